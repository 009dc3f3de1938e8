# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Background runs, resumable streams and idempotent requests (agent_server/runs/), through the real app, the
real SDK and the offline model; on SQLite, and on PostgreSQL too when MEMORY_TEST_POSTGRES_URL names one.

This module: a background run answers at once and ends as the synchronous turn would, runs through the app's one
path (a busy conversation, memory off, a refused request), idempotency keys, a dead process's run resumed, and
OpenAI's own client; and the helpers the other runs tests share (`client`, `slow`, `until`, `ended`).
Streams and cursors: test_runs_streams.py; cancel, failure, owners and age: test_runs_lifetime.py."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from agents import Agent, function_tool
from fastapi.testclient import TestClient
from support import replayed, reply_text, sse_events

from agent_server import llm
from agent_server.memory import database, leases
from agent_server.runs import recovery, store
from agent_server.runs.store import Run

from .test_memory import ADA, backend  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)
from .test_ordered_turns import waiting

ASK = {"input": [{"role": "user", "content": "Hello there"}]}


class SlowTool:
    """An agent whose one tool `hold` runs until the test lets it go; its calls are counted at the tool."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()

        @function_tool(name_override="hold")
        async def hold() -> str:
            """Waits for the test."""
            self.calls += 1
            while not self.release.is_set():
                await asyncio.sleep(0.02)
            return "released"

        self.agent = Agent(name="slow", instructions="x", model=llm.model(), tools=[hold])


@pytest.fixture
def slow(monkeypatch) -> Iterator[SlowTool]:
    tool = SlowTool()
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: tool.agent)
    yield tool
    tool.release.set()


@pytest.fixture
def client(backend: str, api_mode: str, model_log) -> Iterator[TestClient]:  # noqa: F811
    from agent_server.app import app

    with TestClient(app, headers={"x-test-user": ADA}) as test_client:
        yield test_client


def until(check, what: str, seconds: float = 20) -> Any:
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
    return found


def ended(client: TestClient, run_id: str) -> dict[str, Any]:
    return until(lambda: (r := client.get(f"/responses/{run_id}").json())["status"] not in ("queued", "in_progress")
                 and r, "the run to end")  # fmt: skip


def tracing_state() -> str:
    """What decides whether MLflow records a span, for a run that ended with no trace: the sampling setting, the
    sampler MLflow's tracer was set up with (it reads the setting once, as it sets the tracer up), and the span in
    this thread's context (a parent that is not sampled drops its children)."""
    import mlflow.tracing.provider as provider
    from opentelemetry import trace

    try:
        sampler = provider._get_tracer(__name__).sampler.get_description()
    except Exception as error:  # noqa: BLE001 (a diagnosis: what it could not read is part of it)
        sampler = f"unknown ({error!r})"
    ratio = os.environ.get("MLFLOW_TRACE_SAMPLING_RATIO")
    return f"MLFLOW_TRACE_SAMPLING_RATIO={ratio!r}, sampler {sampler}, this thread's span {trace.get_current_span()!r}"


@pytest.mark.usefixtures("traced")
def test_background_answers_at_once_and_the_run_gives_the_synchronous_output(client, slow, model_log, caplog):
    caplog.set_level(logging.INFO, "agent_server.runs")  # a run resumed or claimed says so (for the trace's assert)
    started = time.monotonic()
    hold = {"input": [{"role": "user", "content": "Please hold"}], "background": True}
    answer = client.post("/invocations", json=hold)  # MLflow's agent format: /responses gives OpenAI's items
    assert answer.status_code == 200 and time.monotonic() - started < 1, "the tool is still running"
    run = answer.json()
    assert run["id"].startswith("resp_") and run["object"] == "response" and run["status"] in ("queued", "in_progress")
    assert run["custom_outputs"]["session_id"]
    slow.release.set()
    done = ended(client, run["id"])
    assert done["status"] == "completed" and done["error"] is None
    assert [item["type"] for item in done["output"]] == ["function_call", "function_call_output", "message"]
    assert "The tool returned: released" in reply_text(done["output"])
    traced = done.get("metadata", {}).get("trace_id", "").startswith("tr-")
    assert traced, f"no trace: {done}\n{tracing_state()}\n{caplog.text}"
    synchronous = client.post("/invocations", json={"input": [{"role": "user", "content": "Please hold"}]}).json()
    assert [i["type"] for i in synchronous["output"]] == [i["type"] for i in done["output"]]
    assert reply_text(synchronous["output"]) == reply_text(done["output"])
    assert slow.calls == 2 and len(model_log) == 4, "each run called the model twice and the tool once"
    kept = client.get(f"/conversations/{run['custom_outputs']['session_id']}").json()["items"]
    assert len(kept) == 4, "the background turn is stored as a synchronous one is"


