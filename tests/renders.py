"""Render the template with the real copier and run the real uv in the result."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import copier
from servers import ServerProcess, clean_env, free_port

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template"

API_MODES = ("chat_completions", "responses")  # the app's llm.API_MODES, which these tests cannot import
# Answer sets that cover every provider and both API modes, with and without CI.
MATRIX: dict[str, dict[str, Any]] = {
    "defaults": {},
    **{
        f"{provider}-{api}": {"llm_provider": provider, "llm_api": api}
        for provider in ("offline", "openai", "databricks")
        for api in API_MODES
    },
    # The render whose defaults differ in every LLM setting (tests/test_app_suite.py) offers a second model too
    # (LLM_MODELS), which its bundle grants beside the first.
    "databricks-responses": {
        "llm_provider": "databricks",
        "llm_api": "responses",
        "llm_models": "databricks-gpt-oss-120b",
    },
    # Long-term memory on once (its default is off): the render's evaluation set holds the recall case.
    "offline-responses": {"llm_provider": "offline", "llm_api": "responses", "long_term_memory": True},
    # Each `memory` answer once: sqlite is the default above.
    "databricks-postgres": {"llm_provider": "databricks", "memory": "postgres"},
    "no-ci": {"github_ci": False, "app_name": "support-bot-2", "memory": "none"},
}


def render(
    dest: Path, data: dict[str, Any] | None = None, src: Path | str = ROOT, vcs_ref: str | None = "HEAD"
) -> Path:
    """`copier copy` with default answers plus `data`, never trusted (unsafe=False)."""
    copier.run_copy(str(src), str(dest), data=data or {}, defaults=True, vcs_ref=vcs_ref, unsafe=False, quiet=True)
    RENDERED[dest.resolve()] = [path for path in dest.rglob("*") if path.is_file()]
    return dest


def uv_binary() -> str:
    found = os.environ.get("UV") or shutil.which("uv")
    assert found, "uv is not installed: run the tests through scripts/test"
    return found


def run(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """Run a command and fail with its whole output if it fails."""
    result = subprocess.run(args, cwd=cwd, env=env or clean_env(), capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


def uv(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return run([uv_binary(), *args], cwd=cwd, env=env, timeout=timeout)


# What tools running inside a render write there: not part of the render.
NOT_RENDERED = {".venv", ".git", ".hypothesis", ".mypy_cache", "mlruns", "__pycache__"}
# The files copier wrote, per render this process made: apps other tests serve from a render write files there
# (a conversation database, a log) while a test reads the render file by file.
RENDERED: dict[Path, list[Path]] = {}


def rendered_files(app: Path) -> list[Path]:
    if (made := RENDERED.get(app.resolve())) is not None:
        return [path for path in made if path.is_file() and not NOT_RENDERED & set(path.parts)]
    return [path for path in app.rglob("*") if path.is_file() and not NOT_RENDERED & set(path.parts)]


def rendered_defaults(app: Path) -> dict[str, Any]:
    """The copier answers as agent_server/config/defaults.py holds them: the module run alone (it imports nothing)."""
    namespace: dict[str, Any] = {}
    exec(compile((app / "agent_server" / "config" / "defaults.py").read_text(), "defaults.py", "exec"), namespace)
    return {name: value for name, value in namespace.items() if name.isupper()}


def assert_all_passed(result: subprocess.CompletedProcess) -> None:
    """A pytest run inside a render passed every test: none failed, errored, was skipped or xfailed."""
    lines = result.stdout.strip().splitlines()
    summary = lines[-1]
    # With the summary, what failed and why (pytest's -ra lines, or the end of the output): the run is gone after.
    said = [line for line in lines if line.startswith(("FAILED", "ERROR", "SKIPPED", "XFAIL", "E "))][:40]
    why = "\n".join([*(said or lines[-60:]), summary, result.stderr[-2000:]])
    assert re.search(r"\d+ passed", summary), why
    assert not re.search(r"failed|skipped|xfail|error", summary), why


def passed(test: str, output: str) -> bool:
    """`pytest -v` says the test (a node id, or its end) passed: in one process or, as the app's tests run, on
    pytest-xdist's workers (`[gw0] [ 50%] PASSED tests/...::test`)."""
    name = re.escape(test)
    return re.search(rf"{name}\S* PASSED|PASSED \S*{name}", output) is not None


def load_module(name: str, path: Path) -> ModuleType:
    """A Python file of the template or of a render, imported by path (neither is a package here)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def served_offline(app: Path, api_mode: str, name: str) -> Iterator[tuple[ServerProcess, Path]]:
    """The render's `start-app`, installed as locked, on a loopback port with the offline model in `api_mode`; and
    the file its output goes to, which a test reads afterwards."""
    uv("sync", "--locked", "--no-config", cwd=app)
    port, log = free_port(), app / f"start-app-{name}-{api_mode}.log"
    args = [str(app / ".venv" / "bin" / "start-app"), "--port", str(port)]
    env = clean_env(LLM_PROVIDER="offline", LLM_API=api_mode)
    with ServerProcess(args, env, f"http://127.0.0.1:{port}/health", cwd=app, log=log) as server:
        yield server, log
