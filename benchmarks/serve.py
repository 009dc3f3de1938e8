"""Benchmark: serving, HEAD against release 0.1.0 (and a third app), each a real `start-app` process side by side.

Run with `scripts/benchmark serve` (it renders and syncs the apps, then runs this with the template
repo's own Python, whose dev group has httpx). For each run, app A (0.1.0), app B (HEAD) and, with --app-c, app C
(the commit before a change, to show HEAD is cheaper than it) start fresh side by side, once with tracing off and
once with it on, and each cell is measured on one right after the other:
- the app: `<app>/.venv/bin/start-app --host 127.0.0.1 --port N --workers 1` (what `uv run start-app`
  runs, without uv's process in between), one uvicorn process pinned to core 0 (taskset); 0.1.0 has no
  memory, and HEAD (and C) run as rendered (SQLite memory on, a fresh store per process); the model
  a stub (stub_model.py: a fixed reply at once) in chat_completions mode;
- the stub model and this load client (httpx.AsyncClient) pinned to core 1;
- every request sends the whole history, as a chat UI replays it with memory off: a question, the
  answer as an id-less assistant output_text message, and a second question;
- after 50 warm-up requests, for each mode (stream or not) and concurrency (1, 8, 32), a fixed number
  of requests, timed. The app's CPU is utime+stime from /proc/PID/stat, read with the process quiet
  before and after (so the trace export a request leaves to a background thread counts for it), and
  its peak RSS is VmHWM from /proc/PID/status, reset before each cell (clear_refs).
Tracing "on" is the default local file store (MLFLOW_TRACKING_URI=file:<temp>/mlruns); "off" is the
app's documented switch, MLFLOW_TRACE_SAMPLING_RATIO=0, and the run checks that it wrote no trace.
Every ratio (B/A, B/C) is taken within one run's cells, then the median over the runs is reported.
With --profile, py-spy samples HEAD at concurrency 8, not streaming, tracing off and on.
Prints a Markdown section for RESULTS.md (with --write, replaces that section in the file).
Traffic goes to 127.0.0.1 only; every loop is bounded by a count and by time.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from load_client import measure_cell, stub_stats, warm_up  # noqa: E402
from sections import replace_section  # noqa: E402
from serve_profile import profile  # noqa: E402
from serve_report import HEADING, TRACING, report  # noqa: E402
from served_app import (  # noqa: E402
    CLIENT_CORE,
    CONCURRENCY,
    MODES,
    App,
    Cell,
    Served,
    Settings,
    app_facts,
    count_traces,
    free_port,
    log,
    stored_items,
)


def cell_order(apps: list[App], run: int) -> list[App]:
    """A, B, C in one run and C, B, A in the next: no app always goes first, and B (HEAD, the app every ratio is
    about) is always measured right beside each app it is compared with."""
    return apps if run % 2 == 0 else apps[::-1]


async def measure_pair(
    apps: list[App], tracing: str, run: int, stub_url: str, work: Path, settings: Settings, checks: dict
) -> dict[tuple[str, str, int], Cell]:
    """One fresh process per app, all up at once; each cell is measured on one app right after the other.

    Pairing cell by cell, seconds apart, keeps the other tenants' load on this shared machine about the same for
    both sides of a ratio: run by run, a whole process a minute after the other saw ratios swing by 30%.
    """
    order = cell_order(apps, run)
    served = {
        app.key: Served(app, stub_url, work / f"run{run}-{app.key}-tracing-{tracing}", tracing, settings)
        for app in apps
    }
    cells: dict[tuple[str, str, int], Cell] = {}
    try:
        for one in served.values():
            await one.wait_healthy()
        for one in served.values():
            await warm_up(one, settings.warmup)
        for mode in MODES:
            for concurrency in CONCURRENCY:
                for app in order:
                    seen = collections.Counter((await stub_stats(stub_url))["input_sizes"])
                    cells[app.key, mode, concurrency] = cell = await measure_cell(served[app.key], mode, concurrency)
                    sizes = collections.Counter((await stub_stats(stub_url))["input_sizes"])
                    sizes.subtract(seen)
                    checks.setdefault(("input sizes", app.key), collections.Counter()).update(+sizes)
                    log(
                        f"run {run + 1} {app.key} tracing {tracing} {mode} c={concurrency}: {cell.cpu_ms:.2f} ms "
                        f"CPU/req, {cell.rps:.0f} req/s, p99 {cell.p99:.0f} ms, errors {sum(cell.errors.values())}"
                    )
    finally:
        for one in served.values():
            one.stop()
    for app in apps:
        done = sum(cell.done + sum(cell.errors.values()) for (key, _, _), cell in cells.items() if key == app.key)
        traces = count_traces(served[app.key].folder)
        checks.setdefault(("traces", app.key, tracing), []).append((traces, done + settings.warmup))
        if tracing == "off" and traces:
            raise RuntimeError(f"app {app.key} wrote traces with tracing off (MLFLOW_TRACE_SAMPLING_RATIO=0)")
        checks.setdefault(("stored", app.key), []).append(stored_items(served[app.key].folder))
    return cells


async def main_async(args: argparse.Namespace) -> str:
    settings = Settings.make(args.quick, args.runs)
    started, load_before = time.monotonic(), os.getloadavg()
    if len(os.sched_getaffinity(0)) < 2 or not shutil.which("taskset"):
        raise SystemExit("serve: needs two cores and taskset (util-linux)")
    os.sched_setaffinity(0, {CLIENT_CORE})  # this load client, and every thread it starts
    apps = [
        App("A", args.label_a, Path(args.app_a).resolve(), memory=args.memory_a),
        App("B", args.label_b, Path(args.app_b).resolve(), memory=args.memory_b),
    ]
    if args.app_c:
        apps.append(App("C", args.label_c, Path(args.app_c).resolve(), memory=args.memory_c))
    for app in apps:
        app_facts(app)
    work = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    stub_port = free_port()
    stub_url = f"http://127.0.0.1:{stub_port}/v1"
    limit = 3600
    stub = subprocess.Popen(
        ["taskset", "-c", str(CLIENT_CORE), sys.executable, str(HERE / "stub_model.py"), "--port", str(stub_port)]
        + ["--max-seconds", str(limit)],
        stdout=subprocess.DEVNULL,
    )
    runs: list[dict] = []
    checks: dict = {}
    prof = None
    try:
        for _ in range(50):
            try:
                await stub_stats(stub_url)
                break
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
        for run in range(settings.runs):
            cells: dict = {}
            for tracing in TRACING:
                for (key, mode, concurrency), cell in (
                    await measure_pair(apps, tracing, run, stub_url, work, settings, checks)
                ).items():
                    cells[key, tracing, mode, concurrency] = cell
            runs.append(cells)
        if args.profile:
            prof = {tracing: await profile(apps[1], stub_url, work, settings, args.uv, tracing) for tracing in TRACING}
    finally:
        stub.terminate()
        stub.wait(10)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"kept {work}")
    meta = {
        "command": args.command,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "minutes": (time.monotonic() - started + args.setup_seconds) / 60,
        "load_before": " ".join(f"{x:.1f}" for x in load_before),
        "load_after": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }
    return report(apps, runs, settings, checks, prof, meta)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Serving benchmark, HEAD against 0.1.0 and optionally a third app (see the module's doc)."
    )
    parser.add_argument("--app-a", required=True, help="the rendered, synced 0.1.0 app")
    parser.add_argument("--app-b", required=True, help="the rendered, synced HEAD app")
    parser.add_argument("--label-a", default="release 0.1.0")
    parser.add_argument("--label-b", default="HEAD")
    parser.add_argument("--memory-a", default="none", help='A\'s MEMORY_BACKEND, or "as rendered"')
    parser.add_argument(
        "--memory-b", default="as rendered", help='B\'s MEMORY_BACKEND, or "as rendered" (default: its SQLite default)'
    )
    parser.add_argument("--app-c", help="optional: a third rendered, synced app, B measured against it too")
    parser.add_argument("--label-c", default="the commit before the change")
    parser.add_argument("--memory-c", default="as rendered", help='C\'s MEMORY_BACKEND, or "as rendered"')
    parser.add_argument("--runs", type=int, default=None, help="run pairs (default 3; 1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few requests, one run")
    parser.add_argument(
        "--profile", action="store_true", help="also profile B with py-spy (c=8, not streaming, tracing off and on)"
    )
    parser.add_argument("--uv", default="uv", help="the uv that runs py-spy (uv run --with py-spy)")
    parser.add_argument("--write", help="replace this benchmark's section in this RESULTS.md")
    parser.add_argument("--command", default="scripts/benchmark serve", help="how the run was started (for the report)")
    parser.add_argument("--setup-seconds", type=float, default=0, help="time spent rendering before (for the report)")
    parser.add_argument("--keep", action="store_true", help="keep the apps' logs and trace stores")
    args = parser.parse_args()
    if args.runs is not None and not 1 <= args.runs <= 50:
        parser.error("--runs must be 1 to 50")
    section = asyncio.run(main_async(args))
    if args.write:
        replace_section(Path(args.write), section, HEADING)
    print(section, end="")


if __name__ == "__main__":
    main()
