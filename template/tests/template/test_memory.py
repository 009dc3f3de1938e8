# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Conversation memory (agent_server/memory/) through the real app, SDK and offline model.

Every test runs on SQLite, and on PostgreSQL too when MEMORY_TEST_POSTGRES_URL names a database
(the template's own tests start a real server and set it), in both API modes.

This module: how each client style's turns are kept, continued, edited and owned, the trace that names its
conversation, and memory off; and the fixtures the other memory tests share (`backend`, `client`). Failures and
collisions: test_memory_failures.py; limits and checks: test_memory_limits.py; the database across releases and
on disk: test_memory_schema.py.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator

import httpx
import pytest
from conftest import AppSettings
from fastapi.testclient import TestClient
from support import Conversation, fresh_database, post_turn, replayed, reply_text

BACKENDS = ["sqlite"] + (["postgres"] if os.environ.get("MEMORY_TEST_POSTGRES_URL") else [])
ADA, BOB = "ada@example.com", "bob@example.com"


def counts(user: int, assistant: int, tool: int = 0) -> str:
    return f"I saw {user} user, {assistant} assistant and {tool} tool turns."


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, app_settings: AppSettings, tmp_path) -> str:
    sqlite = request.param == "sqlite"
    url = fresh_database(tmp_path / "conversations.db") if sqlite else os.environ["MEMORY_TEST_POSTGRES_URL"]
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


@pytest.mark.parametrize("full", [False, True], ids=["new-turn-only", "full-history"])
@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_a_reopened_conversation_shows_the_models_reasoning_where_the_answer_had_it(client, stream, full):
    """The offline model reasons when asked to think, as reasoning models do. The answer's reasoning is kept for the
    page to show again, and never reaches the model again (the strict offline model would refuse it): the next
    turns go on, whichever way the client sends them."""
    chat = Conversation(client, stream, full=full)
    live = chat.send("Please think about it")
    assert [item["type"] for item in live] == ["reasoning", "message"]
    assert counts(2, 1) in reply_text(chat.send("Thanks"))
    kept = stored(client, chat.id).json()["items"]
    shape = ["user", "reasoning", "assistant", "user", "assistant"]
    assert [item.get("role") or item["type"] for item in kept] == shape
    assert [item["summary"] for item in kept if item.get("type") == "reasoning"] == [
        item["summary"] for item in live if item["type"] == "reasoning"
    ]
    assert len(stored(client, chat.id).json()["trace_ids"]) == len(kept)


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


@pytest.mark.usefixtures("traced")
def test_the_trace_names_its_conversation(client):
    import mlflow

    chat = Conversation(client, stream=False)
    chat.send("Hi")
    trace = mlflow.get_trace(mlflow.get_last_active_trace_id())
    assert trace.info.trace_metadata["mlflow.trace.session"] == chat.id
    assert trace.info.trace_metadata["mlflow.trace.user"] == ADA


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
