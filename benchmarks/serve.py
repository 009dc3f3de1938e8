"""Benchmark: serving, HEAD against release 0.1.0, each a real `start-app` process side by side.

Run with `scripts/benchmark serve` (it renders and syncs both apps, then runs this with the template
repo's own Python, whose dev group has httpx). For each run, app A (0.1.0) and app B (HEAD) start fresh
side by side, once with tracing off and once with it on, and each cell is measured on one right after the other:
- the app: `<app>/.venv/bin/start-app --host 127.0.0.1 --port N --workers 1` (what `uv run start-app`
  runs, without uv's process in between), one uvicorn process pinned to core 0 (taskset); 0.1.0 has no
  memory, and HEAD runs as rendered (its default, SQLite memory on, a fresh store per process); the model
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
Every ratio B/A is taken within one pair of cells, then the median over the runs is reported.
With --profile, py-spy samples HEAD at concurrency 8, not streaming, tracing off and on.
Prints a Markdown section for RESULTS.md (with --write, replaces that section in the file).
Traffic goes to 127.0.0.1 only; every loop is bounded by a count and by time.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import datetime
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import stub_model  # noqa: E402

HEADING = "## Serving: HEAD against 0.1.0 (benchmarks/serve.py)"
SERVER_CORE, CLIENT_CORE = 0, 1
MODES = ("json", "stream")
CONCURRENCY = (1, 8, 32)
TRACING = ("off", "on")
CLOCK_TICK = 1 / os.sysconf("SC_CLK_TCK")
HISTORY = [
    {"role": "user", "content": "What can you help me with?"},
    # As a chat UI replays the answer it was given: an output_text message without its id.
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "I can answer questions and look things up for you."}],
    },
    {"role": "user", "content": "Tell me more about the second one."},
]
BODIES = {
    "json": json.dumps({"input": HISTORY}).encode(),
    "stream": json.dumps({"input": HISTORY, "stream": True}).encode(),
}
HEADERS = {"content-type": "application/json"}
REPLIES = (stub_model.REPLY.encode(), b"Offline model: I saw")  # the stub's, or the app's offline model's
VERSIONS = ("openai-agents", "mlflow-skinny", "fastapi", "uvicorn", "openai", "httpx")
# Variables of the outer shell that must not reach the apps (another model, another store, a proxy).
DROPPED = ("VIRTUAL_ENV", "UV_", "PYTHONPATH", "LLM_", "OPENAI_", "DATABRICKS_", "MLFLOW_", "MEMORY_", "APP_ENV")
PROXIES = ("http_proxy", "https_proxy", "all_proxy")


@dataclass(frozen=True)
class Settings:
    runs: int
    requests: dict[int, int]  # concurrency: requests per cell
    warmup: int
    cell_seconds: float  # a cell stops sending after this long, finished or not
    start_seconds: float = 180  # for an app to answer /health
    profile_seconds: float = 10

    @classmethod
    def make(cls, quick: bool, runs: int | None) -> Settings:
        if quick:
            return cls(runs=runs or 1, requests={1: 15, 8: 40, 32: 64}, warmup=10, cell_seconds=20, profile_seconds=4)
        return cls(runs=runs or 3, requests={1: 100, 8: 400, 32: 400}, warmup=50, cell_seconds=120)


@dataclass
class App:
    key: str  # A or B
    label: str
    path: Path
    versions: dict[str, str] = field(default_factory=dict)
    python: str = ""
    memory: str = "none"  # MEMORY_BACKEND, or "as rendered": the render's default (app_env)


@dataclass
class Cell:
    cpu_ms: float  # server CPU per completed request
    rps: float
    p50: float
    p95: float
    p99: float
    done: int
    errors: collections.Counter
    rss_mib: float


def log(message: str) -> None:
    print(f"serve: {message}", file=sys.stderr, flush=True)


# --- the app process, read from /proc ---------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all its threads), from /proc/PID/stat."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()  # the name may hold spaces; fields[0] is field 3, state
    return (int(fields[11]) + int(fields[12])) * CLOCK_TICK


def peak_rss_kib(pid: int) -> int:
    """VmHWM: the process's peak resident set since it started or since reset_peak_rss."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


def reset_peak_rss(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux 4.0+)
        return True
    except OSError:
        return False


