# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Conversation memory (agent_server/memory/) through the real app, SDK and offline model.

Every test runs on SQLite, and on PostgreSQL too when MEMORY_TEST_POSTGRES_URL names a database
(the template's own tests start a real server and set it), in both API modes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa
from agents import Agent, ModelSettings, function_tool
from conftest import AppSettings
from fastapi.testclient import TestClient
from sqlalchemy.ext.asyncio import create_async_engine
from support import Conversation, ServerThread, post_turn, replayed, reply_text

from agent_server import agent, llm, memory
from agent_server.memory.schema import ITEM_FORMAT, SchemaTooNew
from agent_server.memory.store import Busy, Store, Unavailable

BACKENDS = ["sqlite"] + (["postgres"] if os.environ.get("MEMORY_TEST_POSTGRES_URL") else [])
ADA, BOB = "ada@example.com", "bob@example.com"


def counts(user: int, assistant: int, tool: int = 0) -> str:
    return f"I saw {user} user, {assistant} assistant and {tool} tool turns."


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, app_settings: AppSettings, tmp_path) -> str:
    url = str(tmp_path / "conversations.db") if request.param == "sqlite" else os.environ["MEMORY_TEST_POSTGRES_URL"]
    app_settings.setenv("MEMORY_BACKEND", request.param)
    app_settings.setenv("MEMORY_DATABASE_URL", url)
    app_settings.setenv("MEMORY_USER_HEADER", "x-test-user")
    return url


@pytest.fixture
def client(backend: str, api_mode: str, model_log) -> Iterator[TestClient]:
    from agent_server.app import app

    with TestClient(app, headers={"x-test-user": ADA}) as test_client:
        yield test_client


def stored(client: httpx.Client, conversation_id: str, user: str = ADA) -> httpx.Response:
    return client.get(f"/conversations/{conversation_id}", headers={"x-test-user": user})


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("full", [False, True], ids=["new-turn-only", "full-history"])
def test_each_turn_reaches_the_model_once_whichever_way_the_client_sends_it(client, stream, full, model_log):
    chat = Conversation(client, stream, full=full)
    chat.send("My name is Ada")
    assert counts(2, 1) in reply_text(chat.send("What is my name?"))
    items = chat.send("What time is it?")  # a tool turn: call, output, answer
    assert [item["type"] for item in items] == ["function_call", "function_call_output", "message"]
    assert counts(4, 3, 1) in reply_text(chat.send("Thanks"))
    kept = stored(client, chat.id).json()["items"]
    assert [item.get("role") or item["type"] for item in kept] == [
        *["user", "assistant"] * 2, "user", "function_call", "function_call_output", "assistant", "user", "assistant",
    ]  # fmt: skip


@pytest.mark.usefixtures("traced")
@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_a_client_that_keeps_its_own_history_and_names_no_conversation_stores_nothing(client, stream):
    """A stateless API client sends its whole history every turn, naming no conversation: stored, each turn would
    be a new conversation holding it all again (n²/2 items for n turns). It is served as with memory off."""
    history: list = []
    alone = {"x-test-user": f"carol-{uuid.uuid4()}@example.com"}  # no other test's conversations (PostgreSQL)
    for turn, text in enumerate(["Hello", "What time is it?", "Thanks"], start=1):
        history.append({"role": "user", "content": text})
        items, outputs = post_turn(client, {"input": history}, stream, alone)
        assert f"I saw {turn} user" in reply_text(items), "the model saw the client's whole history"
        history.extend(replayed(items, "chat_ui"))
        if turn == 1:
            first = outputs["session_id"]  # a first turn alone starts a conversation, as before
        else:
            assert "session_id" not in (outputs or {}) and outputs["trace_id"], outputs
    listed = client.get("/conversations", headers=alone).json()["conversations"]
    assert [conversation["id"] for conversation in listed] == [first]
    assert len(stored(client, first, alone["x-test-user"]).json()["items"]) == 2, "the later turns stored nothing"


