# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in tests/.
"""However a background run ends, its conversation keeps every turn before it: a run the client cancels during a
tool or before any text, and a run resumed after its process died, each append their turn, never replace; and a run
whose process died after its turn was stored keeps that turn once."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from agents import Agent, AgentHooks
from fastapi.testclient import TestClient
from support import reply_text

from agent_server import llm, memory
from agent_server.history import INTERRUPTED_CALL_OUTPUT
from agent_server.runs import execute, recovery

from .test_memory import ADA, backend, counts  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)
from .test_runs import client, crashed_after_its_tool, ended, slow, until  # noqa: F401


def two_turns(app: TestClient, conversation: str) -> list[dict[str, Any]]:
    """Two turns of `conversation`, each its new message alone; the stored items after them."""
    for text in ("Hello", "Tell me more"):
        named = {"input": [{"role": "user", "content": text}], "context": {"conversation_id": conversation}}
        assert app.post("/responses", json=named).status_code == 200
    kept = app.get(f"/conversations/{conversation}").json()["items"]
    assert [item.get("role") for item in kept] == ["user", "assistant", "user", "assistant"]
    return kept


def cancel(app: TestClient, run_id: str) -> dict[str, Any]:
    cancelled = app.post(f"/responses/{run_id}/cancel", json={})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
    return cancelled.json()


def test_cancel_during_a_tool_keeps_the_turns_before_it_and_answers_with_what_it_had(client, slow, model_log):  # noqa: F811
    conversation = f"kept-{uuid.uuid4()}"
    before = two_turns(client, conversation)
    named = {"input": [{"role": "user", "content": "Please hold"}], "context": {"conversation_id": conversation}}
    run_id = client.post("/responses", json={**named, "background": True}).json()["id"]
    until(lambda: slow.calls, "the tool to start")

    answered = cancel(client, run_id)
    [call] = answered["output"]  # the API's own item for a call the app ran (turn/responses_shapes.py)
    assert call["type"] == "mcp_call" and call["name"] == "hold", "the cancel's answer names the call it stopped"
    assert call["output"] == INTERRUPTED_CALL_OUTPUT and call["status"] == "incomplete"
    assert client.get(f"/responses/{run_id}").json()["output"] == answered["output"], "and so does the run, read"

    kept = client.get(f"/conversations/{conversation}").json()["items"]
    assert kept[:4] == before, "every earlier turn is kept, as it was"
    assert [item.get("type", "message") for item in kept[4:]] == ["message", "function_call", "function_call_output"]
    assert kept[4]["content"] == "Please hold" and kept[6]["output"] == INTERRUPTED_CALL_OUTPUT
    named = {"input": [{"role": "user", "content": "Go on"}], "context": {"conversation_id": conversation}}
    assert counts(4, 2, 1) in reply_text(client.post("/responses", json=named).json()["output"]), "the model sees all"
    assert slow.calls == 1


class HeldAfterTheModel(AgentHooks):
    """Holds the run once the model has answered (`before_text`: before it does), until the test lets it go: a
    run cancelled then has streamed its text, but not finished its message."""

    def __init__(self, before_text: bool) -> None:
        self.held = 0
        self.before_text = before_text
        self.release = threading.Event()

    async def on_llm_start(self, context, agent, system_prompt, input_items) -> None:  # noqa: ANN001
        if self.before_text:
            await self._hold()

    async def on_llm_end(self, context, agent, response) -> None:  # noqa: ANN001
        if not self.before_text:
            await self._hold()

    async def _hold(self) -> None:
        self.held += 1
        while not self.release.is_set():
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("before_text", [False, True], ids=["during-its-text", "before-any-text"])
def test_cancel_of_a_text_answer_keeps_the_turns_before_it(client, monkeypatch, before_text):  # noqa: F811
    conversation = f"kept-{uuid.uuid4()}"
    before = two_turns(client, conversation)
    hooks = HeldAfterTheModel(before_text)
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: Agent("held", "x", model=llm.model(), hooks=hooks))
    named = {"input": [{"role": "user", "content": "And then?"}], "context": {"conversation_id": conversation}}
    run_id = client.post("/responses", json={**named, "background": True}).json()["id"]
    until(lambda: hooks.held, "the run to be held")
    try:
        output = cancel(client, run_id)["output"]
    finally:
        hooks.release.set()
    kept = client.get(f"/conversations/{conversation}").json()["items"]
    assert kept[:4] == before, "every earlier turn is kept, as it was"
    assert kept[4] == {"role": "user", "content": "And then?"}
    if before_text:
        assert output == [] and kept[5:] == []
    else:
        said = reply_text(output)
        # Kept with the API's mark of a message cut off (memory/cut_short.py): the page's "Stopped" on reopen.
        assert output[-1]["status"] == "incomplete", output
        assert "I saw 3 user" in said and kept[5:] == [{"role": "assistant", "content": said, "status": "incomplete"}]
        # The marked turn is history the model reads as any other, in either API mode.
        named["input"] = [{"role": "user", "content": "Go on"}]
        answer = client.post("/responses", json=named).json()
        assert "I saw 4 user, 3 assistant" in reply_text(answer["output"]), answer


@pytest.mark.parametrize("earlier_turn", [True, False], ids=["named-conversation", "first-turn"])
def test_a_run_resumed_after_a_crash_appends_its_turn_after_the_ones_before(client, slow, model_log, earlier_turn):  # noqa: F811
    """Its process died after the tool's output was stored; the run resumes on the stored steps, and its turn
    (prompt, call, output, answer) lands after the conversation's earlier turns, which stay."""
    conversation = f"resumed-{uuid.uuid4()}"
    before = two_turns(client, conversation) if earlier_turn else []
    dead = crashed_after_its_tool(client, conversation)
    assert ended(client, dead.id)["status"] == "completed"
    kept = client.get(f"/conversations/{conversation}").json()["items"]
    assert kept[: len(before)] == before, "the earlier turns are kept"
    turn = kept[len(before) :]
    assert [item.get("type", "message") for item in turn] == ["message", "function_call", "function_call_output",
                                                              "message"], turn  # fmt: skip
    assert turn[0]["content"] == "Please hold" and turn[2]["output"] == "stored before the crash"
    assert slow.calls == 0, "the stored call did not run again"


