# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Conversation memory when turns fail or collide: a busy conversation with no queue, a turn's start run again,
a turn the model failed, a stream the client stopped, a turn cancelled while it takes its lease, a conversation
deleted while its turn runs, and a store that cannot take a write (health and the 503s' log). On SQLite, and on
PostgreSQL too when MEMORY_TEST_POSTGRES_URL names one (test_memory.py's `backend`)."""

# ruff: noqa: F811  (test_memory.py's fixtures, imported below, are the tests' arguments)
from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
import uuid

import loopback
import pytest
from agents import Agent, ModelSettings, function_tool
from fastapi.testclient import TestClient
from support import Conversation, ServerThread, reply_text

from agent_server import agent, llm, memory
from agent_server.memory.store import Busy, Store, Unavailable

from .test_memory import ADA, backend, client, counts, stored  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)


def test_with_no_queue_a_second_turn_while_one_runs_is_a_409_and_nothing_interleaves(client, backend, app_settings):
    """MEMORY_TURN_QUEUE_SECONDS=0: a turn of a busy conversation does not wait for it (test_ordered_turns.py)."""
    app_settings.setenv("MEMORY_TURN_QUEUE_SECONDS", "0")
    chat = Conversation(client, stream=False)
    chat.send("One")

    async def hold_the_lease() -> None:
        store = Store(memory.memory_settings().url)
        await store.start_turn(ADA, chat.id, "another-turn", hold_seconds=60)
        await store.close()

    asyncio.run(hold_the_lease())
    body = {"input": [{"role": "user", "content": "Two"}], "context": {"conversation_id": chat.id}}
    response = client.post("/invocations", json=body)
    assert response.status_code == 409 and "answering another request" in response.json()["error"]["message"]
    assert len(stored(client, chat.id).json()["items"]) == 2


def test_a_start_run_again_with_its_own_lease_takes_it_again_and_any_other_lease_is_refused(backend):
    """A turn's start may run again after a dropped connection (store.py: each of its statements commits by itself
    on PostgreSQL, so the first try may have taken the lease): the same lease takes it again, and the conversation
    stays as it was; any other lease is still refused."""

    async def run() -> None:
        store = Store(memory.memory_settings().url)
        await store.open()
        try:
            conversation_id = f"conv_{uuid.uuid4().hex}"
            assert await store.start_turn(ADA, conversation_id, "first-try", hold_seconds=60) == []
            assert await store.start_turn(ADA, conversation_id, "first-try", hold_seconds=60) == []
            with pytest.raises(Busy):
                await store.start_turn(ADA, conversation_id, "another-turn", hold_seconds=60)
            await store.release(ADA, conversation_id, "first-try")
        finally:
            await store.close()

    asyncio.run(run())


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_a_turn_the_model_failed_is_not_stored_and_the_conversation_goes_on(client, stream, monkeypatch):
    chat = Conversation(client, stream)
    chat.send("One")
    looping = agent.create_agent().clone(model_settings=ModelSettings(tool_choice="required"), reset_tool_choice=False)
    with monkeypatch.context() as patch:
        patch.setattr("agent_server.agent.create_agent", lambda: looping)  # calls tools until max_turns: a 502
        body = {
            "input": [{"role": "user", "content": "Two"}],
            "context": {"conversation_id": chat.id},
            "stream": stream,
        }
        response = client.post("/invocations", json=body)
        assert response.status_code == 200 and '"error"' in response.text if stream else response.status_code == 502
    assert len(stored(client, chat.id).json()["items"]) == 2, "nothing of the failed turn, not even its message"
    assert counts(2, 1) in reply_text(chat.send("Two, again"))


def test_a_stream_the_client_stopped_is_not_stored_and_frees_the_conversation(backend, api_mode, monkeypatch):
    from agent_server.app import app

    running, cancelled = threading.Event(), threading.Event()

    async def slow_tool() -> str:
        running.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    slow = Agent(name="slow", instructions="x", model=llm.model(), tools=[function_tool(slow_tool, name_override="f")])
    with ServerThread(app) as url, loopback.Client(base_url=url, headers={"x-test-user": ADA}, timeout=60) as client:
        chat = Conversation(client, stream=True)
        chat.send("One")
        body = {"input": [{"role": "user", "content": "Use f"}], "context": {"conversation_id": chat.id}}
        with monkeypatch.context() as patch:
            patch.setattr("agent_server.agent.create_agent", lambda: slow)
            with client.stream("POST", "/invocations", json={**body, "stream": True}):
                assert running.wait(30), "the tool never started"  # the client hangs up while it runs
        assert cancelled.wait(30), "the hang-up cancelled the turn, and its tool"
        assert counts(2, 1) in reply_text(chat.send("Two")), "the next turn waits for the lease, and sees no more"
        assert len(stored(client, chat.id).json()["items"]) == 4


def test_a_turn_cancelled_while_it_takes_its_lease_gives_the_lease_back(backend):
    """A request stopped while its store call runs (a client that hung up): the transaction runs to its end in
    the store's thread, and the lease it took is given back, so the next turn is not refused as busy."""

    async def cancel_then_start_again() -> list[dict]:
        store = Store(memory.memory_settings().url)
        await store.open()
        try:
            conversation_id = str(uuid.uuid4())
            first = asyncio.ensure_future(store.start_turn(ADA, conversation_id, "first", 300))
            await asyncio.sleep(0)  # the call is under way
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            return [stored.item for stored in await store.start_turn(ADA, conversation_id, "second", 300)]
        finally:
            await store.close()

    assert asyncio.run(cancel_then_start_again()) == []


def test_a_turn_whose_conversation_was_deleted_meanwhile_says_so(client, monkeypatch):
    chat = Conversation(client, stream=False)
    chat.send("Hello")

    @function_tool
    async def forget_everything() -> str:
        """Deletes this conversation while the turn runs."""
        await (await memory.store()).delete(ADA, chat.id)
        return "forgotten"

    deleting = agent.create_agent().clone(tools=[forget_everything])
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: deleting)
    body = {"input": [{"role": "user", "content": "Use forget_everything"}], "context": {"conversation_id": chat.id}}
    response = client.post("/invocations", json=body)
    assert response.status_code == 409
    assert "was deleted while this turn ran" in response.json()["error"]["message"]