def test_a_chat_completions_client_extends_its_conversation(client, caplog):
    chat = Conversation(client, stream=False, full=True)
    chat.send("What time is it?", replay="chat_completions")
    with caplog.at_level("INFO", logger="agent_server.memory"):
        assert counts(2, 1, 1) in reply_text(chat.send("And now?", replay="chat_completions"))
    assert f"conversation {chat.id}, extends (1 items added)" in caplog.text
    assert len(stored(client, chat.id).json()["items"]) == 6


def test_an_edited_last_turn_replaces_the_stored_one(client):
    chat = Conversation(client, stream=False, full=True)
    chat.send("One")
    chat.send("Two")
    chat.history = chat.history[:2]  # the user edits "Two" into "Deux"
    assert counts(2, 1) in reply_text(chat.send("Deux"))
    kept = [item["content"] for item in stored(client, chat.id).json()["items"] if item["role"] == "user"]
    assert kept == ["One", "Deux"]


def test_a_regenerated_answer_replaces_the_stored_one(client):
    chat = Conversation(client, stream=False, full=True)
    chat.send("One")
    chat.send("Two")
    body = {"input": chat.history[:3], "context": {"conversation_id": chat.id}}  # "Two" again, without its answer
    items, _ = post_turn(client, body, stream=False)
    assert counts(2, 1) in reply_text(items)
    assert len(stored(client, chat.id).json()["items"]) == 4


def test_a_conversation_written_in_one_api_mode_continues_in_the_other(client, api_mode, app_settings):
    chat = Conversation(client, stream=False)
    chat.send("What time is it?")
    other = "responses" if api_mode == "chat_completions" else "chat_completions"
    app_settings.setenv("LLM_API", other)
    assert counts(2, 1, 1) in reply_text(chat.send("And now?"))
    app_settings.setenv("LLM_API", api_mode)
    assert counts(3, 2, 1) in reply_text(chat.send("Once more"))


def test_a_new_conversation_gets_an_id_and_the_answer_names_it(client):
    items, outputs = post_turn(client, {"input": [{"role": "user", "content": "Hi"}]}, stream=False)
    assert outputs and len(outputs["session_id"]) >= 32
    assert stored(client, outputs["session_id"]).status_code == 200
    chosen = f"chat-{uuid.uuid4()}"  # a client's own id, as the Databricks chat UI makes one per chat
    named = {"input": [{"role": "user", "content": "Hi"}], "custom_inputs": {"session_id": chosen}}
    assert post_turn(client, named, stream=True)[1]["session_id"] == chosen
    assert any(c["id"] == chosen for c in client.get("/conversations").json()["conversations"])


def test_another_identity_with_the_same_id_reads_and_changes_nothing(client):
    ada = Conversation(client, stream=False, user=ADA)
    ada.send("My secret is 42")
    assert stored(client, ada.id, user=BOB).status_code == 404
    assert client.delete(f"/conversations/{ada.id}", headers={"x-test-user": BOB}).status_code == 404
    assert ada.id not in json.dumps(client.get("/conversations", headers={"x-test-user": BOB}).json())
    bob = Conversation(client, stream=False, user=BOB)
    bob.id = ada.id
    assert counts(1, 0) in reply_text(bob.send("What is the secret?")), "Bob's turn must not see Ada's"
    assert len(stored(client, ada.id).json()["items"]) == 2, "Ada's conversation is unchanged"
    assert stored(client, ada.id, user=BOB).json()["items"][0]["content"] == "What is the secret?"


def test_a_request_without_an_identity_is_refused(client):
    response = client.post("/invocations", json={"input": "Hi"}, headers={"x-test-user": ""})
    assert response.status_code == 401 and "x-test-user" in response.json()["error"]["message"]


def test_the_owner_deletes_a_conversation(client):
    chat = Conversation(client, stream=False)
    chat.send("Hi")
    assert client.delete(f"/conversations/{chat.id}").status_code == 204
    assert stored(client, chat.id).status_code == 404
    assert counts(1, 0) in reply_text(chat.send("Hi again")), "the id starts afresh"


