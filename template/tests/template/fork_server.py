# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The fork server that every test process of a run shares (app_fork_server.py asks it for processes): it imports
LIBRARIES and the template's own modules once, then forks each process asked of it from itself.

It listens on a Unix socket in a folder only this user can reach. Each request is a connection: the server forks
a watcher for it and goes back to listening; the watcher forks the process asked for (which sends its pid, and a
function's answer), waits for it to end and sends its exit code (-N when signal N ended it, as subprocess gives).
A test process that goes away while its process runs (its end of the connection closes) takes that process with
it: the watcher kills it. The server ends when the process that shares it (pytest's, `owner`) has ended, or when
that process stops it.

Only the standard library here: every process forked from the server starts from this module.
"""

from __future__ import annotations

import _collections_abc
import atexit
import contextlib
import gc
import importlib
import importlib.util
import json
import os
import pickle
import select
import signal
import socket
import sys
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

# What the app imports that takes time and reads no setting of the app's as it is imported. A library left out is
# imported by each app process itself: slower, never wrong. (git: MLflow's tracing imports it as it starts.)
LIBRARIES = ["agents", "mlflow.genai.agent_server", "mlflow.openai", "mlflow.tracing.processor.mlflow_v3"]
LIBRARIES += ["fastapi", "uvicorn", "sqlalchemy.ext.asyncio", "openai.lib.streaming.chat", "httpcore2", "git"]
LIBRARIES += ["joserfc.jwe", "joserfc.jwt", "joserfc.jwk", "authlib.integrations.httpx_client"]
LIBRARIES += ["openai.resources.chat.completions", "openai.resources.responses", "openai.lib.streaming.responses"]
LIBRARIES += ["agents.mcp.manager", "mlflow.openai._agent_tracer", "mlflow.store.tracking.file_store"]
LIBRARIES += ["mlflow.tracing.export.mlflow_v3", "mlflow.tracing.export.async_export_queue", "sqlite3"]
LIBRARIES += ["sqlalchemy.dialects.sqlite.aiosqlite", "sqlalchemy.dialects.postgresql.asyncpg", "netrc"]
LIBRARIES += ["uvloop", "uvicorn.protocols.http.auto", "uvicorn.protocols.websockets.auto", "uvicorn.lifespan.on"]
LIBRARIES += ["openai.resources.images", "openai.resources.embeddings", "mlflow.tracing.processor.otel"]
LIBRARIES += ["fastapi.telemetry._runtime", "databricks.sdk"]  # (databricks.sdk: LLM_PROVIDER=databricks's check)

# The template's own modules (the first line of each says so) read no setting as they are imported either, so the
# server imports them too: about 0.4 s of CPU less for each app process. Not the owner's (agent.py, and any module
# of theirs), which may, nor a template module that imports one: each process imports those itself, as at a real
# start. What the template's modules read of the environment as the server imports them goes to PRELOADED, for
# test_fork_server.py to check.
APP_PACKAGE, TEMPLATE_OWNED, PRELOADED = "agent_server", "# Owned by the template", "preloaded.json"

# The console scripts it runs, and the module whose main() each runs (as its entry point in the venv does).
SCRIPTS = {"start-app": "agent_server.start_server", "uvicorn": "uvicorn.main"}

SOCKET = "socket"  # the file in the server's folder it listens on
OWNER_CHECK_SECONDS = 2.0


def serve(folder: str, owner: int) -> None:
    """Listen on `folder`/SOCKET (bound before the imports, so that a request may come at once and wait for
    them), import LIBRARIES and the template's modules, build what they defer, then fork a watcher for each request
    until `owner` has ended."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(Path(folder, f"{SOCKET}.new")))
    listener.listen(64)
    os.rename(Path(folder, f"{SOCKET}.new"), Path(folder, SOCKET))  # only once it listens, or a connection is refused
    for name in LIBRARIES:
        with contextlib.suppress(ImportError):  # one this app does not install
            importlib.import_module(name)
    Path(folder, PRELOADED).write_text(json.dumps(import_template_modules()))
    build_deferred()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    listener.settimeout(OWNER_CHECK_SECONDS)
    while _alive(owner):
        try:
            client, _ = listener.accept()
        except TimeoutError:
            continue
        finally:
            _reap_watchers()
        with client:
            client.settimeout(None)
            connection = Connection(os.dup(client.fileno()))
        try:
            request = connection.recv()
        except (EOFError, OSError):  # a test process that went away as it asked
            connection.close()
            continue
        if os.fork() == 0:
            listener.close()
            _watch(connection, request)  # never returns
        connection.close()


def import_template_modules() -> dict[str, Any]:
    """Import APP_PACKAGE's template modules that import none of the owner's; say which, and what they read of the
    environment (a variable's name, and the file that read it)."""
    spec = importlib.util.find_spec(APP_PACKAGE)
    if spec is None or spec.origin is None:
        return {"imported": [], "read": []}  # the repository's own tests: no app here
    root = Path(spec.origin).parent
    owners, recording, environ = _OwnersModules(root), _RecordingEnviron(root), os.environ
    sys.meta_path.insert(0, owners)
    os.environ = recording  # type: ignore[assignment]  # noqa: B003 (the same variables, read through a recorder)
    imported = []
    try:
        for name in _template_modules(root):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 (it imports the owner's, or fails here: each process imports it)
                continue
            imported.append(name)
    finally:
        os.environ = environ  # noqa: B003
        sys.meta_path.remove(owners)
    return {"imported": imported, "read": sorted(recording.read)}


def build_deferred() -> None:
    """Build here what a process would build on first use and keep for its life: the pydantic models that openai
    defers to their first validation (defer_build; 0.75 s for all of them here, about 0.1 s in each app's first
    turns), and the offline model's strict request validators (agent_server/offline/validation.py: 0.05 to 0.17 s
    each). A build that fails here is left to the process that needs it."""
    import pydantic  # imported already, with the libraries

    models, seen = [pydantic.BaseModel], set()
    while models:
        for model in models.pop().__subclasses__():
            if model not in seen:
                seen.add(model)
                models.append(model)
                if not model.__pydantic_complete__:
                    with contextlib.suppress(Exception):
                        model.model_rebuild()
    with contextlib.suppress(Exception):  # (not an app of this template's, or a build that fails)
        from agent_server.offline.validation import request_validator

        for api in ("chat", "responses"):
            for streaming in (False, True):
                request_validator(api, streaming)


def _template_modules(root: Path) -> list[str]:
    names = []
    for path in sorted(root.rglob("*.py")):
        if path.name != "__main__.py" and _owned_by_template(path):
            parts = path.relative_to(root).with_suffix("").parts
            names.append(".".join([APP_PACKAGE, *parts[: -1 if parts[-1] == "__init__" else None]]))
    return names


def _owned_by_template(path: Path) -> bool:
    with path.open() as source:
        return source.readline().startswith(TEMPLATE_OWNED)


class _OwnersModules:
    """A module finder that refuses APP_PACKAGE's modules that are not the template's."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.startswith(f"{APP_PACKAGE}."):
            where = self.root.joinpath(*name.split(".")[1:])
            source = where / "__init__.py" if where.is_dir() else where.with_suffix(".py")
            if source.exists() and not _owned_by_template(source):
                raise ImportError(f"{name} is the owner's: each process imports it itself")


_LOOKUPS = {os.__file__, _collections_abc.__file__, "<frozen os>", "<frozen _collections_abc>"}


class _RecordingEnviron(type(os.environ)):  # type: ignore[misc]
    """os.environ, noting each variable that code in `root` reads."""

    def __init__(self, root: Path) -> None:
        environ = os.environ
        super().__init__(environ._data, environ.encodekey, environ.decodekey, environ.encodevalue, environ.decodevalue)
        self.root, self.read = str(root), set()

    def __getitem__(self, key: str) -> str:
        self._note(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._note(key)
        return super().__contains__(key)

    def _note(self, key: object) -> None:
        frame = sys._getframe(2)  # past __getitem__; then past os.getenv and Mapping.get (frozen modules in 3.11+)
        while frame is not None and frame.f_code.co_filename in _LOOKUPS:
            frame = frame.f_back
        if frame is not None and frame.f_code.co_filename.startswith(self.root):
            self.read.add((str(key), str(Path(frame.f_code.co_filename).relative_to(self.root))))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _reap_watchers() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _watch(connection: Connection, request: dict[str, Any]) -> None:
    """In the watcher: fork the process asked for, and send its exit code once it has ended; or kill it once
    the test process that asked for it has gone (its end of the connection closed)."""
    ended, ending = os.pipe()  # a byte comes when a child ends (SIGCHLD), so that one wait sees either event
    os.set_blocking(ending, False)
    signal.set_wakeup_fd(ending)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    pid = os.fork()
    if pid == 0:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(ended)
        os.close(ending)
        _child(connection, request)  # never returns
    try:
        while not (status := os.waitpid(pid, os.WNOHANG))[0]:
            if connection.fileno() in select.select([connection.fileno(), ended], [], [])[0]:
                _kill(pid, request["new_session"])  # nothing more is ever sent: the test process has gone
                return
            os.read(ended, 512)
        connection.send(("exit", os.waitstatus_to_exitcode(status[1])))
    except OSError:  # the test process has gone
        _kill(pid, request["new_session"])
    finally:
        os._exit(0)


def _kill(pid: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL) if group else os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _child(connection: Connection, request: dict[str, Any]) -> None:
    """In the process asked for: exactly the request's environment, folder, module path and output; then the
    console script's main(), or the function (whose answer goes back on the connection). Its exit code is the
    script's, as `python -m` would give it (1 and the traceback on stderr for an exception)."""
    connection.send(("pid", os.getpid()))  # first: while it runs, only this process writes to the connection
    gc.freeze()  # what the server imported lives as long as the process: the collector need not walk it again
    if request["new_session"]:
        os.setsid()
    code = 1
    try:
        _take_process(request)
        if APP_PACKAGE in sys.modules:  # its __init__ sets the app's defaults in the environment: in this one, again
            importlib.reload(sys.modules[APP_PACKAGE])
        if "script" in request:
            main = importlib.import_module(SCRIPTS[request["script"]]).main
            main(request["argv"][1:])
        else:
            function, args = pickle.loads(request["call"])
            try:
                answer = (False, function(*args))
            except Exception as error:  # noqa: BLE001 (raised again in the test process)
                answer = (True, error)
            connection.send(("answer", *answer))
        code = 0
    except SystemExit as stop:
        if isinstance(stop.code, int) or stop.code is None:
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 (as the interpreter reports an uncaught exception)
        traceback.print_exc()
    finally:
        atexit._run_exitfuncs()  # os._exit() below would skip them
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _take_process(request: dict[str, Any]) -> None:
    with open(request["stdout"], "ab", buffering=0) as out, open(request["stderr"], "ab", buffering=0) as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.path[:] = request["path"]
    sys.argv = list(request.get("argv", [sys.executable]))


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
