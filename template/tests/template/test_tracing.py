# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""MLflow tracing: each request is one trace with the agent run inside, and a tracing back end
that cannot be reached never fails a request."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid

import app_fork_server
import loopback
import mlflow
import pytest
from support import TRACED, Chat, StartedApp, app_env, reply_text

from agent_server.observability.tracing import BOUNDED_EXPORT, LOCAL_STORE, tracing_environment


def test_local_store_and_bounded_async_export_by_default():
    added = tracing_environment({})
    assert added["MLFLOW_TRACKING_URI"] == LOCAL_STORE
    assert added["MLFLOW_ALLOW_FILE_STORE"] == "true"
    assert added["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] == "true"
    assert int(added["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]) <= 3
    assert int(added["MLFLOW_HTTP_REQUEST_TIMEOUT"]) <= 30


def test_what_the_environment_sets_wins():
    deployed = {"MLFLOW_TRACKING_URI": "databricks", "MLFLOW_EXPERIMENT_ID": "42", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
    added = tracing_environment(deployed)
    assert set(added) == set(BOUNDED_EXPORT) - {"MLFLOW_HTTP_REQUEST_TIMEOUT"}
    assert tracing_environment({"MLFLOW_TRACKING_URI": "http://127.0.0.1:5000"}).get("MLFLOW_ALLOW_FILE_STORE") is None


@pytest.mark.usefixtures("traced")
@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_a_request_is_one_trace_with_the_agent_run_and_tool_call_inside(app_client, stream):
    Chat(app_client, stream).send("What time is it?")
    mlflow.flush_trace_async_logging()
    trace = mlflow.get_trace(mlflow.get_last_active_trace_id())
    names = [span.name for span in trace.data.spans]
    root = "handle_stream" if stream else "handle_invoke"
    assert names[0] == root, names
    assert "get_current_time" in names, names
    assert len(names) >= 4, names  # the root, the agent run, two model calls and the tool call
    assert trace.info.state.value == "OK"


def test_pricing_a_traced_model_call_downloads_no_catalog(monkeypatch):
    """MLflow (3.17) prices each model call from a catalog it fetches from a public host; the app fetches none."""
    from mlflow.utils import providers

    monkeypatch.setenv("MLFLOW_MODEL_CATALOG_URI", tracing_environment({})["MLFLOW_MODEL_CATALOG_URI"])
    monkeypatch.setattr(providers, "_fetch_http_provider", lambda *args: pytest.fail("fetched the model catalog"))
    assert providers._fetch_remote_provider("openai") is None
    providers._load_provider("openai")  # what a traced call's price lookup does: no fetch


@pytest.mark.waits
def test_an_unreachable_tracing_back_end_never_fails_a_request(tmp_path):
    """Export is asynchronous and bounded: requests answer, and the app still stops when asked."""
    # Bound but never listening: connections are refused, and no server another test starts can take the port.
    with socket.socket() as reserved:
        reserved.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{reserved.getsockname()[1]}"
        # No wait between export retries: the defaults' bound is checked above, and the stop is what this test
        # is about (with them, it waits 3 s on the queued traces' retries).
        quick = {"MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0"}
        env = app_env(LLM_PROVIDER="offline", MLFLOW_TRACKING_URI=dead, HOME=str(tmp_path), **TRACED, **quick)
        started = StartedApp(env)
        with started as url, loopback.Client(base_url=url, timeout=60) as client:
            chat = Chat(client, stream=False)
            for chat.stream in (False, True, False):  # one conversation, its turns sent both ways
                assert "get_current_time" in json.dumps(chat.send("What time is it?"))
            assert "I saw 4 user, 3 assistant and 3 tool turns" in reply_text(chat.send("Thanks"))
    assert dead in started.output, started.output  # export was tried (and failed) while the requests went through


TELEMETRY_STATE = """
import os
import agent_server.app
import mlflow.telemetry.utils as telemetry
assert not telemetry._IS_IN_CI_ENV_OR_TESTING, "MLflow took this for CI, where its telemetry is off anyway"
print(os.environ.get("MLFLOW_DISABLE_TELEMETRY"), "off" if telemetry.is_telemetry_disabled() else "on")
"""
# mlflow-skinny 3.17: any of these in the environment turns its telemetry off, so the check runs without them.
CI_MARKERS = """PYTEST_CURRENT_TEST GITHUB_ACTIONS CI CIRCLECI GITLAB_CI JENKINS_URL TRAVIS TF_BUILD
BITBUCKET_BUILD_NUMBER CODEBUILD_BUILD_ARN BUILDKITE TEAMCITY_VERSION CLOUD_RUN_EXECUTION
RUNBOT_HOST_URL RUNBOT_BUILD_NAME RUNBOT_WORKER_ID""".split()


@pytest.mark.waits
@pytest.mark.parametrize(("setting", "expected"), [(None, "true off"), ("false", "false")])
def test_mlflow_sends_no_usage_telemetry_unless_the_owner_turns_it_on(tmp_path, setting, expected):
    """`import mlflow` starts a telemetry client that fetches its settings from the internet and reports each
    trace; the app's package turns it off before MLflow loads. A dead local proxy keeps the check off the network."""
    env = app_env(MLFLOW_TRACKING_URI=f"file:{tmp_path / 'mlruns'}")
    for marker in CI_MARKERS:
        env.pop(marker, None)
    env.update(HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9", LLM_PROVIDER="offline")
    env.pop("DO_NOT_TRACK", None)
    if setting is not None:
        env["MLFLOW_DISABLE_TELEMETRY"] = setting
    owners_choice = 'import os, agent_server; print(os.environ["MLFLOW_DISABLE_TELEMETRY"])'
    script = TELEMETRY_STATE if setting is None else owners_choice
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == expected


class ImportRecorder:
    """A finder that only records which modules the import system asked for (it finds none)."""

    def __init__(self) -> None:
        self.looked_up: list[str] = []

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        self.looked_up.append(name)


@pytest.mark.usefixtures("traced")
def test_a_traced_value_json_cannot_encode_costs_no_search_for_an_absent_package():
    """openai's `omit` (some 20 per model call) is encoded as before, without MLflow's encoder searching
    sys.path for llama_index each time (mlflow-skinny 3.17; about a tenth of a traced request's CPU)."""
    import openai
    from mlflow.tracing.utils import dump_span_attribute_value

    import agent_server.app  # noqa: F401  (configures tracing, as serving does)

    recorder = ImportRecorder()
    sys.meta_path.insert(0, recorder)
    try:
        encoded = json.loads(dump_span_attribute_value({"temperature": openai.omit, "model": "m"}))
    finally:
        sys.meta_path.remove(recorder)
    assert encoded["model"] == "m" and encoded["temperature"].startswith("<openai.Omit object at ")  # str(omit)
    assert [name for name in recorder.looked_up if name.startswith("llama_index")] == []


@pytest.mark.usefixtures("traced")
@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_a_traced_request_searches_for_no_module(app_client, stream):
    """MLflow (mlflow-skinny 3.17) probes on every trace for what a served app does not have: a notebook, a
    Databricks cluster, Spark, llama_index (tracing.MLFLOW_PROBES). Each probe searched every folder on sys.path
    and failed. Once a first request has loaded what requests use, a traced request asks the finders for nothing."""
    chat = Chat(app_client, stream)
    chat.send("What time is it?")
    mlflow.flush_trace_async_logging()
    recorder = ImportRecorder()
    sys.meta_path.insert(0, recorder)
    try:
        chat.send("And now?")
        mlflow.flush_trace_async_logging()  # the trace's export too
    finally:
        sys.meta_path.remove(recorder)
    assert mlflow.get_trace(mlflow.get_last_active_trace_id()) is not None
    assert recorder.looked_up == []


def test_an_untraced_request_with_memory_on_logs_no_warning_and_feedback_says_why_there_is_no_trace(tmp_path):
    """With nothing sampled, naming the conversation on a trace that does not exist made MLflow warn
    ("No active trace found") on every request. The answer names no trace, and feedback says why (feedback.py)."""
    env = app_env(LLM_PROVIDER="offline", MLFLOW_TRACE_SAMPLING_RATIO="0", HOME=str(tmp_path))
    started = StartedApp(env)
    with started as url, loopback.Client(base_url=url, timeout=60) as client:
        chat = Chat(client, stream=False)
        for chat.stream in (False, True):
            assert "I saw" in reply_text(chat.send("Hello"))
        answer = client.post("/invocations", json={"input": [{"role": "user", "content": "Hello"}]}).json()
        assert "trace_id" not in answer["custom_outputs"], answer
        feedback = client.post("/feedback", json={"trace_id": "tr-" + "a" * 32, "value": True})
        assert feedback.status_code == 404 and "MLFLOW_TRACE_SAMPLING_RATIO=0" in feedback.text, feedback.text
    assert "conversations kept in" in started.output and "sqlite" in started.output.lower(), started.output
    assert "No active trace" not in started.output, started.output


def sdk_tracing_states(ratios: list[str | None]) -> dict[str, str]:
    """Each ratio in turn, in one process: configure() decides again from the environment each time it is called.
    Run in a process of its own (app_fork_server.call): configure() sets the SDK's trace provider for the process."""
    from agents.tracing import get_trace_provider
    from agents.tracing.traces import NoOpTrace

    from agent_server.observability import tracing

    states = {}
    for ratio in ratios:
        os.environ.pop("MLFLOW_TRACE_SAMPLING_RATIO", None)
        if ratio is not None:
            os.environ["MLFLOW_TRACE_SAMPLING_RATIO"] = ratio
        tracing.configure()
        states[str(ratio)] = "off" if isinstance(get_trace_provider().create_trace("probe"), NoOpTrace) else "on"
    return states


def test_the_sdks_own_tracing_is_off_when_mlflow_samples_nothing(tmp_path):
    """With nothing sampled, the SDK building each run's spans would be work for nothing (about 7% of a request)."""
    expected = {"0": "off", "0.5": "on", "0.0": "off", "None": "on"}  # on again after off: each call decides
    env = app_env(MLFLOW_TRACKING_URI=f"file:{tmp_path / 'mlruns'}")
    ratios = [None if ratio == "None" else ratio for ratio in expected]
    assert app_fork_server.call(sdk_tracing_states, ratios, env=env) == expected


@pytest.mark.usefixtures("traced")
@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_a_turns_trace_holds_none_of_its_request_headers(app_client, stream):
    """The turn's state goes to the SDK as its run context, which MLflow's tracing records with the SDK call: it is
    recorded by what it names (route, caller, conversation), never with the request's headers, which hold the user's
    token on Databricks Apps (x-forwarded-access-token) or a sign-in."""
    token = f"secret-{uuid.uuid4().hex}"
    body = {"input": [{"role": "user", "content": "What time is it?"}], "stream": stream}
    assert app_client.post("/invocations", json=body, headers={"x-forwarded-access-token": token}).status_code == 200
    mlflow.flush_trace_async_logging()
    trace = mlflow.get_trace(mlflow.get_last_active_trace_id())
    recorded = json.dumps(trace.to_dict())
    assert "get_current_time" in recorded and "TurnContext(path='/invocations'" in recorded, "the run's context"
    assert token not in recorded
