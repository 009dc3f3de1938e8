"""Deploying a generated app, rehearsed offline: what the Databricks Apps runtime does.

`uv sync --locked` with the runtime's uv, then app.yaml's command with the platform's environment, against a
fake workspace on loopback that serves OAuth M2M and the serving endpoints (tests/fake_workspace.py).
(tests/test_deploy_dockerfile.py runs the Dockerfile's steps; tests/test_bundle.py checks the files the platform
reads.)
"""

from __future__ import annotations

import json
import re
import time
import tomllib
from pathlib import Path

import pytest
from deploy_support import (
    EXPERIMENT_ID,
    RUNTIME_UV_VERSION,
    SDK_EXPIRY_MARGIN,
    TOKEN_LIFETIME,
    USER_TOKEN,
    app_command,
    app_yaml_env,
    clean_copy,
    dev_only_packages,
    fake_workspace,
    http,
    installed_packages,
    platform_env,
    sync_env,
    through_the_proxy,
    workspace_log,
)
from renders import run
from servers import ServerProcess, chat_with, free_port, reply_text

# --------------------------------------------------------------------------------------------
# Rehearsal: the Apps runtime, offline
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runtime(renders, tmp_path_factory, uv_of_the_runtime):
    """A clean copy of the default render, installed as the runtime does, and a fake workspace for it."""
    base = tmp_path_factory.mktemp("runtime")
    app = clean_copy(renders["defaults"], base / "app")
    sync = run([str(uv_of_the_runtime), "sync", "--locked"], cwd=app, env=sync_env(base))
    assert (app / ".venv" / "bin" / "start-app").exists(), sync.stderr
    with fake_workspace(app, free_port(), base / "workspace.log") as workspace:
        yield {
            "app": app,
            "uv": uv_of_the_runtime,
            "workspace": workspace.url,
        }


def start_app(runtime, tmp_path: Path, port: int, **overrides: str) -> ServerProcess:
    """app.yaml's command, with the platform's variables and app.yaml's env, as the runtime runs it."""
    app = runtime["app"]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = platform_env(runtime["uv"], home, port, runtime["workspace"], "my-agent-dev")
    env.update(app_yaml_env(app))
    env.update(overrides)
    health = f"http://127.0.0.1:{port}/health"
    return EveryWorker(app_command(app), env, health, cwd=app, log=tmp_path / f"app-{port}.log", timeout=300)


class EveryWorker(ServerProcess):
    """The app as the platform starts it: one worker process per CPU. Entering waits until every worker has
    started (start-app says how many; each logs its start), since the proxy's requests may reach any of them."""

    def __enter__(self) -> EveryWorker:
        super().__enter__()
        deadline = time.monotonic() + self.timeout
        while not (found := re.search(r"start-app: (\d+) worker process", self.output)) or self.output.count(
            "Application startup complete"
        ) < int(found.group(1)):
            assert time.monotonic() < deadline and self.process and self.process.poll() is None, self.output
            time.sleep(0.1)
        return self


def serving_calls(log: list[dict]) -> list[dict]:
    return [entry for entry in log if entry["path"].startswith("/serving-endpoints/")]


def chat_with_a_tool_turn(url: str, stream: bool, headers: dict[str, str] | None = None) -> None:
    chat = chat_with(url, stream, through_the_proxy(headers))
    assert "I saw 1 user, 0 assistant and 0 tool turns" in reply_text(chat.send("Hello"))
    items = chat.send("What time is it?")
    assert [item["type"] for item in items] == ["function_call", "function_call_output", "message"]
    assert "I saw 3 user, 2 assistant and 1 tool turns" in reply_text(chat.send("Thanks"))


@pytest.mark.xdist_group("deploy")
def test_rehearsal_the_runtime_installs_exactly_the_lock_with_its_own_uv(runtime):
    version = run([str(runtime["uv"]), "--version"], cwd=runtime["app"]).stdout
    assert version.split()[:2] == ["uv", RUNTIME_UV_VERSION]
    app = runtime["app"]
    locked = {
        package["name"]: package["version"] for package in tomllib.loads((app / "uv.lock").read_text())["package"]
    }
    installed = installed_packages(app)
    for name in ("openai-agents", "mlflow-skinny", "databricks-sdk", "openai", "fastapi"):
        assert installed[name] == locked[name], name


@pytest.mark.xdist_group("deploy")
def test_rehearsal_the_runtimes_install_compiles_bytecode(runtime):
    """pyproject.toml's compile-bytecode: the runtime's plain `uv sync --locked` compiles at install, so the first
    start does not compile the SDK and MLflow as it imports them (benchmarks/RESULTS.md has the start-up times)."""
    [site] = (runtime["app"] / ".venv" / "lib").glob("python3.*/site-packages")
    for package in ("agents", "mlflow", "openai", "fastapi"):
        assert list((site / package / "__pycache__").glob("__init__.*.pyc")), f"{package} was installed uncompiled"