async def quiet(pid: int, limit: float = 10.0) -> None:
    """Wait until the process has used no CPU for 0.3 s (at most `limit` s): background work is done."""
    deadline, last, still = time.monotonic() + limit, cpu_seconds(pid), 0
    while time.monotonic() < deadline and still < 3:
        await asyncio.sleep(0.1)
        now = cpu_seconds(pid)
        still = still + 1 if now == last else 0
        last = now


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def app_env(stub_url: str, store: Path, tracing: str, model: str = "stub", memory: str = "none") -> dict[str, str]:
    """The app's environment: the stub model at `stub_url`, or with model="offline" the app's own offline model.
    memory="as rendered" leaves MEMORY_BACKEND at the render's default, with its store in `store`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(DROPPED)}
    env = {key: value for key, value in env.items() if key.lower() not in PROXIES}
    if model == "offline":
        env.update(LLM_PROVIDER="offline", LLM_MODEL="offline")
    else:
        env.update(LLM_PROVIDER="openai", OPENAI_BASE_URL=stub_url, OPENAI_API_KEY="stub", LLM_MODEL="stub")
    env.update(
        LLM_API="chat_completions",
        MLFLOW_TRACKING_URI=f"file:{store / 'mlruns'}",
        NO_PROXY="127.0.0.1,localhost",
    )
    if memory == "as rendered":
        env["MEMORY_DATABASE_URL"] = str(store / "conversations.db")
    else:
        env["MEMORY_BACKEND"] = memory
    if tracing == "off":
        env["MLFLOW_TRACE_SAMPLING_RATIO"] = "0"
    return env


def count_traces(store: Path) -> int:
    return sum(1 for folder in (store / "mlruns").glob("*/traces/*") if folder.is_dir())


class Served:
    """One app process: started pinned to the server core, stopped (SIGTERM, then SIGKILL) on exit."""

    def __init__(
        self, app: App, stub_url: str, folder: Path, tracing: str, settings: Settings, model: str = "stub"
    ) -> None:
        self.app, self.folder, self.settings = app, folder, settings
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        folder.mkdir(parents=True)
        self.log_path = folder / "app.log"
        self._log = self.log_path.open("wb")
        command = [str(app.path / ".venv" / "bin" / "start-app"), "--host", "127.0.0.1", "--port", str(self.port)]
        self.process = subprocess.Popen(
            ["taskset", "-c", str(SERVER_CORE), *command, "--workers", "1"],
            cwd=folder,
            env=app_env(stub_url, folder, tracing, model, app.memory),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.pid = self.process.pid  # taskset execs start-app, whose uvicorn serves in this same process

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    async def wait_healthy(self) -> None:
        deadline = time.monotonic() + self.settings.start_seconds
        async with httpx.AsyncClient(base_url=self.url, trust_env=False, timeout=5) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"app {self.app.key} exited at start-up:\n{self.log_tail()}")
                try:
                    if (await client.get("/health")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.2)
            else:
                raise RuntimeError(f"app {self.app.key} did not answer /health in {self.settings.start_seconds} s")
        command = Path(f"/proc/{self.pid}/cmdline").read_bytes().decode(errors="replace")
        assert "start-app" in command, f"pid {self.pid} is not the app: {command!r}"
        children = " ".join(path.read_text() for path in Path(f"/proc/{self.pid}/task").glob("*/children")).split()
        assert not children, f"the app started processes {children}: expected one uvicorn process"
        assert os.sched_getaffinity(self.pid) == {SERVER_CORE}, os.sched_getaffinity(self.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # start-app flushes its traces on SIGTERM
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()


# --- the load client ----------------------------------------------------------------------------------


def client_for(url: str, concurrency: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx.AsyncClient(base_url=url, limits=limits, timeout=30, trust_env=False)


async def one_request(client: httpx.AsyncClient, mode: str) -> str | None:
    """None when the app answered with the model's reply (the stub's, or the offline model's), else what went wrong."""
    try:
        if mode == "stream":
            async with client.stream("POST", "/invocations", content=BODIES[mode], headers=HEADERS) as response:
                body = await response.aread()
            complete = b"[DONE]" in body
        else:
            response = await client.post("/invocations", content=BODIES[mode], headers=HEADERS)
            body, complete = response.content, True
    except httpx.HTTPError as error:
        return type(error).__name__
    if response.status_code != 200:
        return f"HTTP {response.status_code}"
    if not any(reply in body for reply in REPLIES) or not complete:
        return "no reply in the body"
    return None


