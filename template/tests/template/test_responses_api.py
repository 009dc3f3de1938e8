# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""/responses as OpenAI's own client speaks it (turn/responses_api.py): the `openai` package against the
real app, the real SDK and the offline model, in both API modes; each response and each event the app sends is
validated against the package's own types (openai.types.responses), as the offline model validates what it gets."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from openai import OpenAI
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter
from support import sse_events

EVENTS = TypeAdapter(ResponseStreamEvent)
CONTENT_EVENTS = ("response.output_text.delta", "response.output_text.done", "response.content_part.added")
CONTENT_EVENTS += ("response.content_part.done", "response.output_item.done")
LAST_EVENTS = ("response.completed", "response.failed", "response.incomplete", "response.cancelled")


@pytest.fixture
def http(api_mode: str, model_log: list[dict[str, Any]]) -> Iterator[TestClient]:
    from agent_server.app import app

    with TestClient(app, headers={"x-test-user": f"oai-{uuid.uuid4()}@example.com"}) as test_client:
        yield test_client


@pytest.fixture
def client(http: TestClient) -> OpenAI:
    return OpenAI(base_url=str(http.base_url), api_key="unused", http_client=http, max_retries=0)


def valid_response(response: dict[str, Any]) -> Response:
    """The response as the `openai` package's type, checked: what every Responses API client reads is there."""
    checked = Response.model_validate(response)
    assert checked.id.startswith("resp_") and checked.created_at > 0 and checked.model and checked.status
    assert not [item for item in response["output"] if item["type"] == "function_call_output"]
    return checked


def valid_stream(events: list[dict[str, Any]], first: int = 0, whole: bool = True) -> list[dict[str, Any]]:
    """Each event is one of the API's, numbered on from `first`; each content event names an item announced
    before it; a whole stream starts with response.created and ends with its last event."""
    for event in events:
        EVENTS.validate_python(event)
    assert [event["sequence_number"] for event in events] == list(range(first, first + len(events)))
    if whole:
        assert [event["type"] for event in events[:2]] == ["response.created", "response.in_progress"]
        assert events[-1]["type"] in LAST_EVENTS
        valid_response(events[-1]["response"])
        ids = {event["response"]["id"] for event in events if "response" in event}
        assert len(ids) == 1, "one response from its first event to its last"
    announced: dict[int, str] = {}
    for event in events:
        if event["type"] == "response.output_item.added":
            announced[event["output_index"]] = event["item"]["id"]
        elif event["type"] in CONTENT_EVENTS and whole:
            item_id = event["item"]["id"] if "item" in event else event["item_id"]
            assert announced.get(event["output_index"]) == item_id, f"not announced: {event}"
    if whole:  # the SDK's helper completes no response with an item left open
        done = {event["output_index"] for event in events if event["type"] == "response.output_item.done"}
        assert set(announced) <= done, f"items never finished: {set(announced) - done}"
    return events


def test_a_synchronous_response_is_the_apis(client: OpenAI, http: TestClient) -> None:
    answer = client.responses.create(model="agent", input="What time is it?")
    assert answer.id.startswith("resp_") and answer.created_at and answer.status == "completed" and answer.model
    assert [item.type for item in answer.output] == ["mcp_call", "message"]
    call = answer.output[0]
    assert call.type == "mcp_call" and call.name == "get_current_time" and call.output and call.server_label
    assert "The tool returned" in answer.output_text
    raw = http.post("/responses", json={"input": "What time is it?"}).json()
    valid_response(raw)


def test_the_sdks_stream_helper_reads_a_tool_turn(client: OpenAI, http: TestClient) -> None:
    with client.responses.stream(model="agent", input="What time is it?") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [item.type for item in final.output] == ["mcp_call", "message"] and "The tool returned" in final.output_text
    raw = http.post("/responses", json={"input": "What time is it?", "stream": True})
    valid_stream(sse_events(raw.text))


def test_invocations_keep_mlflows_agent_format(http: TestClient) -> None:
    """The Databricks clients read a tool turn from /invocations as function_call and function_call_output."""
    answer = http.post("/invocations", json={"input": "What time is it?"}).json()
    assert [item["type"] for item in answer["output"]] == ["function_call", "function_call_output", "message"]
    streamed = sse_events(http.post("/invocations", json={"input": "What time is it?", "stream": True}).text)
    assert "response.created" not in [event["type"] for event in streamed]
    done = [event["item"]["type"] for event in streamed if event["type"] == "response.output_item.done"]
    assert done == ["function_call", "function_call_output", "message"]


def ended(client: OpenAI, response_id: str) -> Response:
    deadline = time.monotonic() + 60
    while (found := client.responses.retrieve(response_id)).status in ("queued", "in_progress"):
        assert time.monotonic() < deadline, "the run did not end"
        time.sleep(0.05)
    return found