@pytest.mark.xdist_group("deploy")
def test_rehearsal_no_dev_package_reaches_the_deployed_environment(runtime, tmp_path):
    """Neither the runtime's `uv sync --locked` nor app.yaml's `uv run --locked` installs the dev group."""
    dev_only = dev_only_packages(runtime["app"])
    assert {"pytest", "ruff", "mypy", "hypothesis"} <= dev_only  # what the check would catch
    assert not dev_only & set(installed_packages(runtime["app"])), "after the runtime's uv sync --locked"
    port = free_port()
    with start_app(runtime, tmp_path, port):  # app.yaml's command: uv run --locked start-app
        status, _ = http("GET", f"http://127.0.0.1:{port}/health")
        assert status == 200
    leaked = dev_only & set(installed_packages(runtime["app"]))
    assert not leaked, f"app.yaml's command installed the dev group: {sorted(leaked)}"


@pytest.mark.xdist_group("deploy")
def test_rehearsal_serves_multi_turn_chat_and_refreshes_its_token(runtime, tmp_path):
    port = free_port()
    workspace = runtime["workspace"]
    expected_model = app_yaml_env(runtime["app"])["LLM_MODEL"]
    with start_app(runtime, tmp_path, port):
        url = f"http://127.0.0.1:{port}"
        before = len(workspace_log(workspace))
        chat_with_a_tool_turn(url, stream=False)
        first = serving_calls(workspace_log(workspace)[before:])
        # Past the token's usable life for databricks-sdk, which refreshes 40 s before expiry.
        time.sleep(TOKEN_LIFETIME - SDK_EXPIRY_MARGIN + 0.5)
        middle = len(workspace_log(workspace))
        chat_with_a_tool_turn(url, stream=True)
        second = serving_calls(workspace_log(workspace)[middle:])
        traces = wait_for_traces(workspace, count=2)
        # Not through the proxy: no user to keep the conversation for, and no model call.
        status, answer = http("POST", f"{url}/invocations", {"input": "Hello"})
        assert status == 401 and "X-Forwarded-User" in json.loads(answer)["error"]["message"]

    for call in first + second:
        assert call["status"] == 200, call
        assert call["model"] == expected_model  # the endpoint the bundle grants CAN_QUERY on
        assert call["path"] == "/serving-endpoints/chat/completions"
    assert len(first) == len(second) == 4  # three turns, one of them with a tool call
    assert first[0]["token"].startswith("m2m-")
    second_tokens = {call["token"] for call in second}
    assert first[0]["token"] not in second_tokens, "a token past its life was used again"
    fetched_since = {entry["issued"] for entry in workspace_log(workspace)[middle:] if entry.get("issued")}
    assert second_tokens <= fetched_since, "the second chat's token was not fetched anew"
    # Traces go to the bundle's experiment, exported off the request path.
    experiments = {
        entry["trace"]["trace"]["trace_info"]["trace_location"]["mlflow_experiment"]["experiment_id"]
        for entry in traces
    }
    assert experiments == {EXPERIMENT_ID}
    # Starting a trace asks the tracking server nothing (MLflow would look the experiment up on every request).
    lookups = [entry for entry in workspace_log(workspace)[before:] if "/mlflow/experiments/" in entry["path"]]
    assert not lookups, lookups


def wait_for_traces(workspace: str, count: int, timeout: float = 120) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        traces = [entry for entry in workspace_log(workspace) if "trace" in entry]
        if len(traces) >= count:
            return traces
        time.sleep(0.5)
    raise AssertionError(f"fewer than {count} traces reached the workspace within {timeout}s")


