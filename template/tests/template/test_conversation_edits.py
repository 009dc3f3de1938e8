# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Edits, regenerations and titles of stored conversations, as the chat page makes them (memory/merge.py's
rule 0, memory/api.py's PATCH), through the real app, SDK and offline model, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from agents import function_tool
from fastapi.testclient import TestClient
from support import Conversation, post_turn, reply_text

from agent_server import agent

from .test_memory import ADA, BOB, backend, counts, stored  # noqa: F401  (the same SQLite and PostgreSQL as memory's)


@pytest.fixture
def client(backend: str, api_mode: str, model_log) -> Iterator[TestClient]:  # noqa: F811
    from agent_server.app import app

    with TestClient(app, headers={"x-test-user": ADA}) as test_client:
        yield test_client


def titles(client, conversation_id: str, user: str = ADA) -> list[str]:
    """The title of the conversation in the user's list: none, or one (the database may hold other tests')."""
    listed = client.get("/conversations", headers={"x-test-user": user}).json()["conversations"]
    return [conversation["title"] for conversation in listed if conversation["id"] == conversation_id]


def branch(client, chat: Conversation, history: list, text: str) -> list:
    """A branch as the chat page sends it: the history before the edited message, the message, and the flag."""
    body = {
        "input": [*history, {"role": "user", "content": text}],
        "context": {"conversation_id": chat.id},
        "custom_inputs": {"replace_history": True},
    }
    return post_turn(client, body, stream=True)[0]


def test_an_edited_first_message_replaces_the_conversation_and_the_model_sees_it_once(client, caplog):
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    chat.send("Tell me more")
    with caplog.at_level("INFO", logger="agent_server.memory"):
        items = branch(client, chat, [], "Hi there")  # no item of the model's: without the flag, a new turn
    assert counts(1, 0) in reply_text(items)
    assert f"conversation {chat.id}, replaced" in caplog.text
    kept = stored(client, chat.id).json()["items"]
    assert [(item["role"], item["content"] if item["role"] == "user" else "") for item in kept] == [
        ("user", "Hi there"), ("assistant", ""),
    ]  # fmt: skip
    assert titles(client, chat.id) == ["Hello"], "a conversation keeps its title through edits"


def test_a_regenerated_only_answer_is_not_a_second_copy_of_its_question(client):
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    assert counts(1, 0) in reply_text(branch(client, chat, [], "Hello"))
    assert len(stored(client, chat.id).json()["items"]) == 2


def test_replace_history_must_be_a_boolean(client):
    body = {"input": "Hi", "custom_inputs": {"replace_history": "yes"}}
    response = client.post("/invocations", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "custom_inputs.replace_history"


def test_the_owner_renames_a_conversation_and_the_title_is_kept(client):
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    assert titles(client, chat.id) == ["Hello"], "a new conversation is titled from its first message"
    renamed = client.patch(f"/conversations/{chat.id}", json={"title": "  Greetings 👋  "})
    assert renamed.status_code == 200 and renamed.json() == {"id": chat.id, "title": "Greetings 👋"}
    chat.send("And more")
    branch(client, chat, [], "Hi")
    assert titles(client, chat.id) == ["Greetings 👋"]
    as_bob = client.patch(f"/conversations/{chat.id}", json={"title": "x"}, headers={"x-test-user": BOB})
    assert as_bob.status_code == 404
    assert client.patch("/conversations/no-such-chat", json={"title": "x"}).status_code == 404
    assert titles(client, chat.id) == ["Greetings 👋"] and titles(client, chat.id, BOB) == []


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"title": ""}, 400, "not empty"),
        ({"title": "   "}, 400, "not empty"),
        ({"title": 7}, 400, "must be text"),
        ({"title": "x" * 201}, 400, "201 characters; at most 200"),
        ({"title": "two\nlines"}, 400, "control characters"),
        ({"title": "evil\u202etxt.exe"}, 400, "control characters"),
        ({"title": "x", "color": "red"}, 400, "one field"),
        (["title"], 400, "one field"),
        ({"title": "x" * 10_000}, 413, "over 4096 bytes"),
    ],
)
def test_a_bad_title_is_a_4xx_that_says_why_and_changes_nothing(client, body, status, says):
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    response = client.patch(f"/conversations/{chat.id}", json=body)
    assert response.status_code == status and says in response.json()["error"]["message"], response.text
    assert titles(client, chat.id) == ["Hello"]


def test_the_automatic_title_drops_what_a_rename_refuses(client):
    chat = Conversation(client, stream=False)
    chat.send("\u202eexe.txt\u202c \x1b[31mred\x00\x9b\n\tand \u2066isolated\u2069")
    [title] = titles(client, chat.id)
    assert title == "exe.txt [31mred and isolated"
    assert client.patch(f"/conversations/{chat.id}", json={"title": title}).status_code == 200, "a title a rename takes"


def test_a_rename_made_while_the_first_turn_runs_stays(client, monkeypatch):
    """The first turn's finish titles the conversation from its first message only if it has no title yet."""
    from agent_server.app import app

    conversation = f"renamed-{uuid.uuid4()}"

    @function_tool
    async def rename_it() -> str:
        """Renames this conversation while its first turn runs, as its owner would from another tab."""
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as other_tab:
            renamed = await other_tab.patch(
                f"/conversations/{conversation}", json={"title": "Mine"}, headers={"x-test-user": ADA}
            )
        assert renamed.status_code == 200, renamed.text
        return "renamed"

    renaming = agent.create_agent().clone(tools=[rename_it])
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: renaming)
    body = {"input": [{"role": "user", "content": "Use rename_it"}], "context": {"conversation_id": conversation}}
    items, _ = post_turn(client, body, stream=False)
    assert items[1] == {**items[1], "type": "function_call_output", "output": "renamed"}
    assert titles(client, conversation) == ["Mine"]


def test_a_body_that_is_not_json_is_a_400(client):
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    headers = {"content-type": "application/json"}
    response = client.patch(f"/conversations/{chat.id}", content=b"{title", headers=headers)
    assert response.status_code == 400 and "must be JSON" in response.json()["error"]["message"]


@pytest.mark.usefixtures("traced")
def test_a_branch_keeps_the_traces_of_the_answers_it_keeps(client):
    """After a regenerate, the answers before it keep their traces (the chat page shows their thumbs again)."""
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    chat.send("Tell me more")
    before = stored(client, chat.id).json()["trace_ids"]
    branch(client, chat, chat.history[:2], "Tell me more")  # the second answer again
    after = stored(client, chat.id).json()["trace_ids"]
    assert after[1] is not None and after[1] == before[1], (before, after)
    assert after[3] is not None and after[3] != before[3]
