# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Fixtures that run the real app (its routes, turn and SDK) against the in-process offline model.

tests/ is yours: put your own tests here, in files of your own, named as you like (tests/template/ is a package,
so your test_memory.py and the template's do not clash).
The template's tests are in tests/template/, which `copier update` keeps current. One `uv run pytest` runs both,
with these fixtures, and `from support import Chat` (tests/template/support.py) works in your tests too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agent_server import config, llm

# The template's tests and their helpers (support.py, ...), importable from every test, yours too.
sys.path.insert(0, str(Path(__file__).resolve().parent / "template"))

# Each of a run's processes (its test processes, the fork server, the apps it starts) imports the app and the
# tests. With PYTHONDONTWRITEBYTECODE (set in many CI images and containers) none keeps what it compiles, and each
# compiles the app's modules and rewrites the tests again: about 3 s of CPU a test process. The run keeps it in
# __pycache__, as Python does by default (the venv's libraries are compiled as uv installs them: pyproject.toml).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


class AppSettings:
    """The tests' one way to change a setting: set (or unset) the variable, then read the settings again
    (agent_server/config/ reads the environment once). Undone when the test ends."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch

    def setenv(self, name: str, value: str) -> None:
        self.monkeypatch.setenv(name, value)
        config.reload()

    def delenv(self, name: str) -> None:
        self.monkeypatch.delenv(name, raising=False)
        config.reload()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject.toml): one test process per CPU granted (start_server.cpus_granted), plus one to fill the
    time tests spend waiting on the servers they start (on two cores, 74 s against 91 s with two)."""
    from agent_server.start_server import cpus_granted

    return cpus_granted() + 1


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "waits: waits seconds on processes it starts or on clocks (run first)")
    config.addinivalue_line("markers", "api_modes: sets the offline model and its API mode itself (api_mode)")
    if "PYTEST_XDIST_WORKER" not in os.environ:  # pytest's own process: one fork server for all its test processes
        import app_fork_server

        config.add_cleanup(app_fork_server.share())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In a parallel run, start each test process's share of the tests with its part of those marked `waits`.

    pytest-xdist's worksteal hands each process an equal share of the tests, in order, and a process left idle
    takes the second half of the longest queue. The template's longest tests wait seconds on the processes they
    start, and in collection order most came last (test_start_app.py, test_workers.py): a run ended with one
    process waiting on them and the others idle. Spread over the shares' starts, they wait while others compute.
    Tests that share a server of their module's (a module-scoped fixture, as test_workers.py's app) go to one
    share together, so that one process starts it once. The same tests run either way; only their order changes.
    A test that takes the api_mode fixture is marked `api_modes`: it names its model and API mode itself, so the
    render's defaults do not change what it proves."""
    for item in items:
        if "api_mode" in getattr(item, "fixturenames", ()):
            item.add_marker("api_modes")
    items[:] = ordered_for_workers(items, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


def ordered_for_workers(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    waiting = [item for item in items if item.get_closest_marker("waits")]
    if workers < 2 or not waiting:
        return items
    others = [item for item in items if not item.get_closest_marker("waits")]
    groups: dict[Any, list[pytest.Item]] = {}
    for item in waiting:
        groups.setdefault(sharing(item), []).append(item)
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for group in groups.values():  # in collection order, each to the share with the fewest so far
        min(shares, key=len).extend(group)
    ordered: list[pytest.Item] = []
    left, taken = len(items), 0
    for share in range(workers):  # sized as worksteal sizes them: what is left, split among those left
        size = left // (workers - share)
        firsts = shares[share]
        fill = max(0, size - len(firsts))
        ordered += firsts + others[taken : taken + fill]
        left, taken = left - size, taken + fill
    return ordered + others[taken:]


def sharing(item: pytest.Item) -> Any:
    """What a test that waits shares with others: its module and the module-scoped fixtures it uses, if any."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.items() if info else ()
    shared = frozenset(name for name, defs in definitions if defs and defs[-1].scope == "module")
    return (item.nodeid.split("::")[0], shared) if shared else item


@pytest.fixture(autouse=True)
def fresh_settings() -> Iterator[None]:
    """Each test starts from, and leaves behind, the settings of the environment as it is."""
    config.reload()
    yield
    config.reload()


@pytest.fixture
def app_settings(monkeypatch: pytest.MonkeyPatch) -> AppSettings:
    return AppSettings(monkeypatch)


@pytest.fixture(scope="session", autouse=True)
def trace_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The tests' MLflow traces go to a temporary local store, not the project's ./mlruns. The app the tests call
    in this process traces nothing unless a test asks for it (`traced`): tracing is a good part of a request's
    CPU, and most tests are about other things."""
    with pytest.MonkeyPatch.context() as patch:
        # A folder that does not exist yet: MLflow creates it with its default experiment.
        uri = f"file:{tmp_path_factory.mktemp('traces') / 'mlruns'}"
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        # Written as each request ends: no test waits at shutdown for a background queue to drain (about 2 s
        # per app start otherwise).
        patch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
        patch.setenv("MLFLOW_TRACE_SAMPLING_RATIO", "0")
        set_up_tracing_again()
        yield uri


@pytest.fixture
def traced(trace_store: str) -> Iterator[str]:
    """The app in this process traces every request of this test: MLFLOW_TRACE_SAMPLING_RATIO unset, as served."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACE_SAMPLING_RATIO", raising=False)
        set_up_tracing_again()
        yield trace_store
    set_up_tracing_again()  # with the session's ratio, which leaving the context put back


def set_up_tracing_again() -> None:
    """The tracing of the app in this process set up again from the environment, if the app is imported:
    agent_server/app.py sets it up as it is imported, and MLflow reads the ratio as it sets its tracer up."""
    config.reload()
    if "agent_server.app" in sys.modules:
        import mlflow.openai
        from openai.resources.chat.completions import AsyncCompletions

        from agent_server.model_requests import unwrapped
        from agent_server.observability import tracing

        mlflow.tracing.reset()
        if tracing.records_nothing() and not unwrapped(AsyncCompletions):
            # As in an app that started so, no autolog wraps openai's create() (model calls skip its walk then:
            # model_requests.py).
            mlflow.openai.autolog(disable=True, silent=True)
        tracing.configure()


@pytest.fixture(scope="session", autouse=True)
def conversation_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The tests' conversations go to a temporary SQLite file, whatever the app's `memory` answer, not to
    ./conversations.db; tests/template/test_memory.py adds PostgreSQL when MEMORY_TEST_POSTGRES_URL names one."""
    with pytest.MonkeyPatch.context() as patch:
        url = str(tmp_path_factory.mktemp("memory") / "conversations.db")
        patch.setenv("MEMORY_BACKEND", "sqlite")
        patch.setenv("MEMORY_DATABASE_URL", url)
        patch.setenv("LONG_TERM_MEMORY", "false")  # whatever the answer: its own tests turn it on
        yield url


@pytest.fixture(scope="session", autouse=True)
def test_client_host() -> Iterator[None]:
    """The app in the tests' process answers to TestClient's host name, `testserver`, besides the loopback names
    (its servers in threads: support.ServerThread). Served, it answers only to the loopback names unless
    ALLOWED_HOSTS says others (middleware/browser_guard.py), and the apps the tests start inherit none of this
    (support.NOT_INHERITED)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ALLOWED_HOSTS", ",".join(("testserver", *config.LOOPBACK_HOSTS)))
        yield


@pytest.fixture(params=llm.API_MODES)
def api_mode(request: pytest.FixtureRequest, app_settings: AppSettings) -> str:
    app_settings.setenv("LLM_PROVIDER", "offline")
    app_settings.setenv("LLM_MODEL", "offline")
    app_settings.setenv("LLM_API", request.param)
    return request.param


@pytest.fixture
def model_log() -> Iterator[list[dict[str, Any]]]:
    """Every request the offline model answered during the test; each must have been a 200."""
    log = llm.offline_app().state.request_log
    log.clear()
    yield log
    failures = [entry for entry in log if entry["status"] != 200]
    assert not failures, f"the offline model answered {len(failures)} request(s) with an error: {failures}"


@pytest.fixture
def app_client(api_mode: str, model_log: list[dict[str, Any]]) -> Iterator[TestClient]:
    from agent_server.app import app

    with TestClient(app) as client:
        yield client
