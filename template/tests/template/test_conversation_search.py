# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Conversation search (agent_server/memory/search.py): GET /conversations?q= finds the caller's conversations by
title and by what was written in them, never another identity's, answers every query (quotes, operators, NUL, ten
kilobytes), and follows renames, deletes and DELETE /me. Through the real app, SDK and offline model, in both API
modes; on SQLite, and on PostgreSQL too when MEMORY_TEST_POSTGRES_URL names one (test_memory.py's `backend`)."""

# ruff: noqa: F811  (the fixtures imported below are the tests' arguments)
from __future__ import annotations

import functools
import json
import uuid
from typing import Any

import sqlalchemy as sa
from support import Conversation

from agent_server import memory
from agent_server.store import search_schema
from agent_server.store.schema import items

from .test_long_term_memory import as_user, in_database
from .test_long_term_memory_search import HOSTILE
from .test_memory import backend, client  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)


def found(client: Any, query: str, user: str) -> list[dict[str, Any]]:
    answer = client.get("/conversations", params={"q": query}, headers=as_user(user))
    assert answer.status_code == 200, answer.text
    return answer.json()["conversations"]


def test_search_finds_the_callers_conversations_by_title_and_text_and_follows_every_change(client):
    ada, bob = (f"{name}-{uuid.uuid4()}@example.com" for name in ("ada", "bob"))
    word = f"zebra{uuid.uuid4().hex[:8]}"  # a word no other test's conversation holds (PostgreSQL is shared)
    tea = Conversation(client, stream=False, user=ada)
    tea.send(f"I like green tea and the {word}")
    tea.send("What time is it?")  # a tool turn: its call and output are not what search finds
    trains = Conversation(client, stream=True, user=ada)
    trains.send("Tell me about trains")
    theirs = Conversation(client, stream=False, user=bob)
    theirs.send(f"Bob's {word} and green tea")

    hits = found(client, f"GREEN {word}", ada)
    assert [hit["id"] for hit in hits] == [tea.id], "every word, case-insensitively; only the caller's own"
    assert word in hits[0]["snippet"] and hits[0]["in_title"] is True, "titled from its first message"
    assert [hit["id"] for hit in found(client, word[:7], ada)] == [tea.id], "the last word is a prefix as you type"
    assert [hit["id"] for hit in found(client, "tea", bob)] == [theirs.id]
    assert found(client, "get_time", ada) == [] and found(client, "call_id", ada) == [], "no tool JSON"
    assert [hit["id"] for hit in found(client, "trains", ada)] == [trains.id]
    trains.send(f"One more {word}")  # newest first
    assert [hit["id"] for hit in found(client, word, ada)] == [trains.id, tea.id]

    renamed = client.patch(f"/conversations/{tea.id}", json={"title": "Kyoto holiday"}, headers=as_user(ada))
    assert renamed.status_code == 200
    by_title = found(client, "kyoto", ada)
    assert [(hit["id"], hit["in_title"], hit["snippet"]) for hit in by_title] == [(tea.id, True, "")]
    assert found(client, "kyoto", bob) == []
    assert [(hit["in_title"], word in hit["snippet"]) for hit in found(client, word, ada)][1] == (False, True)
    client.patch(f"/conversations/{tea.id}", json={"title": "Osaka"}, headers=as_user(ada))
    assert found(client, "kyoto", ada) == [], "the old title is no longer found"

    for query in [*HOSTILE, "x" * 10_000 + " tea", "tea\x00", '"tea" OR *', "tea:* & !", "tea'); --"]:
        assert isinstance(found(client, query, ada), list), query
    assert [hit["id"] for hit in found(client, '"green" ("tea*" -', ada)] == [tea.id]

    assert client.delete(f"/conversations/{tea.id}", headers=as_user(ada)).status_code == 204
    assert [hit["id"] for hit in found(client, word, ada)] == [trains.id]
    assert client.delete("/me", headers=as_user(ada)).status_code == 200
    assert found(client, word, ada) == [] and found(client, "trains", ada) == []
    if memory.memory_settings().backend == "sqlite":  # nor in the index

        def indexed(connection: sa.Connection) -> int:
            words = "SELECT count(*) FROM agent_conversation_words WHERE owner = :owner"
            return int(connection.scalar(sa.text(words), {"owner": ada}))

        assert in_database(indexed) == 0
    assert [hit["id"] for hit in found(client, word, bob)] == [theirs.id], "no one else's"


def test_the_migration_indexes_what_was_stored_before_it(backend):
    """Items stored before schema 10 have no `words`: the migration fills them in, and search finds them."""
    owner = f"old-{uuid.uuid4()}@example.com"
    message = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Quokka\x00 island"}]}
    call = {"type": "function_call", "call_id": "c1", "name": "quokka_lookup", "arguments": "{}"}
    assert search_schema.words_of(message) == "Quokka island" and search_schema.words_of(call) is None

    def store_old(connection: sa.Connection) -> None:
        now = 1.0
        connection.execute(sa.text(
            "INSERT INTO agent_conversations (owner, id, title, created_at, updated_at) VALUES (:o, 'c', 'Old', :t, :t)"
        ), {"o": owner, "t": now})  # fmt: skip
        rows = [{"owner": owner, "conversation_id": "c", "seq": n, "starts_turn": n == 0, "format": 1,
                 "item": json.dumps(item)} for n, item in enumerate([message, call])]  # fmt: skip
        connection.execute(items.insert(), rows)  # no words: as stored before schema 10
        if connection.dialect.name == "sqlite":  # nor the title in the index
            connection.execute(sa.text("DELETE FROM agent_conversation_words WHERE owner = :o"), {"o": owner})
        search_schema.add_search(connection)  # run again: the rows without words are filled in, nothing else

    in_database(store_old)
    from agent_server.memory import search

    assert [f.id for f in in_database(functools.partial(search.search, owner, "quokka"))] == ["c"]
    assert [f.id for f in in_database(functools.partial(search.search, owner, "old"))] == ["c"]
    assert in_database(functools.partial(search.search, owner, "lookup")) == []