async def load(
    url: str, mode: str, concurrency: int, count: int, seconds: float, keep_going=lambda: True
) -> tuple[list[float], collections.Counter, float]:
    """`count` requests (fewer if `seconds` run out or keep_going() turns false) from `concurrency` workers.
    Returns the latencies (s) of the good ones, the errors and the elapsed seconds."""
    latencies: list[float] = []
    errors: collections.Counter = collections.Counter()
    sent = 0
    started = time.perf_counter()
    deadline = started + seconds

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal sent
        while sent < count and time.perf_counter() < deadline and keep_going():
            sent += 1
            begun = time.perf_counter()
            error = await one_request(client, mode)
            if error is None:
                latencies.append(time.perf_counter() - begun)
            else:
                errors[error] += 1

    async with client_for(url, concurrency) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    if sent < count and time.perf_counter() >= deadline:
        errors[f"not sent (over {seconds:.0f} s)"] += count - sent
    return latencies, errors, elapsed


async def warm_up(served: Served, count: int) -> None:
    for mode in MODES:
        _, errors, _ = await load(served.url, mode, 8, count // 2, served.settings.cell_seconds)
        if errors:
            raise RuntimeError(f"app {served.app.key} failed its warm-up ({dict(errors)}):\n{served.log_tail()}")


async def measure_cell(served: Served, mode: str, concurrency: int) -> Cell:
    pid, count = served.pid, served.settings.requests[concurrency]
    await quiet(pid)
    reset_peak_rss(pid)
    before = cpu_seconds(pid)
    latencies, errors, elapsed = await load(served.url, mode, concurrency, count, served.settings.cell_seconds)
    await quiet(pid)  # the trace export a request leaves to MLflow's background thread is part of its cost
    used = cpu_seconds(pid) - before
    done = len(latencies)
    if len(latencies) >= 2:
        cuts = statistics.quantiles([s * 1000 for s in latencies], n=100, method="inclusive")
        p50, p95, p99 = cuts[49], cuts[94], cuts[98]
    else:
        p50 = p95 = p99 = float("nan")
    return Cell(
        cpu_ms=used * 1000 / done if done else float("nan"),
        rps=done / elapsed if elapsed else float("nan"),
        p50=p50,
        p95=p95,
        p99=p99,
        done=done,
        errors=errors,
        rss_mib=peak_rss_kib(pid) / 1024,
    )


async def stub_stats(stub_url: str) -> dict:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as client:
        return (await client.get(stub_url.removesuffix("/v1") + "/stats")).json()


async def measure_pair(
    apps: list[App], tracing: str, run: int, stub_url: str, work: Path, settings: Settings, checks: dict
) -> dict[tuple[str, str, int], Cell]:
    """One fresh process per app, both up at once; each cell is measured on one app right after the other.

    Pairing cell by cell, seconds apart, keeps the other tenants' load on this shared machine about the same for
    both sides of a ratio: run by run, a whole process a minute after the other saw ratios swing by 30%. The
    order within a pair alternates run by run, so neither app always goes first.
    """
    order = apps if run % 2 == 0 else apps[::-1]
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


def stored_items(store: Path) -> int:
    """Conversation items in the app's SQLite store (memory "as rendered"): none, for stateless requests."""
    database = store / "conversations.db"
    if not database.exists():
        return 0
    with contextlib.closing(sqlite3.connect(database)) as connection:
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "agent_conversation_items" not in tables:
            return 0
        return connection.execute("SELECT count(*) FROM agent_conversation_items").fetchone()[0]


# --- the profile --------------------------------------------------------------------------------------

PACKAGE_GROUPS = {
    "uvicorn": "uvicorn/starlette/fastapi",
    "starlette": "uvicorn/starlette/fastapi",
    "fastapi": "uvicorn/starlette/fastapi",
    "httpx": "httpx/httpcore",
    "httpcore": "httpx/httpcore",
    "httpx2": "httpx/httpcore",  # openai 3's own forks of them
    "httpcore2": "httpx/httpcore",
    "pydantic": "pydantic",
    "pydantic_core": "pydantic",
}
PROFILE_RATE = 500  # samples a second; --nonblocking reads the app's memory from the other core, never pausing it
ALWAYS_SHOWN = (
    "agents",
    "asyncio",
    "uvicorn/starlette/fastapi",
    "mlflow",
    "agent_server",
    "openai",
    "httpx/httpcore",
    "pydantic",
)


def frame_place(frame: str) -> tuple[str, str, str]:
    """(package, function, short file) of one py-spy frame, `function (/full/path.py:line)`."""
    function, _, where = frame.rpartition(" (")
    path = where.rstrip(")").rpartition(":")[0] or where.rstrip(")")
    if "/site-packages/" in path:
        short = path.split("/site-packages/", 1)[1]
        top = short.split("/", 1)[0].removesuffix(".py")
        return PACKAGE_GROUPS.get(top, top), function or frame, short
    if "/agent_server/" in path:
        short = "agent_server/" + path.split("/agent_server/", 1)[1]
        return "agent_server", function or frame, short
    frozen = re.fullmatch(r"<frozen ([\w.]+)>", path)  # os, abc, _collections_abc, importlib._bootstrap
    if frozen:
        return f"stdlib {frozen.group(1).lstrip('_').split('.')[0]}", function or frame, path
    stdlib = re.search(r"/lib/python3\.\d+/(.*)$", path)
    if stdlib:
        short = stdlib.group(1)
        top = short.split("/", 1)[0].removesuffix(".py")
        return ("asyncio" if top == "asyncio" else f"stdlib {top}"), function or frame, short
    return "other", function or frame, path or frame


def summarise_profile(raw: str) -> tuple[int, list[tuple[str, float, float]], list[tuple[str, str, float]]]:
    """From py-spy's raw (collapsed) stacks: samples, per package (self %, inclusive %), top functions by self %."""
    total = 0
    self_by_package: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    by_function: collections.Counter[tuple[str, str]] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count, frames = int(count_text), [frame_place(frame) for frame in stack.split(";")]
        total += count
        package, function, short = frames[-1]
        self_by_package[package] += count
        by_function[package, f"{function} ({short})"] += count
        for seen in {frame[0] for frame in frames}:
            inclusive[seen] += count
    if not total:
        return 0, [], []
    shown = set(ALWAYS_SHOWN) | {name for name, count in self_by_package.items() if count / total >= 0.01}
    packages = sorted(
        ((name, 100 * self_by_package[name] / total, 100 * inclusive[name] / total) for name in shown),
        key=lambda row: -row[1],
    )
    functions = [(package, where, 100 * count / total) for (package, where), count in by_function.most_common(20)]
    return total, packages, functions


def inclusive_functions(raw: str, package: str, top: int = 15) -> list[tuple[str, float]]:
    """The functions of `package` with the largest inclusive share (anywhere on the stack) of py-spy's samples."""
    total = 0
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        total += int(count_text)
        places = {
            f"{function} ({short})" for name, function, short in map(frame_place, stack.split(";")) if name == package
        }
        for place in places:
            counts[place] += int(count_text)
    return [(place, 100 * count / total) for place, count in counts.most_common(top)] if total else []


async def profile(app: App, stub_url: str, work: Path, settings: Settings, uv: str, tracing: str) -> dict:
    """py-spy on app (HEAD) at c=8, not streaming, while the load client keeps it busy."""
    spy = [uv, "run", "--no-project", "--quiet", "--with", "py-spy", "py-spy"]
    version = subprocess.run([*spy, "--version"], capture_output=True, text=True, timeout=300, check=True)
    served = Served(app, stub_url, work / f"profile-tracing-{tracing}", tracing, settings)
    out = served.folder / "profile.txt"
    try:
        await served.wait_healthy()
        await warm_up(served, settings.warmup)
        await quiet(served.pid)
        record = subprocess.Popen(
            ["taskset", "-c", str(CLIENT_CORE), *spy, "record", "--pid", str(served.pid)]
            + ["--duration", str(int(settings.profile_seconds)), "--rate", str(PROFILE_RATE), "--nonblocking", "--gil"]
            + ["--full-filenames", "--format", "raw", "--output", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        await asyncio.sleep(0.5)
        before = cpu_seconds(served.pid)
        latencies, errors, elapsed = await load(
            served.url, "json", 8, 100_000, settings.profile_seconds + 30, keep_going=lambda: record.poll() is None
        )
        await quiet(served.pid)  # the trace export the requests left counts, as in a cell
        cpu = cpu_seconds(served.pid) - before
        _, spy_err = record.communicate(timeout=60)
        if record.returncode != 0:
            raise RuntimeError(f"py-spy failed ({record.returncode}): {spy_err.decode(errors='replace')[-2000:]}")
    finally:
        served.stop()
    raw = out.read_text()
    total, packages, functions = summarise_profile(raw)
    return {
        "tool": version.stdout.strip(),
        "samples": total,
        "seconds": settings.profile_seconds,
        "requests": len(latencies),
        "errors": sum(errors.values()),
        "cpu_ms": cpu * 1000 / max(1, len(latencies)),
        "packages": packages,
        "functions": functions,
        "mlflow": inclusive_functions(raw, "mlflow"),
    }


# --- the report ---------------------------------------------------------------------------------------


def app_facts(app: App) -> None:
    python = app.path / ".venv" / "bin" / "python"
    names = json.dumps(VERSIONS)
    code = (
        "import json, platform; from importlib.metadata import version; "
        f"print(json.dumps([platform.python_version(), {{n: version(n) for n in {names}}}]))"
    )
    app.python, app.versions = json.loads(
        subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    )
    helped = subprocess.run(
        [str(app.path / ".venv" / "bin" / "start-app"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tempfile.gettempdir(),
    )
    assert "--workers" in helped.stdout, f"start-app of {app.label} has no --workers:\n{helped.stdout}{helped.stderr}"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def med(values: list[float]) -> float:
    values = [value for value in values if value == value]  # no NaN
    return statistics.median(values) if values else float("nan")


def ms(value: float, digits: int = 1) -> str:
    return "–" if value != value else f"{value:,.{digits}f}"


def results_table(apps: list[App], runs: list[dict]) -> list[str]:
    """runs: per run, {(app key, tracing, mode, concurrency): Cell}."""
    a, b = apps[0].key, apps[1].key
    lines = [
        "| mode | concurrency | tracing | CPU ms/req A | CPU ms/req B | CPU ratio B/A | req/s A | req/s B "
        "| p50 / p95 / p99 ms A | p50 / p95 / p99 ms B | errors A / B | peak RSS MiB A | peak RSS MiB B |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in MODES:
        for concurrency in CONCURRENCY:
            for tracing in TRACING:
                pairs = [(run[a, tracing, mode, concurrency], run[b, tracing, mode, concurrency]) for run in runs]

                def each(name: str, which: int, pairs: list = pairs) -> float:
                    return med([getattr(pair[which], name) for pair in pairs])

                ratio = med([pair[1].cpu_ms / pair[0].cpu_ms for pair in pairs])
                errors = [sum(sum(pair[which].errors.values()) for pair in pairs) for which in (0, 1)]
                lines.append(
                    f"| {'stream' if mode == 'stream' else 'not streaming'} | {concurrency} | {tracing} "
                    f"| {ms(each('cpu_ms', 0), 2)} | {ms(each('cpu_ms', 1), 2)} | {ms(ratio, 2)}× "
                    f"| {ms(each('rps', 0), 0)} | {ms(each('rps', 1), 0)} "
                    + "".join(
                        f"| {ms(each('p50', w), 0)} / {ms(each('p95', w), 0)} / {ms(each('p99', w), 0)} "
                        for w in (0, 1)
                    )
                    + f"| {errors[0]} / {errors[1]} | {ms(each('rss_mib', 0), 0)} | {ms(each('rss_mib', 1), 0)} |"
                )
    return lines


def tracing_cost(apps: list[App], runs: list[dict]) -> list[str]:
    lines = [
        "| app | mode | CPU ms/req off | CPU ms/req on | added by tracing (ms/req) | on / off |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for app in apps:
        for mode in MODES:
            cells = [(run[app.key, "off", mode, 8], run[app.key, "on", mode, 8]) for run in runs]
            lines.append(
                f"| {app.key} | {'stream' if mode == 'stream' else 'not streaming'} "
                f"| {ms(med([off.cpu_ms for off, _ in cells]), 2)} | {ms(med([on.cpu_ms for _, on in cells]), 2)} "
                f"| {ms(med([on.cpu_ms - off.cpu_ms for off, on in cells]), 2)} "
                f"| {ms(med([on.cpu_ms / off.cpu_ms for off, on in cells]), 2)}× |"
            )
    return lines


def targets(apps: list[App], runs: list[dict]) -> str:
    a, b = apps[0].key, apps[1].key
    parts = []
    for mode in MODES:
        ratio = med([run[b, "off", mode, 8].cpu_ms / run[a, "off", mode, 8].cpu_ms for run in runs])
        p99 = med([run[b, "off", mode, 8].p99 for run in runs])
        name = "streaming" if mode == "stream" else "not streaming"
        parts.append(
            f"{name}: CPU/request {ratio:.2f}× of {apps[0].label} ({'met' if ratio <= 0.8 else 'not met'}), "
            f"p99 {p99:.0f} ms"
        )
    return "; ".join(parts)


def memory_note(apps: list[App]) -> str:
    """How each app ran its memory: "as rendered" is SQLite memory on, a fresh store per process."""
    said = {
        app.key: "as rendered (SQLite memory on, a fresh store per process)"
        if app.memory == "as rendered"
        else f"MEMORY_BACKEND={app.memory}"
        for app in apps
    }
    stateless = " Each request names no conversation and brings its own history, so memory stores none of it."
    return "Memory: " + ", ".join(f"{key} {how}" for key, how in said.items()) + "." + stateless


def report(
    apps: list[App], runs: list[dict], settings: Settings, checks: dict, prof: dict[str, dict] | None, meta: dict
) -> str:
    a, b = apps
    out = [HEADING, ""]
    out.append(
        f"Made by `{meta['command']}` on {meta['date']}, in {meta['minutes']:.1f} minutes. "
        f"{os.cpu_count()} cores ({cpu_model()}), Linux {os.uname().release}, Python {b.python} in both apps. "
        f"The machine was shared with other engineers' test runs at the time (load average {meta['load_before']} "
        f"at the start, {meta['load_after']} at the end), so absolute figures are noisy: compare the ratios, "
        "each taken within a pair of cells measured one right after the other, before the median over the runs."
    )
    out += ["", f"- A: {a.label}", f"- B: {b.label}", ""]
    out.append("| app | " + " | ".join(VERSIONS) + " |")
    out.append("|---|" + "---|" * len(VERSIONS))
    for app in apps:
        out.append(f"| {app.key} | " + " | ".join(app.versions.get(name, "?") for name in VERSIONS) + " |")
    requests = ", ".join(f"{count} at c={c}" for c, count in settings.requests.items())
    out += [
        "",
        f"{settings.runs} run(s); per run and app, one fresh process with tracing off and one with it on, each warmed "
        f"up with {settings.warmup} requests, then per cell {requests}. Both apps' processes are up at once, and each "
        "cell is measured on one app right after the other (A first in odd runs, B first in even ones). "
        "Each process is one uvicorn worker "
        f"(`start-app --host 127.0.0.1 --port N --workers 1`) pinned to core {SERVER_CORE}; the stub model and the "
        f"httpx load client share core {CLIENT_CORE}. {memory_note(apps)} chat_completions mode, the whole two-turn "
        "history (with the answer as an id-less assistant output_text message) in every request. CPU ms/req is the app "
        "process's utime+stime over the cell (read with the process quiet before and after, so background trace "
        f"export counts; {CLOCK_TICK * 1000:.0f} ms ticks) per completed request; peak RSS is VmHWM, reset before "
        "each cell. A, B and latencies are medians over the runs; the ratio is the median of the runs' ratios.",
        "",
    ]
    out += results_table(apps, runs)
    out += ["", f"Target (B at most 0.8× A's CPU per request), at c=8 with tracing off: {targets(apps, runs)}.", ""]
    out += ["What tracing costs, at c=8 (medians of the runs' differences and ratios):", ""]
    out += tracing_cost(apps, runs)
    sizes = {app.key: dict(checks.get(("input sizes", app.key), {})) for app in apps}
    traced = {
        app.key: (
            sum(n for n, _ in checks.get(("traces", app.key, "on"), [])),
            sum(r for _, r in checks.get(("traces", app.key, "on"), [])),
        )
        for app in apps
    }
    out += [
        "",
        "Checks: every model call carried the whole history "
        + ", ".join(
            f"({app.key}: " + ", ".join(f"{size} messages × {n}" for size, n in sorted(sizes[app.key].items())) + ")"
            for app in apps
        )
        + "; with tracing off neither app wrote a trace (MLFLOW_TRACE_SAMPLING_RATIO=0), with it on "
        + ", ".join(f"{app.key} wrote {traced[app.key][0]:,} for {traced[app.key][1]:,} requests" for app in apps)
        + " (warm-up included); conversation items B stored: "
        + f"{sum(checks.get(('stored', b.key), [])):,} (MEMORY: {b.memory}).",
    ]
    for tracing, one in (prof or {}).items():
        out += profile_section(one, tracing, meta["command"])
    return "\n".join(out) + "\n"


def profile_section(prof: dict, tracing: str, command: str) -> list[str]:
    out = [
        "",
        f"### Where HEAD's CPU goes (py-spy, c=8, not streaming, tracing {tracing})",
        "",
        f"`{command}` sampled app B with {prof['tool']} for {prof['seconds']:.0f} s while the load "
        f"client kept it busy (`py-spy record --pid PID --rate {PROFILE_RATE} --nonblocking --gil --format raw "
        "--full-filenames`, through `uv run --no-project --with py-spy`): "
        f"{prof['samples']:,} samples of the thread holding the GIL, while serving {prof['requests']:,} requests "
        f"({prof['errors']} errors, {prof['cpu_ms']:.2f} ms CPU/request under sampling). `--gil` because "
        "py-spy's idle detection counted waiting threads (the thread pool's queue, the trace pruner's sleep) as "
        "busy here; so C code that releases the GIL (socket calls, epoll, file writes) is not in these shares. Self "
        "is the share of samples whose innermost Python frame is in the package (C code counts for the Python "
        "function that called it); inclusive is the share with the package anywhere on the stack.",
        "",
        "| package | self % | inclusive % |",
        "|---|---:|---:|",
    ]
    out += [f"| {name} | {own:.1f} | {incl:.1f} |" for name, own, incl in prof["packages"]]
    out += ["", "| top 20 functions by self time | package | self % |", "|---|---|---:|"]
    out += [f"| `{where}` | {package} | {share:.1f} |" for package, where, share in prof["functions"]]
    if tracing == "on":
        out += ["", "| MLflow's functions by inclusive share | inclusive % |", "|---|---:|"]
        out += [f"| `{where}` | {share:.1f} |" for where, share in prof["mlflow"]]
    return out


def add_app_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """The options the benchmarks that measure HEAD, and release 0.1.0 beside it, share."""
    parser.add_argument("--app", required=True, help="the rendered, synced HEAD app")
    parser.add_argument("--label", default="HEAD")
    parser.add_argument("--before", help="also measure this rendered, synced app (release 0.1.0)")
    parser.add_argument("--before-label", default="release 0.1.0")
    parser.add_argument("--write", help="replace this benchmark's section in this RESULTS.md")
    parser.add_argument("--command", default=f"scripts/benchmark {what}", help="how the run was started")


def publish(section: str, write: str | None, heading: str) -> None:
    """Print a benchmark's report, and with `write` (a RESULTS.md), replace its section there."""
    print(section)
    if write:
        replace_section(Path(write), section, heading)


def replace_section(path: Path, section: str, heading: str = HEADING) -> None:
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
    parser = argparse.ArgumentParser(description="Serving benchmark, HEAD against 0.1.0 (see the module's doc).")
    parser.add_argument("--app-a", required=True, help="the rendered, synced 0.1.0 app")
    parser.add_argument("--app-b", required=True, help="the rendered, synced HEAD app")
    parser.add_argument("--label-a", default="release 0.1.0")
    parser.add_argument("--label-b", default="HEAD")
    parser.add_argument("--memory-a", default="none", help='A\'s MEMORY_BACKEND, or "as rendered"')
    parser.add_argument(
        "--memory-b", default="as rendered", help='B\'s MEMORY_BACKEND, or "as rendered" (default: its SQLite default)'
    )
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
        replace_section(Path(args.write), section)
    print(section, end="")


if __name__ == "__main__":
    main()
