# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The offline model: real openai-client calls for the valid paths, raw HTTP for the invalid ones.

No mocks: every request goes through the FastAPI app in process (or over HTTP for `main()`).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, RunConfig, Runner, function_tool
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter
from support import ServerProcess, clean_env, free_port

from agent_server.history import API_MODES
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


# --------------------------------------------------------------------------------------------
# Deterministic replies: both APIs count the same turns
# --------------------------------------------------------------------------------------------


def test_turn_counts_match_across_apis() -> None:
    chat = chat_messages(
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "time?"},
        {"role": "assistant", "content": "", "tool_calls": [chat_call("call_1")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
        {"role": "assistant", "content": [{"type": "text", "text": "It is noon."}]},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}, {"type": "text", "text": "bye"}]},
    )
    responses = responses_input(
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "time?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_current_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "12:00"},
        output_message("msg_1", "It is noon."),
        {"role": "user", "content": [{"type": "input_text", "text": "thanks"}, {"type": "input_text", "text": "bye"}]},
    )
    expected = reply(3, 2, 1, "thanks\nbye")
    assert post(CHAT, chat).json()["choices"][0]["message"]["content"] == expected
    assert post(RESPONSES, responses).json()["output"][0]["content"][0]["text"] == expected


def test_a_tool_named_in_the_user_text_is_called() -> None:
    tool = {**TIME_TOOL_RESPONSES, "name": "lookup_weather"}
    body = {"model": "offline", "input": "please run Lookup_Weather for Paris", "tools": [TIME_TOOL_RESPONSES, tool]}
    item = post(RESPONSES, body).json()["output"][0]
    assert (item["type"], item["name"]) == ("function_call", "lookup_weather")


def test_tool_choice_none_gets_text() -> None:
    body = {**chat_messages({"role": "user", "content": "what time is it?"}), "tools": [TIME_TOOL_CHAT]}
    message = post(CHAT, {**body, "tool_choice": "none"}).json()["choices"][0]["message"]
    assert message["content"] == reply(1, 0, 0, "what time is it?") and "tool_calls" not in message


def test_same_request_gets_the_same_ids() -> None:
    body = {"model": "offline", "input": "hello"}
    first, second = post(RESPONSES, body).json(), post(RESPONSES, body).json()
    assert (first["id"], first["output"][0]["id"]) == (second["id"], second["output"][0]["id"])


def test_request_log_records_every_request() -> None:
    app = create_offline_app()
    post(CHAT, chat_messages({"role": "user", "content": "hi"}), app)
    post(CHAT, chat_messages(), app)
    log = app.state.request_log
    assert [(entry["path"], entry["status"]) for entry in log] == [(CHAT, 200), (CHAT, 400)]
    assert log[0]["error"] is None and log[0]["body"]["messages"][0]["content"] == "hi"
    assert log[1]["error"]["param"] == "messages"


def test_request_log_keeps_only_the_newest_requests(monkeypatch) -> None:
    """Bounded, so a long-running demo does not grow without end."""
    monkeypatch.setattr("agent_server.offline.server.REQUEST_LOG_SIZE", 3)
    app = create_offline_app()
    for text in ("one", "two", "three", "four"):
        post(CHAT, chat_messages({"role": "user", "content": text}), app)
    assert [entry["body"]["messages"][0]["content"] for entry in app.state.request_log] == ["two", "three", "four"]


def test_request_log_is_bounded_in_bytes_whatever_the_request_sizes(monkeypatch) -> None:
    """1 MB requests do not grow the app by 1 GB: the bodies kept add up to REQUEST_LOG_BYTES at most."""
    monkeypatch.setattr("agent_server.offline.server.REQUEST_LOG_BYTES", 3_000_000)
    app = create_offline_app()
    for number in range(8):
        post(CHAT, chat_messages({"role": "user", "content": f"{number} " + "x" * 1_000_000}), app)
    log = app.state.request_log
    assert 0 < log.bytes <= 3_000_000 and len(log) == 2, (log.bytes, len(log))
    assert log[-1]["body"]["messages"][0]["content"].startswith("7 ")
    post(CHAT, chat_messages({"role": "user", "content": "y" * 4_000_000}), app)
    assert log[-1]["body"]["omitted"].endswith("bytes, over REQUEST_LOG_BYTES"), "too big for the log: a note"
    assert log[-1]["status"] == 200 and log.bytes <= 3_000_000


