"""The SDK version matrix: the app's history and multi-turn tests against each supported openai-agents line.

Each supported release line runs in its own xdist group, so the lines spread over the
workers. uv's cache makes the repeated installs fast. The render's output is also put
through the chat-completions converter of releases below the supported range (they need
`openai<3`), in an environment of their own, to show it does not depend on the SDK version.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from renders import ROOT, TEMPLATE, assert_all_passed, clean_env, uv

# Oldest: the first line that installs beside the locked openai 3.x. Newest: the newest release.
SUPPORTED_LINES = ["0.21", "0.22", "0.23", "0.24"]
# The newest line is the one template/uv.lock pins, and test_app_suite runs the app's whole suite on it.
MATRIX_LINES = SUPPORTED_LINES[:-1]
# Below the range; their converters must still accept the render, with the same result.
CONVERTER_LINES = ["0.18", "0.20"]
APP_TESTS = [
    "tests/template/test_conversation_fuzzer.py",
    "tests/template/test_history.py",
    "tests/template/test_history_catalogue.py",
    "tests/template/test_history_properties.py",
    "tests/template/test_model_faults.py",
    "tests/template/test_multiturn.py",
    "tests/template/test_regression.py",
    "tests/template/test_repairs.py",
]
CONVERTER_CHECK = Path(__file__).with_name("converter_check.py")
# Traces are still written, but in the request: the async queue's flush at each test client's
# shutdown costs seconds per test, and the matrix is about the SDK, not the export queue.
MATRIX_ENV = clean_env(MLFLOW_ENABLE_ASYNC_TRACE_LOGGING="false")


def synced(app: Path) -> Path:
    uv("sync", "--locked", "--dev", "--no-config", cwd=app)
    return app


@pytest.mark.parametrize(
    "line", [pytest.param(line, marks=pytest.mark.xdist_group(f"sdk-{line}")) for line in MATRIX_LINES]
)
def test_app_history_and_multiturn_tests_pass(renders, line):
    app = synced(renders["defaults"])
    with_sdk = ["run", "--locked", "--no-config", "--with", f"openai-agents=={line}.*"]
    version = "import importlib.metadata as m; print(m.version('openai-agents'))"
    installed = uv(*with_sdk, "python", "-c", version, cwd=app, env=MATRIX_ENV)
    assert installed.stdout.strip().startswith(f"{line}."), installed.stdout
    # In one process (-n 0): the tests of a line are all CPU, and parallel processes, each importing and collecting
    # them, doubled the CPU for no sooner an end.
    pytest_args = ["pytest", "-p", "no:cacheprovider", "-q", "-n", "0", *APP_TESTS]
    result = uv(*with_sdk, *pytest_args, cwd=app, env=MATRIX_ENV)
    assert_all_passed(result)


def converted(app: Path, *uv_args: str) -> dict:
    result = uv("run", *uv_args, "python", str(CONVERTER_CHECK), str(app), cwd=app)
    return json.loads(result.stdout)


@pytest.mark.xdist_group("sdk-converters")
@pytest.mark.parametrize("line", CONVERTER_LINES)
def test_render_is_the_same_through_older_chat_converters(renders, line):
    app = synced(renders["defaults"])
    locked = converted(app, "--locked", "--no-config")
    packages = ("--with", f"openai-agents=={line}.*", "--with", "openai<3", "--with", "pyyaml")  # pyyaml: the catalogue
    older = converted(app, "--no-project", "--no-config", *packages)
    assert older["versions"]["openai-agents"].startswith(f"{line}.")
    assert older["versions"]["openai"].startswith("2.")
    assert older["results"].keys() == locked["results"].keys()
    for name, entry in locked["results"].items():
        assert older["results"][name] == entry, f"{name}: {line} converts the render differently"


def test_the_lock_pins_the_newest_supported_line():
    lock = tomllib.loads((TEMPLATE / "uv.lock").read_text())
    locked = next(package["version"] for package in lock["package"] if package["name"] == "openai-agents")
    assert locked.startswith(f"{SUPPORTED_LINES[-1]}."), f"add {locked} to SUPPORTED_LINES, or relock"


def test_supported_range_matches_pyproject_and_readme():
    project = tomllib.loads((TEMPLATE / "pyproject.toml").read_text())
    spec = next(dep for dep in project["project"]["dependencies"] if dep.startswith("openai-agents"))
    major, minor = SUPPORTED_LINES[-1].split(".")
    assert spec == f"openai-agents>={SUPPORTED_LINES[0]},<{major}.{int(minor) + 1}"
    readme = (TEMPLATE / "docs" / "supported-versions.md").read_text()
    assert f"openai-agents {SUPPORTED_LINES[0]} to {SUPPORTED_LINES[-1]}" in readme
    assert f"openai-agents {SUPPORTED_LINES[0]} to {SUPPORTED_LINES[-1]}" in (ROOT / "README.md").read_text()
