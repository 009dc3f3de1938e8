"""Versions of this template as tagged commits in a temporary git repo, built from the working tree.

Update tests need an older and a newer version of the template. They never rely on tags in the
clone they run in (a CI clone may have none), and they test the working tree, uncommitted changes
included: each version is the working tree with a synthetic edit, committed and tagged here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import copier
from renders import ROOT, render

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Template test",
    "GIT_AUTHOR_EMAIL": "template-test@localhost",
    "GIT_COMMITTER_NAME": "Template test",
    "GIT_COMMITTER_EMAIL": "template-test@localhost",
}


def git(*args: str, cwd: Path) -> str:
    """Run git with a fixed identity and no signing; fail with git's own message."""
    env = {**os.environ, **GIT_IDENTITY}
    command = ["git", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", *args]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"git {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def working_tree_files() -> list[str]:
    """Files of this checkout as they are now: tracked or untracked, but not ignored, and not deleted."""
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    return sorted({name for name in listed.split("\0") if name and (ROOT / name).is_file()})


def copy_working_tree(dest: Path) -> None:
    """Make `dest` (a git repo) hold exactly the working tree, whatever it held before."""
    for child in dest.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    for name in working_tree_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=path)
    return path


def release(repo: Path, tag: str, edit: Callable[[Path], None] | None = None, from_working_tree: bool = True) -> str:
    """Commit a version of the template and tag it; `edit` changes the files first."""
    if from_working_tree:
        copy_working_tree(repo)
    if edit is not None:
        edit(repo)
    git("add", "--all", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", f"Template {tag}", cwd=repo)
    git("tag", tag, cwd=repo)
    return tag


def replace_once(path: Path, pattern: str, replacement: str) -> None:
    """Replace the one match of a regex (DOTALL), failing clearly when the file no longer has it."""
    text = path.read_text()
    new, count = re.subn(pattern, lambda _: replacement, text, flags=re.DOTALL)
    assert count == 1, f"{path}: expected one match of {pattern!r}, found {count}: update this synthetic edit"
    path.write_text(new)


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


# --- apps generated from those versions, as an owner keeps them ------------------------------------


def generate(dest: Path, src: Path, version: str, data: dict | None = None) -> Path:
    """`copier copy` of one version, into a git repo with the result committed, as an owner starts."""
    render(dest, data, src=src, vcs_ref=version)
    git("init", "-q", "-b", "main", cwd=dest)
    commit(dest, "Generate the app")
    return dest


def commit(app: Path, message: str) -> None:
    git("add", "--all", cwd=app)
    git("commit", "-q", "-m", message, cwd=app)


def update(app: Path, version: str, unsafe: bool = False) -> None:
    copier.run_update(
        str(app), vcs_ref=version, defaults=True, overwrite=True, unsafe=unsafe, conflict="inline", quiet=True
    )
