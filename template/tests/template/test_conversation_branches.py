# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""No stored turn is deleted by what a client sends (memory/merge.py, memory/branches.py): a history that differs
from the stored conversation keeps what it replaces as an earlier branch, which GET /conversations/{id} lists and
returns; a sliding window goes on with the conversation; only deleting it, DELETE /me and the limits remove turns.
Through the real app, SDK and offline model, on SQLite and PostgreSQL."""

# ruff: noqa: F811  (test_memory.py's fixtures, imported below, are the tests' arguments)
from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from support import Conversation, post_turn, reply_text

from agent_server.memory import database
from agent_server.store.schema import conversations

from .test_memory import ADA, BOB, backend, client, counts, stored  # noqa: F401  (memory's SQLite and PostgreSQL)


def two_turns(client) -> tuple[str, list[dict[str, Any]]]:
    """A conversation of two turns through /responses, six items (the second a tool turn); its id and output."""
    first = client.post("/responses", json={"input": "Hello"}).json()
    conversation = first["custom_outputs"]["session_id"]
    asked = {"input": "What time is it?", "context": {"conversation_id": conversation}}
    second = client.post("/responses", json=asked).json()
    assert len(stored(client, conversation).json()["items"]) == 6
    return conversation, [*first["output"], *second["output"]]


def roles(items: list[dict[str, Any]]) -> list[str]:
    return [item.get("role") or item["type"] for item in items]


def test_a_history_from_the_first_answer_keeps_the_second_turn_as_an_earlier_branch(client):
    """The report's case: a reference to the first answer, then a new message, on a two-turn conversation. It used
    to leave three items; now the conversation goes on from the first answer, and the second turn is kept."""
    conversation, output = two_turns(client)
    before = stored(client, conversation).json()["items"]
    reference = {"type": "item_reference", "id": output[0]["id"]}
    answer = client.post("/responses", json={"input": [reference, {"role": "user", "content": "Tell me more"}]})
    assert answer.status_code == 200, answer.text
    assert counts(1, 1) in reply_text(answer.json()["output"]), "the model sees the branch the request continues"
    now = stored(client, conversation).json()
    assert [item.get("content") for item in now["items"][:3]] == ["Hello", before[1]["content"], "Tell me more"]
    assert len(now["items"]) == 4 and [(b["branch"], b["items"]) for b in now["branches"]] == [(1, 6)]
    earlier = client.get(f"/conversations/{conversation}", params={"branch": 1}).json()
    assert earlier["branch"] == 1 and earlier["items"] == before, "the earlier branch, as it was"


def test_a_client_that_goes_back_to_an_earlier_branch_by_reference_continues_it(client):
    """An AI SDK client (`store: true`) whose user went back to the first version of the chat sends the ids of items
    that only an earlier branch holds: they are found, and the conversation goes on from that branch, the one it
    leaves kept in turn. (Before branches were searched, each such request was a 400 it could never get past.)"""
    conversation, output = two_turns(client)
    first_answer, call, second_answer = output[0], output[1], output[-1]
    moved_on = [{"type": "item_reference", "id": first_answer["id"]}, {"role": "user", "content": "Tell me more"}]
    assert client.post("/responses", json={"input": moved_on}).status_code == 200
    back = [
        {"role": "user", "content": "Hello"},
        {"type": "item_reference", "id": first_answer["id"]},
        {"role": "user", "content": "What time is it?"},
        {"type": "item_reference", "id": call["id"]},  # the tool's call and its output
        {"type": "item_reference", "id": second_answer["id"]},
        {"role": "user", "content": "Thanks"},
    ]
    answer = client.post("/responses", json={"input": back})
    assert answer.status_code == 200, answer.text
    assert counts(3, 2, 1) in reply_text(answer.json()["output"])
    now = stored(client, conversation).json()
    users = [item["content"] for item in now["items"] if item.get("role") == "user"]
    assert users == ["Hello", "What time is it?", "Thanks"]
    assert [(b["branch"], b["items"]) for b in now["branches"]] == [(1, 6), (2, 4)]


def test_whole_items_that_differ_keep_what_they_replace(client):
    """The same with whole items, naming the conversation: nothing stored is gone."""
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    chat.send("What time is it?")
    before = stored(client, chat.id).json()["items"]
    elsewhere = [{"role": "assistant", "content": "Something else"}, {"role": "user", "content": "Hi"}]
    items, _ = post_turn(client, {"input": elsewhere, "context": {"conversation_id": chat.id}}, stream=True)
    assert counts(1, 1) in reply_text(items)
    now = stored(client, chat.id).json()
    assert roles(now["items"]) == ["assistant", "user", "assistant"] and now["branches"][0]["items"] == 6
    assert client.get(f"/conversations/{chat.id}?branch=1").json()["items"] == before


def test_a_sliding_window_continues_the_conversation_and_deletes_nothing(client):
    """A client that sends only its last items (a window it slides along) sees them, and the stored conversation
    keeps all its turns: no branch is made."""
    chat = Conversation(client, stream=False, full=True)
    chat.send("One")
    chat.send("Two")
    window = chat.history[-1:] + [{"role": "user", "content": "Three"}]  # the last answer, then the new message
    items, _ = post_turn(client, {"input": window, "context": {"conversation_id": chat.id}}, stream=False)
    assert counts(1, 1) in reply_text(items), "the model sees the client's window"
    now = stored(client, chat.id).json()
    assert [item["content"] for item in now["items"] if item["role"] == "user"] == ["One", "Two", "Three"]
    assert now["branches"] == []


def test_edit_and_regenerate_keep_what_they_replace(client):
    """The chat page's Edit and Regenerate (`replace_history`) make branches too, numbered in order."""
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    chat.send("Tell me more")
    first = stored(client, chat.id).json()["items"]
    edit = {"input": [*first[:2], {"role": "user", "content": "Tell me less"}], "context": {"conversation_id": chat.id}}
    post_turn(client, {**edit, "custom_inputs": {"replace_history": True}}, stream=True)
    second = stored(client, chat.id).json()["items"]
    assert second[:2] == first[:2] and second[2]["content"] == "Tell me less"
    regenerate = {"input": second[:3], "context": {"conversation_id": chat.id}}
    post_turn(client, {**regenerate, "custom_inputs": {"replace_history": True}}, stream=False)
    now = stored(client, chat.id).json()
    assert [(b["branch"], b["items"]) for b in now["branches"]] == [(1, 4), (2, 4)]
    for number, items in ((1, first), (2, second)):
        assert client.get(f"/conversations/{chat.id}?branch={number}").json()["items"] == items


