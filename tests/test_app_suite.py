"""The generated app installs from its committed lock, passes its own test suite and type-checks (uv run mypy, as
its CI does); and in a fresh render,
`uv run evaluate` passes on the offline model and leaves an MLflow run that MLflow's own search reads (with
long-term memory on, its evaluation set's case that recalls across conversations among them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from renders import assert_all_passed, clean_env, passed, uv

# The whole suite runs in each render whose answers change the app's code or behaviour: the defaults; long-term memory
# on with the Responses API (offline-responses: its evaluation set holds the recall case); memory off (no-ci); and,
# in tests/test_memory_postgres.py, PostgreSQL (databricks-postgres, against the tests' own server). The render whose
# defaults differ in every LLM setting runs the tests of what those answers change (settings and their defaults,
# start-up, the deployed app's checks, the OpenAI provider, the deploy files, AGENTS.md, tracing, the page), without
# those marked `waits` (each starts app processes with the settings it names) or `api_modes` (each sets the offline
# model and the API mode itself): those prove the same in either render, and the others run them all.
SENSITIVE = ("config", "start_app", "deployed", "deploy_config", "openai_provider", "agents_md", "tracing", "chat_page")
RENDER_SENSITIVE = [f"tests/template/test_{name}.py" for name in SENSITIVE]
WHOLE = ["-v"]
SUITES = {
    "defaults": WHOLE,
    "offline-responses": WHOLE,
    "no-ci": WHOLE,
    # In one process: for these few tests, parallel processes that each import and collect them took twice the CPU.
    "databricks-responses": [*RENDER_SENSITIVE, "-m", "not waits and not api_modes", "-n", "0"],
}
# An owner's test named like one of the template's (tests/template/test_memory.py): both run in one suite.
OWNER_TEST = '''"""My own memory test."""

from support import Chat, reply_text


def test_my_memory(app_client):
    assert reply_text(Chat(app_client, stream=False).send("Hello")).endswith("You said: Hello")
'''


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for every render and test process, as a CI keeps one between runs: the renders install the
    same locked libraries, whose analysis is most of a cold run's 25 s of CPU (a warm one takes 3). mypy checks each
    cached module against its source's hash, so a render's own modules are checked as they are."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "mypy-cache"  # the workers' common one


@pytest.mark.parametrize("name", SUITES)
def test_app_installs_locked_and_its_tests_pass(renders, name, mypy_cache):
    app = renders[name]
    if name == "defaults":
        (app / "tests" / "test_memory.py").write_text(OWNER_TEST)
    uv("sync", "--locked", "--dev", "--no-config", cwd=app)
    result = uv("run", "--locked", "--no-config", "pytest", "-p", "no:cacheprovider", *SUITES[name], cwd=app)
    assert_all_passed(result)
    if SUITES[name] is WHOLE:  # every test the render holds ran, the evaluation of its own starter set among them
        assert passed("test_evaluation.py::test_the_starter_set_passes_offline_and_its_judge_scores", result.stdout)
    if name == "defaults":
        assert passed("tests/test_memory.py::test_my_memory", result.stdout), "the owner's test ran"
    uv("run", "--locked", "--no-config", "mypy", "--cache-dir", str(mypy_cache), cwd=app)  # its CI's step beside them
    if name == "defaults":
        evaluated_in(app)


# Read back with MLflow's search API from the store the evaluation wrote (./mlruns), as an owner would.
READ_BACK = """
import json, sys, mlflow
results = json.load(open("evals/results.json"))
[run] = mlflow.search_runs(experiment_names=["evaluation"], output_format="list")
traces = mlflow.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id, return_type="list")
print(json.dumps({"run": run.info.run_id, "status": run.info.status, "traces": len(traces),
                  "results_run": results["run_id"], "metrics": sorted(run.data.metrics)}))
"""


def evaluated_in(app):
    """`uv run evaluate` as the README gives it, on the offline model with its judges: a table, exit 0, a run."""
    env = clean_env(LLM_PROVIDER="offline", LLM_MODEL="offline", MLFLOW_ALLOW_FILE_STORE="true")
    shown = uv("run", "--locked", "--no-config", "evaluate", "--judge", "offline", cwd=app, env=env)
    assert "PASSED: 3 cases, 0 failed" in shown.stdout and "correctness" in shown.stdout, shown.stdout
    read = uv("run", "--locked", "--no-config", "python", "-c", READ_BACK, cwd=app, env=env)
    found = json.loads(read.stdout.strip().splitlines()[-1])
    assert found["status"] == "FINISHED" and found["run"] == found["results_run"]
    assert found["traces"] == 4, found  # a trace per turn of the starter set, each scored once
    assert any(metric.startswith("correctness") for metric in found["metrics"]), found


def test_with_long_term_memory_the_evaluation_set_recalls_across_conversations(renders):
    app = renders["offline-responses"]  # long_term_memory: its cases.yaml holds recalls-my-name-in-a-new-chat
    uv("sync", "--locked", "--no-config", cwd=app)
    env = clean_env(LLM_PROVIDER="offline", MLFLOW_ALLOW_FILE_STORE="true")
    shown = uv("run", "--locked", "--no-config", "evaluate", cwd=app, env=env)
    assert "PASSED: 4 cases, 0 failed" in shown.stdout and "recalls-my-name-in-a-new-chat" in shown.stdout, shown.stdout
