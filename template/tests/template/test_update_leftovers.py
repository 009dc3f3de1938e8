# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""scripts/check_update_leftovers.py: what CI and the pre-commit hook run after a `copier update`."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parents[2]
SCRIPT = APP / "scripts" / "check_update_leftovers.py"

# What `copier update --conflict inline` writes when both sides changed the same lines
# (built from parts, so that this file itself has no markers at the start of a line).
CONFLICT = "\n".join(
    [
        "INSTRUCTIONS = (",
        "<" * 7 + " before updating",
        '    "You are a support bot."',
        "=" * 7,
        '    "You are a helpful assistant."',
        ">" * 7 + " after updating",
        ")",
        "",
    ]
)


def check(*args: str | Path, cwd: Path = APP) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], cwd=cwd, capture_output=True, text=True)


def test_clean_files_pass(tmp_path):
    clean = tmp_path / "agent.py"
    clean.write_text('INSTRUCTIONS = "You are a support bot."\n')
    result = check(clean)
    assert result.returncode == 0, result.stdout
    assert result.stdout == ""


def test_conflict_markers_fail_naming_the_lines(tmp_path):
    conflicted = tmp_path / "agent.py"
    conflicted.write_text(CONFLICT)
    result = check(conflicted)
    assert result.returncode == 1
    assert f"{conflicted}:2: a conflict marker" in result.stdout
    assert f"{conflicted}:6: a conflict marker" in result.stdout


def test_rej_files_fail(tmp_path):
    rejected = tmp_path / "README.md.rej"
    rejected.write_text("@@ -1 +1 @@\n-old\n+new\n")
    result = check(rejected)
    assert result.returncode == 1
    assert f"{rejected}: a .rej file" in result.stdout


def test_indented_examples_and_longer_runs_pass(tmp_path):
    docs = tmp_path / "README.md"
    docs.write_text("A conflict looks like this:\n\n    <<<<<<< before updating\n\n<<<<<<<<<< not a marker\n")
    assert check(docs).returncode == 0


def test_without_arguments_it_checks_the_whole_folder(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    (tmp_path / "pyproject.toml.rej").write_text("@@\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "vendored.py").write_text(CONFLICT)  # not the app's own code
    result = check(cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == "pyproject.toml.rej: a .rej file from `copier update`: " + (
        "apply its hunks by hand, then delete it"
    )
    assert "vendored" not in result.stdout


def test_this_app_has_no_leftovers():
    result = check()
    assert result.returncode == 0, result.stdout


def test_the_pre_commit_hooks_check_conflicts_in_updates_and_lint_with_the_locked_ruff():
    config = (APP / ".pre-commit-config.yaml").read_text()
    hooks = re.findall(r"- repo: (\S+)\n\s+rev: (\S+)", config)
    locked_ruff = re.search(r'name = "ruff"\nversion = "([^"]+)"', (APP / "uv.lock").read_text())
    assert locked_ruff, "ruff is in uv.lock (the dev group)"
    assert ("https://github.com/astral-sh/ruff-pre-commit", f"v{locked_ruff.group(1)}") in hooks
    assert "id: check-merge-conflict\n        args: [--assume-in-merge]" in config


def test_the_pre_commit_hook_runs_the_same_script(tmp_path):
    config = (APP / ".pre-commit-config.yaml").read_text()
    entry = next(line.split(":", 1)[1] for line in config.splitlines() if line.strip().startswith("entry:"))
    command = shlex.split(entry)
    assert command[0] == "python"
    conflicted = tmp_path / "agent.py"
    conflicted.write_text(CONFLICT)
    result = subprocess.run([sys.executable, *command[1:], conflicted], cwd=APP, capture_output=True, text=True)
    assert result.returncode == 1
    assert "a conflict marker" in result.stdout