def test_a_branch_that_is_not_there_is_a_404_and_a_bad_number_a_400(client):
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    body = {"input": "Hi", "context": {"conversation_id": chat.id}, "custom_inputs": {"replace_history": True}}
    post_turn(client, body, stream=False)
    assert client.get(f"/conversations/{chat.id}?branch=1").status_code == 200
    assert client.get(f"/conversations/{chat.id}?branch=2").status_code == 404
    assert client.get(f"/conversations/{chat.id}?branch=1", headers={"x-test-user": BOB}).status_code == 404
    for bad in ("0", "x", "-1", "1.5", "٣", "9" * 30):
        response = client.get(f"/conversations/{chat.id}", params={"branch": bad})
        assert response.status_code == 400 and response.json()["error"]["param"] == "branch", (bad, response.text)


def test_branches_are_bounded_by_max_items_the_oldest_dropped_first(client, app_settings):
    app_settings.setenv("MEMORY_MAX_ITEMS", "5")
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    chat.send("Again")  # four items
    for _ in range(4):  # four regenerates of the last answer, each setting the four items aside
        history = stored(client, chat.id).json()["items"][:3]
        body = {"input": history, "context": {"conversation_id": chat.id}, "custom_inputs": {"replace_history": True}}
        post_turn(client, body, stream=False)
    listed = stored(client, chat.id).json()["branches"]
    assert [(b["branch"], b["items"]) for b in listed] == [(4, 4)], "the newest branch, whole; no more than 5 items"


def test_deleting_the_conversation_me_or_by_age_removes_its_branches(client):
    def branched(user: str) -> str:
        chat = Conversation(client, stream=False, user=user)
        chat.send("Hello")
        body = {"input": "Hi", "context": {"conversation_id": chat.id}, "custom_inputs": {"replace_history": True}}
        post_turn(client, body, stream=False, headers={"x-test-user": user})
        assert len(stored(client, chat.id, user).json()["branches"]) == 1
        return chat.id

    gone = branched(ADA)
    assert client.delete(f"/conversations/{gone}").status_code == 204
    assert branch_rows(client, gone) == 0

    mine = branched(BOB)
    exported = client.get("/me/export", headers={"x-test-user": BOB}).json()
    [kept] = [c for c in exported["conversations"] if c["id"] == mine]
    assert [(b["branch"], [i["content"] for i in b["items"] if i["role"] == "user"]) for b in kept["branches"]] == [
        (1, ["Hello"])
    ]
    assert len(kept["branches"][0]["trace_ids"]) == 2
    deleted = client.delete("/me", headers={"x-test-user": BOB}).json()["deleted"]
    assert deleted["branch_items"] == 2 and branch_rows(client, mine, BOB) == 0

    old = branched(ADA)

    async def as_if_idle_since_1970() -> int:
        kept = await database.store()
        idle = conversations.update().where(conversations.c.id == old).values(updated_at=0.5)
        await kept.run(lambda connection: connection.execute(idle), write=True)
        return await kept.delete_older_than(1.0)

    assert client.portal.call(as_if_idle_since_1970) >= 1
    assert branch_rows(client, old) == 0


def branch_rows(client, conversation_id: str, owner: str = ADA) -> int:
    """The branch rows the database holds for the conversation, counted in the database itself."""
    from agent_server.store.schema import branches

    query = sa.select(sa.func.count()).where(branches.c.owner == owner, branches.c.conversation_id == conversation_id)

    async def count() -> int:
        return await (await database.store()).run(lambda connection: connection.scalar(query))

    return client.portal.call(count)


