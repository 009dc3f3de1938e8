"""Benchmark: the offline model's request log stays flat in memory, however large the requests.

Run with `scripts/benchmark offline-log`: this file, run with the template repo's Python, runs itself with
`--measure` in the app's folder with the app's own Python, then writes the report. The offline model (in
process, called as the app calls it, with no HTTP) answers REQUESTS chat requests of about 1 MB each, twice
side by side in one run: as the app ships it (its log bounded by REQUEST_LOG_BYTES as well as by count), and
with the byte bound lifted, as the log was before (bounded by count alone). The process's resident memory
(VmRSS) is read every QUARTER requests.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
HEADING = "## The offline model's request log (benchmarks/offline_log.py)"
REQUESTS = 1000
QUARTER = REQUESTS // 4
TEXT_BYTES = 1_000_000


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def measure_one(bounded: bool) -> list[float]:
    from agent_server.offline import server

    if not bounded:
        server.REQUEST_LOG_BYTES = 1 << 62  # count alone bounds the log
    app = server.create_offline_app()
    gc.collect()
    readings = [rss_mib()]
    for number in range(REQUESTS):
        body = {"model": "offline", "messages": [{"role": "user", "content": f"{number} " + "x" * TEXT_BYTES}]}
        status, _, _ = await app.state.answer("/v1/chat/completions", json.dumps(body).encode())
        assert status == 200, status
        if (number + 1) % QUARTER == 0:
            gc.collect()
            readings.append(rss_mib())
    return readings


def measure(bounded: bool) -> dict[str, Any]:
    return {"bounded": bounded, "rss": asyncio.run(measure_one(bounded))}


def report(measured: list[dict[str, Any]], command: str, label: str) -> str:
    date = datetime.date.today().isoformat()
    out = [
        HEADING,
        "",
        f"Made by `{command}` on {date}, on {label}: {REQUESTS} chat requests of {TEXT_BYTES // 1_000_000} MB of "
        "text each, answered by the offline model in process, each log in a fresh process. VmRSS in MiB after "
        "0, 250, 500, 750 and 1000 requests.",
        "",
        "| request log | " + " | ".join(f"after {QUARTER * n}" for n in range(5)) + " |",
        "|---|" + "---:|" * 5,
    ]
    for run in measured:
        name = "as shipped (REQUEST_LOG_BYTES, 4 MiB)" if run["bounded"] else "by count alone (1000 requests)"
        out.append(f"| {name} | " + " | ".join(f"{value:,.0f}" for value in run["rss"]) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description="The offline model's request log in memory.")
    parser.add_argument("--measure", choices=["bounded", "unbounded"], help="(internal) measure in this process")
    parser.add_argument("--app", help="the rendered, synced HEAD app")
    parser.add_argument("--label", default="HEAD")
    parser.add_argument("--write", help="replace this benchmark's section in this RESULTS.md")
    parser.add_argument("--command", default="scripts/benchmark offline-log")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure == "bounded")))
        return
    if not args.app:
        parser.error("--app (or --measure) is needed")
    python = str(Path(args.app) / ".venv" / "bin" / "python")
    measured = []
    for kind in ("bounded", "unbounded"):
        done = subprocess.run(
            [python, __file__, "--measure", kind],
            cwd=args.app,
            capture_output=True,
            text=True,
            timeout=1800,
            check=True,
        )
        measured.append(json.loads(done.stdout.strip().splitlines()[-1]))
    sys.path.insert(0, str(HERE))
    import sections

    sections.publish(report(measured, args.command, args.label), args.write, HEADING)


if __name__ == "__main__":
    main()
