# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The offline model: real openai-client calls for the valid paths, raw HTTP for the invalid ones.

This module: both APIs (Chat Completions and Responses) through the real openai client, whole and streamed, checked
against the SDK's models; and the helpers the offline model's other test modules share (test_offline_model_*.py:
replies, serving, validation, media).

No mocks: every request goes through the FastAPI app in process (or over HTTP for `main()`).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from agent_server.offline import create_offline_app, offline_client
from agent_server.offline.replies import STREAM_PIECES

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
TIME_TOOL_CHAT = {
    "type": "function",
    "function": {"name": "get_current_time", "parameters": {"type": "object", "properties": {}}},
}
TIME_TOOL_RESPONSES = {
    "type": "function",
    "name": "get_current_time",
    "parameters": {"type": "object", "properties": {}},
    "strict": True,
}
STREAM_EVENT = TypeAdapter(ResponseStreamEvent)


def post(path: str, body: Any, app: Any = None) -> httpx.Response:
    """POST a raw body (a dict as JSON, or bytes as is) to the offline model, in process."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app or create_offline_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://offline-model") as http:
            return await http.post(path, content=content, headers={"content-type": "application/json"})

    return asyncio.run(send())


def assert_rejected(response: httpx.Response, param: str | None, message: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert (error["param"], error["message"]) == (param, message)


def responses_input(*items: dict[str, Any]) -> dict[str, Any]:
    return {"model": "offline", "input": list(items)}


def chat_messages(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "offline", "messages": list(messages)}


def sse_data(response: httpx.Response) -> list[Any]:
    return [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]


def chat_call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "get_current_time", "arguments": "{}"}}


def output_message(item_id: str, text: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def reply(users: int, assistants: int, tools: int, said: str) -> str:
    return f"Offline model: I saw {users} user, {assistants} assistant and {tools} tool turns. You said: {said}"


# --------------------------------------------------------------------------------------------
# Chat Completions through the real openai client
# --------------------------------------------------------------------------------------------


def test_chat_completion_describes_the_conversation() -> None:
    async def run() -> ChatCompletion:
        return await offline_client().chat.completions.create(
            model="offline",
            messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}],
        )

    completion = asyncio.run(run())
    assert completion.id.startswith("chatcmpl-")
    assert completion.choices[0].message.content == reply(1, 0, 0, "hello")
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens > 0


@pytest.mark.parametrize("text", ["hello", "what time is it?"])
def test_chat_json_is_a_valid_chat_completion(text: str) -> None:
    body = {**chat_messages({"role": "user", "content": text}), "tools": [TIME_TOOL_CHAT]}
    completion = ChatCompletion.model_validate(post(CHAT, body).json())
    assert completion.object == "chat.completion" and completion.choices[0].message.role == "assistant"
    chunks = sse_data(post(CHAT, {**body, "stream": True, "stream_options": {"include_usage": True}}))
    assert all(ChatCompletionChunk.model_validate(chunk).object == "chat.completion.chunk" for chunk in chunks)
    assert post(CHAT, {**body, "stream": True}).text.endswith("data: [DONE]\n\n")


def test_chat_completion_streams_role_deltas_finish_and_usage() -> None:
    async def run() -> list[ChatCompletionChunk]:
        stream = await offline_client().chat.completions.create(
            model="offline",
            messages=[{"role": "user", "content": "hello there"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        return [chunk async for chunk in stream]

    chunks = asyncio.run(run())
    assert chunks[0].choices[0].delta.role == "assistant"
    contents = [c.choices[0].delta.content for c in chunks[1:] if c.choices and c.choices[0].delta.content]
    assert len(contents) >= 2
    assert "".join(contents) == reply(1, 0, 0, "hello there")
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None


def test_chat_calls_get_current_time_then_uses_its_output() -> None:
    question = [{"role": "user", "content": "What TIME is it?"}]

    async def ask(messages: list[dict[str, Any]]) -> ChatCompletion:
        return await offline_client().chat.completions.create(
            model="offline", messages=messages, tools=[TIME_TOOL_CHAT]
        )

    first, replay = asyncio.run(ask(question)), asyncio.run(ask(question))
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert (call.function.name, call.function.arguments) == ("get_current_time", "{}")
    assert re.fullmatch(r"call_[0-9a-f]{24}", call.id)
    assert replay.choices[0].message.tool_calls[0].id == call.id  # stable across replays

    answered = [
        *question,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump(exclude_none=True)]},
        {"role": "tool", "tool_call_id": call.id, "content": "12:00"},
    ]
    second = asyncio.run(ask(answered))
    assert second.choices[0].message.content == "The tool returned: 12:00. " + reply(1, 0, 1, "What TIME is it?")


def test_chat_streams_tool_call_deltas() -> None:
    async def run() -> list[ChatCompletionChunk]:
        stream = await offline_client().chat.completions.create(
            model="offline", messages=[{"role": "user", "content": "time?"}], tools=[TIME_TOOL_CHAT], stream=True
        )
        return [chunk async for chunk in stream]

    chunks = asyncio.run(run())
    deltas = [d for c in chunks for d in c.choices[0].delta.tool_calls or []]
    assert deltas[0].index == 0 and deltas[0].id.startswith("call_") and deltas[0].type == "function"
    assert deltas[0].function.name == "get_current_time"
    assert len(deltas) >= 3  # the announcement, then the arguments in two or more pieces
    assert "".join(d.function.arguments or "" for d in deltas) == "{}"
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


# --------------------------------------------------------------------------------------------
# Responses through the real openai client, and checked against the SDK's models
# --------------------------------------------------------------------------------------------


def test_response_describes_the_conversation() -> None:
    async def run() -> Response:
        return await offline_client().responses.create(model="offline", instructions="Be brief.", input="hello")

    response = asyncio.run(run())
    assert response.id.startswith("resp_") and response.status == "completed"
    assert response.output[0].id.startswith("msg_")
    assert response.output_text == reply(1, 0, 0, "hello")
    assert response.usage is not None and response.usage.total_tokens > 0


@pytest.mark.parametrize("text", ["hello", "what time is it?"])
def test_response_json_is_a_valid_response_object(text: str) -> None:
    body = {"model": "offline", "input": text, "tools": [TIME_TOOL_RESPONSES]}
    response = Response.model_validate(post(RESPONSES, body).json())
    item = response.output[0]
    if text == "hello":
        assert (item.type, item.role, item.status) == ("message", "assistant", "completed")
        assert item.content[0].type == "output_text" and item.content[0].annotations == []
    else:
        assert (item.type, item.name, item.arguments, item.status) == (
            "function_call",
            "get_current_time",
            "{}",
            "completed",
        )
        assert item.id.startswith("fc_") and item.call_id.startswith("call_")


def test_response_stream_sends_the_real_text_event_sequence() -> None:
    raw = post(RESPONSES, {"model": "offline", "input": "hello there", "stream": True})
    assert raw.headers["content-type"].startswith("text/event-stream")
    events = [STREAM_EVENT.validate_python(data) for data in sse_data(raw)]
    types = [event.type for event in events]
    assert types[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert 2 <= len(deltas) <= STREAM_PIECES and "".join(deltas) == reply(1, 0, 0, "hello there")
    assert types[4 + len(deltas) :] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))

    async def through_client() -> list[Any]:
        stream = await offline_client().responses.create(model="offline", input="hello there", stream=True)
        return [event async for event in stream]

    assert [event.type for event in asyncio.run(through_client())] == types


def test_response_stream_sends_function_call_events() -> None:
    body = {"model": "offline", "input": "what time is it?", "tools": [TIME_TOOL_RESPONSES], "stream": True}
    events = [STREAM_EVENT.validate_python(data) for data in sse_data(post(RESPONSES, body))]
    types = [event.type for event in events]
    arguments = [event.delta for event in events if event.type == "response.function_call_arguments.delta"]
    assert len(arguments) >= 2 and "".join(arguments) == "{}"
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        *["response.function_call_arguments.delta"] * len(arguments),
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert events[-1].response.output[0].name == "get_current_time"
