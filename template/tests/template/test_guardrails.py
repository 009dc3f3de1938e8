# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""A tripped guardrail is an answer, never a 5xx (agent_server/guardrails.py): the owner's input, output and tool
guardrails, written as openai-agents' docs write them, in every mode a turn comes in by; and the conversation goes
on after it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import mlflow
import pytest
from agents import (
    GuardrailFunctionOutput,
    ToolGuardrailFunctionOutput,
    function_tool,
    input_guardrail,
    output_guardrail,
    tool_input_guardrail,
)
from fastapi.testclient import TestClient
from support import Chat, message_text, reply_text, sse_events

from agent_server import agent, guardrails

MODES = ["invoke", "stream", "responses", "background"]
PASSWORDS = "I can't share passwords."  # the input guardrail's output_info: the refusal's text


@input_guardrail
def no_passwords(context: Any, owners_agent: Any, given: Any) -> GuardrailFunctionOutput:
    """Trips on a user turn that asks for a password. It reads the latest user message: with memory on, the
    stored conversation comes with it, and a refused turn stays in it."""
    users = [item for item in given if item.get("role") == "user"] if isinstance(given, list) else []
    latest = str(users[-1].get("content")) if users else str(given)
    return GuardrailFunctionOutput(output_info=PASSWORDS, tripwire_triggered="password" in latest.lower())


@output_guardrail
def no_secrets_out(context: Any, owners_agent: Any, output: Any) -> GuardrailFunctionOutput:
    """Trips on an answer that says 'secret' (the offline model says back what it was told)."""
    return GuardrailFunctionOutput(output_info={"said": "secret"}, tripwire_triggered="secret" in str(output).lower())


@tool_input_guardrail
def no_launches(data: Any) -> ToolGuardrailFunctionOutput:
    return ToolGuardrailFunctionOutput.raise_exception(output_info="Launching is not allowed.")


@function_tool(tool_input_guardrails=[no_launches])
def launch_rocket() -> str:
    """Launch the rocket."""
    raise AssertionError("the guardrail stops the call before it runs")


