# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""`uv run evaluate` (agent_server/evaluation/) on the real app, the real MLflow and the offline model: the
starter set passes and leaves an MLflow run with its traces; a case the agent cannot meet, or a turn that
errors, fails with a non-zero exit that says why; judges' scores land in the run; and `--url` evaluates a
running start-app."""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import app_fork_server
import mlflow
import pytest
from mlflow.utils.file_utils import local_file_uri_to_path
from support import TRACED, ServerThread, StartedApp, app_env

from agent_server import config
from agent_server.config import defaults
from agent_server.evaluation import cases, cli
from agent_server.offline import create_offline_app

STARTER_SET = Path(__file__).parents[2] / "evals" / "cases.yaml"
STARTER = cases.load(STARTER_SET).cases
STARTER_PASSED = f"PASSED: {len(STARTER)} cases, 0 failed"
# The starter set is written for the answers the app was made with: with long_term_memory answered true it holds a
# case that recalls across chats, which needs the memory tools that tests/conftest.py turns off for other tests.
AS_ANSWERED = {"LONG_TERM_MEMORY": "true" if defaults.LONG_TERM_MEMORY else "false"}


@pytest.fixture(autouse=True)
def own_environment(app_settings: Any) -> Iterator[None]:
    """evaluate sets variables for its process (every turn traced, written at once): here, for the test only."""
    app_settings.setenv("LLM_PROVIDER", "offline")
    app_settings.setenv("LLM_MODEL", "offline")
    app_settings.setenv("LONG_TERM_MEMORY", AS_ANSWERED["LONG_TERM_MEMORY"])
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)
    config.reload()
    mlflow.set_experiment(experiment_id="0")  # the tests' other traces go where they went before


def evaluate(tmp_path: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    """Run the command in this process; its exit status and its JSON results."""
    output = tmp_path / "results.json"
    status = cli.run(cli.parse_args([*flags, "--output", str(output)]))
    return status, json.loads(output.read_text())


def cases_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cases.yaml"
    path.write_text(text)
    return str(path)


def test_the_starter_set_passes_offline_and_its_judge_scores_land_in_an_mlflow_run(tmp_path, capsys):
    status, results = evaluate(tmp_path, "--cases", str(STARTER_SET), "--judge", "offline")
    table = capsys.readouterr().out
    assert status == 0, results["failures"]
    assert STARTER_PASSED in table and "tells-the-time" in table and "correctness" in table
    assert {"turn_succeeded", "expected_tools", "required_text", "latency", "correctness"} <= set(results["scorers"])
    [run] = mlflow.search_runs(
        experiment_ids=[results["experiment_id"]], filter_string=f"run_id = '{results['run_id']}'", output_format="list"
    )
    assert run.info.status == "FINISHED"
    traces = mlflow.search_traces(run_id=results["run_id"], return_type="list")
    assert len(traces) == sum(len(case.turns) for case in STARTER)  # one per turn: 1 + 1 + 2 (+ 2)
    scored = {a.name: a.value for t in traces for a in t.info.assessments if a.name == "correctness"}
    assert scored == {"correctness": "yes"}  # the offline judge's verdict, on the turn with a reference
    sessions = {t.info.trace_metadata.get("mlflow.trace.session") for t in traces}
    # Each case is one conversation, its turns one MLflow session; a turn with new_conversation starts another.
    assert len(sessions) == sum(1 + sum(turn.new_conversation for turn in case.turns) for case in STARTER)


def test_a_case_the_agent_cannot_meet_fails_with_a_non_zero_exit_naming_the_expectation(tmp_path, capsys):
    unmet = """
cases:
  - name: wants-the-weather
    turns:
      - user: Hello
      - user: Is it sunny?
        expect:
          tools: [{name: get_weather, arguments: {city: Paris}}]
          contains: [It is sunny in Paris]