def test_with_no_queue_a_second_turn_while_one_runs_is_a_409_and_nothing_interleaves(client, backend, app_settings):
    """MEMORY_TURN_QUEUE_SECONDS=0: a turn of a busy conversation does not wait for it (test_ordered_turns.py)."""
    app_settings.setenv("MEMORY_TURN_QUEUE_SECONDS", "0")
    chat = Conversation(client, stream=False)
    chat.send("One")

    async def hold_the_lease() -> None:
        store = Store(memory.settings().url)
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
        store = Store(memory.settings().url)
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

    running = threading.Event()

    async def slow_tool() -> str:
        running.set()
        await asyncio.sleep(1)
        return "late"

    slow = Agent(name="slow", instructions="x", model=llm.model(), tools=[function_tool(slow_tool, name_override="f")])
    with ServerThread(app) as url, httpx.Client(base_url=url, headers={"x-test-user": ADA}, timeout=60) as client:
        chat = Conversation(client, stream=True)
        chat.send("One")
        body = {"input": [{"role": "user", "content": "Use f"}], "context": {"conversation_id": chat.id}}
        with monkeypatch.context() as patch:
            patch.setattr("agent_server.agent.create_agent", lambda: slow)
            with client.stream("POST", "/invocations", json={**body, "stream": True}):
                assert running.wait(30), "the tool never started"  # the client hangs up while it runs
        time.sleep(1.5)  # past the tool: had the turn gone on after the hang-up, it would be stored by now
        assert len(stored(client, chat.id).json()["items"]) == 2
        assert counts(2, 1) in reply_text(chat.send("Two"))


def test_retention_keeps_the_newest_whole_turns(client, app_settings):
    app_settings.setenv("MEMORY_MAX_ITEMS", "5")
    chat = Conversation(client, stream=False)
    for text in ("One", "Two", "Three"):
        chat.send(text)
    kept = stored(client, chat.id).json()["items"]
    assert [item["content"] for item in kept if item["role"] == "user"] == ["Two", "Three"]


def test_a_turn_over_the_size_cap_is_a_413_and_stores_nothing(client, app_settings):
    app_settings.setenv("MEMORY_MAX_TURN_BYTES", "1000")
    big = f"big-{uuid.uuid4()}"
    body = {"input": [{"role": "user", "content": "x" * 2000}], "context": {"conversation_id": big}}
    response = client.post("/invocations", json=body)
    assert response.status_code == 413 and "MEMORY_MAX_TURN_BYTES=1000" in response.json()["error"]["message"]
    assert stored(client, big).status_code == 404, "a conversation whose first turn failed is not kept"


def test_a_bad_conversation_id_is_a_400_that_names_it(client):
    body = {"input": "Hi", "context": {"conversation_id": "../../etc/passwd"}}
    response = client.post("/invocations", json=body)
    assert response.status_code == 400 and response.json()["error"]["param"] == "context.conversation_id"
    both = {"input": "Hi", "context": {"conversation_id": "a"}, "custom_inputs": {"session_id": "b"}}
    assert client.post("/invocations", json=both).status_code == 400


@pytest.mark.usefixtures("traced")
def test_the_trace_names_its_conversation(client):
    import mlflow

    chat = Conversation(client, stream=False)
    chat.send("Hi")
    trace = mlflow.get_trace(mlflow.get_last_active_trace_id())
    assert trace.info.trace_metadata["mlflow.trace.session"] == chat.id
    assert trace.info.trace_metadata["mlflow.trace.user"] == ADA