def test_edits_and_a_regenerate_make_branches_each_shown_switched_to_and_continued(client, model_log):
    """Edit twice and regenerate once: three branches, and GET /conversations/{id} says where they fork along the
    branch shown (`forks`). A turn continues the branch it names (`custom_inputs.branch`): the model sees that branch
    only, it becomes the conversation again, and the conversation it leaves is kept as a branch in turn."""
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    for edit in ("Hi", "Hey"):
        body = {"input": [{"role": "user", "content": edit}], "context": {"conversation_id": chat.id}}
        post_turn(client, {**body, "custom_inputs": {"replace_history": True}}, stream=False)
    regenerate = {"input": stored(client, chat.id).json()["items"][:1], "context": {"conversation_id": chat.id}}
    post_turn(client, {**regenerate, "custom_inputs": {"replace_history": True}}, stream=True)
    now = stored(client, chat.id).json()
    assert [b["branch"] for b in now["branches"]] == [1, 2, 3]
    assert now["forks"] == [
        {"index": 0, "branches": [1, 2, None], "at": 2},  # Hello, Hi, Hey: the message edited twice
        {"index": 1, "branches": [3, None], "at": 1},  # the answer to Hey, and its regenerate
    ]
    first = client.get(f"/conversations/{chat.id}?branch=1").json()
    assert first["forks"] == [{"index": 0, "branches": [1, 2, None], "at": 0}]
    assert [item["content"] for item in first["items"]][0] == "Hello"

    model_log.clear()
    body = {"input": [{"role": "user", "content": "Go on"}], "context": {"conversation_id": chat.id}}
    items, _ = post_turn(client, {**body, "custom_inputs": {"branch": 1}}, stream=True)
    assert counts(2, 1) in reply_text(items), "the model sees branch 1 and the new message only"
    seen = json.dumps(model_log[-1]["body"])
    assert "Hello" in seen and '"Hi"' not in seen and '"Hey"' not in seen
    now = stored(client, chat.id).json()
    assert [item.get("content") for item in now["items"] if item["role"] == "user"] == ["Hello", "Go on"]
    assert [b["branch"] for b in now["branches"]] == [2, 3, 4], "branch 1 is the conversation; what it was, 4"
    assert client.get(f"/conversations/{chat.id}?branch=4").json()["items"][0]["content"] == "Hey"
    assert now["forks"][0] == {"index": 0, "branches": [2, 4, None], "at": 2}

    # An edit in an earlier branch: that branch keeps what the edit replaces; the model sees the edited branch.
    edit = {"input": [{"role": "user", "content": "Hi there"}], "context": {"conversation_id": chat.id}}
    items, _ = post_turn(client, {**edit, "custom_inputs": {"branch": 2, "replace_history": True}}, stream=False)
    assert counts(1, 0) in reply_text(items)
    after = stored(client, chat.id).json()
    assert [b["branch"] for b in after["branches"]] == [2, 3, 4, 5] and after["items"][0]["content"] == "Hi there"
    # A /responses client says it the same way: branch 5, the conversation before that edit.
    then = {"input": "And then?", "context": {"conversation_id": chat.id}, "custom_inputs": {"branch": 5}}
    assert counts(3, 2) in reply_text(client.post("/responses", json=then).json()["output"])


def test_a_turn_that_names_a_branch_that_is_not_there_or_no_number_is_refused(client):
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    context = {"context": {"conversation_id": chat.id}, "input": "Hi"}
    assert client.post("/invocations", json={**context, "custom_inputs": {"branch": 7}}).status_code == 404
    for bad in (0, -1, "1", True, 1.5):
        answer = client.post("/invocations", json={**context, "custom_inputs": {"branch": bad}})
        assert answer.status_code == 400 and answer.json()["error"]["param"] == "custom_inputs.branch", bad
    unnamed = client.post("/invocations", json={"input": "Hi", "custom_inputs": {"branch": 1}})
    assert unnamed.status_code == 400, unnamed.text
    assert len(stored(client, chat.id).json()["items"]) == 2 and stored(client, chat.id).json()["forks"] == []


def test_search_finds_what_a_continued_branch_brings_back(client):
    """Set aside, a branch's words are not the conversation's; continued, they are again (search_schema.py)."""
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    chat.send("Zebra crossings")
    kept = stored(client, chat.id).json()["items"][:2]
    edit = {"input": [*kept, {"role": "user", "content": "Yak"}], "context": {"conversation_id": chat.id}}
    post_turn(client, {**edit, "custom_inputs": {"replace_history": True}}, stream=False)
    found = lambda: [c["id"] for c in client.get("/conversations", params={"q": "zebra"}).json()["conversations"]]  # noqa: E731
    assert chat.id not in found()
    back = {"input": "More", "context": {"conversation_id": chat.id}, "custom_inputs": {"branch": 1}}
    post_turn(client, back, stream=False)
    assert chat.id in found()
