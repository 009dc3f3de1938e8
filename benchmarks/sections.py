"""What the benchmarks' reports share: a section of RESULTS.md with its table, the line that says what a memory
benchmark ran on, and writing a section in place of its old one."""

from __future__ import annotations

import os
import platform
import sqlite3
from collections.abc import Iterable
from importlib.metadata import version
from pathlib import Path


def load_average() -> str:
    """The machine's load averages (1, 5 and 15 minutes), as a report says them."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def section(heading: str, setup: str, columns: str, rows: Iterable[str], *after: str) -> str:
    """A benchmark's section of RESULTS.md: its heading, how it ran, one table (`columns` as `a | b`, each row
    already `| 1 | 2 |`), and the paragraphs that follow the table."""
    lines = [heading, "", setup, "", f"| {columns} |", "|" + "---|" * (columns.count("|") + 1), *rows, ""]
    for paragraph in after:
        lines += [paragraph, ""]
    return "\n".join(lines)


def store_machine(server_version: str) -> str:
    """The machine, Python and database packages a memory benchmark ran on, and its PostgreSQL (cli.on_postgres)."""
    packages = ", ".join(f"{name} {version(name)}" for name in ("sqlalchemy", "asyncpg"))
    return (
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores (shared and noisy "
        f"machine: compare within this run); {packages}, SQLite {sqlite3.sqlite_version} (Python's sqlite3); "
        f"PostgreSQL {server_version} (local, loopback, fsync off)."
    )


def publish(section: str, write: str | None, heading: str) -> None:
    """Print a benchmark's report, and with `write` (a RESULTS.md), replace its section there."""
    print(section)
    if write:
        replace_section(Path(write), section, heading)


def replace_section(path: Path, section: str, heading: str) -> None:
    """Replace a benchmark's section of RESULTS.md (its heading up to the next `## `), or append it."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    start = text.find(heading + "\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        following = text.find("\n## ", start + len(heading))
        rest = text[following + 1 :] if following >= 0 else ""
        text = text[:start] + section + ("\n" + rest if rest else "")
    path.write_text(text)
