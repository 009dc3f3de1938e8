# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Start servers on loopback ports and wait for them: the app in a thread or in a process of its own (start-app),
the tests' MCP tool server; and the environment each gets. support.py names them too, as the tests import them."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import loopback
import port_owners


class ServerThread:
    """Serve an ASGI app with uvicorn on a free loopback port, in a thread of this process."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        # Until the app's shutdown has ended: the next test's app, in this process, opens the same module-level store
        # that this one's shutdown closes (a busy machine took over 10 s, and the next app found its store gone).
        self.server.should_exit = True
        self.thread.join(timeout=120)
        assert exc[0] is not None or not self.thread.is_alive(), "the server did not stop within 120 s"


@contextlib.contextmanager
def served_with_memory(app_settings: Any, folder: Path) -> Iterator[str]:
    """The app over real HTTP (ServerThread: a streamed answer as it comes), its conversations in a SQLite file in
    `folder`, each caller named by the x-test-user header."""
    app_settings.setenv("MEMORY_BACKEND", "sqlite")
    app_settings.setenv("MEMORY_DATABASE_URL", fresh_database(folder / "conversations.db"))
    app_settings.setenv("MEMORY_USER_HEADER", "x-test-user")
    from agent_server.app import app

    with ServerThread(app) as url:
        yield url


START_APP = str(Path(sys.executable).with_name("start-app"))
# What a server process started by the tests must not inherit: the outer venv, and any setting of the app's
# (the model, Databricks, MLflow, memory) that the test does not pass itself.
NOT_INHERITED = ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONPATH")
NOT_INHERITED += ("LLM_", "OPENAI_", "DATABRICKS_", "MLFLOW_", "MEMORY_", "PG", "ALLOWED_", "OIDC_")


def clean_env(**values: str) -> dict[str, str]:
    """This environment without what NOT_INHERITED names, plus `values`: the tests' one environment cleaner."""
    return {**{key: value for key, value in os.environ.items() if not key.startswith(NOT_INHERITED)}, **values}


# What the apps and servers the tests start write (their stores, traces and logs), in one folder per test
# process that goes when the process ends, so that runs of the suite leave nothing behind.
SCRATCH = Path(tempfile.mkdtemp(prefix="agent-tests-"))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)
LOG_NUMBERS = itertools.count()

TRACED = {"MLFLOW_TRACE_SAMPLING_RATIO": "1"}  # app_env(**TRACED): an app that traces every request, as by default


def fresh_database(path: Path) -> str:
    """An empty conversation database at `path`, at this release's schema: a copy (with its mode) of one that the
    app's store made once in this process. A migration from nothing is some 25 ms of CPU, and the tests make
    hundreds of databases; a copy is a fraction of a millisecond."""
    shutil.copy2(_migrated_database(), path)
    return str(path)


@functools.cache
def _migrated_database() -> Path:
    """This process's empty database at the app's schema, made once (fresh_database)."""
    import sqlalchemy as sa

    from agent_server.memory.store import Store

    made = Path(tempfile.mkdtemp(prefix="migrated-", dir=SCRATCH)) / "conversations.db"

    async def migrate() -> None:
        store = Store(sa.URL.create("sqlite+pysqlite", database=str(made)))
        await store.open()
        await store.close()

    asyncio.run(migrate())
    return made


def app_env(**values: str) -> dict[str, str]:
    """clean_env() for an app: conversations and traces in files of its own, not in the project's ./conversations.db
    and ./mlruns; and no request traced unless the test says so (TRACED): once MLflow has exported a trace, its
    export queue makes the app's stop wait up to a second (mlflow-skinny 3.17 polls it each second), and the tests
    that start apps are about other things. test_tracing.py and test_workers.py start traced ones."""
    folder = Path(tempfile.mkdtemp(prefix="app-", dir=SCRATCH))
    own = {"MEMORY_BACKEND": "sqlite", "MEMORY_DATABASE_URL": fresh_database(folder / "conversations.db")}
    own |= {"MLFLOW_TRACKING_URI": f"file:{folder / 'mlruns'}", "MLFLOW_TRACE_SAMPLING_RATIO": "0"}
    return clean_env(**{"HOME": os.environ.get("HOME", "/tmp"), **own, **values})


