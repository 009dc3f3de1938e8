# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""How a background run ends and how long it is kept (agent_server/runs/): every route its owner's alone, cancel
(its partial turn kept, and while its events are written), a failed run answered as the synchronous turn, and
RUNS_MAX_AGE_HOURS. On SQLite, and on PostgreSQL too when MEMORY_TEST_POSTGRES_URL names one (test_memory.py's
`backend`)."""

# ruff: noqa: F811  (the fixtures of test_memory.py and test_runs.py, imported below, are the tests' arguments)
from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from fastapi.testclient import TestClient
from support import reply_text, sse_events

from agent_server.memory import database
from agent_server.runs import execute, recovery, store
from agent_server.runs.store import Run

from .test_memory import ADA, BOB, backend  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)
from .test_runs import ASK, client, ended, slow, until  # noqa: F401


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
    [sent] = listed["data"]
    assert (sent["role"], sent["content"]) == ("user", [{"type": "input_text", "text": "Please hold"}])
    assert listed["first_id"] == listed["last_id"] == sent["id"] and listed["has_more"] is False
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
