# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Tool progress (agent_server/tools/progress.py): a tool call is streamed when it starts, as the
`response.output_item.added` of its call with status `in_progress`, and finished with its output as before; on
/invocations and /responses, streamed and as a background run, through the real app served over HTTP (a test
client would hand over the stream only once it ended), the real SDK and the offline model, in both API modes."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import loopback
import pytest
from conftest import AppSettings
from support import served_with_memory, sse_events

from agent_server.history import INTERRUPTED_CALL_OUTPUT
from agent_server.history.tool_pairs import ID_PREFIXES

from .test_runs import SlowTool

PATHS = ("/invocations", "/responses")
HOW = ("stream", "background")
ADDED, DONE = "response.output_item.added", "response.output_item.done"
HOLD = 0.3  # how long a held tool runs after its call is announced: its output can come no sooner


@pytest.fixture
def served(app_settings: AppSettings, api_mode: str, tmp_path) -> Iterator[str]:
    with served_with_memory(app_settings, tmp_path) as url:
        yield url


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowTool]:
    tool = SlowTool()
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: tool.agent)
    yield tool
    tool.release.set()


def body(how: str, text: str = "Please run hold", **more: Any) -> dict[str, Any]:
    sent = {"input": [{"role": "user", "content": text}], "stream": True, **more}
    return {**sent, "background": True} if how == "background" else sent


Timed = list[tuple[float, dict[str, Any]]]


def timed_events(
    url: str, path: str, sent: dict[str, Any], user: str, slow: SlowTool | None = None, hold: float = HOLD
) -> Timed:
    """Each event of the stream with the time it arrived; `slow`'s tool is let go `hold` seconds after its call
    starts (its `added`), so its output can come no sooner."""
    events: Timed = []
    with loopback.stream("POST", url + path, json=sent, headers={"x-test-user": user}, timeout=60) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            events.append((time.monotonic(), event))
            if slow is not None and started(event):
                assert not slow.release.is_set(), "announced before its output"
                deadline = time.monotonic() + 10
                while slow.calls == 0:  # announced as the SDK starts it: the tool's own start may come just after
                    assert time.monotonic() < deadline, "the tool never started"
                    time.sleep(0.01)
                time.sleep(hold)
                slow.release.set()
    return events


def started(event: dict[str, Any]) -> bool:
    return event.get("type") == ADDED and event["item"]["type"] in ("function_call", "mcp_call")


def announced_early(events: Timed) -> bool:
    """Was a call announced before its output? (/responses announces every item, with its output, the instant
    before it ends.)"""
    return any(started(event) and "output" not in event["item"] for _, event in events)


@pytest.mark.waits
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("path", PATHS)
def test_a_call_is_streamed_when_it_starts_a_tools_time_before_its_output(served, slow, path, how):
    user = f"progress-{uuid.uuid4()}@example.com"
    events = timed_events(served, path, body(how), user, slow)
    added = [(at, event) for at, event in events if started(event)]
    assert len(added) == 1, [event for _, event in events]
    at, event = added[0]
    call = event["item"]
    assert call["status"] == "in_progress" and call["name"] == "hold" and "output" not in call
    kind = "mcp_call" if path == "/responses" else "function_call"
    assert call["type"] == kind
    ended = [(when, e) for when, e in events if e.get("type") == DONE and e["item"]["type"] == kind]
    assert len(ended) == 1, "announced once, finished once"
    finished_at, finished = ended[0]
    assert finished_at - at >= HOLD, "the call came a tool's time before its output"
    if path == "/responses":  # the same item: its index and id, the API's client pairs them
        assert finished["output_index"] == event["output_index"] and finished["item"]["id"] == call["id"]
        assert finished["item"]["output"] == "released" and finished["item"]["status"] == "completed"
        assert not [e for _, e in events if e.get("type") == ADDED and e["item"]["id"] == call["id"] and e is not event]
    else:
        assert finished["item"]["call_id"] == call["call_id"] and call["id"].startswith(ID_PREFIXES["function_call"])
        assert 0 <= time.time() - call["started_at"] < 600, "when it started, for a page that replays the stream"
    if how == "background":  # the run's stream from a cursor: the started call is one of its numbered events
        run_id = events[0][1]["response"]["id"]
        cursor = event["sequence_number"] - 1
        params = {"stream": "true", "starting_after": str(cursor)}
        replay = loopback.get(f"{served}/responses/{run_id}", params=params, headers={"x-test-user": user}, timeout=60)
        assert sse_events(replay.text)[0] == event


