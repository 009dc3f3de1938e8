# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The first answer to an approval request is final, however the history comes back (tools/approval_answers.py),
and approvals outlive restarts with no setting: with memory on, the key that signs them is kept in its store
(memory/approval_store.py). Runs are counted at a real MCP server (delete_file) and at the owner's own function
tool (charge_card, `needs_approval=True`). Across two worker processes: test_workers.py."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import loopback
import pytest
import sqlalchemy as sa
from agents import function_tool
from fastapi.testclient import TestClient
from support import DELETED, ServerThread, StartedApp, app_env, mcp_tool_server, post_turn, reply_text

from agent_server import agent
from agent_server.history import approvals
from agent_server.memory import approval_store
from agent_server.memory.store import Store

CHARGED: list[str] = []
PROMPTS = {"mcp": "Use delete_file, please", "local": "Use charge_card, please"}


@function_tool(needs_approval=True)
def charge_card(amount: str = "10 EUR") -> str:
    """Charge the user's card (the tests' stand-in for a tool with effects: each call is counted)."""
    CHARGED.append(amount)
    return f"charged {amount}"


@pytest.fixture(scope="module")
def tools_url() -> Iterator[str]:
    with ServerThread(mcp_tool_server().app) as url:
        yield f"{url}/mcp"


def declared(tools_url: str) -> str:
    return json.dumps([{"name": "tools", "url": tools_url, "require_approval": ["delete_file"]}])


# Memory on SQLite, off, and on PostgreSQL when MEMORY_TEST_POSTGRES_URL names a database (test_memory.py).
STORES = ["memory", "no-memory"] + (["postgres"] if os.environ.get("MEMORY_TEST_POSTGRES_URL") else [])


@pytest.fixture(params=STORES)
def client(request, app_settings, api_mode, model_log, tools_url, monkeypatch) -> Iterator[tuple[TestClient, bool]]:
    """The app with an MCP server whose delete_file asks first, and an agent whose own charge_card does; with
    conversation memory on, or off (MEMORY_BACKEND=none)."""
    from agent_server.app import app

    app_settings.setenv("MCP_SERVERS", declared(tools_url))
    if request.param == "no-memory":
        app_settings.setenv("MEMORY_BACKEND", "none")
    elif request.param == "postgres":
        app_settings.setenv("MEMORY_BACKEND", "postgres")
        app_settings.setenv("MEMORY_DATABASE_URL", os.environ["MEMORY_TEST_POSTGRES_URL"])
    starter = agent.create_agent
    monkeypatch.setattr(agent, "create_agent", lambda: starter().clone(tools=[*starter().tools, charge_card]))
    DELETED.clear()
    CHARGED.clear()
    with TestClient(app) as test_client:
        yield test_client, request.param != "no-memory"


def runs() -> list[str]:
    return [*DELETED, *CHARGED]


