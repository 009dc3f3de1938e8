# Owned by the template: changes here are overwritten by `copier update`. Put your own checks in scripts of your own.
"""Fail when an unfinished `copier update` left conflict markers or `.rej` files behind.

    python scripts/check_update_leftovers.py [FILE ...]

With no FILE it checks every file git knows here (tracked, and untracked but not
ignored), or every file under the current directory outside a git repository.
CI and the pre-commit hook both run it; it needs nothing but the standard library.
Markers count only at the start of a line, as git writes them, so an indented
example in a README passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

# Built, not written out, so that this file does not flag itself.
MARKERS = (b"<" * 7, b">" * 7)
SKIPPED_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".pytest_cache", ".ruff_cache"})


def leftovers(paths: Iterable[Path]) -> Iterator[str]:
    """One message per problem found in `paths`."""
    for path in paths:
        if path.name.endswith(".rej"):
            yield f"{path}: a .rej file from `copier update`: apply its hunks by hand, then delete it"
            continue
        try:
            lines = path.read_bytes().splitlines()
        except OSError:
            continue  # deleted, a directory, or unreadable: nothing committed to check
        for number, line in enumerate(lines, start=1):
            if is_marker(line):
                yield f"{path}:{number}: a conflict marker: keep the right lines, then delete the markers"


def is_marker(line: bytes) -> bool:
    marker, rest = line[:7], line[7:]
    return marker in MARKERS and (not rest.strip() or rest.startswith(b" "))


def files_here() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return list(walk(Path(".")))
    return [Path(name) for name in sorted(set(listed.decode().split("\0"))) if name]


def walk(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            yield Path(folder, name)


def main(argv: list[str]) -> int:
    paths = [Path(arg) for arg in argv] if argv else files_here()
    problems = list(leftovers(paths))
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} leftover(s) from an unfinished template update: see README.md, Updating.")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
