# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""`item_reference` items (agent_server/memory/references.py): a Responses API client that keeps `store: true`, as
the Vercel AI SDK does by default, sends the model's earlier items by id; with memory on, the app puts the caller's
stored items in their place, and the turn joins their conversation."""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi.testclient import TestClient
from support import reply_text

from .test_memory import backend, client  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)


def reference(item_id: str) -> dict[str, str]:
    return {"type": "item_reference", "id": item_id}


def alone() -> dict[str, str]:
    """An identity of its own: on PostgreSQL, the database holds every other test's conversations of the client's."""
    return {"x-test-user": f"references-{uuid.uuid4()}@example.com"}


def turn(http: TestClient, items: list[dict[str, Any]], **headers: str) -> dict[str, Any]:
    answer = http.post("/responses", json={"input": items}, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_references_replay_the_stored_items_and_the_turns_join_their_conversation(client):  # noqa: F811
    """Three turns as the AI SDK sends them with `store: true`: each answer's items come back by id alone, the
    tool the app ran by its mcp_call's id (once for the call, once for its result)."""
    client.headers.update(alone())
    asked = [{"role": "user", "content": "Hello"}]
    first = turn(client, asked)
    asked += [reference(item["id"]) for item in first["output"]] + [{"role": "user", "content": "What time is it?"}]
    second = turn(client, asked)
    assert "I saw 2 user, 1 assistant and 1 tool turns" in reply_text(second["output"])
    call, message = second["output"]
    assert call["type"] == "mcp_call"
    asked += [reference(call["id"]), reference(call["id"]), reference(message["id"])]
    third = turn(client, [*asked, {"role": "user", "content": "Thanks"}])
    assert "I saw 3 user, 2 assistant and 1 tool turns" in reply_text(third["output"]), "the tool turn, replayed"

    listed = client.get("/conversations").json()["conversations"]
    assert len(listed) == 1, "every turn joined the first one's conversation"
    stored = client.get(f"/conversations/{listed[0]['id']}").json()["items"]
    users = [item["content"] for item in stored if item.get("role") == "user"]
    assert users == ["Hello", "What time is it?", "Thanks"], "each turn stored once, in order"


def test_a_reference_by_a_tool_calls_id_alone_finds_its_conversation(client):  # noqa: F811
    """The `mcp_call`'s id is its call's `call_id`, not the id of a stored item: a request whose only references
    are to a tool call still joins the conversation that holds it, and brings the call and its output."""
    user = alone()
    call, _ = turn(client, [{"role": "user", "content": "What time is it?"}], **user)["output"]
    assert call["type"] == "mcp_call"
    asked = [reference(call["id"]), reference(call["id"]), {"role": "user", "content": "And now?"}]
    answer = turn(client, asked, **user)
    assert "and 1 tool turns. You said: And now?" in reply_text(answer["output"]), "the call and its output, once"
    listed = client.get("/conversations", headers=user).json()["conversations"]
    assert len(listed) == 1, "the turn joined the call's conversation"
    stored = client.get(f"/conversations/{listed[0]['id']}", headers=user).json()["items"]
    assert [item["content"] for item in stored if item.get("role") == "user"][-1] == "And now?"
    other = client.post("/responses", json={"input": asked}, headers=alone())
    assert other.status_code == 400 and other.json()["error"]["param"] == "input[0]", "another identity's call"


def test_a_reference_to_an_item_the_caller_does_not_have_is_a_400_that_says_how_to_send_it(client):  # noqa: F811
    first = turn(client, [{"role": "user", "content": "Hello"}])
    ours, other = reference(first["output"][-1]["id"]), alone()
    for items, headers in (
        ([{"role": "user", "content": "Hi"}, reference("msg_nobody_made_this")], {}),
        ([{"role": "user", "content": "Hello"}, ours], other),  # another identity's item
    ):
        answer = client.post("/responses", json={"input": items}, headers=headers)
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["param"] == "input[1]" and "store false" in error["message"], error
    assert [c["id"] for c in client.get("/conversations", headers=other).json()["conversations"]] == []


def test_a_reference_names_its_own_conversation_when_the_request_names_one(client):  # noqa: F811
    first = turn(client, [{"role": "user", "content": "Hello"}])
    other = {"role": "user", "content": "Elsewhere"}
    answer = client.post(
        "/responses",
        json={"input": [other, reference(first["output"][-1]["id"])], "context": {"conversation_id": "elsewhere"}},
    )
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "input[1]", answer.text


def test_with_memory_off_a_reference_is_a_400_that_says_to_send_items_whole(app_settings, api_mode):
    from agent_server.app import app

    app_settings.setenv("MEMORY_BACKEND", "none")
    with TestClient(app) as http:
        answer = http.post("/responses", json={"input": [{"role": "user", "content": "Hi"}, reference("msg_1")]})
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "input[1]" and "store false" in answer.json()["error"]["message"]


def test_a_background_run_resolves_its_references_and_runs_in_their_conversation(client):  # noqa: F811
    client.headers.update(alone())
    asked = [{"role": "user", "content": "Hello"}]
    first = turn(client, asked)
    asked += [reference(first["output"][-1]["id"]), {"role": "user", "content": "And again"}]
    run = client.post("/responses", json={"input": asked, "background": True})
    assert run.status_code == 200, run.text
    done = until(lambda: (r := client.get(f"/responses/{run.json()['id']}").json())["status"] == "completed" and r)
    assert "I saw 2 user, 1 assistant and 0 tool turns" in reply_text(done["output"])
    assert len(client.get("/conversations").json()["conversations"]) == 1


def until(check: Any, seconds: float = 20) -> Any:
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
    return found
