"""Benchmark: does one identity flooding the app raise another identity's latency? With and without fair shares.

Run with `scripts/benchmark fair-shares`. One `start-app --workers 1` of the app as rendered (SQLite memory on),
pinned to core 0, on the stub model (stub_model.py), tracing off, callers named by a header (MEMORY_USER_HEADER).
The stub answers at once (every turn a burst of CPU on the one core: the worst case), then --model-delay seconds
late (0.5: as a model takes time, a turn mostly waits). Identity B sends its turns one after another (a stateless
client's whole history) and their latencies are timed alone and while identity A floods the app with 32 turns at
once, sending each again as soon as it is answered (a 429 too: the worst client, one that ignores Retry-After): in
--rounds rounds of both, so that the shared machine's ups and downs hit both; each flood starts a second before B's
turns are timed, and has a second to end. Both with no limits and with RATE_LIMIT_CONCURRENT_TURNS=2 and
RATE_LIMIT_TURNS_PER_MINUTE=600 (which turn fair steps on, scheduling/fair_steps.py). Target: with the limits, A's
flood raises B's p99 by at most 20%. The stub, B's client and A's flood share core 1; the flood runs in a process of
its own at nice 19, as it stands for clients on other machines (in B's process, B's timings waited on the flood's
client). Traffic goes to 127.0.0.1 only; every loop is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cli
import httpx
from sections import load_average, publish, section
from served_app import CLIENT_CORE, DROPPED, HISTORY, SERVER_CORE, free_port

HEADING = "## Fair shares under a flood (benchmarks/fair_shares.py)"
COLUMNS = (  # its table's (sections.section)
    "the model answers | limits | B's p99 alone | B's p99 under A's flood | ratio | ratio of medians "
    "| A's answers by status"
)
HERE = Path(__file__).resolve().parent
BODY = {"input": HISTORY}
DROPPED_HERE = (*DROPPED, "RATE_LIMIT_")
CONCURRENT_TURNS = 2
SETTLE_SECONDS = 1.0


async def b_latencies(url: str, count: int) -> list[float]:
    async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=60, headers={"x-user": "b"}) as client:
        times = []
        for _ in range(count):
            started = time.perf_counter()
            response = await client.post("/invocations", json=BODY)
            assert response.status_code == 200, response.text
            times.append(time.perf_counter() - started)
        return times


async def flood(url: str) -> None:
    """A's flood, in a process of its own (`--flood URL`): until a line comes on stdin; then its answers' statuses
    on stdout, as JSON."""
    os.nice(19)  # A's client stands for machines elsewhere: its CPU must not slow the stub or B's client
    stop, statuses = asyncio.Event(), collections.Counter[int]()
    limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
    async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=60, limits=limits) as client:

        async def one() -> None:
            while not stop.is_set():
                response = await client.post("/invocations", json=BODY, headers={"x-user": "a"})
                statuses[response.status_code] += 1

        async def until_told() -> None:
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            stop.set()

        await asyncio.gather(until_told(), *(one() for _ in range(32)))
    print(json.dumps(statuses))


def flooding(url: str) -> subprocess.Popen[str]:
    command = [sys.executable, __file__, "--flood", url]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def flood_ended(process: subprocess.Popen[str]) -> dict[int, int]:
    answered, _ = process.communicate("stop\n", timeout=60)
    return {int(status): n for status, n in json.loads(answered).items()}


async def cell(app: Path, stub_url: str, folder: Path, limits: dict[str, str], count: int, rounds: int) -> dict:
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith(DROPPED_HERE)}
    env.update(
        LLM_PROVIDER="openai", OPENAI_BASE_URL=stub_url, OPENAI_API_KEY="stub", LLM_MODEL="stub",
        LLM_API="chat_completions", MEMORY_BACKEND="sqlite", MEMORY_DATABASE_URL=str(folder / f"c-{port}.db"),
        MEMORY_USER_HEADER="x-user", MLFLOW_TRACE_SAMPLING_RATIO="0", MLFLOW_TRACKING_URI=f"file:{folder}/mlruns",
        NO_PROXY="127.0.0.1", **limits,
    )  # fmt: skip
    command = [str(app / ".venv" / "bin" / "start-app"), "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    with (folder / f"app-{port}.log").open("wb") as log:
        server = subprocess.Popen(["taskset", "-c", str(SERVER_CORE), *command], env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/health", trust_env=False, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        await b_latencies(url, 20)  # warm
        alone: list[float] = []
        flooded: list[float] = []
        statuses: collections.Counter[int] = collections.Counter()
        for round_ in range(rounds):  # alone and flooded in turn, so that the machine's own ups and downs hit both
            share = count // rounds + (round_ < count % rounds)
            alone += await b_latencies(url, share)
            flood_process = flooding(url)
            try:
                await asyncio.sleep(SETTLE_SECONDS)
                flooded += await b_latencies(url, share)
            finally:
                statuses.update(flood_ended(flood_process))
            await asyncio.sleep(SETTLE_SECONDS)  # A's last turns finish before B is timed alone again
    finally:
        server.terminate()
        server.wait(60)
    alone.sort()
    flooded.sort()
    p99 = lambda times: times[min(len(times) - 1, int(len(times) * 0.99))]  # noqa: E731
    p50 = lambda times: times[len(times) // 2]  # noqa: E731
    median_ratio = p50(flooded) / p50(alone)
    return {"alone": p99(alone), "flooded": p99(flooded), "median_ratio": median_ratio, "statuses": statuses}


def limits_of(args: argparse.Namespace) -> dict[str, str]:
    return {
        "RATE_LIMIT_CONCURRENT_TURNS": str(CONCURRENT_TURNS),
        "RATE_LIMIT_TURNS_PER_MINUTE": str(args.turns_per_minute),
    }


async def main_async(args: argparse.Namespace) -> str:
    os.sched_setaffinity(0, {CLIENT_CORE})
    work = Path(tempfile.mkdtemp(prefix="fair-bench-"))
    rows = []
    try:
        for delay, requests in ((0.0, args.requests * 4), (args.model_delay, args.requests)):
            stub_port = free_port()
            stub = subprocess.Popen(
                ["taskset", "-c", str(CLIENT_CORE), sys.executable, str(HERE / "stub_model.py")]
                + ["--port", str(stub_port), "--delay-seconds", str(delay)],
                stdout=subprocess.DEVNULL,
            )
            try:
                await asyncio.sleep(1)
                for limited in (False, True):
                    stub_url = f"http://127.0.0.1:{stub_port}/v1"
                    limits = limits_of(args) if limited else {}
                    measured = await cell(Path(args.app), stub_url, work, limits, requests, args.rounds)
                    a = ", ".join(f"{status}: {n}" for status, n in sorted(measured["statuses"].items()))
                    alone, flooded = measured["alone"], measured["flooded"]
                    rows.append(
                        f"| {delay:g} s | {'the two above' if limited else 'none'} | {alone * 1000:.0f} ms"
                        f" | {flooded * 1000:.0f} ms | {flooded / alone:.2f}× | {measured['median_ratio']:.2f}× | {a} |"
                    )
                    print(rows[-1], flush=True)
            finally:
                stub.terminate()
                stub.wait(10)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return section(
        HEADING,
        f"`{args.command}` on {datetime.date.today()}, {args.label}, load {load_average()} after: one worker pinned "
        "to a core, the stub model, tracing off; B sends its turns one after another, alone and while A floods with "
        f"32 at once, ignoring Retry-After, from a process of its own at nice 19; {args.rounds} rounds of both, each "
        f"half {args.requests * 4} of B's turns in all (0 s) or {args.requests} (late model). "
        f"Limits: RATE_LIMIT_CONCURRENT_TURNS={CONCURRENT_TURNS}, "
        f"RATE_LIMIT_TURNS_PER_MINUTE={args.turns_per_minute} (which turn fair steps on). "
        "Target: with the limits, B's p99 under the flood at most 1.2× alone.",
        COLUMNS,
        rows,
    )


def main() -> None:
    parser = cli.arguments(__doc__, "fair-shares", app=False)
    parser.add_argument("--requests", type=int, default=60, help="B's turns in each half of a cell")
    parser.add_argument("--rounds", type=int, default=4, help="alone, then flooded, this many times in a cell")
    parser.add_argument("--model-delay", type=float, default=0.5, help="seconds the stub takes to answer a call")
    parser.add_argument(
        "--turns-per-minute", type=int, default=600, help="RATE_LIMIT_TURNS_PER_MINUTE: B's own turns must fit in it"
    )
    parser.add_argument("--flood", metavar="URL", help=argparse.SUPPRESS)  # A's flood, run by the benchmark
    args = parser.parse_args()
    if args.flood:
        asyncio.run(flood(args.flood))
        return
    if not args.app:
        parser.error("--app is required")
    if len(os.sched_getaffinity(0)) < 2 or not shutil.which("taskset"):
        raise SystemExit("fair_shares: needs two cores and taskset (util-linux)")
    publish(asyncio.run(main_async(args)), args.write, HEADING)


if __name__ == "__main__":
    main()
