# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Background runs, resumable streams and idempotent requests (agent_server/runs/), through the real app, the
real SDK and the offline model; on SQLite, and on PostgreSQL too when MEMORY_TEST_POSTGRES_URL names one."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import sys
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
from agent_server.runs import execute, recovery, store
from agent_server.runs.store import Run

from .test_memory import ADA, BOB, backend  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)
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


@pytest.mark.usefixtures("traced")
def test_background_answers_at_once_and_the_run_gives_the_synchronous_output(client, slow, model_log):
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
    assert done["metadata"]["trace_id"].startswith("tr-")
    synchronous = client.post("/invocations", json={"input": [{"role": "user", "content": "Please hold"}]}).json()
    assert [i["type"] for i in synchronous["output"]] == [i["type"] for i in done["output"]]
    assert reply_text(synchronous["output"]) == reply_text(done["output"])
    assert slow.calls == 2 and len(model_log) == 4, "each run called the model twice and the tool once"
    kept = client.get(f"/conversations/{run['custom_outputs']['session_id']}").json()["items"]
    assert len(kept) == 4, "the background turn is stored as a synchronous one is"


def test_a_runs_request_is_parsed_once_before_mlflow_and_its_events_encoded_once(client, monkeypatch):
    """The runs' middleware parses the body; its attempt brings it parsed to the request guard (RunAttempt.body).
    An event of the handler's, encoded by MLflow's server, is kept with its number, not encoded again."""
    marker, loads, dumps, parses, items = f"parse-once-{uuid.uuid4()}", json.loads, json.dumps, [], []

    def counting_loads(text: Any, *args: Any, **kwargs: Any) -> Any:
        shown = text.decode(errors="replace") if isinstance(text, (bytes, bytearray)) else str(text)
        if marker in shown and '"input"' in shown and '"model"' not in shown and execute.PATH_KEY not in shown:
            parses.append(shown)  # the request's; not the model's (the offline model's), nor the kept run's
        return loads(text, *args, **kwargs)

    def counting_dumps(value: Any, *args: Any, **kwargs: Any) -> str:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if isinstance(value, dict) and value.get("type") == "response.output_item.done" and "offline" not in caller:
            items.append(value)  # the app's stream; not the offline model's own
        return dumps(value, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counting_loads)
    monkeypatch.setattr(json, "dumps", counting_dumps)
    run = client.post("/invocations", json={"input": [{"role": "user", "content": marker}], "background": True})
    assert ended(client, run.json()["id"])["status"] == "completed"
    assert len(parses) == 2, "the runs' middleware, then MLflow's server: the request guard takes it parsed"
    assert len(items) == 1, "the answer's one item: encoded by MLflow's server alone"


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


def test_a_background_stream_is_numbered_and_replays_byte_for_byte_from_any_cursor(client):
    with client.stream("POST", "/invocations", json={**ASK, "background": True, "stream": True}) as response:
        live = response.read().decode()
    events = sse_events(live)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    assert live.endswith("data: [DONE]\n\n")
    run_id = events[0]["response"]["id"]
    assert events[-1]["response"]["output"] == [e["item"] for e in events if e["type"] == "response.output_item.done"]
    blocks = live.split("\n\n")
    for cursor in (-1, 0, 2, len(events) - 1):
        replay = client.get(f"/responses/{run_id}", params={"stream": "true", "starting_after": cursor}).text
        assert replay == "\n\n".join(blocks[cursor + 1 :]), f"after {cursor}: the same bytes"


def test_a_client_that_goes_away_leaves_the_run_running(client, slow):
    body = {"input": [{"role": "user", "content": "Please hold"}], "background": True, "stream": True}
    with client.stream("POST", "/responses", json=body) as response:
        first = next(response.iter_lines())
    run_id = json.loads(first.removeprefix("data: "))["response"]["id"]
    slow.release.set()
    assert ended(client, run_id)["status"] == "completed"


def test_every_route_of_a_run_is_its_owners_alone(client):
    run_id = client.post("/responses", json={**ASK, "background": True}).json()["id"]
    ended(client, run_id)
    bob = {"x-test-user": BOB}
    for method, path, params in [
        ("GET", f"/responses/{run_id}", {}),
        ("GET", f"/responses/{run_id}", {"stream": "true", "starting_after": "0"}),
        ("POST", f"/responses/{run_id}/cancel", {}),
    ]:
        body = {} if method == "POST" else None
        answer = client.request(method, path, params=params, headers=bob, json=body)
        assert answer.status_code == 404 and "You have no response" in answer.json()["error"]["message"]
        unknown = client.request(method, path.replace(run_id, "resp_unknown"), params=params, json=body)
        assert unknown.status_code == 404


