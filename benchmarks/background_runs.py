"""Benchmark: what a background run costs a turn over a synchronous one, and how many one process holds at once.

Run with `scripts/benchmark runs` (it renders and syncs HEAD's app, then runs this with the template repo's
Python). On SQLite and on PostgreSQL (Debian's server, as tests/postgres.py starts it), one `start-app`
process each, pinned to core 0, memory on, the model the zero-cost stub (stub_model.py) on core 1 with this
client:
- cost: TURNS streamed turns as a synchronous stream (`"stream": true`) and TURNS as a background stream
  (`"background": true, "stream": true`, read to its end), in alternating blocks of BLOCK, at concurrency 4,
  each a new conversation's first turn. The app's CPU is utime+stime from /proc (SQLite's work is in it: the
  store runs in a thread of the app); PostgreSQL's, the CPU of the server's processes.
- capacity: against a stub that answers each model call 5 s late (`--delay-seconds 5`), N background runs
  started at once (N = 100, 300, 600), then each read with GET /responses/{id} until it ends: how many
  completed, the errors, and the seconds from the first start to the last end.
Prints a Markdown section for RESULTS.md (with --write, replaces that section in the file).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import cli
import httpx
import load_client
import sections
import served_app

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from postgres import PostgresServer  # noqa: E402  (the tests' own PostgreSQL, on loopback)

HEADING = "## Background runs (benchmarks/background_runs.py)"
TURNS, BLOCK, CONCURRENCY = 400, 50, 4
CAPACITY = (100, 300, 600)
DELAY = 5.0


def body(background: bool) -> bytes:
    turn = {"input": [{"role": "user", "content": "Hello"}], "stream": True}
    return json.dumps({**turn, "background": True} if background else turn).encode()


def postgres_cpu(postgres: PostgresServer) -> float:
    """The PostgreSQL server's processes: the postmaster and every backend it forked."""
    root = postgres.process.pid
    pids = [root] + [int(p) for p in Path(f"/proc/{root}/task/{root}/children").read_text().split()]
    total = 0.0
    for pid in pids:
        try:
            total += served_app.cpu_seconds(pid)
        except OSError:
            continue
    return total


