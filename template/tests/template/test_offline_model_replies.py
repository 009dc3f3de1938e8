# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The offline model's deterministic replies: both APIs count the same turns, call the tool the user names, give
the same ids to the same request; its bounded request log; the call-id styles it is asked for.

Raw HTTP to the FastAPI app in process (test_offline_model.py's helpers).
"""

from __future__ import annotations

import pytest

from agent_server.offline import create_offline_app

from .test_offline_model import (
    CHAT,
    RESPONSES,
    TIME_TOOL_CHAT,
    TIME_TOOL_RESPONSES,
    chat_call,
    chat_messages,
    output_message,
    post,
    reply,
    responses_input,
)

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