class ServerProcess:
    """A server as a process of its own, on a loopback port: the tests' one way to start and stop one.

    Entering starts it and waits until `ready_url` answers, failing with what the process printed if it exits
    first; leaving stops it by its own process id (SIGTERM, then SIGKILL), or with `group`, every process of
    the group that id leads (a script that starts the server as its child). What it prints goes to `log`, a
    file (a pipe that nobody reads while it runs would fill and stall it); `output` reads it. With `preloaded`,
    a console script the fork server knows (app_fork_server.SCRIPTS) runs in a process forked from it.
    """

    def __init__(
        self, args: list[str], env: dict[str, str], ready_url: str, cwd: Path | None = None,
        log: Path | None = None, timeout: float = 120, group: bool = False, preloaded: bool = False,
    ) -> None:  # fmt: skip
        self.args, self.env, self.ready_url, self.cwd, self.timeout = args, env, ready_url, cwd, timeout
        self.group, self.preloaded = group, preloaded
        self.log = log or SCRATCH / f"server-{next(LOG_NUMBERS)}.log"
        self.url = "/".join(ready_url.split("/")[:3])  # scheme://host:port
        self.process: Any = None  # a subprocess.Popen, or what acts as one (launch)

    def __enter__(self) -> ServerProcess:
        self.process = self.launch()
        try:
            wait_until_answering(self.ready_url, self.process, self.timeout, output=lambda: self.output)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def launch(self) -> Any:
        """Start the process: a subprocess.Popen, or what acts as one (app_fork_server.ForkedApp)."""
        if self.preloaded:
            import app_fork_server  # here: the repo's own tests load this file, and start no app with it

            self.log.write_text("")
            return app_fork_server.start(self.args, self.env, self.cwd, self.log, self.group)
        with self.log.open("w") as out:
            return subprocess.Popen(
                self.args,
                env=self.env,
                cwd=self.cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=self.group,
            )

    def stop(self, timeout: float = 120) -> int:
        """SIGTERM, and SIGKILL if it has not stopped within `timeout` (a flush of queued traces is bounded)."""
        assert self.process is not None
        if self.process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait()
        return self.process.returncode

    def _signal(self, signum: int) -> None:
        assert self.process is not None
        if self.group:
            os.killpg(self.process.pid, signum)
        else:
            self.process.send_signal(signum)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def run_to_exit(self, timeout: float = 300) -> int:
        """For a process expected to stop by itself: its exit code."""
        with self.log.open("w") as out:
            done = subprocess.run(
                self.args, env=self.env, cwd=self.cwd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout
            )
        return done.returncode

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")


class StartedApp(ServerProcess):
    """`start-app` as a platform runs it, on a free loopback port; entering gives the app's URL.

    Its process is forked from one that has imported the app's libraries already (app_fork_server.py: about 2 s
    of CPU less a start); with `preloaded=False`, the console script runs as a process of its own, for a test
    about what a start imports."""

    def __init__(
        self, env: dict[str, str], port_flag: bool = True, options: tuple[str, ...] = (), preloaded: bool = True
    ) -> None:
        port = free_port()
        args = [START_APP, *options, "--port", str(port)] if port_flag else [START_APP, *options]
        env = env if port_flag else {**env, "DATABRICKS_APP_PORT": str(port)}
        super().__init__(args, env, f"http://127.0.0.1:{port}/health", preloaded=preloaded)

    def __enter__(self) -> str:  # type: ignore[override]
        return super().__enter__().url


@dataclass
class ToolServer:
    app: Any  # the ASGI app
    seen: list[dict[str, str]]  # the path and headers of every request it got
    tools: Any  # the mcp package's server, to add tools while it runs
    lifespan: Any  # its lifespan, for an app that serves it inside its own (FastAPI(lifespan=...))


