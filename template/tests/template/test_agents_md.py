# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""AGENTS.md tells coding agents where things are: every path it names must exist."""

from __future__ import annotations

import re
from pathlib import Path

APP = Path(__file__).resolve().parents[2]


def named_paths(text: str) -> set[str]:
    """The `quoted` words that look like a file or folder (a slash, or a suffix); not URL paths like `/health`."""
    quoted = re.findall(r"`([^`\s]+)`", text)
    return {
        word
        for word in quoted
        if re.fullmatch(r"[\w.-][\w./-]*", word) and ("/" in word or re.search(r"(^\.|\.\w+$)", word))
    }


def test_every_path_agents_md_names_exists():
    named = named_paths((APP / "AGENTS.md").read_text())
    assert {"agent_server/agent.py", "agent_server/history/", "uv.lock"} <= named  # what the check reads
    missing = sorted(path for path in named if not (APP / path).exists())
    assert not missing, f"AGENTS.md names paths that do not exist: {missing}"


def test_a_missing_path_is_caught():
    text = "see `agent_server/gone.py`, `run it`, `x = 1`, `/health`, `MCP_SERVERS` and `.python-version`"
    assert named_paths(text) == {"agent_server/gone.py", ".python-version"}
