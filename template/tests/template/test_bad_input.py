# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Bad input to /invocations gets a 400 that says what is wrong: never a 500, and nothing is dropped."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([{"role": "user", "content": "hi"}], "must be a JSON object"),
        ("hello", "must be a JSON object"),
        ({}, "'input' is required"),
        ({"input": {"role": "user"}}, "'input' is required and must be a list"),
        ({"input": []}, "at least one item"),
        ({"input": [{"role": "user", "content": "hi"}], "stream": "yes"}, "'stream' must be true or false"),
        ({"input": [{"type": "teleport", "to": "mars"}]}, "input[0]: item type 'teleport' is not supported"),
        ({"input": [{"role": "user", "content": "hi"}, 42]}, "input[1]: expected an object, got number"),
        (
            {"input": [{"type": "function_call_output", "call_id": 7, "output": ""}]},
            "input[0]: a tool output needs a 'call_id' string",
        ),
        ({"input": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "input[0]: content part 'input_audio'"),
    ],
    ids=[
        "array-body",
        "string-body",
        "no-input",
        "input-not-a-list",
        "empty-input",
        "stream-not-bool",
        "unknown-item-type",
        "item-not-an-object",
        "call-id-not-a-string",
        "unrenderable-part",
    ],
)
@pytest.mark.parametrize("path", ["/invocations", "/responses"])
def test_bad_body_is_a_400_with_a_message(app_client, body, message, path):
    response = app_client.post(path, json=body)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]["message"]


def test_invalid_json_is_a_400(app_client):
    response = app_client.post("/invocations", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]["message"]


def test_error_names_the_item(app_client):
    response = app_client.post("/invocations", json={"input": [{"role": "user", "content": "hi"}, {"role": "robot"}]})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "input[1]"


def test_input_string_is_one_user_message(app_client):
    response = app_client.post("/invocations", json={"input": "Hello"})
    assert response.status_code == 200, response.text
    assert "I saw 1 user, 0 assistant and 0 tool turns" in response.text


def test_chat_completions_history_is_accepted(app_client):
    history = [
        {"role": "user", "content": "What time is it?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_current_time", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
        {"role": "assistant", "content": "It is 12:00."},
        {"role": "user", "content": "Thanks"},
    ]
    response = app_client.post("/invocations", json={"input": history})
    assert response.status_code == 200, response.text
    assert "I saw 2 user, 1 assistant and 1 tool turns" in response.text