def mcp_tool_server(path: str = "/mcp", token: str | None = None) -> ToolServer:
    """A real MCP server (the `mcp` package's own, streamable HTTP) at `path`; with `token`, a request
    without `Authorization: Bearer <token>` gets a 401. Its tools: a fast one, a slow one, one that raises,
    one that needs the user's approval in the tests (delete_file, which records its calls in DELETED) and a
    huge one."""
    from mcp.server.mcpserver import MCPServer  # here: the repo's own tests load this file too

    tools = MCPServer("tools")
    seen: list[dict[str, str]] = []

    @tools.tool()
    def lookup_weather(city: str = "Paris") -> str:
        """The weather in a city."""
        return f"Sunny in {city}"

    @tools.tool()
    async def slow_lookup() -> str:
        """Answers after three seconds."""
        TOOL_CALLS.append("slow_lookup")
        await asyncio.sleep(3)
        return "late"

    @tools.tool()
    async def five_second_job() -> str:
        """Answers after five seconds (the chat page shows it running meanwhile)."""
        TOOL_CALLS.append("five_second_job")
        await asyncio.sleep(5)
        return "finished after five seconds"

    @tools.tool()
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("the tool broke")

    @tools.tool()
    def delete_file(name: str = "a.txt") -> str:
        """Deletes a file: the user approves each call first (require_approval)."""
        DELETED.append(name)
        return f"deleted {name}"

    @tools.tool()
    def huge_report() -> str:
        """A very long text."""
        return "x" * 50_000

    app = tools.streamable_http_app(streamable_http_path=path)

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        counted = {"/calls": TOOL_CALLS, "/deleted": DELETED}  # what its tools ran, for tests in another process
        if scope["type"] == "http" and scope["path"] in counted:
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": json.dumps(counted[scope["path"]]).encode()})
            return
        if scope["type"] == "http":
            headers = {key.decode(): value.decode() for key, value in scope["headers"]}
            seen.append({"path": scope["path"], **headers})
            if token is not None and headers.get("authorization") != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
        await app(scope, receive, send)

    return ToolServer(recording, seen, tools, app.router.lifespan_context)


DELETED: list[str] = []  # the names mcp_tool_server's delete_file tool was called with, in this process
TOOL_CALLS: list[str] = []  # the slow tools mcp_tool_server ran, in this process: counted at the tool


def serve_mcp_tools(port: int) -> None:
    """Serve mcp_tool_server() at http://127.0.0.1:PORT/mcp until stopped (for tests that run it as a process).
    uvicorn stops on SIGTERM, then raises the signal again with the handler it found: this one, so that the process
    exits and runs its atexit functions (SCRATCH's removal), rather than dying by the signal and leaving them."""
    import uvicorn

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    uvicorn.run(mcp_tool_server().app, host="127.0.0.1", port=port, log_level="warning")


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` free loopback ports, none twice, and none that another test process is given meanwhile
    (port_owners.free_ports)."""
    return port_owners.free_ports(count)


class PortTaken(AssertionError):
    """The port a server was to bind answers, but another process holds it (port_owners.py)."""


def wait_until_answering(
    url: str, process: subprocess.Popen, timeout: float = 120, output: Callable[[], str] | None = None
) -> None:
    """Wait until a GET of `url` answers at all; fail with the process's output if it exits first.

    `output` reads that output when the process writes it to a file rather than a pipe.
    """
    read_output = output or (lambda: process.communicate()[0])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"{process.args} exited ({process.returncode}):\n{read_output()}"
        try:
            loopback.get(url, timeout=2)
            if port_owners.someone_elses(httpx.URL(url).port or 80, process.pid):  # not the server we started
                raise PortTaken(f"{url} is answered by another process than {process.args}")
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError(f"{process.args} did not answer on {url} within {timeout}s:\n{output() if output else ''}")
