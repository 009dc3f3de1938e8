"""What the benchmarks' command lines and the processes they start share: one parser, one readiness wait, one
PostgreSQL."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent


def arguments(doc: str, command: str, app: bool | None = None) -> argparse.ArgumentParser:
    """A benchmark's parser with the options every one has (--write, --command as `scripts/benchmark COMMAND`
    names it); with `app`, also --app (required if True) and --label."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--write", help="replace this benchmark's section in this RESULTS.md")
    parser.add_argument("--command", default=f"scripts/benchmark {command}")
    if app is not None:
        parser.add_argument("--app", required=app, help="the rendered, synced app" + ("" if app else " (required)"))
        parser.add_argument("--label", default="HEAD")
    return parser


def add_app_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """The options the benchmarks that measure HEAD, and release 0.1.0 beside it, share."""
    parser.add_argument("--app", required=True, help="the rendered, synced HEAD app")
    parser.add_argument("--label", default="HEAD")
    parser.add_argument("--before", help="also measure this rendered, synced app (release 0.1.0)")
    parser.add_argument("--before-label", default="release 0.1.0")
    parser.add_argument("--write", help="replace this benchmark's section in this RESULTS.md")
    parser.add_argument("--command", default=f"scripts/benchmark {what}", help="how the run was started")


def wait_healthy(url: str, process: subprocess.Popen, what: str, path: str = "/health", seconds: float = 300) -> None:
    """Until `url` + `path` answers (below 500), or SystemExit naming `what` if its process ends or time runs out."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(f"{url}{path}", timeout=5, trust_env=False).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            raise SystemExit(f"{what}: {process.args} did not start")
        time.sleep(0.2)


def on_postgres(measure: Callable[[str, str], Awaitable[Any]]) -> tuple[str, Any]:
    """`measure(database_url, folder)` against the tests' own PostgreSQL, started on loopback for it (and a
    scratch folder, for its SQLite side): the server's version, and what `measure` returns."""
    sys.path.insert(0, str(ROOT / "tests"))
    from postgres import PostgresServer

    with PostgresServer() as pg, tempfile.TemporaryDirectory() as folder:
        return pg.psql("SHOW server_version"), asyncio.run(measure(pg.url, folder))