@pytest.mark.xdist_group("deploy")
def test_rehearsal_calls_a_managed_mcp_server_with_the_apps_refreshed_token_or_the_users(runtime, tmp_path):
    """mcp_servers.uc_functions("main", "tools") as MCP_SERVERS names it, served by the fake workspace."""
    port = free_port()
    workspace = runtime["workspace"]
    managed = [{"name": "uc-main-tools", "url": "/api/2.0/mcp/functions/main/tools", "databricks_auth": True}]
    with start_app(runtime, tmp_path, port, MCP_SERVERS=json.dumps(managed)):
        chat = chat_with(f"http://127.0.0.1:{port}", stream=False, headers=through_the_proxy())
        before = len(workspace_log(workspace))
        assert "Sunny in Paris" in json.dumps(chat.send("Use lookup_weather"))
        first = mcp_calls(workspace_log(workspace)[before:])
        time.sleep(TOKEN_LIFETIME - SDK_EXPIRY_MARGIN + 0.5)  # past the token's usable life, as above
        middle = len(workspace_log(workspace))
        chat.stream = True
        assert "Sunny in Paris" in json.dumps(chat.send("And lookup_weather again"))
        second = mcp_calls(workspace_log(workspace)[middle:])
    assert first and second and all(call["status"] == 200 for call in first + second), first + second
    assert all(call["token"].startswith("m2m-") for call in first + second)
    assert {call["token"] for call in first}.isdisjoint(call["token"] for call in second), "the token was refreshed"

    # On behalf of the user: the request's own connection carries the user's token.
    port = free_port()
    with start_app(runtime, tmp_path, port, MCP_SERVERS=json.dumps(managed), LLM_ON_BEHALF_OF_USER="true"):
        user = through_the_proxy({"x-forwarded-access-token": USER_TOKEN})
        chat = chat_with(f"http://127.0.0.1:{port}", stream=True, headers=user)
        before = len(workspace_log(workspace))
        assert "Sunny in Paris" in json.dumps(chat.send("Use lookup_weather"))
        as_user = mcp_calls(workspace_log(workspace)[before:])
    assert as_user and {(call["token"], call["status"]) for call in as_user} == {("user", 200)}, as_user


def mcp_calls(log: list[dict]) -> list[dict]:
    return [entry for entry in log if entry["path"].startswith("/api/2.0/mcp/")]


@pytest.mark.xdist_group("deploy")
def test_rehearsal_refuses_the_offline_model_unless_told_to(runtime, tmp_path):
    refused = start_app(runtime, tmp_path, free_port(), LLM_PROVIDER="offline")
    assert refused.run_to_exit() != 0
    assert "LLM_ALLOW_OFFLINE=true" in refused.output and "DATABRICKS_APP_NAME" in refused.output
    assert "Traceback" not in refused.output

    port = free_port()
    with start_app(runtime, tmp_path, port, LLM_PROVIDER="offline", LLM_ALLOW_OFFLINE="true"):
        answer = chat_with(f"http://127.0.0.1:{port}", stream=False, headers=through_the_proxy()).send("Hello")
        assert reply_text(answer).startswith("Offline model:")


@pytest.mark.xdist_group("deploy")
def test_rehearsal_names_the_offered_endpoints_that_cannot_answer_at_start_up(runtime, tmp_path):
    """Every listed model (LLM_MODEL, LLM_MODELS) is checked as the app starts, not on a user's first turn: the
    fake workspace serves any endpoint but `missing-*` (no such endpoint) and `pending-*` (not ready)."""
    offered = "databricks-gpt-oss-120b,missing-endpoint,pending-endpoint"
    refused = start_app(runtime, tmp_path, free_port(), LLM_MODELS=offered)
    assert refused.run_to_exit() != 0
    [line] = [line for line in refused.output.splitlines() if "serving endpoints this app offers" in line]
    assert "missing-endpoint (does not exist)" in line and "pending-endpoint (not ready)" in line
    assert "databricks-gpt-oss-120b" not in line and "Traceback" not in refused.output
    checked = [entry["path"] for entry in workspace_log(runtime["workspace"]) if "/serving-endpoints/" in entry["path"]]
    assert "/api/2.0/serving-endpoints/databricks-gpt-oss-120b" in checked


@pytest.mark.xdist_group("deploy")
def test_rehearsal_calls_the_model_on_behalf_of_the_user_when_asked(runtime, tmp_path):
    """Over the Responses API this time, which Databricks serves at /serving-endpoints/responses."""
    port = free_port()
    workspace = runtime["workspace"]
    with start_app(runtime, tmp_path, port, LLM_ON_BEHALF_OF_USER="true", LLM_API="responses"):
        url = f"http://127.0.0.1:{port}"
        before = len(workspace_log(workspace))
        for stream in (False, True):
            chat_with_a_tool_turn(url, stream, headers={"x-forwarded-access-token": USER_TOKEN})
        as_user = serving_calls(workspace_log(workspace)[before:])
        middle = len(workspace_log(workspace))
        # No user token: refused, never run as the app's own service principal.
        status, answer = http("POST", f"{url}/invocations", {"input": "Hello"}, through_the_proxy())
        refused = serving_calls(workspace_log(workspace)[middle:])
    assert [call["token"] for call in as_user] == ["user"] * 8
    assert {(call["path"], call["status"]) for call in as_user} == {("/serving-endpoints/responses", 200)}
    assert status == 401 and "no user token" in json.loads(answer)["error"]["message"]
    assert refused == []