def test_health_says_503_while_the_store_cannot_take_a_write_and_the_503s_log_one_line(
    api_mode, model_log, app_settings, tmp_path
):
    """A load balancer stops sending turns to an app that cannot store them; each such turn's 503 is one line."""
    database = tmp_path / "conversations.db"
    app_settings.setenv("MEMORY_BACKEND", "sqlite")
    app_settings.setenv("MEMORY_DATABASE_URL", str(database))
    from agent_server.app import app
    from agent_server.memory import database as open_store

    # The probe's bounds, shortened: the test waits for one probe to time out and the next to be due.
    app_settings.monkeypatch.setattr(open_store, "PROBE_SECONDS", 0.3)
    app_settings.monkeypatch.setattr(open_store, "PROBE_EVERY_SECONDS", 0.3)
    with TestClient(app) as local:
        assert local.get("/health").json() == {"status": "healthy"}
        chat = Conversation(local, stream=False)
        chat.send("Hello")
        blocker = sqlite3.connect(database, timeout=0)
        blocker.execute("BEGIN EXCLUSIVE")  # another process holds the only write lock SQLite has
        try:
            open_store._probed = (-10.0, None)  # probe now, not on the cached answer of a moment ago
            health = local.get("/health")
            assert health.status_code == 503, health.text
            assert "cannot take a write" in health.json()["error"]["message"]
        finally:
            blocker.rollback()
            blocker.close()
        deadline = time.monotonic() + 60  # the probe that waited on the lock ends once it is free
        while local.get("/health").status_code != 200:
            assert time.monotonic() < deadline, "healthy again once the store takes writes"
            time.sleep(0.1)

        async def down(*args: object) -> None:
            raise Unavailable("OperationalError: disk I/O error")

        turn_log, logged = logging.getLogger("agent_server.turn"), Records()
        turn_log.addHandler(logged)
        try:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(Store, "finish_turn", down)  # the database fails as the turn is stored
                body = {"input": [{"role": "user", "content": "Two"}], "context": {"conversation_id": chat.id}}
                assert local.post("/invocations", json=body).status_code == 503
        finally:
            turn_log.removeHandler(logged)
    assert logged.records and all(r.exc_info is None for r in logged.records), "no traceback for an expected 503"
    assert "disk I/O error" in logged.records[-1].getMessage() and "(503)" in logged.records[-1].getMessage()


class Records(logging.Handler):
    """The records a logger emits, as they reach its handlers (after its filters)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