def answer(request: dict[str, Any], approve: bool) -> dict[str, Any]:
    return {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": approve}


class Replays:
    """One conversation: with memory on, named from its first turn (as the Databricks chat UI names it)."""

    def __init__(self, client: httpx.Client, memory: bool, stream: bool = False) -> None:
        self.client, self.memory, self.stream = client, memory, stream
        self.id = f"approvals-{uuid.uuid4().hex}"

    def send(self, items: list[dict[str, Any]], **custom: Any) -> list[dict[str, Any]]:
        body: dict[str, Any] = {"input": items}
        if self.memory:
            body["context"] = {"conversation_id": self.id}
        if custom:
            body["custom_inputs"] = custom
        return post_turn(self.client, body, self.stream)[0]

    def outputs(self, call_id: str) -> list[Any]:
        """The outputs of this call in the stored conversation (GET /conversations/{id})."""
        kept = self.client.get(f"/conversations/{self.id}").json()["items"]
        return [item["output"] for item in kept if item.get("call_id") == call_id and "output" in item]


DENIED = f"The tool returned: {approvals.DENIED}"


@pytest.mark.parametrize("tool", ["mcp", "local"])
def test_a_denied_call_never_runs_however_its_approval_comes_back(client, tool):
    """Denied, then approved: alone, in the whole history again (twice), in a regenerate (replace_history)."""
    test_client, memory = client
    chat = Replays(test_client, memory)
    prompt = {"role": "user", "content": PROMPTS[tool]}
    [request] = chat.send([prompt])
    assert request["type"] == "mcp_approval_request"
    whole = [prompt, request]
    assert DENIED in reply_text(chat.send([answer(request, False)] if memory else [*whole, answer(request, False)]))
    shapes = {"the whole history again": [*whole, answer(request, True)]}
    if memory:
        shapes["the approval alone"] = [answer(request, True)]
    for shape, items in shapes.items():
        assert DENIED in reply_text(chat.send(items)), shape
        assert DENIED in reply_text(chat.send(items)), f"{shape}, twice"
    if memory:
        assert DENIED in reply_text(chat.send([*whole, answer(request, True)], replace_history=True)), "regenerate"
        assert chat.outputs(request["id"]) == [approvals.DENIED], "what the conversation keeps says so too"
    assert runs() == []


def test_a_denial_with_a_reason_tells_the_model_why_keeps_it_and_stays_final(client):
    """Deny with a reason (the chat page's Deny, an `mcp_approval_response` with `reason`): the model is told the
    reason with the denial, the conversation keeps it, and an approval sent after it still runs nothing. With memory
    on, through /invocations and a /responses client; without, the history replayed."""
    test_client, memory = client
    chat = Replays(test_client, memory)
    prompt = {"role": "user", "content": PROMPTS["local"]}
    [request] = chat.send([prompt])
    denial = {**answer(request, False), "reason": "Not this card, it is the company's"}
    told = f"{approvals.DENIED} Reason: Not this card, it is the company's"
    assert f"The tool returned: {told}" in reply_text(chat.send([denial] if memory else [prompt, request, denial]))
    approval = [answer(request, True)] if memory else [prompt, request, answer(request, True)]
    assert DENIED in reply_text(chat.send(approval)), "the first answer is final"
    if memory:
        assert chat.outputs(request["id"]) == [told], "kept, for the page to show again"
        [asked] = chat.send([{"role": "user", "content": PROMPTS["local"] + " again"}])
        body = {"input": [{**answer(asked, False), "reason": "no"}], "context": {"conversation_id": chat.id}}
        output = test_client.post("/responses", json=body).json()["output"]
        assert f"The tool returned: {approvals.DENIED} Reason: no" in reply_text(output), "a /responses client"
    assert runs() == []


@pytest.mark.parametrize("tool", ["mcp", "local"])
def test_an_approved_call_runs_once_and_a_denial_sent_after_it_runs_nothing(client, tool):
    test_client, memory = client
    chat = Replays(test_client, memory, stream=True)
    prompt = {"role": "user", "content": PROMPTS[tool]}
    [request] = chat.send([prompt])
    ran = "deleted a.txt" if tool == "mcp" else "charged 10 EUR"
    whole = [prompt, request]
    assert f"The tool returned: {ran}" in reply_text(chat.send([*whole, answer(request, True)]))
    again = reply_text(chat.send([*whole, answer(request, False)]))
    # With memory the conversation holds the call's output; without, the model is told that it ran.
    assert f"The tool returned: {ran if memory else approvals.NOT_RUN_AGAIN}" in again
    assert runs() == (["a.txt"] if tool == "mcp" else ["10 EUR"])


def test_only_answers_to_ids_of_the_apps_shape_are_kept():
    """A client's made-up id (here one longer than the store's column) names no request of the app's: its answer is
    not kept, so no history can fail its turns in the store."""
    made = approvals.approval_id([{"role": "user", "content": "Delete it"}], "delete_file", "{}")
    ids = [made, approvals.ID_PREFIX + "f" * 100, approvals.ID_PREFIX + "1"]
    items = [{"type": "function_call_output", "call_id": call_id, "output": approvals.DENIED} for call_id in ids]
    assert approvals.answers(items) == {made: False}


def test_processes_that_open_one_store_at_once_sign_with_one_key(tmp_path):
    """Eight stores (as eight processes would) ask a new database for its key at once: one key, made by whichever
    came first, and the same after a restart (approval_store.signing_key: insert if absent, then read)."""
    url = sa.URL.create("sqlite+pysqlite", database=str(tmp_path / "conversations.db"))

    async def keys() -> list[str]:
        first = Store(url)
        await first.open()  # migrated once, as start-app's check does before its workers start
        stores = [first, *(Store(url) for _ in range(7))]
        try:
            return list(await asyncio.gather(*(store.run(approval_store.signing_key, True) for store in stores)))
        finally:
            await asyncio.gather(*(store.close() for store in stores))

    made = asyncio.run(keys())
    assert len(set(made)) == 1 and len(made[0]) == 64
    assert asyncio.run(keys()) == made, "kept: a restart signs with the same key"


@pytest.mark.parametrize("client", [store for store in STORES if store != "no-memory"], indirect=True)
def test_a_request_that_expired_or_was_signed_with_another_key_is_marked_and_its_approval_runs_nothing(
    client, app_settings
):
    """GET /conversations/{id} names the request the conversation waits on when it can no longer be answered (the
    chat page says so instead of offering Approve), and an approval of it runs nothing: the model is told why."""
    test_client, _ = client
    app_settings.setenv("MCP_APPROVAL_SECRET", "a key the app will not have")
    signed_elsewhere = Replays(test_client, memory=True)
    [old] = signed_elsewhere.send([{"role": "user", "content": PROMPTS["mcp"]}])
    app_settings.delenv("MCP_APPROVAL_SECRET")
    expiring = Replays(test_client, memory=True)
    [request] = expiring.send([{"role": "user", "content": PROMPTS["local"]}])
    closed = lambda chat: test_client.get(f"/conversations/{chat.id}").json()["closed_approvals"]  # noqa: E731
    assert closed(expiring) == {}, "a request made now can be answered"
    assert closed(signed_elsewhere) == {old["id"]: "not_verified"}
    app_settings.setenv("MCP_APPROVAL_MAX_AGE_HOURS", "0.0001")  # 0.36 s
    time.sleep(1.1)
    assert closed(expiring) == {request["id"]: "expired"}
    assert f"The tool returned: {approvals.EXPIRED}" in reply_text(expiring.send([answer(request, True)]))
    assert f"The tool returned: {approvals.NOT_VERIFIED}" in reply_text(signed_elsewhere.send([answer(old, True)]))
    assert runs() == []


@pytest.mark.waits
def test_an_approval_asked_before_a_restart_runs_once_after_it_with_no_setting(tools_url):
    """start-app stopped and started again on the same store, with no MCP_APPROVAL_SECRET: the request it made
    before is its own (the store keeps the key), and its approval runs the call once."""
    env = app_env(LLM_PROVIDER="offline", MCP_SERVERS=declared(tools_url))
    env.pop("MCP_APPROVAL_SECRET", None)
    DELETED.clear()
    conversation = {"conversation_id": f"restart-{uuid.uuid4().hex}"}
    with StartedApp(env) as url, loopback.Client(base_url=url, timeout=60) as before:
        asking = {"input": [{"role": "user", "content": PROMPTS["mcp"]}], "context": conversation}
        [request] = post_turn(before, asking, False)[0]
    with StartedApp(env) as url, loopback.Client(base_url=url, timeout=60) as after:
        kept = after.get(f"/conversations/{conversation['conversation_id']}").json()
        assert kept["items"][-1]["call_id"] == request["id"] and kept["closed_approvals"] == {}
        approved = {"input": [answer(request, True)], "context": conversation}
        assert "The tool returned: deleted a.txt" in reply_text(post_turn(after, approved, True)[0])
        assert "The tool returned: deleted a.txt" in reply_text(post_turn(after, approved, False)[0]), "a retry"
    assert DELETED == ["a.txt"]