def done_items(events: Timed) -> list[dict[str, Any]]:
    return [event["item"] for _, event in events if event.get("type") == DONE]


def without_message_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items as a comparison sees them: each message's id is new on every answer."""
    return [{k: v for k, v in item.items() if not (item.get("type") == "message" and k == "id")} for item in items]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("path", PATHS)
def test_the_replayable_items_and_the_stored_conversation_are_the_same_with_progress(
    served, slow, monkeypatch, path, how
):
    """The same two turns, with progress and with it off: the same finished items, and the same conversation kept."""
    slow.release.set()  # the tool answers at once

    def conversation(progress: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        if not progress:
            monkeypatch.setattr("agent_server.turn.serve.started_item", lambda *_: None)
        user, named = f"progress-{uuid.uuid4()}@example.com", f"c-{uuid.uuid4()}"
        finished = []
        for text in ("Please run hold", "Thanks"):
            events = timed_events(served, path, body(how, text, context={"conversation_id": named}), user)
            assert announced_early(events) == (progress and text != "Thanks")
            finished += done_items(events)
        kept = loopback.get(f"{served}/conversations/{named}", headers={"x-test-user": user}, timeout=60)
        assert kept.status_code == 200, kept.text
        return without_message_ids(finished), without_message_ids(kept.json()["items"])

    with_progress, without = conversation(True), conversation(False)
    assert with_progress == without
    assert [item["type"] for item in with_progress[0]][:1] == ["mcp_call" if path == "/responses" else "function_call"]


@pytest.mark.parametrize("path", PATHS)
def test_a_call_that_asks_first_is_not_announced_it_ends_as_its_approval_request(served, path):
    """The default agent's send_summary asks first (needs_approval): the SDK streams its call before it knows, and
    a call announced would never finish; it is not announced, and the answer is its approval request."""
    events = timed_events(served, path, body("stream", "Use send_summary"), f"progress-{uuid.uuid4()}@example.com")
    assert not [event for _, event in events if started(event)]
    assert [item["type"] for item in done_items(events)] == ["mcp_approval_request"]


@pytest.mark.waits
@pytest.mark.parametrize("api_mode", ["responses"], indirect=True)  # the approvals' path is the app's in either mode
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("path", PATHS)
def test_an_approved_call_is_streamed_when_it_starts_and_one_denied_or_replayed_never(
    served, slow, monkeypatch, path, how
):
    """A call the user approved runs before the model is called again (tools/approved_calls.py): it is announced
    as it starts, a tool's time before its output, once its approval passed the checks; a denied call runs nothing
    and is never announced, and nor is an approval sent again (its call ran: its output comes at once)."""
    asking = dataclasses.replace(slow.agent.tools[0], needs_approval=True)
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: slow.agent.clone(tools=[asking]))
    user, context = f"progress-{uuid.uuid4()}@example.com", {"context": {"conversation_id": f"c-{uuid.uuid4()}"}}

    def asked() -> dict[str, Any]:
        [request] = done_items(timed_events(served, path, body(how, **context), user))
        assert request["type"] == "mcp_approval_request" and request["name"] == "hold"
        return request

    def answered(request: dict[str, Any], approve: bool, tool: SlowTool | None = None) -> Timed:
        response = {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": approve}
        return timed_events(served, path, {**body(how, **context), "input": [response]}, user, tool)

    denied = answered(asked(), False)
    assert not [event for _, event in denied if started(event)] and slow.calls == 0, "denied: never announced"
    request = asked()
    events = answered(request, True, slow)
    [(at, event)] = [(at, event) for at, event in events if started(event)]
    call = event["item"]
    assert call["status"] == "in_progress" and call["name"] == "hold" and "output" not in call
    if path == "/responses":  # the API's own approved call: an mcp_call named by its approval
        assert call["type"] == "mcp_call" and call["id"] == call["approval_request_id"] == request["id"]
        [(finished_at, finished)] = [(when, e) for when, e in events if e.get("type") == DONE and e is not event
                                     and e["item"].get("id") == request["id"]]  # fmt: skip
        assert finished["output_index"] == event["output_index"] and finished["item"]["output"] == "released"
    else:
        assert call["type"] == "function_call" and call["call_id"] == request["id"]
        [(finished_at, finished)] = [(when, e) for when, e in events if e.get("type") == DONE
                                     and e["item"].get("call_id") == request["id"]]  # fmt: skip
        assert finished["item"] == {"type": "function_call_output", "call_id": request["id"], "output": "released"}
    assert finished_at - at >= 0.3, "announced a tool's time before its output"
    replayed = answered(request, True)
    assert not [event for _, event in replayed if started(event)] and slow.calls == 1, "ran once, announced once"


@pytest.mark.parametrize("api_mode", ["responses"], indirect=True)  # the runs' path is the app's in either mode
@pytest.mark.parametrize("path", PATHS)
def test_a_call_a_cancel_stops_ends_on_the_stream_with_its_interrupted_output_as_the_turn_keeps_it(served, slow, path):
    """The client cancels a background run while its tool runs: the stream ends the call it announced with the
    output that says it was interrupted (/responses: its mcp_call, at its index), before `response.cancelled`,
    whose output, the run's replay and the stored turn say the same."""
    user, named = f"progress-{uuid.uuid4()}@example.com", f"c-{uuid.uuid4()}"
    sent, headers = body("background", context={"conversation_id": named}), {"x-test-user": user}
    events: list[dict[str, Any]] = []
    with loopback.stream("POST", served + path, json=sent, headers=headers, timeout=60) as response:
        for line in (line for line in response.iter_lines() if line.startswith("data: {")):
            events.append(json.loads(line[6:]))
            if started(events[-1]):
                while slow.calls == 0:
                    time.sleep(0.01)
                run_id = events[0]["response"]["id"]
                assert loopback.post(f"{served}/responses/{run_id}/cancel", json={}, headers=headers).status_code == 200
    [call] = [event for event in events if started(event)]
    position = events.index(call)
    ended = [event["item"] for event in events[position:] if event.get("type") == DONE]
    if path == "/responses":
        [item] = ended
        assert [e["output_index"] for e in events if e.get("type") == DONE] == [call["output_index"]]
        assert item == {**call["item"], "output": INTERRUPTED_CALL_OUTPUT, "status": "incomplete"}
    else:
        call_id = call["item"]["call_id"]
        assert [item["type"] for item in ended] == ["function_call", "function_call_output"]
        assert ended[0]["call_id"] == call_id and ended[0]["name"] == "hold"
        assert ended[1] == {"type": "function_call_output", "call_id": call_id, "output": INTERRUPTED_CALL_OUTPUT}
    assert events[-1]["type"] == "response.cancelled" and events[-1]["response"]["output"] == ended
    replay = loopback.get(f"{served}/responses/{run_id}", params={"stream": "true"}, headers=headers, timeout=60)
    assert sse_events(replay.text) == events, "the run's own stream, as kept"
    kept = loopback.get(f"{served}/conversations/{named}", headers=headers, timeout=60).json()["items"]
    assert [item.get("type", "message") for item in kept] == ["message", "function_call", "function_call_output"]
    assert kept[2]["output"] == INTERRUPTED_CALL_OUTPUT and kept[1]["call_id"] == kept[2]["call_id"]
    assert kept[2]["call_id"] == call["item"].get("call_id", call["item"]["id"]), "the call the stream ended"
