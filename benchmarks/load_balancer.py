"""Benchmark: 1, 2 and 3 instances of the app behind HAProxy on one PostgreSQL, and how soon a follower on another
instance sees a run's events.

Run with `scripts/benchmark load-balancer` (it renders and syncs HEAD's app, then runs this with the template repo's
Python). HAProxy (Debian's package) runs the app's own deploy/haproxy.cfg, its addresses replaced; PostgreSQL is the
tests' (tests/postgres.py); every process on loopback, stopped by its process id.
- throughput: for 1, 2 and 3 instances (one worker each, the app on its offline model, tracing off), a closed loop of
  CONCURRENCY clients through HAProxy for SECONDS, each turn a new user's new conversation (memory on PostgreSQL):
  turns a second, and the p50 and p99 of a turn. The same concurrency for each row: the p99 column says whether the
  rows compare at equal p99 (on a machine with fewer cores than instances, more instances share the same cores).
- follower delay: RUNS background runs on instance A, each calling the MCP server's slow_lookup (3 s), followed
  from their start by a client on A and by one on B; for each event after the tool's output, B's arrival minus A's
  (A's follower gets each event as A stores it). B reads what A stored by polling (runs/live.py, POLL_SECONDS).
Prints a Markdown section for RESULTS.md (with --write, replaces that section in the file).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import cli
import httpx
from sections import load_average, publish, section
from served_app import DROPPED, free_port

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from postgres import PostgresServer  # noqa: E402  (the tests' own PostgreSQL, on loopback)

HEADING = "## Instances behind a load balancer (benchmarks/load_balancer.py)"
COLUMNS = "instances | turns/s | over 1 | p50, ms | p99, ms | failed"  # its table's (sections.section)
HAPROXY = "/usr/sbin/haproxy"
CONCURRENCY, SECONDS, RUNS = 16, 20, 8


def start(command: list[str], env: dict[str, str], log: Path, cwd: Path | None = None) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        process.wait(60)


def haproxy_config(template: Path, listen: int, ports: list[int]) -> str:
    text = template.read_text().replace("bind 127.0.0.1:8080", f"bind 127.0.0.1:{listen}")
    servers = "".join(f"    server app{n} 127.0.0.1:{port}\n" for n, port in enumerate(ports, 1))
    return re.sub(r"(    server app\d 127\.0\.0\.1:\d+\n)+", servers, text)


async def closed_loop(url: str, seconds: float) -> tuple[float, float, float, int]:
    """(turns a second, p50, p99 in seconds, failures) of CONCURRENCY clients for `seconds`."""
    took: list[float] = []
    failures = 0
    deadline = time.monotonic() + seconds

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal failures
        while time.monotonic() < deadline:
            began = time.monotonic()
            body = {"input": [{"role": "user", "content": "Hello"}]}
            answer = await http.post("/invocations", json=body, headers={"x-test-user": f"{uuid.uuid4()}@example.com"})
            if answer.status_code == 200:
                took.append(time.monotonic() - began)
            else:
                failures += 1

    limits = httpx.Limits(max_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits, trust_env=False) as http:
        started = time.monotonic()
        await asyncio.gather(*(client(http) for _ in range(CONCURRENCY)))
        elapsed = time.monotonic() - started
    took.sort()
    return len(took) / elapsed, took[len(took) // 2], took[int(len(took) * 0.99)], failures


async def follower_delays(a: str, b: str) -> list[float]:
    """For each of RUNS runs on A: B's arrival of each event after the tool's output, minus A's."""
    delays: list[float] = []
    user = {"x-test-user": "follower@example.com"}
    async with httpx.AsyncClient(timeout=60, trust_env=False) as http:
        for _ in range(RUNS):
            body = {"input": [{"role": "user", "content": "Please run slow_lookup"}], "background": True}
            run_id = (await http.post(f"{a}/invocations", json=body, headers=user)).json()["id"]

            async def follow(url: str, run_id: str = run_id) -> dict[int, tuple[float, str]]:
                seen: dict[int, tuple[float, str]] = {}
                params = {"stream": "true"}
                async with http.stream("GET", f"{url}/responses/{run_id}", params=params, headers=user) as stream:
                    async for line in stream.aiter_lines():
                        if line.startswith("data: {"):
                            event = json.loads(line[6:])
                            seen[event["sequence_number"]] = (time.monotonic(), event.get("type", ""))
                return seen

            on_a, on_b = await asyncio.gather(follow(a), follow(b))
            after = [seq for seq, (_at, kind) in on_a.items() if kind == "response.output_item.done"]
            first = after[-2] if len(after) >= 2 else 0  # the tool's output: the events after it came live
            delays += [on_b[seq][0] - on_a[seq][0] for seq in on_a if seq >= first and seq in on_b]
    return delays


