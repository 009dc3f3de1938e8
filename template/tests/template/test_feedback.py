# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Feedback on answers (agent_server/feedback.py): every answer carries its trace id, and POST /feedback
records a `user_feedback` assessment on that trace, read back here from the local MLflow store. With tracing
sampled out: tests/template/test_tracing.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import mlflow
import pytest
from conftest import AppSettings
from fastapi.testclient import TestClient
from support import fresh_database, sse_events

ADA, BOB = "ada@example.com", "bob@example.com"


def serve(app_settings: AppSettings, memory: str, tmp_path) -> TestClient:
    """The app on the offline model, its callers named by a header: the trace records the caller, memory on or off."""
    app_settings.setenv("LLM_PROVIDER", "offline")
    app_settings.setenv("LLM_MODEL", "offline")
    app_settings.setenv("MEMORY_BACKEND", memory)
    app_settings.setenv("MEMORY_DATABASE_URL", fresh_database(tmp_path / "conversations.db"))
    app_settings.setenv("MEMORY_USER_HEADER", "x-test-user")
    from agent_server.app import app

    return TestClient(app, headers={"x-test-user": ADA})


@pytest.fixture(params=["sqlite", "none"])
def either_client(request: pytest.FixtureRequest, app_settings: AppSettings, tmp_path) -> Iterator[TestClient]:
    with serve(app_settings, request.param, tmp_path) as test_client:
        yield test_client


@pytest.fixture
def client(app_settings: AppSettings, tmp_path) -> Iterator[TestClient]:
    with serve(app_settings, "sqlite", tmp_path) as test_client:
        yield test_client


def answer_trace_id(client: TestClient, stream: bool) -> str:
    body = {"input": [{"role": "user", "content": "hello"}], "stream": stream}
    response = client.post("/invocations", json=body)
    assert response.status_code == 200, response.text
    if stream:
        done = [event for event in sse_events(response.text) if event.get("type") == "response.output_item.done"]
        ids = {event["custom_outputs"]["trace_id"] for event in done}
        assert len(ids) == 1, done  # every item of one answer names the one trace
        return ids.pop()
    return str(response.json()["custom_outputs"]["trace_id"])


def user_feedback(trace_id: str) -> list[mlflow.entities.Assessment]:
    trace = mlflow.get_trace(trace_id)
    return [a for a in trace.info.assessments if a.name == "user_feedback" and a.valid is not False]


@pytest.mark.usefixtures("traced")
@pytest.mark.parametrize("stream", [False, True])
def test_feedback_on_an_answer_is_a_user_feedback_assessment_on_its_trace(either_client, stream):
    trace_id = answer_trace_id(either_client, stream)
    response = either_client.post("/feedback", json={"trace_id": trace_id, "value": False, "comment": "Wrong city."})
    assert response.status_code == 200, response.text
    assert response.json()["replaced"] is False
    [feedback] = user_feedback(trace_id)
    assert (feedback.value, feedback.rationale) == (False, "Wrong city.")
    assert (feedback.source.source_type, feedback.source.source_id) == ("HUMAN", ADA)


@pytest.mark.usefixtures("traced")
def test_feedback_is_one_per_user_and_a_second_replaces_the_first(client):
    trace_id = answer_trace_id(client, stream=False)
    assert client.post("/feedback", json={"trace_id": trace_id, "value": False}).status_code == 200
    again = client.post("/feedback", json={"trace_id": trace_id, "value": True, "comment": "Better on reflection."})
    assert again.status_code == 200 and again.json()["replaced"] is True, again.text
    [feedback] = user_feedback(trace_id)
    assert (feedback.value, feedback.rationale, feedback.source.source_id) == (True, "Better on reflection.", ADA)


