# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Long-term memory (agent_server/memory/long_term.py, facts.py, memories_api.py) through the real app, SDK and
offline model; on SQLite, and on PostgreSQL too when MEMORY_TEST_POSTGRES_URL names one (test_memory.py's
`backend`). Identities are made per test: the PostgreSQL database is shared by every test.

This module: facts remembered and recalled per caller, the memories' routes, runs acting for their caller, the
bounds, spans, the settings, and the migration that adds it; and the helpers the other long-term memory tests
share. The search's hostile and cross-store cases: test_long_term_memory_search.py; the caller's own data
(your_data.py): test_your_data.py."""

from __future__ import annotations

import asyncio
import functools
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from conftest import AppSettings
from fastapi.testclient import TestClient
from support import Conversation, reply_text

from agent_server import config, memory
from agent_server.config import ConfigurationError
from agent_server.memory import facts
from agent_server.memory.store import Store

from .test_memory import backend  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)


def someone(name: str) -> str:
    return f"{name}-{uuid.uuid4()}@example.com"


@pytest.fixture
def remembering(backend: str, app_settings: AppSettings) -> str:  # noqa: F811
    app_settings.setenv("LONG_TERM_MEMORY", "true")
    return backend


@pytest.fixture
def client(remembering: str, api_mode: str, model_log) -> Iterator[TestClient]:
    from agent_server.app import app

    with TestClient(app) as test_client:
        yield test_client


def as_user(user: str) -> dict[str, str]:
    return {"x-test-user": user}


def tool_outputs(items: list[dict[str, Any]], name: str) -> list[str]:
    """The outputs of the calls of tool `name`: function calls and their outputs, or (a run read through /responses,
    in the Responses API's shapes) `mcp_call` items."""
    calls = {item["call_id"] for item in items if item["type"] == "function_call" and item["name"] == name}
    outputs = [item["output"] for item in items if item["type"] == "function_call_output" and item["call_id"] in calls]
    return outputs + [item["output"] for item in items if item["type"] == "mcp_call" and item["name"] == name]


def finished(client: TestClient, run_id: str, user: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while (run := client.get(f"/responses/{run_id}", headers=as_user(user)).json())["status"] in (
        "queued", "in_progress"
    ):  # fmt: skip
        assert time.monotonic() < deadline, run
        time.sleep(0.02)
    return run


def in_database(transaction: Any) -> Any:
    """`transaction` run on the app's own database, outside the app (store.py's Store on the same URL)."""

    async def run() -> Any:
        store = Store(memory.memory_settings().url)  # type: ignore[arg-type]
        try:
            await store.open()  # migrated, as the app would have
            return await store.run(transaction)
        finally:
            await store.close()

    return asyncio.run(run())


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_a_fact_remembered_in_one_conversation_is_recalled_in_another_for_that_user_alone(client, stream):
    ada, bob = someone("ada"), someone("bob")
    first = Conversation(client, stream, user=ada)
    remembered = first.send("My name is Ada Lovelace")
    assert tool_outputs(remembered, "remember") == ["Remembered: My name is Ada Lovelace"]
    second = Conversation(client, stream, user=ada)
    recalled = tool_outputs(second.send("What is my name?"), "recall")
    assert second.id != first.id and "My name is Ada Lovelace" in recalled[0]
    theirs = Conversation(client, stream, user=bob)
    assert tool_outputs(theirs.send("What is my name?"), "recall") == ["You remember nothing about this user yet."]
    # A guessed conversation id is the guesser's own conversation: Ada's facts are not in it either.
    guessed = client.post(
        "/invocations", json={"input": [{"role": "user", "content": "What do you know about me?"}],
                              "context": {"conversation_id": first.id}}, headers=as_user(bob),
    )  # fmt: skip
    assert tool_outputs(guessed.json()["output"], "recall") == ["You remember nothing about this user yet."]


def test_no_route_shows_or_deletes_another_users_memories(client):
    ada, bob = someone("ada"), someone("bob")
    Conversation(client, False, user=ada).send("Remember that I like green tea")
    listed = client.get("/memories", headers=as_user(ada)).json()
    assert listed["enabled"] and [m["text"] for m in listed["memories"]] == ["Remember that I like green tea"]
    fact_id = listed["memories"][0]["id"]
    assert client.get("/memories", headers=as_user(bob)).json()["memories"] == []
    assert client.delete(f"/memories/{fact_id}", headers=as_user(bob)).status_code == 404
    assert client.delete("/memories", headers=as_user(bob)).json() == {"deleted": 0}
    exported = client.get("/me/export", headers=as_user(bob)).json()
    assert exported["memories"] == [] and exported["conversations"] == [] and "green tea" not in json.dumps(exported)
    assert client.delete("/me", headers=as_user(bob)).json()["deleted"]["memories"] == 0
    assert [m["id"] for m in client.get("/memories", headers=as_user(ada)).json()["memories"]] == [fact_id]
    for wrong in ("x", "-1", "1.0", "99999999999999999999", "%20"):
        assert client.delete(f"/memories/{wrong}", headers=as_user(ada)).status_code == 404
    assert client.delete(f"/memories/{fact_id}", headers=as_user(ada)).status_code == 204
    assert client.get("/memories", headers=as_user(ada)).json()["memories"] == []
    assert client.get("/memories").status_code == 401, "no identity, no memories"


def test_delete_all_memories_deletes_the_callers_only(client):
    ada, bob = someone("ada"), someone("bob")
    for text in ("Remember I live in London", "Remember I have a cat"):
        Conversation(client, False, user=ada).send(text)
    Conversation(client, False, user=bob).send("Remember I live in Paris")
    assert client.delete("/memories", headers=as_user(ada)).json() == {"deleted": 2}
    assert client.get("/memories", headers=as_user(ada)).json()["memories"] == []
    assert [m["text"] for m in client.get("/memories", headers=as_user(bob)).json()["memories"]] == [
        "Remember I live in Paris"
    ]


def test_background_runs_and_idempotent_replays_act_for_their_own_caller(client):
    ada, bob = someone("ada"), someone("bob")
    Conversation(client, False, user=ada).send("My name is Ada")
    ask = {"input": [{"role": "user", "content": "What is my name?"}]}
    for user, expected in ((ada, "My name is Ada"), (bob, "You remember nothing")):
        run = client.post("/responses", json={**ask, "background": True}, headers=as_user(user)).json()
        done = finished(client, run["id"], user)
        assert expected in tool_outputs(done["output"], "recall")[0]
    key = {"Idempotency-Key": f"turn-{uuid.uuid4()}"}
    answered = client.post("/invocations", json=ask, headers={**key, **as_user(ada)}).json()
    assert "My name is Ada" in tool_outputs(answered["output"], "recall")[0]
    # The same key from another identity is that identity's own request: it replays nothing of Ada's.
    replayed = client.post("/invocations", json=ask, headers={**key, **as_user(bob)}).json()
    assert replayed["id"] != answered["id"]
    assert "You remember nothing" in tool_outputs(replayed["output"], "recall")[0]


@pytest.mark.parametrize("whose", ["own", "other"])
def test_a_run_resumed_after_its_process_died_recalls_its_owners_facts_only(client, whose):
    """A resumed run has no request of its own: it is replayed with its owner's identity headers
    (runs/execute.identity_headers), so its recall is its owner's."""
    from agent_server.memory import database
    from agent_server.runs import recovery, store
    from agent_server.runs.store import Run

    ada, bob = someone("ada"), someone("bob")
    Conversation(client, False, user=ada).send("My name is Ada")
    owner = ada if whose == "own" else bob
    conversation = f"resumed-{uuid.uuid4()}"
    body = {"input": [{"role": "user", "content": "What is my name?"}], "context": {"conversation_id": conversation}}
    dead = Run(f"resp_{uuid.uuid4().hex}", owner, conversation, None, "x", body, True, status="in_progress",
               holder="gone:1", heartbeat_until=time.time() - 1, created_at=time.time())  # fmt: skip

    async def crashed() -> None:
        await (await database.store()).run(store.create(dead), write=True)
        await recovery.beat()

    client.portal.call(crashed)
    done = finished(client, dead.id, owner)
    said = tool_outputs(done["output"], "recall")[0]
    assert ("My name is Ada" in said) == (whose == "own"), said


def test_a_thousand_facts_stay_within_the_bounds_oldest_dropped_first(client, app_settings):
    app_settings.setenv("LONG_TERM_MEMORY_MAX_FACTS", "50")
    app_settings.setenv("LONG_TERM_MEMORY_MAX_BYTES", "2000")
    ada = someone("ada")
    current = memory.memory_settings()

    def thousand(connection: sa.Connection) -> list[facts.Kept]:
        return [
            facts.remember(ada, f"fact number {n} is {'x' * (n % 7)}", current.max_facts, current.max_fact_bytes,
                           connection)
            for n in range(1000)
        ]  # fmt: skip

    kept = in_database(thousand)
    assert sum(each.dropped for each in kept) == 1000 - len(in_database(functools.partial(facts.newest, ada, 2000)))
    left = in_database(functools.partial(facts.newest, ada, 2000))
    assert len(left) <= 50 and sum(len(f.text.encode()) for f in left) <= 2000
    assert left[0].text.startswith("fact number 999 "), "the newest stay"
    assert [int(f.text.split()[2]) for f in left] == list(range(999, 999 - len(left), -1)), "the oldest went first"
    said = tool_outputs(Conversation(client, False, user=ada).send("Remember one more thing"), "remember")[0]
    assert said.startswith("Remembered: Remember one more thing")
    assert "oldest facts about the user were forgotten" in said
    assert "at most 50 facts (2000 bytes)" in said
    recalled = tool_outputs(Conversation(client, False, user=ada).send("What do you know about me?"), "recall")[0]
    assert len([line for line in recalled.splitlines() if line.startswith("- ")]) == facts.RECALLED


@pytest.mark.usefixtures("traced")
def test_each_memory_read_and_write_is_a_span_of_the_turns_trace(client):
    import mlflow

    ada = someone("ada")
    Conversation(client, False, user=ada).send("Remember I like tea")
    trace = mlflow.get_trace(mlflow.get_last_active_trace_id())
    spans = {span.name: span for span in trace.data.spans}
    assert spans["memory.remember"].inputs == {"fact": "Remember I like tea"}
    Conversation(client, False, user=ada).send("What do you know about me?")
    trace = mlflow.get_trace(mlflow.get_last_active_trace_id())
    recalled = next(span for span in trace.data.spans if span.name == "memory.recall")
    assert "Remember I like tea" in recalled.outputs


def test_with_long_term_memory_off_the_model_is_offered_no_memory_tools(backend, api_mode, model_log):  # noqa: F811
    from agent_server.app import app

    with TestClient(app) as client:
        items = Conversation(client, False, user=someone("ada")).send("My name is Ada")
        assert [item["type"] for item in items] == ["message"], "no remember call"
        assert "I saw 1 user" in reply_text(items)
        offered = json.dumps(model_log[-1]["body"].get("tools", []))
        assert '"remember"' not in offered and '"recall"' not in offered
        assert client.get("/memories", headers=as_user(someone("ada"))).json()["enabled"] is False


def test_long_term_memory_needs_a_store_and_a_user_per_caller(app_settings):
    app_settings.setenv("LONG_TERM_MEMORY", "true")
    app_settings.setenv("MEMORY_BACKEND", "none")
    with pytest.raises(ConfigurationError, match="MEMORY_BACKEND=sqlite or postgres"):
        memory.memory_settings()
    app_settings.setenv("MEMORY_BACKEND", "sqlite")
    app_settings.setenv("HOST", "0.0.0.0")  # others reach it, and nothing names them: all would be `local`
    with pytest.raises(ConfigurationError, match="MEMORY_USER_HEADER"):
        memory.memory_settings()
    app_settings.setenv("MEMORY_USER_HEADER", "x-test-user")
    assert memory.memory_settings().long_term
    app_settings.delenv("MEMORY_USER_HEADER")
    app_settings.setenv("HOST", "127.0.0.1")  # local development: one user, `local`
    assert memory.memory_settings().long_term and config.settings().memory.max_facts == 200


def test_a_database_of_schema_5_gets_long_term_memory(remembering, api_mode, model_log):
    """Migration 6 (store/schema.py) adds the facts' table and its search index to a database as release 5 left
    it, with its conversations."""
    from agent_server.app import app

    with TestClient(app) as client:
        Conversation(client, False, user=someone("ada")).send("Hello")

    def as_release_5_left_it(connection: sa.Connection) -> None:
        if connection.dialect.name == "sqlite":
            connection.execute(sa.text("DROP TABLE agent_memories_search"))
        connection.execute(sa.text("DROP TABLE agent_memories"))
        connection.execute(sa.text("UPDATE agent_memory_schema SET version = 5"))

    in_database(as_release_5_left_it)
    ada = someone("ada")
    with TestClient(app) as client:
        Conversation(client, False, user=ada).send("My name is Ada")
        recalled = tool_outputs(Conversation(client, False, user=ada).send("What is my name?"), "recall")
        assert "My name is Ada" in recalled[0]