@pytest.mark.parametrize("how", ["background", "idempotency-key"])
def test_a_client_that_keeps_its_own_history_stores_no_conversation_through_runs_either(client, how):
    """test_memory's stateless client, its turns sent as runs: each run keeps its request and events, but only the
    first turn, sent alone, starts a conversation; the later ones would each store the whole history again."""
    alone = {"x-test-user": f"dora-{uuid.uuid4()}@example.com"}
    history: list[dict[str, Any]] = []
    for turn, text in enumerate(["Hello", "What time is it?", "Thanks"], start=1):
        history.append({"role": "user", "content": text})
        if how == "background":
            run = client.post("/responses", json={"input": history, "background": True}, headers=alone).json()
            run_url = f"/responses/{run['id']}"

            def completed(url: str = run_url) -> Any:
                return (found := client.get(url, headers=alone).json())["status"] == "completed" and found

            done = until(completed, "the run to complete")
        else:
            keyed = {**alone, "Idempotency-Key": f"turn-{uuid.uuid4()}"}
            done = client.post("/invocations", json={"input": history}, headers=keyed).json()
        assert f"I saw {turn} user" in reply_text(done["output"]), "the model saw the client's whole history"
        history.extend(replayed(done["output"], "chat_ui"))
        if turn == 1:
            first = done["custom_outputs"]["session_id"]
        else:
            assert "session_id" not in done["custom_outputs"], done["custom_outputs"]
    listed = client.get("/conversations", headers=alone).json()["conversations"]
    assert [conversation["id"] for conversation in listed] == [first]
    assert len(client.get(f"/conversations/{first}", headers=alone).json()["items"]) == 2


def test_background_with_memory_off_is_a_400_that_says_why(app_settings, api_mode):
    app_settings.setenv("MEMORY_BACKEND", "none")
    from agent_server.app import app

    with TestClient(app) as client:
        answer = client.post("/invocations", json={**ASK, "background": True})
        assert answer.status_code == 400 and "MEMORY_BACKEND=none" in answer.json()["error"]["message"]
        assert client.post("/invocations", json={**ASK, "background": "yes"}).status_code == 400
        assert client.get("/responses/resp_x").status_code == 404


def test_a_background_turn_of_a_busy_conversation_waits_for_its_turn(client, slow, app_settings):
    """A run replays its request through the app, so it queues as any turn does (memory/queue.py): a second run of
    the conversation waits for the first and runs after it, seeing its answer; its POST answers once it runs. With
    MEMORY_TURN_QUEUE_SECONDS=0 it is refused at once, as without `background`."""
    body = {"input": [{"role": "user", "content": "Please hold"}], "background": True}
    run = client.post("/responses", json=body).json()
    until(lambda: slow.calls, "the tool to start")
    conversation = run["custom_outputs"]["session_id"]
    named = {"input": [{"role": "user", "content": "And?"}], "context": {"conversation_id": conversation}}
    app_settings.setenv("MEMORY_TURN_QUEUE_SECONDS", "0")
    background = {"background": True}
    refused = client.post("/responses", json={**named, **background})
    assert refused.status_code == 409 and "answering another request" in refused.json()["error"]["message"]
    app_settings.setenv("MEMORY_TURN_QUEUE_SECONDS", "30")
    answers: list[Any] = []
    second = threading.Thread(target=lambda: answers.append(client.post("/responses", json={**named, **background})))
    second.start()
    until(lambda: waiting(conversation) == 1, "the second run to wait for its turn")
    slow.release.set()
    second.join(30)
    assert answers[0].status_code == 200 and answers[0].json()["status"] == "in_progress", answers[0].text
    assert ended(client, run["id"])["status"] == "completed"
    after = ended(client, answers[0].json()["id"])
    assert after["status"] == "completed"
    assert "I saw 2 user, 1 assistant and 1 tool turns" in reply_text(after["output"]), "the first run's answer"


def test_a_refused_request_is_answered_as_without_a_run(client):
    answer = client.post("/responses", json={"input": [], "background": True})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "input"
    answer = client.post("/responses", json={**ASK, "background": True, "stream": "yes"})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "stream"


def test_the_same_idempotency_key_is_the_same_run_and_runs_nothing_again(client, slow, model_log):
    body = {"input": [{"role": "user", "content": "Please hold"}]}
    key = {"Idempotency-Key": f"turn-{uuid.uuid4()}"}  # PostgreSQL's database is the same for every test
    answers: list[Any] = []
    both = [threading.Thread(target=lambda: answers.append(client.post("/invocations", json=body, headers=key)))
            for _ in range(2)]  # fmt: skip
    for thread in both:
        thread.start()
    until(lambda: slow.calls, "the tool to start")
    time.sleep(0.2)
    slow.release.set()
    for thread in both:
        thread.join(30)
    again = client.post("/invocations", json=body, headers=key)
    assert [a.status_code for a in [*answers, again]] == [200, 200, 200]
    assert len({a.json()["id"] for a in [*answers, again]}) == 1, "one run"
    assert reply_text(again.json()["output"]) == reply_text(answers[0].json()["output"])
    assert slow.calls == 1 and len(model_log) == 2, "the model and the tool ran once for all three"
    other = client.post("/invocations", json={"input": [{"role": "user", "content": "Other"}]}, headers=key)
    assert other.status_code == 409 and "Idempotency-Key" in other.json()["error"]["message"]
    streamed = client.post("/invocations", json={**body, "stream": True}, headers=key).text
    assert sse_events(streamed)[-1]["response"]["id"] == again.json()["id"], "the run's stream, from its start"
    kept = client.get(f"/conversations/{again.json()['custom_outputs']['session_id']}").json()["items"]
    shapes = [item.get("type", "message") for item in kept]
    assert shapes == ["message", "function_call", "function_call_output", "message"], "replayed, its turn is kept once"
    assert client.post("/invocations", json=body, headers={"Idempotency-Key": "a b"}).status_code == 400