def test_rows_of_an_earlier_release_still_continue(backend, api_mode, model_log):
    """Rows as the first release with memory wrote them (ITEM_FORMAT 1), written straight into the database."""
    rows = [
        {"role": "user", "content": "What time is it?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_current_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "12:00"},
        {"role": "assistant", "content": "It is noon."},
    ]
    assert ITEM_FORMAT == 1, "a new item format needs rows of the old one here, and a reader for them"
    old_id = f"old-{uuid.uuid4()}"
    from agent_server.app import app

    def insert_rows(connection: sa.Connection) -> None:
        connection.execute(
            sa.text(
                "INSERT INTO agent_conversations (owner, id, title, created_at, updated_at) "
                "VALUES (:owner, :id, 'old', 0, :now)"
            ),
            {"owner": ADA, "id": old_id, "now": time.time()},
        )
        for seq, item in enumerate(rows):
            connection.execute(
                sa.text(
                    "INSERT INTO agent_conversation_items (owner, conversation_id, seq, starts_turn, format, item) "
                    "VALUES (:owner, :id, :seq, :starts, 1, :item)"
                ),
                {
                    "owner": ADA,
                    "id": old_id,
                    "seq": seq,
                    "starts": item.get("role") == "user",
                    "item": json.dumps(item),
                },
            )

    async def write_rows() -> None:
        url = memory.settings().url
        if url.get_backend_name() == "sqlite":  # the standard library's driver, which has no async form
            with sa.create_engine(url).begin() as connection:
                insert_rows(connection)
            return
        engine = create_async_engine(url)
        async with engine.begin() as connection:
            await connection.run_sync(insert_rows)
        await engine.dispose()

    with TestClient(app, headers={"x-test-user": ADA}) as client:
        asyncio.run(write_rows())
        chat = Conversation(client, stream=False)
        chat.id = old_id
        assert counts(2, 1, 1) in reply_text(chat.send("And now?"))


def test_with_memory_off_the_client_keeps_the_history(api_mode, model_log, app_settings):
    app_settings.setenv("MEMORY_BACKEND", "none")
    from agent_server.app import app

    with TestClient(app) as client:
        body = {"input": [{"role": "user", "content": "Hi"}], "context": {"conversation_id": "c1"}}
        items, outputs = post_turn(client, body, stream=False)
        assert "session_id" not in (outputs or {}) and counts(1, 0) in reply_text(items)
        items, _ = post_turn(client, body, stream=False)
        assert counts(1, 0) in reply_text(items), "nothing was kept"
        assert client.get("/conversations").status_code == 404


def test_a_turn_cancelled_while_it_takes_its_lease_gives_the_lease_back(backend):
    """A request stopped while its store call runs (a client that hung up): the transaction runs to its end in
    the store's thread, and the lease it took is given back, so the next turn is not refused as busy."""

    async def cancel_then_start_again() -> list[dict]:
        store = Store(memory.settings().url)
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


@pytest.mark.usefixtures("traced")
def test_a_database_of_schema_2_gets_each_answers_trace_column_and_its_conversations_go_on(
    backend, api_mode, model_log
):
    """Schema 3 keeps each answer's trace (memory/schema.py): a database as release 2 left it, with a conversation
    in it, is migrated at start-up; the old answer has no trace, the new one has."""
    old_id = f"old-{uuid.uuid4()}"

    def as_release_2_left_it(connection: sa.Connection) -> None:
        connection.execute(sa.text("ALTER TABLE agent_conversation_items DROP COLUMN trace_id"))
        connection.execute(sa.text("UPDATE agent_memory_schema SET version = 2"))
        connection.execute(
            sa.text(
                "INSERT INTO agent_conversations (owner, id, title, created_at, updated_at) VALUES (:o, :i, 'x', 0, :t)"
            ),
            {"o": ADA, "i": old_id, "t": time.time()},  # recent: kept by MEMORY_MAX_AGE_DAYS
        )
        for seq, item in enumerate([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi."}]):
            connection.execute(
                sa.text(
                    "INSERT INTO agent_conversation_items (owner, conversation_id, seq, starts_turn, format, item) "
                    "VALUES (:o, :i, :seq, :starts, 1, :item)"
                ),
                {"o": ADA, "i": old_id, "seq": seq, "starts": seq == 0, "item": json.dumps(item)},
            )

    async def downgrade() -> None:
        store = Store(memory.settings().url)
        try:
            await store.open()  # this release's schema, then back to release 2's
            await store.run(as_release_2_left_it, write=True)
        finally:
            await store.close()

    asyncio.run(downgrade())
    from agent_server.app import app

    with TestClient(app, headers={"x-test-user": ADA}) as client:
        chat = Conversation(client, stream=False)
        chat.id = old_id
        assert counts(2, 1) in reply_text(chat.send("Again"))
        traces = stored(client, chat.id).json()["trace_ids"]
        assert traces[:3] == [None, None, None] and traces[3] is not None, traces


def test_a_database_written_by_a_newer_release_is_refused(tmp_path):
    async def newer_then_open() -> str:
        url = sa.URL.create("sqlite+pysqlite", database=str(tmp_path / "newer.db"))
        store = Store(url)
        await store.open()
        with contextlib.closing(sqlite3.connect(url.database or "")) as database, database:
            database.execute("UPDATE agent_memory_schema SET version = 99")
        try:
            await store.open()
        except SchemaTooNew as error:
            return str(error)
        finally:
            await store.close()
        return "opened"

    assert "schema version 99, written by a newer release" in asyncio.run(newer_then_open())


# --- identities, files and messages: checked, private, short ----------------------------------------


def test_an_identity_is_checked_whole_never_cut(client):
    """Two identities that share their first 320 characters were one owner when cut; now the longer is a 400."""
    shared = "a" * 320
    assert post_turn(client, {"input": "Hi"}, stream=False, headers={"x-test-user": shared})[1]
    response = client.post("/invocations", json={"input": "Hi"}, headers={"x-test-user": shared + "-bob"})
    assert response.status_code == 400 and "at most 320" in response.json()["error"]["message"]
    assert client.get("/conversations", headers={"x-test-user": shared + "-bob"}).status_code == 400


def test_an_identity_header_sent_twice_is_a_400(client):
    """Behind a proxy that adds its own header beside the client's, the client must not pick its identity."""
    twice = [("x-test-user", "mallory@example.com"), ("x-test-user", ADA)]
    response = client.post("/invocations", json={"input": "Hi"}, headers=twice)
    assert response.status_code == 400 and "replace the client's identity header" in response.json()["error"]["message"]
    assert client.get("/conversations", headers=twice).status_code == 400


def test_the_conversations_file_is_the_apps_users_alone(api_mode, model_log, app_settings, tmp_path):
    """conversations.db and SQLite's -wal and -shm files are 0600, like the trace store; so is a file an earlier
    release made readable by all."""
    database = tmp_path / "conversations.db"
    database.touch(mode=0o644)
    database.chmod(0o644)
    app_settings.setenv("MEMORY_BACKEND", "sqlite")
    app_settings.setenv("MEMORY_DATABASE_URL", str(database))
    from agent_server.app import app

    with TestClient(app) as local:
        Conversation(local, stream=False).send("Hello")
        for suffix in ("", "-wal", "-shm"):
            assert os.stat(f"{database}{suffix}").st_mode & 0o777 == 0o600, suffix


def test_an_unknown_conversation_is_quoted_short_in_its_404(client):
    response = stored(client, "x" * 10_000)
    message = response.json()["error"]["message"]
    assert response.status_code == 404 and len(message) < 300 and "9800 more characters" in message


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

        mlflow_log, logged = logging.getLogger("mlflow.genai.agent_server.server"), Records()
        mlflow_log.addHandler(logged)  # MLflow's loggers do not propagate to the root, where caplog listens
        try:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(Store, "finish_turn", down)  # the database fails as the turn is stored
                body = {"input": [{"role": "user", "content": "Two"}], "context": {"conversation_id": chat.id}}
                assert local.post("/invocations", json=body).status_code == 503
        finally:
            mlflow_log.removeHandler(logged)
    assert logged.records and all(r.exc_info is None for r in logged.records), "no traceback for an expected 503"
    assert "disk I/O error" in logged.records[-1].getMessage() and "(503)" in logged.records[-1].getMessage()


class Records(logging.Handler):
    """The records a logger emits, as they reach its handlers (after its filters)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