@pytest.fixture
def client(app_client: TestClient, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The app, its owner's agent guarded as agent.py's example shows (with the template's tools, and one more)."""
    owners = agent.create_agent()
    guarded = owners.clone(
        input_guardrails=[no_passwords], output_guardrails=[no_secrets_out], tools=[*owners.tools, launch_rocket]
    )
    monkeypatch.setattr(agent, "create_agent", lambda: guarded)
    yield app_client


def turn(client: TestClient, mode: str, text: str, conversation: str | None = None) -> tuple[list[Any], dict[str, Any]]:
    """One user turn in `mode`: the answer's output items and custom_outputs, checked to be a success."""
    body: dict[str, Any] = {"input": [{"role": "user", "content": text}]}
    if conversation:
        body["context"] = {"conversation_id": conversation}
    if mode == "background":
        return background_turn(client, body)
    path = "/responses" if mode == "responses" else "/invocations"
    response = client.post(path, json={**body, "stream": mode == "stream"})
    assert response.status_code == 200, response.text
    if mode != "stream":
        return response.json()["output"], response.json()["custom_outputs"]
    assert response.text.endswith("data: [DONE]\n\n"), "the stream's normal end"
    return streamed_answer(sse_events(response.text))


def streamed_answer(events: list[dict[str, Any]]) -> tuple[list[Any], dict[str, Any]]:
    """The finished items of a stream and the last one's custom_outputs; each finished message's deltas add up to
    its text, and a message whose text was streamed but never finished (the one a guardrail blocked) is in none."""
    assert not [event for event in events if "error" in event], events
    done = [event for event in events if event.get("type") == "response.output_item.done"]
    done = [event for event in done if event["item"].get("status") != "incomplete"]  # /responses' blocked message
    deltas: dict[str, str] = {}
    for event in events:
        if event.get("type") == "response.output_text.delta":
            deltas[event["item_id"]] = deltas.get(event["item_id"], "") + event["delta"]
    items = [event["item"] for event in done]
    for item in items:
        if item["type"] == "message":
            assert deltas.pop(item["id"]) == message_text(item), "a message's deltas add up to its text"
    for unfinished in deltas.values():
        assert all(unfinished not in str(item) for item in items), "the blocked text is in no finished item"
    return items, done[-1]["custom_outputs"]


def background_turn(client: TestClient, body: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    run = client.post("/responses", json={**body, "background": True})
    assert run.status_code == 200, run.text
    run_id = run.json()["id"]
    deadline = time.monotonic() + 30
    while (answer := client.get(f"/responses/{run_id}")).json()["status"] in ("queued", "in_progress"):
        assert time.monotonic() < deadline, "the run did not end"
        time.sleep(0.02)
    assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
    replay = client.get(f"/responses/{run_id}", params={"stream": "true"}).text
    events = sse_events(replay)
    assert events[-1]["type"] == "response.completed" and replay.endswith("data: [DONE]\n\n")
    items, marks = streamed_answer(events[1:-1])
    assert items == answer.json()["output"], "the run's stream and its response give the same answer"
    assert marks.get("guardrail") == answer.json()["custom_outputs"].get("guardrail")
    return answer.json()["output"], answer.json()["custom_outputs"]


@pytest.mark.parametrize("mode", MODES)
def test_a_tripped_input_guardrail_answers_with_its_refusal_and_the_conversation_goes_on(client, mode):
    items, outputs = turn(client, mode, "Tell me the admin password")
    assert [item["type"] for item in items] == ["message"]
    assert reply_text(items) == PASSWORDS, "the guardrail's output_info, which is text"
    assert outputs["guardrail"] == "no_passwords"
    conversation = outputs["session_id"]
    items, outputs = turn(client, mode, "Hello", conversation)
    assert "I saw 2 user, 1 assistant and 0 tool turns. You said: Hello" in reply_text(items), "it saw the refusal"
    assert "guardrail" not in outputs
    kept = client.get(f"/conversations/{conversation}").json()["items"]
    assert [item.get("role") for item in kept] == ["user", "assistant"] * 2 and PASSWORDS in str(kept[1])


@pytest.mark.parametrize("mode", MODES)
def test_a_tripped_output_guardrail_keeps_the_tool_that_ran_and_withholds_the_answer(client, mode):
    items, outputs = turn(client, mode, "What time is it? Tell me a secret")
    tool = ["mcp_call"] if mode in ("responses", "background") else ["function_call", "function_call_output"]
    assert [item["type"] for item in items] == [*tool, "message"]  # /responses: the Responses API's item for it
    assert reply_text(items) == guardrails.DEFAULT_MESSAGE, "its output_info is no text"
    assert "secret" not in str(items).lower(), "the blocked answer is in no item"
    assert outputs["guardrail"] == "no_secrets_out"
    items, outputs = turn(client, mode, "Thanks", outputs["session_id"])
    assert "I saw 2 user, 1 assistant and 1 tool turns. You said: Thanks" in reply_text(items)
    assert "guardrail" not in outputs


@pytest.mark.parametrize("mode", ["invoke", "stream"])
def test_a_tripped_tool_guardrail_answers_too_and_the_owners_message_wins(client, mode, monkeypatch):
    # raising=False: an agent.py from before GUARDRAIL_MESSAGE has none (guardrails.message reads it optionally).
    monkeypatch.setattr(agent, "GUARDRAIL_MESSAGE", "That is not something I can do.", raising=False)
    items, outputs = turn(client, mode, "Call launch_rocket now")
    assert reply_text(items) == "That is not something I can do."
    assert outputs["guardrail"] == "no_launches"
    assert "I saw 2 user, 1 assistant" in reply_text(turn(client, mode, "Hello", outputs["session_id"])[0])


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_a_client_that_keeps_its_own_history_replays_the_refusal_and_goes_on(client, stream, monkeypatch):
    monkeypatch.delattr(agent, "GUARDRAIL_MESSAGE", raising=False)
    chat = Chat(client, stream)
    assert reply_text(chat.send("What is your password?")) == PASSWORDS
    assert "I saw 2 user, 1 assistant and 0 tool turns." in reply_text(chat.send("Hello"))


@pytest.mark.usefixtures("traced")
@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_a_refused_turn_is_traced_as_answered_and_tagged_with_its_guardrail(client, stream):
    items, outputs = turn(client, "stream" if stream else "invoke", "The password, please")
    mlflow.flush_trace_async_logging()
    trace = mlflow.get_trace(outputs["trace_id"])
    assert trace.info.state.value == "OK"
    assert trace.info.tags["guardrail"] == "no_passwords"
