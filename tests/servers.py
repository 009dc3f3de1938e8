"""The generated app's own client and server helpers (template/tests/template/support.py), for the repo's tests.

One Chat client with one replay rule, one free_port, one environment cleaner and one server process
helper, for both test trees. It is loaded by path: it is the template's file, and no rendered app needs
to exist for it.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

SUPPORT = Path(__file__).resolve().parent.parent / "template" / "tests" / "template" / "support.py"
sys.path.append(str(SUPPORT.parent))  # what it imports beside it (app_servers.py), after this tree's own
_spec = importlib.util.spec_from_file_location("app_support", SUPPORT)
assert _spec is not None and _spec.loader is not None
app_support = importlib.util.module_from_spec(_spec)
sys.modules["app_support"] = app_support
_spec.loader.exec_module(app_support)

Chat = app_support.Chat
ServerProcess = app_support.ServerProcess
PortTaken = app_support.PortTaken
clean_env = app_support.clean_env
free_port = app_support.free_port
free_ports = app_support.free_ports
post = app_support.post
replayed = app_support.replayed
reply_text = app_support.reply_text


def chat_with(url: str, stream: bool, headers: dict[str, str] | None = None) -> Chat:
    """A Chat with a real server at `url` (model calls can take a while on a loaded machine)."""
    return Chat(http_client(url, headers), stream)


def http_client(url: str, headers: dict[str, str] | None = None) -> Any:
    return app_support.httpx.Client(base_url=url, headers=headers, timeout=120)


CHAT_UI_CLIENT = Path(__file__).resolve().parent / "chat_ui_client"


def converse(url: str, mode: str, *prompts: str) -> dict[str, Any]:
    """A conversation with the app at `url` held by the Databricks chat UI's own packages (chat_ui_client/chat.mjs,
    `mode` stream, generate or fallback): {"requests": [...], "replies": [...]}, as the client saw them."""
    return node_client(CHAT_UI_CLIENT, "@databricks/ai-sdk-provider", url, mode, *prompts)


def node_client(folder: Path, package: str, *args: str) -> dict[str, Any]:
    """`folder`/chat.mjs run with `args` by Node, with `package` installed there by scripts/test: its JSON output."""
    node = shutil.which("node")
    assert node, f"Node 20 or later is needed for {folder.name}"
    assert (folder / "node_modules" / package).is_dir(), "run scripts/test (npm ci)"
    command = [node, str(folder / "chat.mjs"), *args]
    result = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, (
        f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    )
    return json.loads(result.stdout)