# --------------------------------------------------------------------------------------------
# The real openai-agents SDK, both model clients
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
@pytest.mark.parametrize("api", API_MODES)
def test_agents_sdk_calls_the_tool_and_answers_with_its_output(api: str, streamed: bool) -> None:
    calls: list[str] = []

    @function_tool
    def get_current_time() -> str:
        """The current time."""
        calls.append("get_current_time")
        return "12:00"

    app = create_offline_app()
    model_type = OpenAIChatCompletionsModel if api == "chat_completions" else OpenAIResponsesModel
    agent = Agent(
        name="clock",
        instructions="Answer briefly.",
        model=model_type(model="offline", openai_client=offline_client(app)),
        tools=[get_current_time],
    )

    async def run() -> Any:
        config = RunConfig(tracing_disabled=True)
        if not streamed:
            return (await Runner.run(agent, "what time is it?", run_config=config)).final_output
        result = Runner.run_streamed(agent, "what time is it?", run_config=config)
        async for _ in result.stream_events():
            pass
        return result.final_output

    final_output = asyncio.run(run())
    log = app.state.request_log
    assert calls == ["get_current_time"]
    assert [entry["status"] for entry in log] == [200, 200], log
    second_request = json.dumps(log[1]["body"])
    assert '"12:00"' in second_request  # the tool output went back to the model
    assert final_output == "The tool returned: 12:00. " + reply(1, 0, 1, "what time is it?")


# --------------------------------------------------------------------------------------------
# Strict validation: schema errors
# --------------------------------------------------------------------------------------------


def test_rejects_null_assistant_content() -> None:
    body = responses_input({"role": "user", "content": "hi"}, {"role": "assistant", "content": None})
    assert_rejected(
        post(RESPONSES, body),
        "input[1].content",
        "Invalid value for 'input[1].content': expected a string or an array, but got null.",
    )


def test_rejects_output_message_without_id_with_null_status() -> None:
    item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}], "status": None}
    body = responses_input({"role": "user", "content": "hi"}, item)
    assert_rejected(post(RESPONSES, body), "input[1].id", "Missing required parameter: 'input[1].id'.")


def test_rejects_null_status_on_user_message() -> None:
    body = responses_input({"role": "user", "content": "hi", "status": None})
    assert_rejected(post(RESPONSES, body), "input[0].status", "Unknown parameter: 'input[0].status'.")


def test_rejects_unknown_keys_at_any_depth() -> None:
    body = responses_input({"role": "user", "content": [{"type": "input_text", "text": "hi", "foo": 1}]})
    assert_rejected(post(RESPONSES, body), "input[0].content[0].foo", "Unknown parameter: 'input[0].content[0].foo'.")
    tool = {"type": "function", "function": {"name": "f", "parameters": {}, "foo": 1}}
    body = {**chat_messages({"role": "user", "content": "hi"}), "tools": [tool]}
    assert_rejected(post(CHAT, body), "tools[0].function.foo", "Unknown parameter: 'tools[0].function.foo'.")
    assert_rejected(post(CHAT, {**body, "tools": [], "bar": 1}), "bar", "Unknown parameter: 'bar'.")


def test_rejects_missing_required_keys() -> None:
    body = chat_messages({"role": "user", "content": "hi"}, {"role": "tool", "content": "12:00"})
    assert_rejected(
        post(CHAT, body), "messages[1].tool_call_id", "Missing required parameter: 'messages[1].tool_call_id'."
    )
    assert_rejected(post(CHAT, {"messages": []}), "model", "Missing required parameter: 'model'.")


def test_rejects_values_of_the_wrong_type() -> None:
    body = {**responses_input({"role": "user", "content": "hi"}), "temperature": "hot"}
    assert_rejected(
        post(RESPONSES, body), "temperature", "Invalid value for 'temperature': expected a number, but got 'hot'."
    )
    body = chat_messages({"role": "user", "content": None})
    assert_rejected(
        post(CHAT, body),
        "messages[0].content",
        "Invalid value for 'messages[0].content': expected a string or an array, but got null.",
    )