"""
    status, results = evaluate(tmp_path, "--cases", cases_file(tmp_path, unmet))
    assert status == 1
    [case] = results["cases"]
    assert case["passed"] is False and len(case["turns"]) == 2
    tools, text = case["scores"]["expected_tools"], case["scores"]["required_text"]
    assert not tools["passed"] and 'turn 2: Expected a call to get_weather with {"city": "Paris"}' in tools["rationale"]
    assert not text["passed"] and "does not contain 'It is sunny in Paris'" in text["rationale"]
    said = capsys.readouterr()
    assert "FAILED: 1 cases, 1 failed" in said.out
    # Its last line names a command that shows the run: the app's mlflow-skinny has no `mlflow ui` of its own.
    store = local_file_uri_to_path(os.environ["MLFLOW_TRACKING_URI"])
    assert said.err.splitlines()[-1] == (
        f"evaluate: results in {tmp_path / 'results.json'}; see the run and its traces with "
        f"`MLFLOW_ALLOW_FILE_STORE=true uvx mlflow ui --backend-store-uri {store}`"
    )


def test_the_way_to_see_the_run_follows_where_it_went():
    uvx = "see the run and its traces with `MLFLOW_ALLOW_FILE_STORE=true uvx mlflow ui --backend-store-uri"
    assert cli.where_to_look("file:./mlruns") == f"{uvx} ./mlruns`"  # the default, as the README says
    assert cli.where_to_look("/my store/mlruns") == f"{uvx} '/my store/mlruns'`"
    assert cli.where_to_look("databricks") == "the run and its traces are in MLflow at databricks"


class ModelDownOnCue:
    """The offline model, except that a request whose conversation says BREAK gets a 400: the model down for
    that turn (a 400 is never retried, so the turn fails at once)."""

    def __init__(self) -> None:
        self.model = create_offline_app()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.model(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        if b"BREAK" in body:
            await send(
                {"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json")]}
            )
            error = {"error": {"message": "The model is down for this turn.", "type": "invalid_request_error"}}
            return await send({"type": "http.response.body", "body": json.dumps(error).encode()})

        async def replay() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        await self.model(scope, replay, send)


def test_a_turn_that_errors_fails_its_case_and_its_later_turns_are_not_sent(tmp_path, app_settings):
    broken = """
cases:
  - name: breaks-mid-conversation
    goal: Ask about BREAK and keep asking.
    turns:
      - user: Hello
      - user: Please BREAK now
      - user: Are you still there?
"""
    with ServerThread(ModelDownOnCue()) as model_url:
        app_settings.setenv("LLM_PROVIDER", "openai")
        app_settings.setenv("OPENAI_BASE_URL", f"{model_url}/v1")
        app_settings.setenv("OPENAI_API_KEY", "test")
        app_settings.setenv("LLM_MAX_RETRIES", "0")
        status, results = evaluate(
            tmp_path, "--cases", cases_file(tmp_path, broken), "--judge", "offline", "--simulate", "1"
        )
    assert status == 1
    written, simulated = results["cases"]
    assert [turn["error"] is not None for turn in written["turns"]] == [False, True]  # the third was never sent
    failed = written["scores"]["turn_succeeded"]
    assert not failed["passed"] and failed["rationale"].startswith("turn 2: The turn failed: ")
    assert "The model is down for this turn" in failed["rationale"] and "turn 3 was not sent" in failed["rationale"]
    # A simulated user asked about BREAK too: the turn that failed is kept and fails, never a short success.
    assert simulated["name"] == "breaks-mid-conversation (simulated 1)"
    assert simulated["turns"][-1]["error"] and not simulated["scores"]["turn_succeeded"]["passed"]


RECALLED_ACROSS_CONVERSATIONS = """
cases:
  - name: recalls-my-name-in-a-new-chat
    turns:
      - user: My name is Ada Lovelace.
        expect:
          tools: [remember]
      - user: What is my name?
        new_conversation: true
        expect:
          contains: [Ada Lovelace]
          not_contains: [error]