@pytest.mark.parametrize(
    "params",
    [{"stream": "true", "starting_after": "x"}, {"stream": "true", "starting_after": "-2"}, {"starting_after": "3"},
     {"stream": "maybe"}],
)  # fmt: skip
def test_a_bad_cursor_is_a_400_that_says_why(client, params):
    run_id = client.post("/responses", json={**ASK, "background": True}).json()["id"]
    answer = client.get(f"/responses/{run_id}", params=params)
    assert answer.status_code == 400, answer.text
    assert "starting_after" in answer.json()["error"]["message"] or "stream" in answer.json()["error"]["message"]


def test_a_cursor_is_plain_digits_up_to_what_the_database_holds(client):
    """Past 2**31 - 1 (the events' INTEGER column on PostgreSQL; past 2**63 SQLite's) was a 200 and a broken stream."""
    run_id = client.post("/responses", json={**ASK, "background": True}).json()["id"]
    ended(client, run_id)
    for cursor in ("99999999999999999999", str(2**63), str(2**31), "1.5", "1_0", " 1", "\u0661"):
        answer = client.get(f"/responses/{run_id}", params={"stream": "true", "starting_after": cursor})
        assert answer.status_code == 400 and "starting_after" in answer.json()["error"]["message"], cursor
    last = client.get(f"/responses/{run_id}", params={"stream": "true", "starting_after": str(2**31 - 1)})
    assert last.status_code == 200 and last.text == "data: [DONE]\n\n", "after every event"


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


def test_cancel_stops_the_run_and_keeps_its_partial_turn(client, slow, model_log):
    run = client.post("/responses", json={"input": [{"role": "user", "content": "Please hold"}], "background": True})
    run_id, conversation = run.json()["id"], run.json()["custom_outputs"]["session_id"]
    until(lambda: slow.calls, "the tool to start")
    cancelled = client.post(f"/responses/{run_id}/cancel", json={})  # as OpenAI's client sends it, with JSON
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert client.get(f"/responses/{run_id}").json()["status"] == "cancelled"
    events = sse_events(client.get(f"/responses/{run_id}", params={"stream": "true"}).text)
    assert events[-1]["type"] == "response.cancelled"
    listed = client.get(f"/responses/{run_id}/input_items", params={"order": "asc"}).json()  # the page's, on reload
    assert listed == {"object": "list", "data": [{"type": "message", "role": "user", "content": "Please hold"}],
                      "has_more": False}  # fmt: skip
    assert client.get(f"/responses/{run_id}/input_items", headers={"x-test-user": BOB}).status_code == 404
    kept = client.get(f"/conversations/{conversation}").json()["items"]
    assert [i.get("type", "message") for i in kept] == ["message", "function_call", "function_call_output"]
    assert kept[0]["content"] == "Please hold", "the prompt is kept"
    assert "interrupted" in kept[-1]["output"], "the call still running is answered as interrupted"
    named = {"input": [{"role": "user", "content": "Go on"}], "context": {"conversation_id": conversation}}
    assert "I saw 2 user" in reply_text(client.post("/responses", json=named).json()["output"])
    assert slow.calls == 1