def crashed_after_its_tool(app: TestClient, conversation: str) -> Run:
    """A run of `conversation` ("Please hold") whose process died after its tool's output was stored, claimed by
    the next heartbeat: it resumes on the stored steps."""
    body = {"input": [{"role": "user", "content": "Please hold"}], "context": {"conversation_id": conversation}}
    call = {"type": "function_call", "call_id": "call_1", "name": "hold", "arguments": "{}", "id": "fc_1"}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "stored before the crash"}
    dead = Run(f"resp_{uuid.uuid4().hex}", ADA, conversation, None, "x", body, True, status="in_progress",
               holder="gone:1", heartbeat_until=time.time() - 1, created_at=time.time())  # fmt: skip
    events = [{"type": "response.created", "response": {"id": dead.id}}, *[
        {"type": "response.output_item.done", "item": item} for item in (call, output)]]  # fmt: skip

    async def crashed() -> None:
        opened = await database.store()
        await opened.run(store.create(dead), write=True)
        data = [json.dumps({**event, "sequence_number": n}) for n, event in enumerate(events)]
        await opened.run(store.append(dead, 0, data, None), write=True)
        await recovery.beat()

    app.portal.call(crashed)
    return dead


def test_a_dead_processs_run_resumes_from_its_stored_steps_without_running_them_again(client, slow, model_log):
    """A run whose process died after its tool's output was stored: the next heartbeat claims it, and the model
    goes on from the stored output; the tool does not run again."""
    dead = crashed_after_its_tool(client, f"resumed-{uuid.uuid4()}")
    done = ended(client, dead.id)
    assert done["status"] == "completed", done
    assert "The tool returned: stored before the crash" in reply_text(done["output"])
    assert slow.calls == 0 and len(model_log) == 1, "the model went on from the stored output"
    replay = sse_events(client.get(f"/responses/{dead.id}", params={"stream": "true"}).text)
    assert [e["sequence_number"] for e in replay] == list(range(len(replay))), "one stream, numbered on"
    assert leases.holder()  # the claim names this process


def test_openais_own_client_runs_reads_follows_and_cancels_a_background_response(client, slow):
    """The client API is the Responses API's background mode, as the `openai` package speaks it."""
    import openai

    api = openai.OpenAI(base_url=f"{client.base_url}", api_key="unused", http_client=client)
    created = api.responses.create(model="app", input="Please hold", background=True)
    assert created.status == "in_progress" and created.id.startswith("resp_")
    with api.responses.retrieve(created.id, stream=True, starting_after=-1) as events:
        first = next(iter(events))
    assert first.type == "response.created" and first.sequence_number == 0
    cancelled = api.responses.cancel(created.id)
    assert cancelled.status == "cancelled"
    assert api.responses.retrieve(created.id).status == "cancelled"
    slow.release.set()
    done = api.responses.create(model="app", input="Hello", background=True)
    until(lambda: api.responses.retrieve(done.id).status == "completed", "the run to complete")
    assert "You said: Hello" in api.responses.retrieve(done.id).output_text


def test_a_background_answer_the_model_cut_short_ends_incomplete_with_its_text(client, api_mode):
    """A run whose answer the model cut at its output-token limit (Responses mode; model_ends.py) is `incomplete`,
    as the API's own are, its text kept; its stream ends with `response.incomplete`, replayed the same."""
    import openai

    api = openai.OpenAI(base_url=f"{client.base_url}", api_key="unused", http_client=client)
    run = api.responses.create(model="app", input="Hello, please cut it short", background=True)
    done = until(lambda: (r := api.responses.retrieve(run.id)).status not in ("queued", "in_progress") and r, "the end")
    assert done.output_text and "Offline model" in done.output_text
    last = sse_events(client.get(f"/responses/{run.id}?stream=true&starting_after=-1").text)[-1]
    if api_mode == "responses":
        assert done.status == "incomplete" and done.incomplete_details.reason == "max_output_tokens", done
        assert done.output[-1].status == "incomplete" and last["type"] == "response.incomplete", last
    else:  # openai-agents passes a chat completion's finish_reason "length" on as a finished answer
        assert done.status == "completed" and last["type"] == "response.completed"