def main() -> None:
    parser = cli.arguments(__doc__, "load-balancer", app=True)
    parser.add_argument("--seconds", type=int, default=SECONDS)
    args = parser.parse_args()
    if not os.path.exists(HAPROXY):
        raise SystemExit("load-balancer: needs haproxy (Debian's package: apt-get install haproxy)")
    app = Path(args.app)
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"lb-bench-{os.getpid()}"
    folder.mkdir()
    base = {key: value for key, value in os.environ.items() if not key.startswith(DROPPED)}
    rows, delays = [], []
    tools_port = free_port()
    support = "import sys; sys.path.insert(0, 'tests/template'); import support"
    serve_tools = f"{support}; support.serve_mcp_tools({tools_port})"
    tools = start([str(app / ".venv" / "bin" / "python"), "-c", serve_tools], base, folder / "tools.log", cwd=app)
    try:
        cli.wait_healthy(f"http://127.0.0.1:{tools_port}", tools, "load-balancer", "/mcp")
        with PostgresServer() as postgres:
            env = {
                **base, "LLM_PROVIDER": "offline", "LLM_MODEL": "offline", "MEMORY_BACKEND": "postgres",
                "MEMORY_DATABASE_URL": postgres.url, "MEMORY_USER_HEADER": "x-test-user",
                "MLFLOW_TRACE_SAMPLING_RATIO": "0", "MLFLOW_TRACKING_URI": f"file:{folder / 'mlruns'}",
                "MCP_SERVERS": json.dumps([{"name": "tools", "url": f"http://127.0.0.1:{tools_port}/mcp"}]),
            }  # fmt: skip
            for count in (1, 2, 3):
                ports = [free_port() for _ in range(count)]
                apps = [
                    start([str(app / ".venv" / "bin" / "start-app"), "--port", str(port), "--workers", "1"], env,
                          folder / f"app-{count}-{port}.log", cwd=app)
                    for port in ports
                ]  # fmt: skip
                listen = free_port()
                config = folder / f"haproxy-{count}.cfg"
                config.write_text(haproxy_config(app / "deploy" / "haproxy.cfg", listen, ports))
                proxy = start([HAPROXY, "-db", "-f", str(config)], base, folder / f"haproxy-{count}.log")
                try:
                    for port, process in zip(ports, apps, strict=True):
                        cli.wait_healthy(f"http://127.0.0.1:{port}", process, "load-balancer")
                    url = f"http://127.0.0.1:{listen}"
                    cli.wait_healthy(url, proxy, "load-balancer")
                    asyncio.run(closed_loop(url, 3))  # warm
                    rate, p50, p99, failed = asyncio.run(closed_loop(url, args.seconds))
                    rows.append((count, rate, p50, p99, failed))
                    if count == 2:
                        a, b = (f"http://127.0.0.1:{port}" for port in ports)
                        delays = asyncio.run(follower_delays(a, b))
                finally:
                    stop(proxy)
                    for process in apps:
                        stop(process)
    finally:
        stop(tools)
        shutil.rmtree(folder, ignore_errors=True)
    one = rows[0][1]
    table = [
        f"| {count} | {rate:.1f} | {rate / one:.2f}× | {p50 * 1000:.0f} | {p99 * 1000:.0f} | {failed} |"
        for count, rate, p50, p99, failed in rows
    ]
    delays.sort()
    report = section(
        HEADING,
        f"`{args.command}` on {datetime.date.today()}, {args.label}, {len(os.sched_getaffinity(0))} cores, load "
        f"{load_average()} after: HAProxy with the app's deploy/haproxy.cfg in "
        "front of 1, 2 and 3 instances of one worker each, on one PostgreSQL, the offline model, tracing off; "
        f"{CONCURRENCY} clients in a closed loop for {args.seconds} s, each turn a new user's new conversation.",
        COLUMNS,
        table,
        f"A follower on instance B of a run on instance A ({RUNS} runs, {len(delays)} events after a 3 s tool): "
        f"B sees each event a median **{statistics.median(delays) * 1000:.0f} ms** after A's own follower, "
        f"at most {delays[-1] * 1000:.0f} ms (A writes an unfollowed run's deltas every 0.2 s, B polls every "
        "0.25 s). A rolling restart under load loses **0** turns (tests/test_load_balancer.py, which prints its "
        "counts). More instances than cores share the cores: this machine shows the overhead of the proxy and "
        "the shared store, not the scaling a host with a core per instance gets.",
    )
    publish(report, args.write, HEADING)


if __name__ == "__main__":
    main()