def test_background_runs_retrieve_resume_and_cancel(client: OpenAI, http: TestClient) -> None:
    started = client.responses.create(model="agent", input="What time is it?", background=True)
    assert started.id.startswith("resp_") and started.status in ("queued", "in_progress") and started.model
    done = ended(client, started.id)
    assert done.status == "completed" and [item.type for item in done.output] == ["mcp_call", "message"]
    valid_response(http.get(f"/responses/{started.id}").json())

    streamed = list(client.responses.create(model="agent", input="What time is it?", background=True, stream=True))
    assert streamed[0].type == "response.created" and streamed[-1].type == "response.completed"
    run_id = streamed[0].response.id
    raw = valid_stream(sse_events(http.get(f"/responses/{run_id}", params={"stream": "true"}).text))
    assert [event.model_dump(exclude_none=True) for event in streamed] == [EVENTS.validate_python(e).model_dump(
        exclude_none=True) for e in raw]  # fmt: skip
    resumed = list(client.responses.retrieve(run_id, stream=True, starting_after=3))
    assert [event.sequence_number for event in resumed] == list(range(4, len(raw)))
    valid_stream([event for event in raw if event["sequence_number"] > 3], first=4, whole=False)

    cancelled = client.responses.cancel(run_id)  # ended already: the answer says how
    assert cancelled.id == run_id and cancelled.status == "completed" and cancelled.model
    valid_response(http.post(f"/responses/{run_id}/cancel", json={}).json())


@pytest.mark.parametrize("how", ["create", "stream", "background"])
def test_a_three_turn_chat_replays_what_the_client_got(client: OpenAI, how: str) -> None:
    """The client keeps its own history: each turn sends the items the app returned, as the SDK gives them."""
    history: list[Any] = []
    for text in ["Hello", "What time is it?", "Thanks"]:
        history.append({"role": "user", "content": text})
        if how == "create":
            answer = client.responses.create(model="agent", input=history)
        elif how == "stream":
            with client.responses.stream(model="agent", input=history) as stream:
                answer = stream.get_final_response()
        else:
            answer = ended(client, client.responses.create(model="agent", input=history, background=True).id)
        assert answer.status == "completed"
        history.extend(item.model_dump(exclude_none=True) for item in answer.output)
    assert [item["type"] for item in history if "type" in item] == ["message", "mcp_call", "message", "message"]
    assert "I saw 3 user, 2 assistant and 1 tool turns" in answer.output_text, answer.output_text


def test_an_approved_call_is_an_mcp_call_that_answers_its_request(client: OpenAI, monkeypatch) -> None:
    """The Responses API's approvals: the request, the user's answer, then the call with `approval_request_id` and
    its output; replayed, the model sees the call once, answered by what the tool returned."""
    from agent_server import agent
    from agent_server.tools import approved_calls

    from .test_local_tool_approvals import SENT, asking_agent

    monkeypatch.setattr(agent, "create_agent", asking_agent)
    approved_calls.forget_all()
    SENT.clear()
    history: list[Any] = [{"role": "user", "content": "Use send_email, please"}]
    [request] = client.responses.create(model="agent", input=history).output
    assert request.type == "mcp_approval_request" and request.name == "send_email"
    history += [request.model_dump(exclude_none=True)]
    history += [{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}]
    with client.responses.stream(model="agent", input=history) as stream:
        answer = stream.get_final_response()
    call = answer.output[0]
    assert call.type == "mcp_call" and call.approval_request_id == request.id and call.name == "send_email"
    assert call.output == "sent to ada@example.com" and call.arguments == request.arguments
    history += [item.model_dump(exclude_none=True) for item in answer.output] + [{"role": "user", "content": "Thanks"}]
    last = client.responses.create(model="agent", input=history)
    assert "I saw 2 user, 1 assistant and 1 tool turns" in last.output_text, last.output_text
    assert SENT == ["ada@example.com"], "the approved call ran once"


def test_a_run_resumed_mid_message_ends_the_message_its_stop_cut_off(client: OpenAI, http: TestClient) -> None:
    """A run whose process stopped while a message streamed (its stored events end mid-text), resumed by the next
    heartbeat: the cut-off message ends incomplete with no text, the new attempt's items are numbered after it,
    and the whole stream is one the SDK's helper completes."""
    from agent_server.memory import database, owner_of
    from agent_server.runs import execute, recovery, store
    from agent_server.runs.store import Run

    body = {"input": [{"role": "user", "content": "Hello there"}]}
    first = sse_events(http.post("/responses", json={**body, "background": True, "stream": True}).text)
    cut = next(n for n, event in enumerate(first) if event["type"] == "response.output_text.delta") + 1
    kept = {**body, execute.PATH_KEY: "/responses"}  # as a run posted to /responses is kept
    dead = Run(f"resp_{uuid.uuid4().hex}", owner_of(http.headers), "", None, "x", kept, True, status="in_progress",
               holder="gone:1", heartbeat_until=time.time() - 1, created_at=time.time())  # fmt: skip
    earlier = [{**event, "response": {**event["response"], "id": dead.id}} if "response" in event else event
               for event in first[:cut]]  # fmt: skip

    async def stopped() -> None:
        opened = await database.store()
        await opened.run(store.create(dead), write=True)
        await opened.run(store.append(dead, 0, [json.dumps(event) for event in earlier], None), write=True)
        await recovery.beat()

    http.portal.call(stopped)
    assert ended(client, dead.id).status == "completed"
    whole = valid_stream(sse_events(http.get(f"/responses/{dead.id}", params={"stream": "true"}).text))
    assert whole[:cut] == earlier, "what a client saw before the stop"
    cut_off = whole[cut]
    assert cut_off["type"] == "response.output_item.done" and cut_off["output_index"] == 0
    assert cut_off["item"]["status"] == "incomplete" and cut_off["item"]["content"] == []
    [answer] = whole[-1]["response"]["output"]
    assert answer["type"] == "message" and "Hello there" in answer["content"][0]["text"], "answered anew"
    assert whole[cut + 1]["type"] == "response.output_item.added" and whole[cut + 1]["output_index"] == 1