def test_rejects_unknown_role() -> None:
    body = chat_messages({"role": "bot", "content": "hi"})
    assert_rejected(
        post(CHAT, body),
        "messages[0].role",
        "Invalid value for 'messages[0].role': expected one of 'developer', 'system', 'user', 'assistant', "
        "'tool', 'function', but got 'bot'.",
    )


def test_rejects_unknown_item_type() -> None:
    error = post(RESPONSES, responses_input({"type": "bogus"})).json()["error"]
    assert error["param"] == "input[0].type"
    assert error["message"].startswith("Invalid value for 'input[0].type': expected one of 'message', ")
    assert error["message"].endswith(", but got 'bogus'.")


# --------------------------------------------------------------------------------------------
# Strict validation: rules beyond the schema
# --------------------------------------------------------------------------------------------


def test_rejects_function_call_output_without_its_call() -> None:
    body = responses_input(
        {"role": "user", "content": "time?"},
        {"type": "function_call_output", "call_id": "call_9", "output": "12:00"},
    )
    assert_rejected(post(RESPONSES, body), "input", "No tool call found for function call output with call_id call_9.")


@pytest.mark.parametrize("arguments", ['{"lim', "[1, 2]", ""], ids=["cut-off", "not-an-object", "empty"])
def test_rejects_tool_call_arguments_that_are_not_a_json_object(arguments: str) -> None:
    """As strict servers do (vLLM, several hosted providers): a history the render has not repaired fails here."""
    call = {"type": "function_call", "call_id": "call_9", "name": "get_current_time", "arguments": arguments}
    body = responses_input(
        {"role": "user", "content": "time?"}, call, {"type": "function_call_output", "call_id": "call_9", "output": "x"}
    )
    param = "input[1].arguments"
    assert_rejected(
        post(RESPONSES, body), param, f"Invalid value for '{param}': the tool call's arguments are not a JSON object."
    )
    function = {"name": "get_current_time", "arguments": arguments}
    messages = chat_messages(
        {"role": "user", "content": "time?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_9", "type": "function", "function": function}],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "x"},
    )
    param = "messages.[1].tool_calls.[0].function.arguments"
    assert_rejected(
        post(CHAT, messages), param, f"Invalid value for '{param}': the tool call's arguments are not a JSON object."
    )


def test_rejects_function_call_without_its_output() -> None:
    body = responses_input(
        {"role": "user", "content": "time?"},
        {"type": "function_call", "call_id": "call_9", "name": "get_current_time", "arguments": "{}"},
    )
    assert_rejected(post(RESPONSES, body), "input", "No tool output found for function call call_9.")


@pytest.mark.parametrize(
    ("item", "expected_prefix"),
    [
        (output_message("abc", "hello again"), "msg"),
        ({"type": "function_call", "id": "abc", "call_id": "call_1", "name": "f", "arguments": "{}"}, "fc"),
        ({"type": "function_call_output", "id": "abc", "call_id": "call_1", "output": "ok"}, "fc"),
        ({"type": "reasoning", "id": "abc", "summary": []}, "rs"),
    ],
    ids=["message", "function_call", "function_call_output", "reasoning"],
)
def test_rejects_item_ids_with_the_wrong_prefix(item: dict[str, Any], expected_prefix: str) -> None:
    body = responses_input(
        {"role": "user", "content": "f"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
        item,
    )
    if item["type"] == "function_call":
        body["input"].append({"type": "function_call_output", "call_id": "call_1", "output": "ok"})
    message = f"Invalid 'input[3].id': 'abc'. Expected an ID that begins with '{expected_prefix}'."
    assert_rejected(post(RESPONSES, body), "input[3].id", message)


def test_rejects_input_parts_in_an_assistant_message() -> None:
    body = responses_input(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "input_text", "text": "hello"}]},
    )
    assert_rejected(
        post(RESPONSES, body),
        "input[1].content[0]",
        "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'.",
    )


