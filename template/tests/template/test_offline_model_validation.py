# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The offline model's strict validation, as the real APIs validate: schema errors (unknown keys, missing keys,
wrong types, roles, item types), the rules beyond the schema (calls and their outputs, item ids, content parts,
tool messages, models, empty histories), and bodies that are not JSON objects or are malformed: each a 400 in the
APIs' error shape, never a 500."""

from __future__ import annotations

from typing import Any

import pytest

from .test_offline_model import (
    CHAT,
    RESPONSES,
    assert_rejected,
    chat_call,
    chat_messages,
    output_message,
    post,
    responses_input,
)

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