"""


@pytest.mark.parametrize(
    ("backend", "long_term"),
    [("sqlite", True), ("sqlite", False), ("none", False)],
    ids=["long-term-memory", "conversation-memory-only", "no-memory"],
)
def test_a_turn_can_open_a_new_conversation_of_the_same_user(tmp_path, app_settings, backend, long_term):
    """Only long-term memory carries the name into the second conversation: without it the case fails, as the
    second conversation has neither the first's id (memory on) nor its history (memory off)."""
    app_settings.setenv("MEMORY_BACKEND", backend)
    app_settings.setenv("LONG_TERM_MEMORY", str(long_term).lower())
    status, results = evaluate(tmp_path, "--cases", cases_file(tmp_path, RECALLED_ACROSS_CONVERSATIONS))
    [case] = results["cases"]
    assert [turn["error"] for turn in case["turns"]] == [None, None]
    text = case["scores"]["required_text"]
    if long_term:
        assert status == 0 and case["passed"] and text["passed"], results["failures"]
    else:
        assert status == 1 and not text["passed"] and "does not contain 'Ada Lovelace'" in text["rationale"]
    traces = mlflow.search_traces(run_id=results["run_id"], return_type="list")
    sessions = {t.info.trace_metadata.get("mlflow.trace.session") for t in traces}
    assert len(traces) == 2 and len(sessions) == 2  # two conversations, each its own MLflow session


@pytest.mark.waits
def test_evaluate_against_a_running_app(tmp_path, capsys):
    """On each model the running app offers (its GET /models: this process's settings list one)."""
    env = app_env(LLM_PROVIDER="offline", HOME=str(tmp_path), MLFLOW_TRACKING_URI=f"file:{tmp_path / 'app-mlruns'}",
                  LLM_MODELS="offline,big=Big model", **TRACED, **AS_ANSWERED)  # fmt: skip
    with (app := StartedApp(env)) as url:
        status, results = evaluate(tmp_path, "--cases", str(STARTER_SET), "--url", url, "--model", "all")
    assert status == 0, results["failures"]
    assert f"PASSED: {2 * len(STARTER)} cases, 0 failed" in capsys.readouterr().out
    assert [case["model"] for case in results["cases"]] == ["offline"] * len(STARTER) + ["big"] * len(STARTER)
    # The app's stop sent the traces it still held: one for each request it answered.
    answered = app.output.count('"POST /invocations HTTP/1.1" 200')
    traces = [folder for folder in (tmp_path / "app-mlruns").glob("*/traces/*") if folder.is_dir()]
    assert answered >= 3 and len(traces) == answered, (answered, len(traces))


@pytest.mark.waits
def test_a_run_longer_than_a_pruning_pass_keeps_the_traces_it_is_writing(tmp_path):
    """The app in process prunes its local traces (tracing.keep_pruned): here every 0.1 s, and any older than
    0.1 s (TRACES_MAX_AGE_DAYS). The run reads back, copies and scores its turns' traces later than that, and
    prunes none of them while it runs. In a process of its own, whose pruner ends with it."""
    env = app_env(LLM_PROVIDER="offline", TRACES_MAX_AGE_DAYS="0.000001", **AS_ANSWERED)
    flags = ["--cases", str(STARTER_SET), "--output", str(tmp_path / "results.json")]
    status, printed, said = app_fork_server.call(evaluated_pruning_often, flags, str(tmp_path), env=env, timeout=300)
    assert status == 0, said[-4000:]
    assert STARTER_PASSED in printed


def evaluated_pruning_often(flags: list[str], folder: str) -> tuple[int | str | None, str, str]:
    """`evaluate` run in `folder`, with the app's pruner passing every 0.1 s: its exit status and what it printed.
    In a process forked for it (app_fork_server.call), with the environment it was given and its own pruner."""
    from agent_server.observability import tracing

    os.chdir(folder)
    config.reload()
    tracing.PRUNE_EVERY_SECONDS = 0.1
    printed, said = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(said):
        try:
            cli.main(flags)
        except SystemExit as exited:
            return exited.code, printed.getvalue(), said.getvalue()
    return None, printed.getvalue(), said.getvalue()