def test_rejects_output_parts_in_a_user_message() -> None:
    body = responses_input({"role": "user", "content": [{"type": "output_text", "text": "hi", "annotations": []}]})
    assert_rejected(
        post(RESPONSES, body),
        "input[0].content[0]",
        "Invalid value: 'output_text'. Supported values are: 'input_text', 'input_image' and 'input_file'.",
    )


def test_chat_rejects_tool_calls_without_tool_messages() -> None:
    body = chat_messages(
        {"role": "user", "content": "time?"},
        {"role": "assistant", "content": None, "tool_calls": [chat_call("call_1"), chat_call("call_2")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
        {"role": "user", "content": "well?"},
    )
    assert_rejected(
        post(CHAT, body),
        "messages.[1].role",
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: call_2",
    )


def test_chat_rejects_tool_message_without_a_preceding_call() -> None:
    body = chat_messages(
        {"role": "user", "content": "time?"},
        {"role": "assistant", "content": None, "tool_calls": [chat_call("call_1")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
        {"role": "tool", "tool_call_id": "call_7", "content": "13:00"},
    )
    assert_rejected(
        post(CHAT, body),
        "messages.[3].role",
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
    )


@pytest.mark.parametrize("path", [CHAT, RESPONSES])
def test_rejects_an_empty_model(path: str) -> None:
    body = {"model": "", "messages": [{"role": "user", "content": "hi"}], "input": "hi"}
    body.pop("input" if path == CHAT else "messages")
    assert_rejected(post(path, body), "model", "Invalid value for 'model': expected a non-empty string.")


def test_rejects_a_missing_model_in_responses() -> None:
    assert_rejected(post(RESPONSES, {"input": "hi"}), "model", "Missing required parameter: 'model'.")


@pytest.mark.parametrize(("path", "key"), [(CHAT, "messages"), (RESPONSES, "input")])
def test_rejects_empty_history(path: str, key: str) -> None:
    message = f"Invalid '{key}': empty array. Expected an array with minimum length 1, but got an empty array instead."
    assert_rejected(post(path, {"model": "offline", key: []}), key, message)


def test_rejects_previous_response_id_it_never_stored() -> None:
    body = {"model": "offline", "input": "hi", "previous_response_id": "resp_1"}
    assert_rejected(post(RESPONSES, body), "previous_response_id", "Previous response with id 'resp_1' not found.")


@pytest.mark.parametrize("path", [CHAT, RESPONSES])
@pytest.mark.parametrize(
    "raw",
    [b"[]", b'"hi"', b"42", b"null", b"", b"not json", b'{"model": NaN}', b"\xff", b"[" * 100_000],
    ids=["array", "string", "number", "null", "empty", "garbage", "nan", "not-utf8", "too-deep"],
)
def test_a_body_that_is_not_a_json_object_is_a_400(path: str, raw: bytes) -> None:
    response = post(path, raw)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "body",
    [
        {"model": "offline", "input": [None]},
        {"model": "offline", "input": [[]]},
        {"model": "offline", "input": [{}]},
        {"model": "offline", "input": [{"type": "function_call_output", "output": [{"type": 5}]}]},
        {"model": "offline", "input": [{"role": "user", "content": [None, {"type": None}]}]},
        {"model": "offline", "input": "hi", "tools": [{"type": "function"}], "tool_choice": {"type": "function"}},
        {"model": "offline", "input": "hi", "conversation": {"id": "conv_1"}},
        {"model": ["offline"], "messages": [{"role": "tool"}], "input": {"x": 1}, "stream": True},
    ],
)
def test_malformed_bodies_are_400s_not_500s(body: dict[str, Any]) -> None:
    for path in (CHAT, RESPONSES):
        response = post(path, body)
        assert response.status_code in (400, 404), response.text
        assert response.json()["error"]["message"]


# --------------------------------------------------------------------------------------------
# Over HTTP, as `python -m agent_server.offline --port N`
# --------------------------------------------------------------------------------------------


def test_main_serves_the_model_over_http() -> None:
    port = free_port()
    command = [sys.executable, "-m", "agent_server.offline", "--port", str(port)]
    with ServerProcess(command, clean_env(), f"http://127.0.0.1:{port}/v1", cwd=Path(__file__).resolve().parents[2]):
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="offline", max_retries=0)
        completion = client.chat.completions.create(model="offline", messages=[{"role": "user", "content": "hello"}])
        assert completion.choices[0].message.content == reply(1, 0, 0, "hello")


@pytest.mark.parametrize(("style", "call_ids"), [("unique", None), ("reuse", ["call_0"] * 2), ("empty", [""] * 2)])
@pytest.mark.parametrize("path", [CHAT, RESPONSES])
def test_twice_calls_the_tool_twice_with_ids_in_the_style_asked_for(style, call_ids, path) -> None:
    app = create_offline_app(call_ids=style)
    user = {"role": "user", "content": "What time is it? Twice, please."}
    if path == CHAT:
        body = chat_messages(user) | {"tools": [TIME_TOOL_CHAT]}
        calls = post(path, body, app).json()["choices"][0]["message"]["tool_calls"]
        ids = [call["id"] for call in calls]
    else:
        body = responses_input(user) | {"tools": [TIME_TOOL_RESPONSES]}
        ids = [item["call_id"] for item in post(path, body, app).json()["output"]]
    assert len(ids) == 2
    if call_ids is None:
        assert all(ids) and len(set(ids)) == 2
    else:
        assert ids == call_ids


def test_an_unknown_call_id_style_is_refused() -> None:
    with pytest.raises(ValueError, match="OFFLINE_MODEL_CALL_IDS='sometimes'"):
        create_offline_app(call_ids="sometimes")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CHAT, {"model": "offline", "messages": [{"role": "user", "content": "hello"}]}),
        (CHAT, {"model": "offline", "messages": [{"role": "user", "content": "hello"}], "stream": True}),
        (RESPONSES, {"model": "offline", "input": "What time is it?", "tools": [TIME_TOOL_RESPONSES]}),
        (RESPONSES, {"model": "offline", "input": "hello", "stream": True}),
        (CHAT, {"model": "offline", "messages": [{"role": "user", "content": None}]}),
        (RESPONSES, b"{not json"),
    ],
    ids=["chat", "chat-stream", "responses-tool", "responses-stream", "chat-400", "not-json"],
)
def test_in_process_and_asgi_answer_byte_for_byte_alike(path, body):
    """offline_client skips the ASGI app (InProcess): what it gets must be exactly what a server would send."""
    from agent_server.offline.server import InProcess

    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    over_asgi = post(path, content)

    async def in_process() -> httpx.Response:
        async with httpx.AsyncClient(
            transport=InProcess(create_offline_app()), base_url="http://offline-model"
        ) as http:
            return await http.post(path, content=content, headers={"content-type": "application/json"})

    def timeless(answer: httpx.Response) -> tuple[int, bytes]:  # the two may straddle a second
        return answer.status_code, re.sub(rb'"(created|created_at)": ?\d+', rb'"\1":0', answer.content)

    direct = asyncio.run(in_process())
    assert timeless(direct) == timeless(over_asgi)
    assert direct.headers["content-type"].split(";")[0] == over_asgi.headers["content-type"].split(";")[0]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", API_MODES)
def test_asked_to_think_it_reasons_first_and_the_sdk_reads_a_reasoning_item(api: str, streamed: bool) -> None:
    """A summary of its reasoning before the answer: `reasoning_content` in chat completions (as DeepSeek-style
    servers send it, which openai-agents 0.24's chatcmpl_converter reads), a reasoning item in Responses."""
    model_type = OpenAIChatCompletionsModel if api == "chat_completions" else OpenAIResponsesModel
    model = model_type(model="offline", openai_client=offline_client(create_offline_app()))
    agent = Agent(name="thinker", instructions="Answer.", model=model)
    config = RunConfig(tracing_disabled=True)

    async def run() -> list[Any]:
        if streamed:
            result = Runner.run_streamed(agent, "Please think about it", run_config=config)
            async for _ in result.stream_events():
                pass
            return result.new_items
        return (await Runner.run(agent, "Please think about it", run_config=config)).new_items

    items = [item.raw_item for item in asyncio.run(run())]
    assert [item.type for item in items] == ["reasoning", "message"]
    assert items[0].summary[0].text.startswith("The user asks me to think."), items[0]
    assert "You said: Please think about it" in items[1].content[0].text
