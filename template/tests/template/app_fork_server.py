# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""`start-app` (or plain `uvicorn`), or a test's function, in processes forked from one that has imported the
app's libraries once.

A process that starts the app spends about 2 s of CPU importing openai-agents, MLflow and FastAPI before it
serves (`python -X importtime -c "import agent_server.app"`); the tests start a dozen, and on two cores that was
a good part of the suite's time. multiprocessing's fork server imports LIBRARIES once per test process and
forks each app from it: a process of its own, with its own pid, environment, folder and log, that runs
start-app's main() as the console script does. agent_server itself is imported in each app process, after its
environment is set, as at a real start. Tests about what a start imports, or about a setting a library reads as
it is imported, run the console script itself (test_start_app.py, test_tracing.py). run() runs start-app to
its exit, for the tests of the settings that stop it. call() runs a function in such a process, for a test that
changes what a process keeps for its life (test_tracing.py).

Only the standard library here: the fork server imports this module in each app process it forks.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# What the app imports that takes time and reads no setting of the app's as it is imported. A library left out is
# imported by each app process itself: slower, never wrong. (git: MLflow's tracing imports it as it starts.)
LIBRARIES = ["agents", "mlflow.genai.agent_server", "mlflow.openai", "mlflow.tracing.processor.mlflow_v3"]
LIBRARIES += ["fastapi", "uvicorn", "sqlalchemy.ext.asyncio", "openai.lib.streaming.chat", "httpcore2", "git"]
LIBRARIES += ["joserfc.jwe", "joserfc.jwt", "joserfc.jwk", "authlib.integrations.httpx_client"]

_context: Any = None


def _fork_server() -> Any:
    """multiprocessing's fork server, with LIBRARIES imported (it starts at the first process asked of it)."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(LIBRARIES)
    return _context


def start(args: list[str], env: dict[str, str], cwd: Path | None, log: Path, new_session: bool) -> ForkedApp:
    """Run the main() of the console script args[0] (start-app, or uvicorn: SCRIPTS) with args[1:] in a process
    forked from the fork server, with exactly `env` as its environment and `log` as its output."""
    assert Path(args[0]).name in SCRIPTS, f"{args[0]} is none of {sorted(SCRIPTS)}"
    target_args = (args, env, str(cwd or os.getcwd()), str(log), new_session)
    process = _fork_server().Process(target=_run_start_app, args=target_args)
    process.start()
    return ForkedApp(process, args)


def run(
    args: list[str], env: dict[str, str], cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """What `subprocess.run(args, env=env, capture_output=True, text=True)` gives for the console script args[0]
    (SCRIPTS), which runs as start() runs it: for tests of how it stops, without a process's imports each time."""
    with tempfile.TemporaryDirectory() as folder:
        printed, said = Path(folder, "stdout"), Path(folder, "stderr")
        target_args = (args, env, str(cwd or os.getcwd()), str(printed), False, str(said))
        process = _fork_server().Process(target=_run_start_app, args=target_args)
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(args, timeout)
        return subprocess.CompletedProcess(args, process.exitcode, printed.read_text(), said.read_text())


def call(function: Callable[..., Any], *args: Any, env: dict[str, str], timeout: float = 120) -> Any:
    """What `function(*args)` returns (or raises) in a process forked from the fork server, with exactly `env` as
    its environment: a fresh process for each call, as `python -c` would be, without importing LIBRARIES again.
    `function` must be importable by name, and its arguments and result picklable."""
    context = _fork_server()
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=_call, args=(sending, env, function, args))
    process.start()
    sending.close()
    try:
        if not receiving.poll(timeout):
            raise TimeoutError(f"{function.__qualname__} did not return within {timeout} s")
        failed, value = receiving.recv()
    except EOFError:
        raise RuntimeError(f"{function.__qualname__}'s process ended without an answer") from None
    finally:
        receiving.close()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
    if failed:
        raise value
    return value


def _call(sending: Any, env: dict[str, str], function: Callable[..., Any], args: tuple[Any, ...]) -> None:
    _keep_libraries_out_of_collections()
    _take_environment(env)
    try:
        answer = (False, function(*args))
    except Exception as error:  # noqa: BLE001 (raised again in the caller)
        answer = (True, error)
    sending.send(answer)
    atexit._run_exitfuncs()  # those of the modules unpickling `function` imported here, as in _run_start_app


def _keep_libraries_out_of_collections() -> None:
    """In the forked process: what the fork server imported lives as long as the process, so the garbage collector
    need not walk it again and again (gc.freeze). That walking was 0.2 s of CPU in each app's start."""
    gc.freeze()


def _take_environment(env: dict[str, str]) -> None:
    """In the forked process: exactly `env`, not the fork server's environment."""
    os.environ.clear()
    os.environ.update(env)


# The console scripts start() runs, and the module whose main() each runs (as its entry point in the venv does).
SCRIPTS = {"start-app": "agent_server.start_server", "uvicorn": "uvicorn.main"}


def _run_start_app(
    args: list[str], env: dict[str, str], cwd: str, log: str, new_session: bool, errors: str | None = None
) -> None:
    """In the forked process: what running the console script with that environment, folder and output (stderr
    to `errors`, if given) does."""
    _keep_libraries_out_of_collections()
    if new_session:
        os.setsid()
    with open(log, "ab", buffering=0) as out, open(errors or log, "ab", buffering=0) as err:
        with open(os.devnull, "rb") as nothing:
            os.dup2(nothing.fileno(), 0)  # not multiprocessing's own stdin, which uvicorn's reloader cannot pass on
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the process's own stdin, open as long as it runs)
    _take_environment(env)
    os.chdir(cwd)
    sys.argv = list(args)
    import importlib

    main = importlib.import_module(SCRIPTS[Path(args[0]).name]).main
    try:
        main(args[1:])
    finally:
        atexit._run_exitfuncs()  # a forked process leaves by os._exit(), which would skip them


class ForkedApp:
    """What the tests use of subprocess.Popen, for a process the fork server started."""

    def __init__(self, process: Any, args: list[str]) -> None:
        self._process = process
        self.args = args
        self.pid: int = process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode  # -N when a signal N stopped it, as with Popen

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            # Ended, and reaped by the fork server, before its exit code reached us: gone, as Popen treats it.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
