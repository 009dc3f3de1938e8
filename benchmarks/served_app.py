"""One app process under a benchmark: the request it is sent, started pinned to the server core (`Served`), read
from /proc (CPU, peak memory), with the facts of its install. serve.py and the benchmarks beside it share these."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import stub_model

SERVER_CORE, CLIENT_CORE = 0, 1
MODES = ("json", "stream")
CONCURRENCY = (1, 8, 32)
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
