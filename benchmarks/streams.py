"""Benchmark: hundreds of slow streams on one worker, HEAD against release 0.1.0.

Run with `scripts/benchmark streams`. A stub model (stub_model.py --chunks 20 --over-seconds 5) streams each reply
in 20 deltas, one every 0.25 s, as a slow model does. Each app is one `start-app --workers 1` pinned to core 0,
as rendered (HEAD: SQLite memory on), tracing off; the stub and this client share core 1. For each count of
streams, all are opened at once, each a client's whole history naming no conversation (stream: true), and for
each delta that reaches the client the delay the app added is taken: when it arrived, less when the stub sent it
(the stub writes the time into the delta's text; one machine, one clock). Reported: the p50 and p99 of that delay
over every delta of every stream, the p99 of the first delta's arrival after its request (the queue a burst of
new streams meets), the streams that failed (not a 200, or fewer than 20 deltas), the app's CPU per delta and its
peak memory. A last cell (unless --no-sustained) opens 60 streams a second for 70 s instead, some 300 open at any
time, where full garbage collections and what requests leave in reference cycles show. The client is a bare
asyncio HTTP/1.1 reader, so that 1,000 streams cost it little. Traffic goes to 127.0.0.1 only; every stream is
bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cli
import httpx
from sections import load_average, publish, section
from served_app import CLIENT_CORE, DROPPED, HISTORY, SERVER_CORE, cpu_seconds, free_port

HEADING = "## Slow streams on one worker (benchmarks/streams.py)"
COLUMNS = (  # its table's (sections.section)
    "streams | app | added delay p50 | added delay p99 | first delta p99 | failed | app CPU per delta | app peak memory"
)
HERE = Path(__file__).resolve().parent
DELTAS, OVER_SECONDS = 20, 5.0
# The sustained cell: 60 new streams a second for SUSTAINED_SECONDS, each 5 s long, so some 300 are open at once.
SUSTAINED_PER_SECOND, SUSTAINED_SECONDS = 60, 70
BODY = json.dumps({"input": HISTORY, "stream": True}).encode()


SENT_AT = re.compile(rb"w\d+@(\d+\.\d+)")


async def one_stream(port: int, deadline: float) -> tuple[list[float], float | None, bool]:
    """The delay the app added to each delta of one stream, the first delta's arrival after the request (seconds),
    and whether it got all of them."""
    started, first = time.monotonic(), None
    delays: list[float] = []
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), deadline - started)
        writer.write(
            b"POST /invocations HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(BODY)}\r\nconnection: close\r\n\r\n".encode()
            + BODY
        )
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), deadline - time.monotonic())
        if b" 200 " not in status:
            writer.close()
            return delays, first, False
        while time.monotonic() < deadline:
            line = await asyncio.wait_for(reader.readline(), deadline - time.monotonic())
            if not line:
                break
            if b"response.output_text.delta" in line and (sent := SENT_AT.search(line)):
                delays.append(time.time() - float(sent.group(1)))
                first = time.monotonic() - started if first is None else first
        writer.close()
    except (TimeoutError, OSError):
        return delays, first, False
    return delays, first, len(delays) == DELTAS


def app_env(stub_url: str, folder: Path, memory: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(DROPPED)}
    env.update(
        LLM_PROVIDER="openai", OPENAI_BASE_URL=stub_url, OPENAI_API_KEY="stub", LLM_MODEL="stub",
        LLM_API="chat_completions", MEMORY_BACKEND=memory, MEMORY_DATABASE_URL=str(folder / "conversations.db"),
        MLFLOW_TRACE_SAMPLING_RATIO="0", MLFLOW_TRACKING_URI=f"file:{folder / 'mlruns'}", NO_PROXY="127.0.0.1",
    )  # fmt: skip
    return env


async def opened(port: int, streams: int, sustained: bool) -> list[tuple[list[float], float | None, bool]]:
    """`streams` streams: all at once, or (`sustained`) SUSTAINED_PER_SECOND a second, so that some 300 are open
    at any time while new ones keep coming."""
    if not sustained:
        deadline = time.monotonic() + 60 + streams / 20
        return await asyncio.gather(*(one_stream(port, deadline) for _ in range(streams)))
    tasks, started = [], time.monotonic()
    for number in range(streams):
        tasks.append(asyncio.create_task(one_stream(port, time.monotonic() + 60)))
        await asyncio.sleep(max(0.0, started + (number + 1) / SUSTAINED_PER_SECOND - time.monotonic()))
    return await asyncio.gather(*tasks)


def peak_memory_mib(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def cell(app: Path, memory: str, streams: int, stub_url: str, work: Path, sustained: bool = False) -> dict:
    folder = Path(tempfile.mkdtemp(dir=work))
    port = free_port()
    command = [str(app / ".venv" / "bin" / "start-app"), "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    with (folder / "app.log").open("wb") as log:
        server = subprocess.Popen(
            ["taskset", "-c", str(SERVER_CORE), *command], env=app_env(stub_url, folder, memory), stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=2) as client:
            for _ in range(600):
                try:
                    if (await client.get(f"http://127.0.0.1:{port}/health")).status_code == 200:
                        break
                except httpx.HTTPError:
                    await asyncio.sleep(0.2)
            else:
                raise SystemExit(f"streams: {app} did not start")
        await asyncio.gather(*(one_stream(port, time.monotonic() + 60) for _ in range(3)))  # warm
        before = cpu_seconds(server.pid)
        results = await opened(port, streams, sustained)
        cpu = cpu_seconds(server.pid) - before
        peak = peak_memory_mib(server.pid)
    finally:
        server.terminate()
        server.wait(60)
    delays = sorted(delay for got, _, _ in results for delay in got)
    firsts = sorted(first for _, first, _ in results if first is not None)
    events = len(delays)
    return {
        "p50": statistics.median(delays) if delays else float("nan"),
        "p99": delays[min(events - 1, int(events * 0.99))] if delays else float("nan"),
        "first_p99": firsts[min(len(firsts) - 1, int(len(firsts) * 0.99))] if firsts else float("nan"),
        "failed": sum(1 for _, _, whole in results if not whole),
        "cpu_per_event_ms": 1000 * cpu / events if events else float("nan"),
        "peak_mib": peak,
    }


async def main_async(args: argparse.Namespace) -> str:
    os.sched_setaffinity(0, {CLIENT_CORE})
    counts = [int(count) for count in args.streams.split(",")]
    work = Path(tempfile.mkdtemp(prefix="streams-bench-"))
    stub_port = free_port()
    stub = subprocess.Popen(
        ["taskset", "-c", str(CLIENT_CORE), sys.executable, str(HERE / "stub_model.py"), "--port", str(stub_port),
         "--chunks", str(DELTAS), "--over-seconds", str(OVER_SECONDS), "--max-seconds", "3600"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    stub_url = f"http://127.0.0.1:{stub_port}/v1"
    apps = [(args.before_label, Path(args.before), "none")] if args.before else []
    apps.append((args.label, Path(args.app), "sqlite"))
    rows = []
    cells = [(str(count), count, False) for count in counts]
    if not args.no_sustained:
        sustained = SUSTAINED_PER_SECOND * SUSTAINED_SECONDS
        cells.append((f"{SUSTAINED_PER_SECOND} new a second for {SUSTAINED_SECONDS} s", sustained, True))
    try:
        await asyncio.sleep(1)
        for name, count, steady in cells:
            for label, app, memory in apps:
                measured = await cell(app, memory, count, stub_url, work, steady)
                rows.append(
                    f"| {name} | {label} | {measured['p50'] * 1000:.0f} ms | {measured['p99'] * 1000:.0f} ms | "
                    f"{measured['first_p99']:.2f} s | {measured['failed']} | {measured['cpu_per_event_ms']:.2f} ms | "
                    f"{measured['peak_mib']:.0f} MiB |"
                )
                print(rows[-1], flush=True)
    finally:
        stub.terminate()
        stub.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    return section(
        HEADING,
        f"`{args.command}` on {datetime.date.today()}, load {load_average()} after. One worker pinned to a core; a "
        f"stub model streaming {DELTAS} deltas over {OVER_SECONDS:.0f} s; "
        "all streams opened at once, each a stateless client's whole history; tracing off; HEAD as rendered "
        "(SQLite memory on). Added delay: a delta's arrival less when the stub sent it. Target (HEAD, 600 "
        "streams): the added delay's p99 at most 100 ms; 1,000 streams end with 0 failed. The last row opens "
        f"{SUSTAINED_PER_SECOND} streams a second for {SUSTAINED_SECONDS} s instead, some 300 open at any time: "
        "full garbage collections and what requests leave in cycles show over time. Peak memory: the app's "
        "VmHWM at the end of the cell.",
        COLUMNS,
        rows,
    )


def main() -> None:
    parser = cli.arguments(__doc__, "streams", app=True)
    parser.add_argument("--before", help="the rendered, synced 0.1.0 app, measured beside it")
    parser.add_argument("--before-label", default="release 0.1.0")
    parser.add_argument("--streams", default="100,300,600,1000", help="counts of streams opened at once")
    parser.add_argument("--no-sustained", action="store_true", help="leave out the sustained cell (70 s an app)")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2 or not shutil.which("taskset"):
        raise SystemExit("streams: needs two cores and taskset (util-linux)")
    publish(asyncio.run(main_async(args)), args.write, HEADING)


if __name__ == "__main__":
    main()