ONE_CASE = "cases: [{name: a, turns: [{user: hi}]}]\n"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"cases: 5\n", "'cases' must be a list of cases, not a number."),
        (b"cases: every one\n", "'cases' must be a list of cases, not text."),
        (f"thresholds: [latency]\n{ONE_CASE}".encode(), "'thresholds' must map scorer names to pass rates"),
        (f"thresholds: fast\n{ONE_CASE}".encode(), "to pass rates (such as latency: 1), not text."),
        ("cases: [{name: café, turns: [{user: hi}]}]\n".encode("latin-1"), "not UTF-8 text (invalid continuation"),
        (None, "a directory, not a cases file"),
    ],
    ids=["cases-a-number", "cases-text", "thresholds-a-list", "thresholds-text", "latin-1", "a-directory"],
)
def test_a_cases_file_that_cannot_be_read_exits_2_with_a_one_line_reason(tmp_path, capsys, content, says):
    path = tmp_path / "cases.yaml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(SystemExit) as exited:
        cli.main(["--cases", str(path), "--output", str(tmp_path / "results.json")])
    said = capsys.readouterr().err
    assert exited.value.code == 2, said
    assert said.startswith(f"evaluate: {path}: ") and says in said and said.count("\n") == 1, said


def test_a_mistake_in_the_cases_file_names_its_place(tmp_path):
    path = cases_file(tmp_path, "cases:\n  - name: x\n    turns:\n      - user: hi\n        expect: {tool: [a]}\n")
    with pytest.raises(cases.EvaluationSetError, match=r"cases\[0\]\.turns\[0\]\.expect\.tool: unknown key$"):
        cases.load(Path(path))
    with pytest.raises(cases.EvaluationSetError, match="threshold of 'latency' is 2"):
        cases.load(Path(cases_file(tmp_path, "thresholds: {latency: 2}\ncases: [{name: a, turns: [{user: hi}]}]\n")))
    lines = tmp_path / "cases.jsonl"
    lines.write_text('{"name": "a", "turns": [{"user": "hi", "expect": {"tools": ["get_current_time"]}}]}\n')
    [case] = cases.load(lines).cases
    assert case.turns[0].expect.tools[0].name == "get_current_time"
    opens = "cases: [{name: a, turns: [{user: hi, new_conversation: true}]}]\n"
    with pytest.raises(cases.EvaluationSetError, match=r"cases\[0\]\.turns: .*the first turn opens the case's"):
        cases.load(Path(cases_file(tmp_path, opens)))
    numbered = "cases: [{name: a, turns: [{user: hi}, {user: yo, new_conversation: 1}]}]\n"
    with pytest.raises(cases.EvaluationSetError, match=r"turns\[1\]\.new_conversation: Input should be a valid bool"):
        cases.load(Path(cases_file(tmp_path, numbered)))


def test_the_cases_play_on_each_listed_model_and_each_row_says_which(tmp_path, app_settings, capsys):
    app_settings.setenv("LLM_MODELS", "offline,big=Big model")
    says_big = "cases:\n  - name: greets\n    turns:\n      - user: Hello\n        expect: {contains: [as big]}\n"
    status, results = evaluate(tmp_path, "--cases", cases_file(tmp_path, says_big), "--model", "all")
    assert status == 1  # the default does not say it answered as big: the comparison shows it
    assert [(c["model"], c["passed"], c["turns"][0]["model"]) for c in results["cases"]] == [
        ("offline", False, "offline"), ("big", True, "big")]  # fmt: skip
    assert results["scorers"]["required_text @big"]["ok"] and not results["scorers"]["required_text @offline"]["ok"]
    table = capsys.readouterr().out
    assert "greets @offline" in table and "greets @big" in table and "required_text @big" in table
    with pytest.raises(config.ConfigurationError, match="--model 'huge' is not listed"):
        evaluate(tmp_path, "--cases", cases_file(tmp_path, says_big), "--model", "huge")