def burst(client: TestClient, trace_id: str, size: int) -> list[Any]:
    """`size` feedbacks on the trace at once, from as many threads: each one's response, or the app's exception."""
    start, answers = threading.Barrier(size), []

    def give(n: int) -> None:
        start.wait()
        try:
            answers.append(client.post("/feedback", json={"trace_id": trace_id, "value": n % 2 == 0}))
        except Exception as error:  # the app's exception, which TestClient raises here
            answers.append(error)

    threads = [threading.Thread(target=give, args=(n,)) for n in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


@pytest.mark.usefixtures("traced")
def test_feedback_given_at_once_on_a_fresh_trace_is_all_answered_and_kept_once(client):
    """A burst of thumbs on one answer (a user clicking fast, a client retrying): each is a 200, written one after
    the other, so that the first logs the user's feedback and every later one replaces it. Five answers, each a
    burst of 20: MLflow's file store, written and read at once, gave a 500 or a 404 now and then, or kept two."""
    for _ in range(5):
        trace_id = answer_trace_id(client, stream=False)
        answers = burst(client, trace_id, 20)
        failed = [a if isinstance(a, Exception) else a.text for a in answers if getattr(a, "status_code", 0) != 200]
        assert len(answers) == 20 and not failed, failed
        assert sorted(answer.json()["replaced"] for answer in answers) == [False] + [True] * 19
        assert len(user_feedback(trace_id)) == 1


@pytest.mark.usefixtures("traced")
def test_another_identity_gets_a_404_for_a_trace_not_theirs(either_client):
    client = either_client
    trace_id = answer_trace_id(client, stream=False)
    response = client.post("/feedback", json={"trace_id": trace_id, "value": True}, headers={"x-test-user": BOB})
    assert response.status_code == 404, response.text
    assert "You have no answer" in response.json()["error"]["message"]
    assert user_feedback(trace_id) == []
    unknown = client.post("/feedback", json={"trace_id": "tr-" + "0" * 32, "value": True})
    assert unknown.status_code == 404  # the same answer for a trace that does not exist: nothing is told


@pytest.mark.parametrize(
    ("body", "status", "names"),
    [
        ([], 400, "JSON object"),
        ({"trace_id": "tr-" + "a" * 32}, 400, "'value'"),
        ({"trace_id": "tr-" + "a" * 32, "value": "yes"}, 400, "'value'"),
        ({"trace_id": "../../etc", "value": True}, 400, "'trace_id'"),
        ({"trace_id": 7, "value": True}, 400, "'trace_id'"),
        ({"trace_id": "tr-" + "a" * 32, "value": True, "comment": 3}, 400, "'comment'"),
        ({"trace_id": "tr-" + "a" * 32, "value": True, "comment": "x" * 2001}, 413, "FEEDBACK_MAX_COMMENT_CHARS"),
        ({"trace_id": "tr-" + "a" * 32, "value": True, "score": 5}, 400, "'score'"),
        *(
            ({"trace_id": "tr-" + "a" * 32, "value": False, "comment": f"fine{hidden}print"}, 400, "control characters")
            for hidden in ("\x00", "\x1b[2J", "\r", "\x9b", "\u202e", "\u202a", "\u2066", "\u2069")
        ),  # NUL, ESC, CR, a C1 control, an override, an embedding, the isolates: as a title refuses them
    ],
)
def test_bad_feedback_is_a_4xx_that_names_the_problem(client, body, status, names):
    response = client.post("/feedback", json=body)
    assert response.status_code == status, response.text
    assert names in response.json()["error"]["message"]


def test_a_comment_may_hold_line_breaks_and_tabs(client):
    body = {"trace_id": "tr-" + "a" * 32, "value": False, "comment": "Two things:\n\t- the city\n\t- the date"}
    response = client.post("/feedback", json=body)
    assert response.status_code == 404 and "keeps no traces" in response.text, "checked, and let through"


def test_feedback_without_an_identity_is_a_401(client):
    response = client.post("/feedback", json={"trace_id": "tr-" + "a" * 32, "value": True}, headers={"x-test-user": ""})
    assert response.status_code == 401, response.text


@pytest.mark.usefixtures("traced")
def test_a_conversation_read_back_names_each_answers_trace_and_the_callers_feedback_on_it(client):
    """What the chat page reads after a reload: the trace beside each stored answer (GET /conversations/{id}), then
    the caller's own thumbs on those traces (GET /feedback), and nobody else's."""
    first = client.post("/invocations", json={"input": "What time is it?"}).json()
    conversation = first["custom_outputs"]["session_id"]
    second = client.post("/invocations", json={"input": "Thanks", "context": {"conversation_id": conversation}})
    traces = [first["custom_outputs"]["trace_id"], second.json()["custom_outputs"]["trace_id"]]
    read = client.get(f"/conversations/{conversation}").json()
    kinds = [item.get("role") or item["type"] for item in read["items"]]
    assert kinds == ["user", "function_call", "function_call_output", "assistant", "user", "assistant"]
    assert read["trace_ids"] == [None, traces[0], traces[0], traces[0], None, traces[1]]

    assert client.post("/feedback", json={"trace_id": traces[1], "value": False, "comment": "Curt."}).status_code == 200
    asked = "&".join(f"trace_id={trace_id}" for trace_id in traces)
    assert client.get(f"/feedback?{asked}").json() == {"feedback": {traces[1]: {"value": False, "comment": "Curt."}}}
    assert client.get(f"/feedback?{asked}", headers={"x-test-user": BOB}).json() == {"feedback": {}}
    assert client.get("/feedback").json() == {"feedback": {}}


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("trace_id=../../etc", "is not a trace id"),
        ("&".join(f"trace_id=tr-{n:032x}" for n in range(101)), "At most 100"),
    ],
)
def test_reading_feedback_with_bad_trace_ids_is_a_400(client, query, names):
    response = client.get(f"/feedback?{query}")
    assert response.status_code == 400 and names in response.json()["error"]["message"], response.text


@pytest.mark.usefixtures("traced")
def test_a_thumbs_down_conversation_becomes_a_case_of_the_evaluation_set(client, tmp_path):
    """`uv run evaluate --from-feedback`: the conversation up to the disliked answer, as a case cases.load reads."""
    from agent_server.evaluation import cases, from_feedback

    first = client.post("/invocations", json={"input": [{"role": "user", "content": "My city is Lyon."}]}).json()
    conversation = {"conversation_id": first["custom_outputs"]["session_id"]}
    second = client.post(
        "/invocations", json={"input": [{"role": "user", "content": "Weather there?"}], "context": conversation}
    ).json()
    trace_id = second["custom_outputs"]["trace_id"]
    assert (
        client.post("/feedback", json={"trace_id": trace_id, "value": False, "comment": "No weather."}).status_code
        == 200
    )
    path = tmp_path / "from_feedback.yaml"
    assert from_feedback.write_cases(path, since_days=1, experiment="0") == 0
    written = {case.name: case for case in cases.load(path).cases}
    case = written[f"feedback-{trace_id.removeprefix('tr-')[:12]}"]
    assert [turn.user for turn in case.turns] == ["My city is Lyon.", "Weather there?"]
    assert "# the user's comment: No weather." in path.read_text()
