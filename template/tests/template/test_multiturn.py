# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Multi-turn chats through the real app, its turn and the SDK against the offline model.

Each test runs in both API modes (the api_mode fixture), streaming and not, and the
model_log fixture fails the test if the offline model answered any request with an error.
"""

from __future__ import annotations

import pytest
from support import Chat, reply_text

from agent_server.history.tool_pairs import output_bound_call_id

pytestmark = pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])


def counts(user: int, assistant: int, tool: int = 0) -> str:
    return f"I saw {user} user, {assistant} assistant and {tool} tool turns."


def test_first_prompt(app_client, stream):
    chat = Chat(app_client, stream)
    assert counts(1, 0) in reply_text(chat.send("Hello"))


def test_second_prompt_with_chat_ui_replay(app_client, stream, model_log):
    chat = Chat(app_client, stream)
    chat.send("Hello")
    reply = reply_text(chat.send("And again"))
    assert counts(2, 1) in reply
    assert reply.endswith("You said: And again")
    assert len(model_log) == 2


def test_third_prompt(app_client, stream):
    chat = Chat(app_client, stream)
    chat.send("One")
    chat.send("Two")
    assert counts(3, 2) in reply_text(chat.send("Three"))


def test_tool_turn(app_client, stream, model_log):
    chat = Chat(app_client, stream)
    items = chat.send("What time is it?")
    assert [item["type"] for item in items] == ["function_call", "function_call_output", "message"]
    call, output, _ = items
    assert call["name"] == "get_current_time"
    assert output["call_id"] == call["call_id"]
    assert reply_text(items).startswith(f"The tool returned: {output['output']}.")
    assert len(model_log) == 2, "one model call for the tool call, one for the answer"
    assert counts(2, 1, 1) in reply_text(chat.send("Thanks"))


def test_follow_up_replays_turn_one_exactly(app_client, stream):
    chat = Chat(app_client, stream)
    chat.send("What time is it?", replay="exact")
    chat.send("Hello", replay="exact")
    assert counts(3, 2, 1) in reply_text(chat.send("Once more", replay="exact"))


def test_returned_items_are_clean_for_replay(app_client, stream):
    chat = Chat(app_client, stream)
    items = chat.send("What time is it?")
    for item in items:
        assert None not in item.values(), item
        assert not {"async", "async_", "caller", "namespace", "provider_data"} & item.keys(), item
    call, output, message = items
    assert message["id"].startswith("msg_")
    assert "id" not in output
    # The call's id names its output, so the render can tell it from an output a client adds.
    assert call["id"] == output_bound_call_id(call["call_id"], output["output"])
