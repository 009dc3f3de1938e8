"""Benchmark: 1, 2 and 3 instances of the app behind HAProxy on one PostgreSQL, in turns a second at equal p99, and how
soon a follower on another instance sees a run's events.

Run with `scripts/benchmark load-balancer` (it renders and syncs HEAD's app, then runs this with the template repo's
Python). HAProxy (Debian's package) runs the app's own deploy/haproxy.cfg, its addresses replaced; PostgreSQL is the
tests' (tests/postgres.py); every process on loopback, stopped by its process id.
- throughput: what bounds an instance is set, so that this machine's two shared cores are not the bound. The model is
  the app's offline model over HTTP, each call answered MODEL_SECONDS late (slow_model.py): a turn waits on its
  model, as real turns do. Each instance takes at most PER_INSTANCE requests at once (HAProxy's `maxconn` on each
  server; the rest wait in HAProxy's queue), so one instance serves at most PER_INSTANCE / MODEL_SECONDS turns a
  second whatever the machine. For 1, 2 and 3 instances (one worker each, tracing off), clients in a closed loop
  through HAProxy, each turn a new user's new conversation (memory on PostgreSQL), raised STEP at a time until the
  p99 of a turn crosses P99_TARGET: a row is the step with the most turns a second under it. n instances deliver
  n times one's turns at that p99 only if nothing serialises them: not PostgreSQL, not HAProxy.
- follower delay: RUNS background runs on instance A, each calling the MCP server's slow_lookup (3 s), followed
  from their start by a client on A and by one on B; for each event after the tool's output, B's arrival minus A's
  (A's follower gets each event as A stores it). B reads what A stored by polling (runs/live.py, POLL_SECONDS).
Prints a Markdown section for RESULTS.md (with --write, replaces that section in the file).
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
HAPROXY = "/usr/sbin/haproxy"
MODEL_SECONDS = 2.0  # each model call's latency (slow_model.py)
PER_INSTANCE = 4  # requests an instance takes at once (HAProxy's maxconn on each server)
P99_TARGET = 2 * MODEL_SECONDS  # two model calls: a turn that waited about a whole turn for its place crosses it
STEP, SECONDS, WARM = 2, 20, 4  # clients added a step; each step measured for SECONDS after WARM
RUNS = 8
COLUMNS = (  # its table's (sections.section)
    "instances | bound, turns/s | clients | turns/s | of the bound | over 1 | p50, ms | p99, ms "
    "| next step: clients: p99, ms | instances' CPU, cores | PostgreSQL, HAProxy and model, cores | failed"
)


def start(command: list[str], env: dict[str, str], log: Path, cwd: Path | None = None) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        process.wait(60)


def haproxy_config(template: Path, listen: int, ports: list[int]) -> str:
    text = template.read_text().replace("bind 127.0.0.1:8080", f"bind 127.0.0.1:{listen}")
    assert "    default-server check " in text
    text = re.sub(r"(    default-server check .*)\n", rf"\1 maxconn {PER_INSTANCE}\n", text)
    servers = "".join(f"    server app{n} 127.0.0.1:{port}\n" for n, port in enumerate(ports, 1))
    return re.sub(r"(    server app\d 127\.0\.0\.1:\d+\n)+", servers, text)


def cpu_seconds(pids: list[int]) -> float:
    """The CPU the processes `pids` and all their descendants have used (their reaped children's too)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        pid = int(stat.parent.name)
        parents[pid] = int(fields[1])
        times[pid] = sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    wanted, total = set(pids), 0.0
    for pid in sorted(times):  # a child's pid may be lower than its parent's: walk up from each
        ancestor = pid
        while ancestor and ancestor not in wanted:
            ancestor = parents.get(ancestor, 0)
        total += times[pid] if ancestor else 0.0
    return total


async def closed_loop(url: str, clients: int) -> tuple[float, float, float, int]:
    """(turns a second, p50, p99 in seconds, failures) of `clients` in a closed loop: the turns that ended within
    SECONDS after the first WARM seconds."""
    ended: list[tuple[float, float]] = []  # (when, how long)
    failures = 0
    began_all = time.monotonic()
    window = (began_all + WARM, began_all + WARM + SECONDS)

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal failures
        while time.monotonic() < window[1]:
            began = time.monotonic()
            body = {"input": [{"role": "user", "content": "Hello"}]}
            answer = await http.post("/invocations", json=body, headers={"x-test-user": f"{uuid.uuid4()}@example.com"})
            if answer.status_code == 200:
                ended.append((time.monotonic(), time.monotonic() - began))
            else:
                failures += 1

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits, trust_env=False) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    took = sorted(seconds for when, seconds in ended if window[0] <= when <= window[1])
    return len(took) / SECONDS, took[len(took) // 2], took[min(len(took) - 1, int(len(took) * 0.99))], failures


def steps(url: str, apps: list[int], others: list[int]) -> tuple[list[tuple], tuple]:
    """Clients raised STEP at a time until p99 crosses P99_TARGET: every step's (clients, turns/s, p50, p99, failures,
    the cores the `apps` used, the cores the `others` used), and the best under the target."""
    done: list[tuple] = []
    for clients in range(STEP, 41, STEP):
        cpu, began = (cpu_seconds(apps), cpu_seconds(others)), time.monotonic()
        rate, p50, p99, failed = asyncio.run(closed_loop(url, clients))
        took = time.monotonic() - began
        cores = ((cpu_seconds(apps) - cpu[0]) / took, (cpu_seconds(others) - cpu[1]) / took)
        done.append((clients, rate, p50, p99, failed, *cores))
        print(f"  {clients} clients: {rate:.2f}/s, p50 {p50:.2f} s, p99 {p99:.2f} s, cores {cores}", flush=True)
        if p99 > P99_TARGET:
            break
    under = [step for step in done if step[3] <= P99_TARGET]
    return done, max(under, key=lambda step: step[1]) if under else done[0]


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
    args = parser.parse_args()
    if not os.path.exists(HAPROXY):
        raise SystemExit("load-balancer: needs haproxy (Debian's package: apt-get install haproxy)")
    app = Path(args.app)
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"lb-bench-{os.getpid()}"
    folder.mkdir()
    base = {key: value for key, value in os.environ.items() if not key.startswith(DROPPED)}
    rows: list[tuple[int, list[tuple], tuple]] = []
    delays: list[float] = []
    tools_port, model_port = free_port(), free_port()
    python = str(app / ".venv" / "bin" / "python")
    support = "import sys; sys.path.insert(0, 'tests/template'); import support"
    serve_tools = f"{support}; support.serve_mcp_tools({tools_port})"
    tools = start([python, "-c", serve_tools], base, folder / "tools.log", cwd=app)
    slow = [python, str(HERE / "slow_model.py"), "--port", str(model_port), "--delay-seconds", str(MODEL_SECONDS)]
    model = start(slow, base, folder / "model.log", cwd=app)
    try:
        cli.wait_healthy(f"http://127.0.0.1:{tools_port}", tools, "load-balancer", "/mcp")
        cli.wait_healthy(f"http://127.0.0.1:{model_port}", model, "load-balancer", "/")
        with PostgresServer() as postgres:
            env = {
                **base, "LLM_PROVIDER": "openai", "LLM_MODEL": "offline", "OPENAI_API_KEY": "offline",
                "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1", "MEMORY_BACKEND": "postgres",
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
                    print(f"{count} instance{'s' if count > 1 else ''}:", flush=True)
                    others = [postgres.process.pid, proxy.pid, model.pid]  # type: ignore[union-attr]
                    rows.append((count, *steps(url, [each.pid for each in apps], others)))
                    if count == 2:
                        a, b = (f"http://127.0.0.1:{port}" for port in ports)
                        delays = asyncio.run(follower_delays(a, b))
                finally:
                    stop(proxy)
                    for process in apps:
                        stop(process)
    finally:
        stop(model)
        stop(tools)
        shutil.rmtree(folder, ignore_errors=True)
    publish(report(args, rows, delays), args.write, HEADING)


def report(args: argparse.Namespace, rows: list[tuple[int, list[tuple], tuple]], delays: list[float]) -> str:
    one = rows[0][2][1]
    table = []
    for count, done, best in rows:
        clients, rate, p50, p99, failed, cores, others = best
        bound = count * PER_INSTANCE / MODEL_SECONDS
        after = [step for step in done if step[0] > clients]
        crossed = f"{after[0][0]}: {after[0][3] * 1000:.0f}" if after else "not reached"
        table.append(
            f"| {count} | {bound:g} | {clients} | {rate:.2f} | {rate / bound:.0%} | {rate / one:.2f}× "
            f"| {p50 * 1000:.0f} | {p99 * 1000:.0f} | {crossed} | {cores:.2f} | {others:.2f} "
            f"| {sum(step[4] for step in done)} |"
        )
    delays.sort()
    return section(
        HEADING,
        f"`{args.command}` on {datetime.date.today()}, {args.label}, {len(os.sched_getaffinity(0))} cores, load "
        f"{load_average()} after: HAProxy with the app's deploy/haproxy.cfg in "
        f"front of 1, 2 and 3 instances of one worker each, each server given `maxconn {PER_INSTANCE}`, on one "
        f"PostgreSQL; the offline model over HTTP, each call answered {MODEL_SECONDS:g} s late "
        "(benchmarks/slow_model.py); tracing off. Clients in a closed loop, each turn a new user's new "
        f"conversation, {STEP} more a step, each step measured for {SECONDS} s after {WARM} s, until p99 "
        f"crossed {P99_TARGET * 1000:.0f} ms; a row is the step with the most turns a second under that p99. "
        f"The bound is {PER_INSTANCE} turns at once an instance, so {PER_INSTANCE / MODEL_SECONDS:g} turns a "
        "second an instance; the cores columns say the two shared cores were not the bound (benchmarks/README.md).",
        COLUMNS,
        table,
        f"A follower on instance B of a run on instance A ({RUNS} runs, {len(delays)} events after a 3 s tool): "
        f"B sees each event a median **{statistics.median(delays) * 1000:.0f} ms** after A's own follower, "
        f"at most {delays[-1] * 1000:.0f} ms (A writes an unfollowed run's deltas every 0.2 s, B polls every "
        "0.25 s). A rolling restart under load loses **0** turns (tests/test_load_balancer.py, which prints its "
        "counts).",
    )


if __name__ == "__main__":
    main()
