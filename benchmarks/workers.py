"""Benchmark: requests a second of `start-app --workers 2` against `--workers 1`, the app as rendered.

Run with `scripts/benchmark workers`. The app is the defaults render (SQLite memory on) on its own offline model,
in process, so no model server takes a core from the workers; tracing off (MLFLOW_TRACE_SAMPLING_RATIO=0), so the
figure is the app's and not the local trace store's. The load comes from wrk (Debian's package), a C client that
takes little CPU: on a 2-core machine it cannot be pinned apart from two workers, so its share is in the figures.
Every request sends a client's whole history, naming no conversation, as stateless API clients do (memory stores
nothing for them). For each run, one worker then two (each a fresh `start-app`, warmed up for 3 s), for the same
seconds at the same concurrency; the ratio is taken within a run, and the median over the runs reported.
Traffic goes to 127.0.0.1 only; each wrk run is bounded in time.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

import cli
from sections import load_average, publish, section
from served_app import DROPPED, HISTORY, free_port

HEADING = "## Worker processes (benchmarks/workers.py)"
COLUMNS = "run | 1 worker, req/s | 2 workers, req/s | 2 over 1 | non-2xx"  # its table's (sections.section)


def wrk_script(folder: Path) -> Path:
    script = folder / "post.lua"
    body = json.dumps(json.dumps({"input": HISTORY}))  # a Lua string literal of the JSON body
    script.write_text(f'wrk.method = "POST"\nwrk.body = {body}\nwrk.headers["Content-Type"] = "application/json"\n')
    return script


def requests_a_second(app: Path, workers: int, seconds: int, concurrency: int, folder: Path) -> tuple[float, int]:
    """(requests a second, responses that were not 2xx) of a fresh start-app with `workers` processes."""
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith(DROPPED)}
    env.update(
        LLM_PROVIDER="offline", LLM_MODEL="offline", MEMORY_BACKEND="sqlite",
        MEMORY_DATABASE_URL=str(folder / f"conversations-{port}.db"), MLFLOW_TRACE_SAMPLING_RATIO="0",
        MLFLOW_TRACKING_URI=f"file:{folder / 'mlruns'}",
    )  # fmt: skip
    command = [str(app / ".venv" / "bin" / "start-app"), "--port", str(port), "--workers", str(workers)]
    with (folder / f"app-{port}.log").open("wb") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        cli.wait_healthy(url, server, f"workers ({workers})", seconds=120)
        script = wrk_script(folder)
        wrk = ["wrk", "-t", "1", "-c", str(concurrency), "-s", str(script), f"{url}/invocations"]
        subprocess.run([*wrk, "-d", "3s"], capture_output=True, check=True)  # every worker warm
        out = subprocess.run([*wrk, "-d", f"{seconds}s"], capture_output=True, text=True, check=True).stdout
        rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
        bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
        return rate, int(bad.group(1)) if bad else 0
    finally:
        server.terminate()
        server.wait(60)


def main() -> None:
    parser = cli.arguments(__doc__, "workers", app=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("workers: needs wrk (Debian's package: apt-get install wrk)")
    folder = Path(tempfile.mkdtemp(prefix="workers-bench-"))
    cores = len(os.sched_getaffinity(0))
    rows, ratios = [], []
    try:
        for run in range(1, args.runs + 1):
            one, one_bad = requests_a_second(Path(args.app), 1, args.seconds, args.concurrency, folder)
            two, two_bad = requests_a_second(Path(args.app), 2, args.seconds, args.concurrency, folder)
            ratios.append(two / one)
            rows.append(f"| {run} | {one:.0f} | {two:.0f} | {two / one:.2f}× | {one_bad + two_bad} |")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    median = statistics.median(ratios)
    report = section(
        HEADING,
        f"`{args.command}` on {datetime.date.today()}, {args.label}, {cores} cores, load "
        f"{load_average()} after: the defaults render (SQLite memory on) on its "
        f"offline model, tracing off, wrk at concurrency {args.concurrency} for {args.seconds} s a cell, each "
        "request a stateless client's whole history. Target: 2 workers on 2 cores serve at least 1.6× one.",
        COLUMNS,
        rows,
        f"Median: **{median:.2f}×** ({'met' if median >= 1.6 else 'not met'}). wrk shares the two cores with the "
        "workers: it cannot be pinned apart from them on this machine.",
    )
    publish(report, args.write, HEADING)


if __name__ == "__main__":
    main()