class App:
    def __init__(self, app: Path, stub_url: str, folder: Path, env: dict[str, str]) -> None:
        self.port = served_app.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        folder.mkdir(parents=True, exist_ok=True)
        self.log = (folder / "app.log").open("wb")
        values = served_app.app_env(stub_url, folder, "off")
        values.update({"MEMORY_BACKEND": "sqlite", "MEMORY_DATABASE_URL": str(folder / "conversations.db"), **env})
        command = [str(app / ".venv" / "bin" / "start-app"), "--host", "127.0.0.1", "--port", str(self.port)]
        self.process = subprocess.Popen(["taskset", "-c", str(served_app.SERVER_CORE), *command], cwd=folder,
                                        env=values, stdout=self.log, stderr=subprocess.STDOUT)  # fmt: skip

    async def healthy(self) -> None:
        async with httpx.AsyncClient(base_url=self.url, trust_env=False, timeout=5) as client:
            for _ in range(600):
                try:
                    if (await client.get("/health")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                assert self.process.poll() is None, "the app exited at start-up"
                await asyncio.sleep(0.1)
        raise RuntimeError("the app did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)
        self.log.close()


async def turns(url: str, background: bool, count: int) -> collections.Counter[str]:
    errors: collections.Counter[str] = collections.Counter()
    sent = 0
    async with load_client.client_for(url, CONCURRENCY) as client:

        async def worker() -> None:
            nonlocal sent
            while sent < count:
                sent += 1
                async with client.stream(
                    "POST", "/invocations", content=body(background), headers=served_app.HEADERS
                ) as r:
                    data = await r.aread()
                if r.status_code != 200 or b"[DONE]" not in data or served_app.REPLIES[0] not in data:
                    errors[f"HTTP {r.status_code}"] += 1

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return errors


async def cost(app: App, store_cpu) -> dict[str, float]:  # type: ignore[no-untyped-def]
    await turns(app.url, False, 40)
    await turns(app.url, True, 40)  # warm both paths
    spent = {False: [0.0, 0.0], True: [0.0, 0.0]}
    for block in range(TURNS // BLOCK * 2):
        background = block % 2 == 1
        await served_app.quiet(app.process.pid)
        cpu, store = served_app.cpu_seconds(app.process.pid), store_cpu()
        errors = await turns(app.url, background, BLOCK)
        assert not errors, errors
        await served_app.quiet(app.process.pid)
        spent[background][0] += served_app.cpu_seconds(app.process.pid) - cpu
        spent[background][1] += store_cpu() - store
    return {
        "sync_ms": spent[False][0] / TURNS * 1000,
        "background_ms": spent[True][0] / TURNS * 1000,
        "sync_store_ms": spent[False][1] / TURNS * 1000,
        "background_store_ms": spent[True][1] / TURNS * 1000,
    }


async def capacity(url: str, count: int) -> dict[str, float]:
    errors: collections.Counter[str] = collections.Counter()
    limits = httpx.Limits(max_connections=100)
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120, trust_env=False) as client:

        async def start() -> str | None:
            answer = await client.post("/responses", content=body(True).replace(b', "stream": true', b""),
                                       headers=served_app.HEADERS)  # fmt: skip
            if answer.status_code != 200:
                errors[f"start: HTTP {answer.status_code}"] += 1
                return None
            return str(answer.json()["id"])

        ids = [run for run in await asyncio.gather(*(start() for _ in range(count))) if run]
        accepted = time.monotonic() - started
        done = 0
        for run_id in ids:
            while True:
                status = (await client.get(f"/responses/{run_id}")).json().get("status")
                if status not in ("queued", "in_progress"):
                    break
                await asyncio.sleep(0.2)
            if status == "completed":
                done += 1
            else:
                errors[status] += 1
    return {"runs": count, "completed": done, "errors": sum(errors.values()), "accepted_s": accepted,
            "seconds": time.monotonic() - started, "kinds": dict(errors)}  # fmt: skip


def start_stub(delay: float) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, str(HERE / "stub_model.py"), "--port", "0", "--delay-seconds", str(delay)]
    stub = subprocess.Popen(["taskset", "-c", str(served_app.CLIENT_CORE), *command], stdout=subprocess.PIPE, text=True)
    line = stub.stdout.readline() if stub.stdout else ""
    return stub, line.rsplit(" ", 1)[1].strip()


async def measure(app_path: Path, work: Path) -> dict[str, object]:
    results: dict[str, object] = {}
    os.sched_setaffinity(0, {served_app.CLIENT_CORE})
    with PostgresServer() as postgres:
        stores = {"SQLite": {}, "PostgreSQL": {"MEMORY_BACKEND": "postgres", "MEMORY_DATABASE_URL": postgres.url}}
        for delay, what in ((0.0, "cost"), (DELAY, "capacity")):
            stub, stub_url = start_stub(delay)
            try:
                for name, env in stores.items():
                    app = App(app_path, stub_url, work / f"{what}-{name}", env)
                    try:
                        await app.healthy()
                        if what == "cost":
                            nothing = functools.partial(float, 0)  # SQLite's work is in the app's CPU
                            store_cpu = nothing if name == "SQLite" else functools.partial(postgres_cpu, postgres)
                            results[f"cost {name}"] = await cost(app, store_cpu)
                        else:
                            results[f"capacity {name}"] = [await capacity(app.url, n) for n in CAPACITY]
                    finally:
                        app.stop()
            finally:
                stub.terminate()
                stub.wait(10)
    return results


def report(results: dict[str, object], command: str, label: str) -> str:
    date = datetime.date.today().isoformat()
    out = [
        HEADING,
        "",
        f"{label}, {date}, `{command}`; {served_app.cpu_model()}, one app process pinned to one core.",
        "",
    ]
    out += ["What a background stream costs a turn over a synchronous stream (memory on, the stub model, "
            f"{TURNS} turns each, concurrency {CONCURRENCY}):", "",
            "| store | app CPU per turn, sync | background | ratio | store CPU per turn, sync | background |",
            "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name in ("SQLite", "PostgreSQL"):
        c = results[f"cost {name}"]
        assert isinstance(c, dict)
        ratio = c["background_ms"] / c["sync_ms"]
        store = (f"{c['sync_store_ms']:.2f} ms | {c['background_store_ms']:.2f} ms" if name == "PostgreSQL"
                 else "in the app's | in the app's")  # fmt: skip
        out.append(f"| {name} | {c['sync_ms']:.2f} ms | {c['background_ms']:.2f} ms | {ratio:.2f}× | {store} |")
    out += ["", f"Background runs started at once against a model that answers {DELAY:g} s late, then read to "
            "their end with GET /responses/{id}:", "",
            "| store | runs | completed | errors | all accepted in | all ended in |",
            "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name in ("SQLite", "PostgreSQL"):
        rows = results[f"capacity {name}"]
        assert isinstance(rows, list)
        for r in rows:
            out.append(f"| {name} | {r['runs']} | {r['completed']} | {r['errors']} {r['kinds'] or ''} | "
                       f"{r['accepted_s']:.1f} s | {r['seconds']:.1f} s |")  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_app_arguments(parser, "runs")
    args = parser.parse_args()
    work = Path(subprocess.run(["mktemp", "-d"], capture_output=True, text=True, check=True).stdout.strip())
    results = asyncio.run(measure(Path(args.app).resolve(), work))
    sections.publish(report(results, args.command, args.label), args.write, HEADING)


if __name__ == "__main__":
    main()
