# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The caller's own data (agent_server/memory/your_data.py): `GET /me/export` holds the caller's conversations,
runs, memories and traces and nothing of anyone else's, `DELETE /me` leaves nothing of the caller and touches no
one else, and with memory off the caller is told what is kept. Through the real app, SDK and offline model; on
SQLite, and on PostgreSQL too when MEMORY_TEST_POSTGRES_URL names one (test_memory.py's `backend`)."""

# ruff: noqa: F811  (the fixtures imported below are the tests' arguments)
from __future__ import annotations

import functools
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from support import Conversation

from agent_server import memory

from .test_long_term_memory import as_user, client, finished, in_database, remembering, someone  # noqa: F401
from .test_memory import backend  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)


def rows_of(owner: str) -> dict[str, int]:
    """How many rows of `owner` each table holds, counted in the database itself."""
    from agent_server.store.schema import approval_answers, conversations, items, memories, runs, turn_queue

    def count(connection: sa.Connection) -> dict[str, int]:
        tables = {"conversations": conversations, "items": items, "runs": runs, "memories": memories}
        tables |= {"approval_answers": approval_answers, "waiting_turns": turn_queue}
        return {
            name: connection.scalar(sa.select(sa.func.count()).select_from(table).where(table.c.owner == owner))
            for name, table in tables.items()
        }

    return in_database(count)


def test_export_holds_the_callers_conversations_runs_and_memories_and_nothing_of_anothers(client):
    ada, bob = someone("ada"), someone("bob")
    chat = Conversation(client, False, user=ada)
    chat.send("My name is Ada")
    run = client.post("/responses", json={"input": [{"role": "user", "content": "Hello"}], "background": True},
                      headers=as_user(ada)).json()  # fmt: skip
    finished(client, run["id"], ada)
    Conversation(client, False, user=bob).send("My name is Bob")
    response = client.get("/me/export", headers=as_user(ada))
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    exported = response.json()
    assert exported["owner"] == ada and "Bob" not in response.text and bob not in response.text
    assert {c["id"] for c in exported["conversations"]} == {chat.id, run["custom_outputs"]["session_id"]}
    ours = next(c for c in exported["conversations"] if c["id"] == chat.id)
    assert ours["title"] == "My name is Ada" and ours["items"][0] == {"role": "user", "content": "My name is Ada"}
    assert len(ours["trace_ids"]) == len(ours["items"])
    assert [r["id"] for r in exported["runs"]] == [run["id"]] and exported["runs"][0]["events"]
    assert exported["runs"][0]["request"]["input"] == [{"role": "user", "content": "Hello"}]
    assert [m["text"] for m in exported["memories"]] == ["My name is Ada"] and exported["approval_answers"] == []
    assert "trace" in exported["about"] and isinstance(exported["trace_ids"], list)


@pytest.mark.usefixtures("traced")
def test_export_lists_the_trace_of_each_answer(client):
    ada = someone("ada")
    items = Conversation(client, False, user=ada)
    items.send("Hello")
    exported = client.get("/me/export", headers=as_user(ada)).json()
    answers = [t for t in exported["conversations"][0]["trace_ids"] if t]
    assert answers and exported["trace_ids"] == answers


def test_delete_me_leaves_nothing_of_the_caller_and_touches_no_one_else(client, caplog):
    ada, bob = someone("ada"), someone("bob")
    words = {user: f"word{uuid.uuid4().hex}" for user in (ada, bob)}  # in the search index of SQLite, by owner
    for user in (ada, bob):
        Conversation(client, False, user=user).send("My name is Ada")
        Conversation(client, False, user=user).send(f"Remember the code {words[user]}")
        client.post("/invocations", json={"input": [{"role": "user", "content": "Hi"}]},
                    headers={**as_user(user), "Idempotency-Key": f"k-{uuid.uuid4()}"})  # fmt: skip
    from agent_server.memory import approval_store
    from agent_server.store.schema import turn_queue

    for user in (ada, bob):  # an approval answer, as the request guard keeps it; a waiting turn's place
        in_database(functools.partial(approval_store.keep_first_answers, user, {f"mcpr_{uuid.uuid4().hex}": True}))
        place = {"owner": user, "conversation_id": "busy", "lease": f"gone:1/{uuid.uuid4().hex}", "expires_at": 0.0}
        in_database(lambda connection, place=place: connection.execute(turn_queue.insert().values(place)))
    before = rows_of(bob)
    with caplog.at_level("INFO", logger="agent_server.memory"):
        answer = client.delete("/me", headers=as_user(ada))
    assert answer.status_code == 200
    deleted = answer.json()["deleted"]
    assert deleted["conversations"] == 3 and deleted["memories"] == 2 and deleted["runs"] == 1, deleted
    assert deleted["approval_answers"] == 1 and deleted["waiting_turns"] == 1
    assert deleted["items"] >= 8 and deleted["run_events"] >= 1
    left = rows_of(ada)
    assert left == dict.fromkeys(("conversations", "items", "runs", "memories", "approval_answers", "waiting_turns"), 0)
    assert rows_of(bob) == before, "no one else's rows"
    assert client.get("/conversations", headers=as_user(ada)).json()["conversations"] == []
    if memory.memory_settings().backend == "sqlite":  # nor anything of theirs in FTS5's index (PostgreSQL: the table)

        def indexed(word: str) -> Any:
            search = "SELECT count(*) FROM agent_memories_search WHERE agent_memories_search MATCH :word"
            return lambda connection: connection.scalar(sa.text(search), {"word": f'"{word}"'})

        assert (in_database(indexed(words[ada])), in_database(indexed(words[bob]))) == (0, 1)
    logged = [r.getMessage() for r in caplog.records if "deleted their data" in r.getMessage()]
    assert len(logged) == 1 and "Ada" not in logged[0] and ada not in logged[0] and "3 conversations" in logged[0]


def test_with_memory_off_the_caller_is_told_that_nothing_is_kept_but_traces(app_settings, api_mode):
    app_settings.setenv("MEMORY_BACKEND", "none")
    from agent_server.app import app

    with TestClient(app) as client:
        exported = client.get("/me/export").json()
        assert exported["owner"] == "local" and exported["conversations"] == [] and exported["memories"] == []
        assert "keeps nothing about you server-side" in exported["about"] and "trace" in exported["about"]
        gone = client.delete("/me").json()
        kept = {kind: count for kind, count in gone["deleted"].items() if kind != "traces"}  # traces: in MLflow
        assert set(kept.values()) == {0} and "keeps nothing" in gone["about"]
        assert client.get("/memories").status_code == 404
