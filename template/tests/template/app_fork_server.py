# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""`start-app` (or plain `uvicorn`), or a test's function, in processes forked from one that has imported the
app's libraries once: the run's fork server (fork_server.py), which every test process of the run shares.

A process that starts the app spends about 2 s of CPU importing openai-agents, MLflow and FastAPI before it
serves (`python -X importtime -c "import agent_server.app"`); the tests start dozens, and on two cores that was
a good part of the suite's time. The fork server imports those libraries once a run (about 3.7 s of CPU; once
per test process, it was that three times) and forks each app from itself: a process of its own, with its own
pid, environment, folder and log, that runs start-app's main() as the console script does. The server imports the
template's own modules too, which read no setting as they are imported (test_fork_server.py checks); the owner's
agent.py, and what imports it, each app process imports after its environment is set, as at a real start. Tests
about what a start imports, or about a setting a library reads as it is imported, run the console script itself
(test_start_app.py, test_tracing.py). run() runs start-app to its exit, for the tests of the settings that stop
it. call() runs a function in such a process, for a test that changes what a process keeps for its life
(test_tracing.py).

pytest's own process names the server's folder (share(), from conftest.py) before its test processes start, so
they inherit it; the first that asks for a process starts the server, and pytest's process stops it at the end.

Only the standard library here, as in fork_server.py.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Client, Connection
from pathlib import Path
from typing import Any

import fork_server

FOLDER, OWNER = "APP_TESTS_FORK_SERVER", "APP_TESTS_FORK_SERVER_OWNER"  # inherited by the test processes
SCRIPTS = fork_server.SCRIPTS
_started: list[subprocess.Popen[bytes]] = []  # the server this process started, kept (it outlives its test)


def share() -> Callable[[], None]:
    """In pytest's own process, before its test processes start: a folder for the run's fork server, named in the
    environment they inherit. What it returns stops the server, by its pid, and removes the folder."""
    folder = tempfile.mkdtemp(prefix="agent-fork-")  # only this user can reach it, or the socket in it
    os.environ[FOLDER], os.environ[OWNER] = folder, str(os.getpid())

    def stop() -> None:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
            os.kill(int(Path(folder, "pid").read_text()), signal.SIGTERM)
        shutil.rmtree(folder, ignore_errors=True)

    return stop


def start(args: list[str], env: dict[str, str], cwd: Path | None, log: Path, new_session: bool) -> ForkedApp:
    """Run the main() of the console script args[0] (start-app, or uvicorn: SCRIPTS) with args[1:] in a process
    forked from the fork server, with exactly `env` as its environment and `log` as its output."""
    return _ask(args, env, cwd, log, log, new_session, **_script(args))


def run(
    args: list[str], env: dict[str, str], cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """What `subprocess.run(args, env=env, capture_output=True, text=True)` gives for the console script args[0]
    (SCRIPTS), which runs as start() runs it: for tests of how it stops, without a process's imports each time."""
    with tempfile.TemporaryDirectory() as folder:
        printed, said = Path(folder, "stdout"), Path(folder, "stderr")
        process = _ask(args, env, cwd, printed, said, **_script(args))
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        return subprocess.CompletedProcess(args, process.wait(), printed.read_text(), said.read_text())


def call(function: Callable[..., Any], *args: Any, env: dict[str, str], timeout: float = 120) -> Any:
    """What `function(*args)` returns (or raises) in a process forked from the fork server, with exactly `env` as
    its environment: a fresh process for each call, as `python -c` would be, without importing the libraries again.
    `function` must be importable by name, and its arguments and result picklable."""
    name = function.__qualname__
    process = _ask([name], env, None, Path(os.devnull), Path(os.devnull), call=pickle.dumps((function, args)))
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise TimeoutError(f"{name} did not return within {timeout} s") from None
    if not process.answers:
        raise RuntimeError(f"{name}'s process ended without an answer ({process.returncode})")
    failed, value = process.answers[0]
    if failed:
        raise value
    return value


def _script(args: list[str]) -> dict[str, Any]:
    """What a request names of the console script args[0] (SCRIPTS) to run with args[1:]."""
    assert Path(args[0]).name in SCRIPTS, f"{args[0]} is none of {sorted(SCRIPTS)}"
    return {"script": Path(args[0]).name, "argv": list(args)}


def _ask(
    args: list[str], env: dict[str, str], cwd: Path | None, stdout: Path, stderr: Path, new_session: bool = False,
    **what: Any,
) -> ForkedApp:  # fmt: skip
    """A process from the fork server, with exactly that environment, folder, output and this module path, doing
    `what` (_script's, or a function's `call`)."""
    request = {"env": env, "cwd": str(cwd or os.getcwd()), "stdout": str(stdout), "stderr": str(stderr)}
    connection = _connect()
    connection.send({**request, "new_session": new_session, "path": list(sys.path), **what})
    return ForkedApp(connection, args)


def _connect() -> Connection:
    """A connection to the run's fork server, which the first test process to ask starts."""
    if FOLDER not in os.environ:  # not under the tests' conftest.py (a script of its own): a server for this process
        atexit.register(share())
    folder = Path(os.environ[FOLDER])
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one test process at a time: the first starts the server
        if not (folder / "pid").exists():
            _start_server(folder)
    return Client(str(folder / fork_server.SOCKET), family="AF_UNIX")


def _start_server(folder: Path) -> None:
    """Start the server and wait until it listens (it does so before its imports, which requests then wait for)."""
    log = folder / "server.log"
    command = [sys.executable, fork_server.__file__, str(folder), os.environ[OWNER]]
    with log.open("ab") as out:
        server = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    _started.append(server)
    while not (folder / fork_server.SOCKET).exists():
        if server.poll() is not None:
            raise RuntimeError(f"the fork server stopped ({server.returncode}): {log.read_text()}")
        time.sleep(0.01)
    (folder / "pid").write_text(str(server.pid))


class ForkedApp:
    """What the tests use of subprocess.Popen, for a process the fork server started: its pid, which it sends first,
    and its exit code, which its watcher sends once it has ended; `answers`, what a function called in it
    returned."""

    def __init__(self, connection: Connection, args: list[str]) -> None:
        self._connection, self.args = connection, args
        self.returncode: int | None = None  # -N when a signal N stopped it, as with Popen
        self.answers: list[tuple[bool, Any]] = []
        kind, self.pid = self._receive()
        assert kind == "pid", kind

    def poll(self) -> int | None:
        self._take(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._take(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def _take(self, timeout: float | None) -> None:
        """What came within `timeout`: a function's answer, from the process; its exit code, from its watcher."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._connection.poll(left):
                return
            kind, *message = self._receive()
            if kind == "answer":
                self.answers.append((message[0], message[1]))
            else:
                self.returncode = message[0]
                self._connection.close()

    def _receive(self) -> tuple[Any, ...]:
        try:
            return tuple(self._connection.recv())
        except EOFError:
            raise RuntimeError(f"the fork server's watcher of {self.args[0]} went away") from None

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            # Ended, and reaped by its watcher, before its exit code reached us: gone, as Popen treats it.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