@contextlib.contextmanager
def writes_held(client: TestClient, database_url: str) -> Iterator[None]:
    """The app's database writes wait while this holds the lock they need, as behind another writer's long
    transaction (SQLite: another connection's write lock; PostgreSQL: a lock on the runs' events table)."""
    if not database_url.startswith("postgres"):
        holder = sqlite3.connect(database_url, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    import asyncpg

    holder = client.portal.call(asyncpg.connect, database_url)
    try:
        client.portal.call(holder.execute, "BEGIN; LOCK TABLE agent_run_events IN SHARE MODE")
        yield
        client.portal.call(holder.execute, "ROLLBACK")
    finally:
        client.portal.call(holder.close)


async def read_run(transaction: Any) -> Run | None:
    return await (await database.store()).run(transaction)


def test_a_cancel_while_the_runs_events_are_written_keeps_the_stream_whole(client, slow, backend):  # noqa: F811
    """The cancel stops the run while it writes a finished item: that write still ends, and counts, so the events
    after it (the last, response.cancelled) are stored too. They were refused as repeats of the item's numbers."""
    run = client.post("/responses", json={"input": [{"role": "user", "content": "Please hold"}], "background": True})
    run_id = run.json()["id"]
    live = execute.RUNNING[run_id]
    answers: list[Any] = []

    def items_done() -> int:
        return sum('"type": "response.output_item.done"' in data for data in live.events)

    def call_stored() -> bool:  # the stream records the started call (a write of its own) as the tool starts
        stored = client.portal.call(lambda: read_run(store.get(ADA, run_id)))
        return bool(stored and stored.started_calls)

    # Taken before that write, the lock held the stream there (SQLite waits 30 s), short of the tool's output.
    until(lambda: slow.calls and call_stored() and live.stored == len(live.events), "the tool running, its call stored")
    before = items_done()
    with writes_held(client, backend):
        slow.release.set()  # the tool's output is an item, written at once: the write waits for the lock
        until(lambda: items_done() > before, "the tool's output")
        time.sleep(0.1)  # the write under way
        cancel = threading.Thread(target=lambda: answers.append(client.post(f"/responses/{run_id}/cancel", json={})))
        cancel.start()
        until(lambda: live.cancel_requested, "the cancel")
    cancel.join(30)
    assert answers[0].status_code == 200 and answers[0].json()["status"] == "cancelled"
    events = sse_events(client.get(f"/responses/{run_id}", params={"stream": "true"}).text)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "response.cancelled", [e["type"] for e in events]
    assert events[-2]["type"] == "response.output_item.done", "the tool's output, written as the cancel came"


def test_a_run_past_its_event_bytes_fails_with_a_413_and_its_stream_ends_saying_so(client, app_settings):
    app_settings.setenv("RUNS_MAX_EVENT_BYTES", "900")
    run_id = client.post("/responses", json={**ASK, "background": True}).json()["id"]
    answer = until(lambda: (r := client.get(f"/responses/{run_id}")).status_code != 200 and r, "the run to fail")
    assert answer.status_code == 413 and answer.json()["status"] == "failed"
    assert "RUNS_MAX_EVENT_BYTES" in answer.json()["error"]["message"]
    replay = client.get(f"/responses/{run_id}", params={"stream": "true"}).text
    assert replay.endswith("data: [DONE]\n\n")
    last = sse_events(replay)[-1]
    assert last["type"] == "response.failed", "the last event is written past the limit too"
    assert last["response"]["status"] == "failed" and "RUNS_MAX_EVENT_BYTES" in last["response"]["error"]["message"]


def test_a_last_event_that_would_pass_the_event_bytes_is_written_without_its_output(client, app_settings):
    """A run whose events fit in RUNS_MAX_EVENT_BYTES, but not its last event with its output (which repeats the
    output's items), completes: its stream ends with response.completed, without the output; GET has it."""
    body = {**ASK, "background": True, "stream": True}
    first = sse_events(client.post("/responses", json=body).text)
    last = first[-1]
    bare = json.dumps({**last, "response": {**last["response"], "output": []}})
    before_last = sum(len(json.dumps(event)) for event in first[:-1])
    room = len(json.dumps(last)) - len(bare)  # what the output adds to the last event
    assert room > 100
    app_settings.setenv("RUNS_MAX_EVENT_BYTES", str(before_last + len(bare) + room // 2))
    events = sse_events(client.post("/responses", json=body).text)
    assert [event["type"] for event in events] == [event["type"] for event in first]
    assert events[-1]["type"] == "response.completed" and events[-1]["response"]["output"] == []
    done = client.get(f"/responses/{events[0]['response']['id']}").json()
    assert done["status"] == "completed" and reply_text(done["output"]) == reply_text(last["response"]["output"])


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
        await opened.run(store.append(dead.id, 0, data, None), write=True)
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
    assert leases.HOLDER  # the claim names this process


@pytest.mark.usefixtures("traced")
def test_a_run_is_one_trace_however_often_its_stream_is_read(client, slow):
    import mlflow

    run_id = client.post("/responses", json={"input": [{"role": "user", "content": "Please hold"}], "background": True})
    run_id = run_id.json()["id"]
    for _ in range(3):  # three reconnections while it runs, each dropped after an event
        with client.stream("GET", f"/responses/{run_id}", params={"stream": "true", "starting_after": "-1"}) as read:
            next(read.iter_lines())
    slow.release.set()
    trace_id = ended(client, run_id)["metadata"]["trace_id"]
    for cursor in ("-1", "2"):
        client.get(f"/responses/{run_id}", params={"stream": "true", "starting_after": cursor})
    mlflow.flush_trace_async_logging()
    trace = mlflow.get_trace(trace_id)
    assert trace.data.spans[0].name == "handle_stream" and "hold" in [span.name for span in trace.data.spans]
    traced = mlflow.search_traces(
        filter_string=f"trace.timestamp_ms >= {trace.info.request_time - 1}", return_type="list"
    )
    runs = [t for t in traced if t.data.spans and t.data.spans[0].name.startswith("handle_")]
    assert [t.info.trace_id for t in runs] == [trace_id], "one trace for the run, none for reading it"


def test_a_failed_run_answers_with_the_synchronous_status_in_the_one_error_shape(client, monkeypatch):
    from agents import ModelSettings

    from agent_server import agent

    named = {**ASK, "context": {"conversation_id": f"failed-{uuid.uuid4()}"}}
    assert client.post("/invocations", json=named).status_code == 200, "a turn before the run"
    kept = client.get(f"/conversations/{named['context']['conversation_id']}").json()["items"]
    looping = agent.create_agent().clone(model_settings=ModelSettings(tool_choice="required"), reset_tool_choice=False)
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: looping)  # calls tools until max_turns
    synchronous = client.post("/invocations", json=ASK)
    run_id = client.post("/invocations", json={**named, "background": True}).json()["id"]
    failed = until(lambda: (r := client.get(f"/responses/{run_id}")).status_code != 200 and r, "the run to fail")
    assert failed.status_code == synchronous.status_code == 502
    assert failed.json()["error"] == synchronous.json()["error"], "the same error, in the same shape"
    assert failed.json()["status"] == "failed" and failed.json()["id"] == run_id
    events = sse_events(client.get(f"/responses/{run_id}", params={"stream": "true"}).text)
    assert events[-2]["type"] == "error" and events[-2]["status"] == 502
    in_the_apis = {**synchronous.json()["error"], "code": "server_error"}  # with the Responses API's code for it
    assert events[-1]["type"] == "response.failed" and events[-1]["response"]["error"] == in_the_apis
    after = client.get(f"/conversations/{named['context']['conversation_id']}").json()["items"]
    assert after == kept, "a failed run stores nothing: its conversation keeps the turns before it, as they were"


def test_runs_are_kept_for_runs_max_age_hours(client, app_settings):
    run_id = client.post("/responses", json={**ASK, "background": True}).json()["id"]
    ended(client, run_id)
    client.portal.call(recovery.prune)
    assert client.get(f"/responses/{run_id}").status_code == 200, "younger than RUNS_MAX_AGE_HOURS (24)"
    app_settings.setenv("RUNS_MAX_AGE_HOURS", "0.0001")  # 0.36 s
    time.sleep(0.5)
    client.portal.call(recovery.prune)  # as the heartbeat does hourly, and every start
    assert client.get(f"/responses/{run_id}").status_code == 404
    assert client.get(f"/responses/{run_id}", params={"stream": "true"}).status_code == 404


def test_a_run_past_its_age_is_gone_at_once_whatever_the_prune_schedule(client, app_settings):
    """RUNS_MAX_AGE_HOURS is enforced when a run is read, not only when the hourly prune deletes it: every route
    answers 404, and the run's idempotency key is free again (a new run, not the old one's answer)."""
    run_id = client.post("/responses", json={**ASK, "background": True}).json()["id"]
    ended(client, run_id)
    key = {"Idempotency-Key": f"aged-{uuid.uuid4()}"}
    keyed = client.post("/invocations", json=ASK, headers=key).json()["id"]
    assert client.post("/invocations", json=ASK, headers=key).json()["id"] == keyed
    app_settings.setenv("RUNS_MAX_AGE_HOURS", "0.0001")  # 0.36 s; no prune runs in this test
    time.sleep(0.5)
    for method, params in [("GET", {}), ("GET", {"stream": "true"}), ("GET", {"stream": "true", "starting_after": 0}),
                           ("POST", {})]:  # fmt: skip
        path = f"/responses/{run_id}" + ("/cancel" if method == "POST" else "")
        answer = client.request(method, path, params=params, json={} if method == "POST" else None)
        assert answer.status_code == 404 and "You have no response" in answer.json()["error"]["message"], path
    again = client.post("/invocations", json=ASK, headers=key)
    assert again.status_code == 200 and again.json()["id"] != keyed, "the aged run's key is free"


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