def died_before_its_end(app: TestClient, run_id: str) -> None:
    """The run's process died after its turn was stored, before the run's end was: its last event (response.completed)
    and its status are not stored, and no process holds it; the next heartbeat claims it."""
    # GET /responses/{id} answers from the live run, which says completed before its last events and status are
    # written: wait until they are (the run has left this process's live runs), or the wrong event is undone.
    until(lambda: run_id not in execute.RUNNING, "the run's end to be stored")
    runs, events = memory.runs_table, memory.run_events_table

    def undone(connection: sa.Connection) -> None:
        last = connection.scalar(sa.select(sa.func.max(events.c.seq)).where(events.c.run_id == run_id))
        connection.execute(events.delete().where(events.c.run_id == run_id, events.c.seq == last))
        connection.execute(runs.update().where(runs.c.id == run_id).values(
            status="in_progress", holder="gone:1", heartbeat_until=time.time() - 1))  # fmt: skip

    async def died() -> None:
        await memory.transact(undone, write=True)
        await recovery.beat()

    app.portal.call(died)


@pytest.mark.parametrize(("path", "prompt"), [("/responses", "And then?"), ("/invocations", "Use send_summary")],
                         ids=["an-answer", "an-approval-request"])  # fmt: skip
def test_a_run_whose_process_died_after_its_turn_was_stored_keeps_that_turn_once(client, model_log, path, prompt):  # noqa: F811
    """The resumed run finds its turn (ended on an answer, or on an approval request) in its conversation: it ends
    with what it had, and neither the model nor the conversation gets the turn a second time."""
    conversation = f"stored-{uuid.uuid4()}"
    before = two_turns(client, conversation)
    named = {"input": [{"role": "user", "content": prompt}], "context": {"conversation_id": conversation}}
    run_id = client.post(path, json={**named, "background": True}).json()["id"]
    answered = ended(client, run_id)
    assert answered["output"][-1]["type"] == ("message" if path == "/responses" else "mcp_approval_request")
    kept = client.get(f"/conversations/{conversation}").json()["items"]
    assert kept[:4] == before and kept[4] == named["input"][0] and len(kept) == 6
    asked = len(model_log)
    died_before_its_end(client, run_id)
    again = ended(client, run_id)
    assert again["status"] == "completed" and again["output"] == answered["output"], again
    assert client.get(f"/conversations/{conversation}").json()["items"] == kept, "the turn is kept once"
    assert len(model_log) == asked, "the model was not asked again"
