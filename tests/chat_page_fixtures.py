"""The chat page tests' fixtures (tests/test_chat_page_*.py), loaded by tests/conftest.py for every module.

The apps they share are session fixtures, so that each starts once per worker however the tests are split into
modules (the browser tests run on one worker: their xdist group "browser"). A test that needs an app of its own
starts one with `start_app`. A model that fails for real comes from tests/flaky_model.py: the offline model behind
a switch that makes its next answer a 503.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright
from renders import ROOT, clean_env, uv, uv_binary
from servers import PortTaken, ServerProcess, free_port

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def serving(command: list[str], cwd: Path, env: dict[str, str], port: int) -> Iterator[str]:
    """A server process on `port`: its URL once /health answers; stopped by its own process id after."""
    with ServerProcess(command, env, f"http://127.0.0.1:{port}/health", cwd=cwd) as server:
        yield server.url


LOOPBACK = "127.0.0.1"


@contextmanager
def running_app(app: Path, folder: Path, **env: str) -> Iterator[str]:
    """`start-app` in the render `app`, on the offline model unless `env` says otherwise. A port another process took
    while the app loaded (a minute on a loaded machine) is given up for another (app_servers.PortTaken)."""
    for attempt in range(3):
        port = free_port()
        # Not the render's ./conversations.db, which every app started from the render would share.
        settings = {"LLM_PROVIDER": "offline", "MEMORY_DATABASE_URL": str(folder / f"conversations-{port}.db"), **env}
        command = [uv_binary(), "run", "--locked", "--no-config", "start-app", "--port", str(port), "--host", LOOPBACK]
        started = ExitStack()
        try:
            url = started.enter_context(serving(command, app, clean_env(**settings), port))
        except PortTaken:
            if attempt == 2:
                raise
            continue
        with started:
            yield url
        return


@pytest.fixture
def start_app(renders, tmp_path) -> Iterator[Callable[..., Any]]:
    """Start the defaults render with `start-app` and the offline model; each app keeps its own conversations."""
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    yield lambda **env: running_app(app, tmp_path, **env)


@pytest.fixture
def served_app(start_app) -> Iterator[str]:
    with start_app() as url:
        yield url


@pytest.fixture(scope="session")
def stateless_app(renders, tmp_path_factory) -> Iterator[str]:
    """One app with memory off for the tests of how the page shows things: it keeps nothing between them."""
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    with running_app(app, tmp_path_factory.mktemp("stateless"), MEMORY_BACKEND="none") as url:
        yield url


class FlakyModel:
    """tests/flaky_model.py: the offline model over HTTP, whose next answers can be made to fail."""

    def __init__(self, url: str) -> None:
        self.url = url
        # The app's settings for it; no retries, so one failure is one failed turn.
        self.env = {
            "LLM_PROVIDER": "openai",
            "LLM_MODEL": "offline-model",
            "OPENAI_BASE_URL": f"{url}/v1",
            "OPENAI_API_KEY": "test-key",
            "LLM_MAX_RETRIES": "0",
        }

    def fail_next(self) -> None:
        httpx.post(f"{self.url}/fake/fail-next", timeout=10).raise_for_status()

    def statuses(self) -> list[int]:
        return [entry["status"] for entry in httpx.get(f"{self.url}/fake/log", timeout=10).json()]


@pytest.fixture
def flaky_model(start_app, renders) -> Iterator[FlakyModel]:
    app = renders["defaults"]  # synced by start_app: the helper runs with the app's own Python
    port = free_port()
    command = [str(app / ".venv" / "bin" / "python"), str(ROOT / "tests" / "flaky_model.py"), "--port", str(port)]
    with serving(command, app, clean_env(), port) as url:
        yield FlakyModel(url)


# One Chromium for all the chat page tests (launching it costs about six times a fresh context), launched by the
# first of them and closed after the last: after a test when the next one does not use it. Not a session fixture:
# while Playwright's sync API is open it marks its event loop as running in this process, and asyncio.run() in a
# later test on the same worker (tests/test_soak.py) would refuse to start.
_CHROMIUM = ExitStack()
_LAUNCHED: list[Browser] = []


@pytest.fixture
def chromium() -> Browser:
    if not _LAUNCHED:
        executable = shutil.which("chromium")
        assert executable, "Chromium is not installed: run the tests through scripts/test, which installs it"
        playwright = _CHROMIUM.enter_context(sync_playwright())
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        _CHROMIUM.callback(launched.close)
        _CHROMIUM.callback(_LAUNCHED.clear)
        _LAUNCHED.append(launched)
    return _LAUNCHED[0]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    try:
        return (yield)
    finally:
        if nextitem is None or "chromium" not in nextitem.fixturenames:
            _CHROMIUM.close()


@pytest.fixture
def browser(chromium) -> Iterator[Browser]:
    """The shared Chromium; each page or context a test opens is its own profile, closed after the test."""
    yield chromium
    for context in chromium.contexts:
        context.close()


@pytest.fixture
def browser_page(browser) -> Page:
    return browser.new_page()


@pytest.fixture
def artifacts() -> Path:
    """Where screenshots are kept after the run: $TEST_ARTIFACTS, by default test-artifacts/ at the repo root."""
    folder = Path(os.environ.get("TEST_ARTIFACTS") or ROOT / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def slow_tools_app(renders, tmp_path_factory) -> Iterator[dict[str, str]]:
    """An app whose MCP server's slow_lookup takes 3 s, and whose delete_file asks first; the server counts their
    calls at GET /calls and GET /deleted (since its start: each test reads the calls it adds)."""
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    port = free_port()
    serve = f"import sys; sys.path.insert(0, 'tests/template'); import support; support.serve_mcp_tools({port})"
    tools = f"http://127.0.0.1:{port}"
    declared = json.dumps([{"name": "tools", "url": f"{tools}/mcp", "require_approval": ["delete_file"]}])
    with (
        ServerProcess([str(app / ".venv" / "bin" / "python"), "-c", serve], clean_env(), f"{tools}/mcp", cwd=app),
        running_app(app, tmp_path_factory.mktemp("slow-tools"), MCP_SERVERS=declared) as url,
    ):
        yield {"url": url, "tools": tools}
