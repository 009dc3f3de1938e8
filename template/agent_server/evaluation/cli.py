# Owned by the template: changes here are overwritten by `copier update`. Put your own cases in evals/cases.yaml.
"""`uv run evaluate`: play the evaluation set through the app, score it with MLflow, say whether it passed.

    uv run evaluate                          # evals/cases.yaml through the app in process, deterministic scorers
    uv run evaluate --judge offline          # and MLflow's judges, on the built-in offline model
    uv run evaluate --judge openai:/gpt-4.1-mini --simulate 2   # a real judge, and 2 simulated chats a case
    uv run evaluate --url http://127.0.0.1:8000                 # a running app instead
    uv run evaluate --model big --model small   # each case on each of these models (LLM_MODELS); --model all: every one
    uv run evaluate --from-feedback          # thumbs-down conversations, written as new cases

It reads .env as start-app does. In process, the app serves with this project's settings, except that its
conversations go to a temporary SQLite file (never the app's own store) and every turn is traced. The result
is an MLflow evaluation run in the experiment `evaluation` (or MLFLOW_EXPERIMENT_ID's), with a trace per turn:
`uvx mlflow ui` shows it (the app's mlflow-skinny has no UI; its last line says how). Exit status: 0 when every
scorer reaches its threshold, 1 when one does not, 2 when the evaluation could not run (a bad cases file, an app
that does not answer).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_server import config
from agent_server.evaluation import cases as case_files
from agent_server.evaluation import report as reports
from agent_server.observability import tracing

EXPERIMENT = "evaluation"
RESULTS_PATH = Path("evals/results.json")
OFFLINE_JUDGE = "offline"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="evaluate", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--cases", action="append", type=Path, help=f"a cases file (repeatable; {case_files.DEFAULT_PATH})"
    )
    parser.add_argument("--url", help="evaluate the app running at this URL instead of in process")
    parser.add_argument("--header", action="append", default=[], help="NAME: VALUE sent with every request (--url)")
    parser.add_argument("--judge", help="the judges' model: `offline`, or as MLflow names one (EVAL_JUDGE_MODEL)")
    parser.add_argument("--simulate", type=int, default=0, metavar="N", help="N simulated chats per case with a goal")
    parser.add_argument(
        "--model", action="append", dest="models", help="play the cases on this listed model (repeatable), or `all`"
    )
    parser.add_argument("--output", type=Path, default=RESULTS_PATH, help=f"the JSON results ({RESULTS_PATH})")
    parser.add_argument("--from-feedback", action="store_true", help="write thumbs-down conversations as cases")
    parser.add_argument("--since-days", type=float, default=30, help="with --from-feedback: feedback this recent")
    args = parser.parse_args(argv)
    if args.simulate < 0:
        parser.error("--simulate takes a number of chats, 0 or more")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from agent_server.start_server import load_env_file

    load_env_file(Path(".env"))
    try:
        sys.exit(run(args))
    except (case_files.EvaluationSetError, config.ConfigurationError, ConnectionError) as error:
        print(f"evaluate: {error}", file=sys.stderr)
        sys.exit(2)  # could not evaluate: not the same as an evaluation that failed (1)


@tracing.pruning_held()  # no pass of the app's deletes the traces this run writes and reads (tracing.py)
def run(args: argparse.Namespace) -> int:
    # Every turn traced, and written as it ends: the evaluation reads each trace back at once.
    os.environ["MLFLOW_TRACE_SAMPLING_RATIO"] = "1"
    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
    settings = config.reload()
    from agent_server.observability import tracing

    os.environ.update(tracing.tracing_environment(os.environ))  # the app's store and MLflow's defaults
    if args.from_feedback:
        from agent_server.evaluation import from_feedback

        path = args.output if args.output != RESULTS_PATH else from_feedback.DEFAULT_PATH
        return from_feedback.write_cases(path, args.since_days, os.environ.get("MLFLOW_EXPERIMENT_ID") or "0")
    evaluation_set = case_files.load(*(args.cases or [case_files.DEFAULT_PATH]))
    args.models = models_to_play(args.models, listed_models(args, settings) if args.models else [])
    judge = args.judge or settings.evaluation.judge_model or None
    if args.simulate and not judge:
        raise config.ConfigurationError("--simulate needs a judge model to play the user: --judge or EVAL_JUDGE_MODEL")
    with contextlib.ExitStack() as stack:
        if judge == OFFLINE_JUDGE:
            judge = stack.enter_context(offline_judge())
        if args.url is None:
            stack.enter_context(in_process_settings())
        evaluated = evaluate(evaluation_set, args, judge)
    reports.write_json(evaluated, args.output)
    print(reports.table(evaluated), flush=True)
    for line in evaluated.failures():
        print(f"evaluate: {line}", file=sys.stderr)
    print(f"evaluate: results in {args.output}; {where_to_look(os.environ['MLFLOW_TRACKING_URI'])}", file=sys.stderr)
    return 0 if evaluated.passed else 1


def listed_models(args: argparse.Namespace, settings: config.Settings) -> list[str]:
    """The models the app under test offers: with --url, the running app's own list (GET /models), which may not be
    this project's settings; in process, the settings' (LLM_MODEL, LLM_MODELS)."""
    if args.url is None:
        return list(settings.models.names)
    import httpx

    headers = dict(_header(text) for text in args.header)
    try:
        response = httpx.get(args.url.rstrip("/") + "/models", headers=headers, timeout=30)
        response.raise_for_status()
        return [str(entry["id"]) for entry in response.json()["data"]]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
        raise ConnectionError(f"The app at {args.url} did not list its models (GET /models): {error}") from None


def models_to_play(asked: list[str] | None, listed: list[str]) -> list[str]:
    """The listed models `--model` names (`all`: every one, in the owner's order); ConfigurationError for another."""
    if not asked:
        return []
    if "all" in asked:
        return list(listed)
    unknown = [name for name in asked if name not in listed]
    if unknown:
        names = ", ".join(listed)
        raise config.ConfigurationError(f"--model {unknown[0]!r} is not listed (LLM_MODEL, LLM_MODELS): {names}")
    return list(dict.fromkeys(asked))


def where_to_look(uri: str) -> str:
    """How to see the run: MLflow's UI, through uvx for a local store (the app's mlflow-skinny has no UI, so
    `mlflow ui` alone fails with "No module named 'flask'"), or the tracking server it went to."""
    from mlflow.utils.file_utils import local_file_uri_to_path

    from agent_server.observability import tracing

    if not tracing._is_local_file_store(uri):
        return f"the run and its traces are in MLflow at {uri}"
    store = shlex.quote(local_file_uri_to_path(uri))
    return f"see the run and its traces with `MLFLOW_ALLOW_FILE_STORE=true uvx mlflow ui --backend-store-uri {store}`"


def evaluate(evaluation_set: case_files.EvaluationSet, args: argparse.Namespace, judge: str | None) -> reports.Report:
    import mlflow

    from agent_server.evaluation import scorers
    from agent_server.evaluation.conversation import AppUnderTest, Chat

    experiment = _experiment()
    label = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    headers = dict(_header(text) for text in args.header)
    results: list[reports.CaseResult] = []
    with AppUnderTest(args.url, headers) as app, mlflow.start_run(run_name=f"evaluate-{label}") as run:
        expectations: dict[str, dict[str, Any]] = {}
        plays = [(model, case) for model in args.models or [None] for case in evaluation_set.cases]
        total = len(plays)
        for number, (model, case) in enumerate(plays, 1):
            on = f" @{model}" if model else ""
            chat, played = Chat(session=f"{label}/{case.name}{on}", model=model), []
            for turn in case.turns:
                chat = chat.next_conversation() if turn.new_conversation else chat
                result = app.turn(chat, turn.user)
                played.append(result)
                expectations[result.turn_id] = expected(turn.expect)
                if chat.failed:
                    break
            results.append(reports.CaseResult(case.name, played, len(case.turns), model=model))
            failed = next((t.error for t in played if t.error), None)
            took = sum(t.seconds for t in played)
            said = f"turn {len(played)} failed: {failed}" if failed else f"{len(played)} turn(s) in {took:.1f} s"
            print(f"evaluate: [{number}/{total}] {case.name}{on}: {said}", file=sys.stderr, flush=True)
        if args.simulate:
            from agent_server.evaluation import simulate

            results += simulate.conversations(app, evaluation_set.cases, args.simulate, judge or "", label)
        data = [
            {"trace": mlflow.get_trace(turn.trace_id), "expectations": expectations.get(turn.turn_id, {})}
            for case in results
            for turn in case.turns
        ]
        chosen = [*scorers.DETERMINISTIC, *(scorers.judges(judge) if judge else [])]
        print(f"evaluate: scoring {len(data)} turn(s) with {len(chosen)} scorer(s)", file=sys.stderr, flush=True)
        outcome = mlflow.genai.evaluate(data=data, scorers=chosen)
        rows = outcome.result_df.to_dict("records") if outcome.result_df is not None else []
    names = [chosen_scorer.name for chosen_scorer in chosen]
    built = reports.build(results, rows, names, dict(evaluation_set.thresholds), run.info.run_id, experiment)
    _drop_copied(experiment, results)
    return built


def _drop_copied(experiment: str, results: list[reports.CaseResult]) -> None:
    """A store that cannot link a trace to a run (the local file store) has MLflow score a copy of each turn's
    trace, in the run: the originals would show every turn twice in the MLflow UI, so they go."""
    from mlflow import MlflowClient

    copied = [
        turn.original_trace_id for case in results for turn in case.turns if turn.trace_id != turn.original_trace_id
    ]
    if copied:
        MlflowClient().delete_traces(experiment_id=experiment, trace_ids=copied)


def expected(expect: case_files.Expectations) -> dict[str, Any]:
    """A turn's expectations as MLflow keeps them (`expected_response` and `guidelines` are what its judges read)."""
    found = {
        "tools": [tool.model_dump(exclude_none=True) for tool in expect.tools],
        "contains": list(expect.contains),
        "not_contains": list(expect.not_contains),
        "expected_response": expect.reference,
        "guidelines": list(expect.guidelines),
        "max_seconds": expect.max_seconds,
    }
    return {name: value for name, value in found.items() if value not in (None, [])}


def _experiment() -> str:
    import mlflow

    if experiment_id := os.environ.get("MLFLOW_EXPERIMENT_ID"):  # the app's (Databricks: the bundle's experiment)
        return str(mlflow.set_experiment(experiment_id=experiment_id).experiment_id)
    return str(mlflow.set_experiment(EXPERIMENT).experiment_id)


def _header(text: str) -> tuple[str, str]:
    name, colon, value = text.partition(":")
    if not colon or not name.strip():
        raise config.ConfigurationError(f"--header {text!r}: give it as 'Name: value'")
    return name.strip(), value.strip()


@contextlib.contextmanager
def in_process_settings() -> Iterator[None]:
    """The app in process keeps its conversations in a temporary SQLite file, never in the app's own store."""
    names = ("MEMORY_BACKEND", "MEMORY_DATABASE_URL", "MEMORY_LAKEBASE_INSTANCE")
    saved = {name: os.environ.get(name) for name in names}
    with tempfile.TemporaryDirectory(prefix="evaluate-") as folder:
        if config.settings().memory.backend != "none":
            os.environ["MEMORY_BACKEND"] = "sqlite"
            os.environ["MEMORY_DATABASE_URL"] = str(Path(folder) / "conversations.db")
            os.environ.pop("MEMORY_LAKEBASE_INSTANCE", None)
        config.reload()
        try:
            yield
        finally:
            _restore(saved)
            config.reload()


@contextlib.contextmanager
def offline_judge() -> Iterator[str]:
    """The built-in offline model, served on loopback for MLflow's judges: their model's name."""
    import uvicorn

    from agent_server.offline import create_offline_app

    server = uvicorn.Server(uvicorn.Config(create_offline_app(), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, name="offline-judge", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise ConnectionError("the offline judge did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    # MLflow's judges read OPENAI_API_BASE before OPENAI_BASE_URL (mlflow/metrics/genai/model_utils.py, 3.17);
    # the agent's own openai client reads only OPENAI_BASE_URL, so an `openai` agent still talks to its model.
    saved = {name: os.environ.get(name) for name in ("OPENAI_API_BASE", "OPENAI_API_KEY")}
    os.environ["OPENAI_API_BASE"] = f"http://127.0.0.1:{port}/v1"
    os.environ.setdefault("OPENAI_API_KEY", "offline")
    try:
        yield "openai:/offline"
    finally:
        _restore(saved)
        server.should_exit = True
        thread.join(timeout=10)


def _restore(saved: dict[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
