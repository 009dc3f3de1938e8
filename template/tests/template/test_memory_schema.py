# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Conversation memory's database across releases and on disk: rows an earlier release wrote, a database of an
earlier schema migrated, one of a newer release refused, and the SQLite files readable by the app's user alone.
On SQLite, and on PostgreSQL too when MEMORY_TEST_POSTGRES_URL names one (test_memory.py's `backend`)."""

# ruff: noqa: F811  (test_memory.py's fixtures, imported below, are the tests' arguments)
from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from sqlalchemy.ext.asyncio import create_async_engine
from support import Conversation, reply_text

from agent_server import memory
from agent_server.memory.store import Store
from agent_server.store.schema import ITEM_FORMAT, SchemaTooNew

from .test_memory import ADA, backend, counts, stored  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)


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
        url = memory.memory_settings().url
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


def left_as(earlier_release: Callable[[sa.Connection], None]) -> None:
    """The test's database at this release's schema, then set back as `earlier_release` changes it."""

    async def downgrade() -> None:
        store = Store(memory.memory_settings().url)
        try:
            await store.open()
            await store.run(earlier_release, write=True)
        finally:
            await store.close()

    asyncio.run(downgrade())


@pytest.mark.usefixtures("traced")
def test_a_database_of_schema_2_gets_each_answers_trace_column_and_its_conversations_go_on(
    backend, api_mode, model_log
):
    """Schema 3 keeps each answer's trace (store/schema.py): a database as release 2 left it, with a conversation
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

    left_as(as_release_2_left_it)
    from agent_server.app import app

    with TestClient(app, headers={"x-test-user": ADA}) as client:
        chat = Conversation(client, stream=False)
        chat.id = old_id
        assert counts(2, 1) in reply_text(chat.send("Again"))
        traces = stored(client, chat.id).json()["trace_ids"]
        assert traces[:3] == [None, None, None] and traces[3] is not None, traces


def test_a_database_of_schema_7_gets_the_branches_table_and_its_conversations_branch(backend, api_mode, model_log):
    """Schema 8 keeps conversations' earlier branches (memory/branches.py): a database as release 7 left it, with a
    conversation in it, is migrated at start-up; an edit of that conversation then keeps what it replaced."""
    from agent_server.app import app

    with TestClient(app, headers={"x-test-user": ADA}) as client:
        chat = Conversation(client, stream=False)
        chat.send("Hello")

    def as_release_7_left_it(connection: sa.Connection) -> None:
        connection.execute(sa.text("DROP TABLE agent_conversation_branches"))
        connection.execute(sa.text("UPDATE agent_memory_schema SET version = 7"))

    left_as(as_release_7_left_it)
    with TestClient(app, headers={"x-test-user": ADA}) as client:
        body = {"input": "Hi", "context": {"conversation_id": chat.id}, "custom_inputs": {"replace_history": True}}
        assert client.post("/invocations", json=body).status_code == 200
        read = stored(client, chat.id).json()
        assert read["items"][0]["content"] == "Hi" and [b["items"] for b in read["branches"]] == [2]


def test_a_database_of_schema_11_gets_the_branches_model_column_and_its_branches_still_open(
    backend, api_mode, model_log
):
    """Schema 12 keeps the model of each answer in an earlier branch: a database as schema 11 left it, with a branch
    in it, is migrated at start-up; that branch still opens (its answers' model unknown), and a new one is kept."""
    from agent_server.app import app

    with TestClient(app, headers={"x-test-user": ADA}) as client:
        chat = Conversation(client, stream=False)
        chat.send("Hello")
        body = {"input": "Hi", "context": {"conversation_id": chat.id}, "custom_inputs": {"replace_history": True}}
        assert client.post("/invocations", json=body).status_code == 200

    def as_schema_11_left_it(connection: sa.Connection) -> None:
        connection.execute(sa.text("ALTER TABLE agent_conversation_branches DROP COLUMN model"))
        connection.execute(sa.text("UPDATE agent_memory_schema SET version = 11"))

    left_as(as_schema_11_left_it)
    with TestClient(app, headers={"x-test-user": ADA}) as client:
        assert client.get(f"/conversations/{chat.id}", params={"branch": 1}).json()["items"][0]["content"] == "Hello"
        body = {"input": "Hey", "context": {"conversation_id": chat.id}, "custom_inputs": {"replace_history": True}}
        assert client.post("/invocations", json=body).status_code == 200
        assert [b["items"] for b in stored(client, chat.id).json()["branches"]] == [2, 2]


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


def test_the_modules_that_moved_to_store_are_still_importable_from_memory_for_a_release():
    """agent_server/store/ holds the database since this release; agent_server.memory.<name> is the same module."""
    import agent_server.memory.schema

    from agent_server import store
    from agent_server.memory import settings

    assert agent_server.memory.schema is store.schema and settings is store.settings
    for name in store.MOVED_FROM_MEMORY:
        assert importlib.import_module(f"agent_server.memory.{name}") is getattr(store, name)
