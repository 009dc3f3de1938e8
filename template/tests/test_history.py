# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Unit tests of the render boundary, one per rule in agent_server/history.py."""

from __future__ import annotations

import pytest

from agent_server.history import INTERRUPTED_CALL_OUTPUT, HistoryError, render_history

USER = {"role": "user", "content": "What time is it?"}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


# --- assistant messages ---------------------------------------------------------------------


def test_id_less_output_text_segment():
    item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi there"}]}
    assert render_history([USER, item]) == [USER, assistant("Hi there")]


def test_output_text_without_type_key():
    item = {"role": "assistant", "content": [{"type": "output_text", "text": "Hi", "annotations": []}]}
    assert render_history([item]) == [assistant("Hi")]


def test_several_segments_are_joined_with_newline():
    parts = [{"type": "output_text", "text": "one"}, {"type": "output_text", "text": "two"}]
    assert render_history([{"role": "assistant", "content": parts}]) == [assistant("one\ntwo")]


def test_mlflow_normalised_message():
    # Exactly what mlflow's ResponsesAgentRequest (3.17) hands the handler for an id-less replay.
    item = {"status": None, "content": [{"text": "Hi", "type": "output_text"}], "role": "assistant", "type": "message"}
    assert render_history([item]) == [assistant("Hi")]


def test_mlflow_string_content_message():
    item = {"type": "message", "role": "assistant", "content": "Hi", "status": None}
    assert render_history([item]) == [assistant("Hi")]


def test_output_message_with_id_and_status():
    item = {
        "id": "msg_123",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Hi", "annotations": [{"type": "url_citation"}]}],
    }
    assert render_history([item]) == [assistant("Hi")]


def test_refusal_part_is_kept_as_text():
    item = {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}
    assert render_history([item]) == [assistant("I can't help with that.")]


@pytest.mark.parametrize("content", [None, "", []], ids=["none", "empty-string", "empty-list"])
def test_empty_assistant_content_becomes_empty_text(content):
    assert render_history([{"role": "assistant", "content": content}]) == [assistant("")]


def test_assistant_without_content_key():
    assert render_history([{"role": "assistant"}]) == [assistant("")]


# --- chat-completions shaped history ---------------------------------------------------------

TOOL_CALL = {"id": "call_1", "type": "function", "function": {"name": "get_current_time", "arguments": "{}"}}
TOOL_MESSAGE = {"role": "tool", "tool_call_id": "call_1", "content": "12:00"}
CALL = {"type": "function_call", "call_id": "call_1", "name": "get_current_time", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "12:00"}


@pytest.mark.parametrize("content", [None, ""], ids=["none", "empty-string"])
def test_chat_tool_turn_becomes_call_and_output(content):
    history = [USER, {"role": "assistant", "content": content, "tool_calls": [TOOL_CALL]}, TOOL_MESSAGE]
    assert render_history(history) == [USER, CALL, OUTPUT]


def test_chat_tool_turn_without_content_key():
    history = [USER, {"role": "assistant", "tool_calls": [TOOL_CALL]}, TOOL_MESSAGE]
    assert render_history(history) == [USER, CALL, OUTPUT]


def test_chat_tool_turn_with_text_keeps_the_text_first():
    history = [USER, {"role": "assistant", "content": "Let me look.", "tool_calls": [TOOL_CALL]}, TOOL_MESSAGE]
    assert render_history(history) == [USER, assistant("Let me look."), CALL, OUTPUT]


def test_tool_message_with_none_content_becomes_empty_output():
    history = [{"role": "assistant", "tool_calls": [TOOL_CALL]}, {**TOOL_MESSAGE, "content": None}]
    assert render_history(history)[1] == {**OUTPUT, "output": ""}


def test_tool_message_with_text_parts_is_joined():
    parts = [{"type": "text", "text": "12"}, {"type": "text", "text": "00"}]
    history = [{"role": "assistant", "tool_calls": [TOOL_CALL]}, {**TOOL_MESSAGE, "content": parts}]
    assert render_history(history)[1] == {**OUTPUT, "output": "12\n00"}


def test_parallel_calls_stay_paired_and_in_order():
    second = {"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
    history = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL, second]},
        TOOL_MESSAGE,
        {"role": "tool", "tool_call_id": "call_2", "content": "found"},
        assistant("Done"),
    ]
    assert render_history(history) == [
        USER,
        CALL,
        {"type": "function_call", "call_id": "call_2", "name": "lookup", "arguments": '{"q": "x"}'},
        OUTPUT,
        {"type": "function_call_output", "call_id": "call_2", "output": "found"},
        assistant("Done"),
    ]


# --- Responses items --------------------------------------------------------------------------


def test_function_call_keeps_only_what_both_apis_accept():
    item = {**CALL, "id": "3f9a1c1e-uuid", "status": "completed", "caller": None, "namespace": None}
    assert render_history([item, OUTPUT]) == [CALL, OUTPUT]


def test_missing_arguments_become_empty_object():
    item = {"type": "function_call", "call_id": "call_1", "name": "get_current_time", "arguments": None}
    assert render_history([item, OUTPUT])[0]["arguments"] == "{}"


def test_output_that_arrives_late_is_moved_next_to_its_call():
    assert render_history([CALL, assistant("thinking"), OUTPUT]) == [CALL, OUTPUT, assistant("thinking")]


def test_orphan_call_gets_an_interrupted_output():
    rendered = render_history([USER, CALL, assistant("Sorry, stopped.")])
    assert rendered == [USER, CALL, {**OUTPUT, "output": INTERRUPTED_CALL_OUTPUT}, assistant("Sorry, stopped.")]


def test_orphan_output_is_an_error_naming_its_index():
    with pytest.raises(HistoryError) as error:
        render_history([USER, OUTPUT])
    assert error.value.index == 1
    assert "no tool call before it" in str(error.value)


def test_reasoning_items_are_not_replayed():
    reasoning = {"type": "reasoning", "id": "0b6c-uuid", "summary": [{"type": "summary_text", "text": "hmm"}]}
    assert render_history([USER, reasoning, assistant("Hi")]) == [USER, assistant("Hi")]


def test_compacted_summary_passes_through_in_responses_mode():
    compaction = {"type": "compaction", "encrypted_content": "gAAAA...", "id": None}
    assert render_history([compaction, USER], api="responses") == [
        {"type": "compaction", "encrypted_content": "gAAAA..."},
        USER,
    ]


def test_compacted_summary_is_an_error_in_chat_completions_mode():
    with pytest.raises(HistoryError, match=r"input\[0\].*LLM_API=responses"):
        render_history([{"type": "compaction", "encrypted_content": "gAAAA..."}], api="chat_completions")


# --- user-side content -------------------------------------------------------------------------


def test_status_none_is_stripped_from_user_messages():
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}], "status": None}
    assert render_history([item]) == [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]


def test_user_none_content_becomes_empty_text():
    assert render_history([{"role": "user", "content": None}]) == [{"role": "user", "content": ""}]


def test_multimodal_user_content_is_kept():
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "input_file", "file_id": "file_1", "file_url": None},
    ]
    assert render_history([{"role": "user", "content": content}]) == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
                {"type": "input_file", "file_id": "file_1"},
            ],
        }
    ]


def test_system_and_developer_messages_pass_through():
    history = [{"role": "system", "content": "Be brief."}, {"role": "developer", "content": "Use tools."}]
    assert render_history(history) == history


# --- errors and invariants -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ("hello", "expected an object, got string"),
        ({"type": "web_search_call", "id": "ws_1"}, "item type 'web_search_call' is not supported"),
        ({"content": "no role"}, "neither 'type' nor 'role'"),
        ({"role": "function", "content": "x"}, "role 'function' is not supported"),
        ({"role": "assistant", "content": [{"type": "output_audio"}]}, "part 'output_audio' is not supported"),
        ({"role": "user", "content": [{"type": "input_audio"}]}, "part 'input_audio' is not supported"),
        ({"type": "function_call", "name": "f", "arguments": "{}"}, "needs a 'call_id' string"),
        ({"role": "tool", "content": "x"}, "needs a 'tool_call_id' string"),
    ],
)
def test_unrenderable_items_name_their_index(item, reason):
    with pytest.raises(HistoryError) as error:
        render_history([USER, item])
    assert error.value.index == 1
    assert str(error.value).startswith("input[1]: ")
    assert reason in str(error.value)


def test_duplicate_call_ids_are_an_error():
    with pytest.raises(HistoryError, match="used by two tool calls"):
        render_history([CALL, OUTPUT, CALL, OUTPUT])


def test_render_is_idempotent():
    history = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
        TOOL_MESSAGE,
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "12:00"}], "status": None},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
        CALL | {"call_id": "call_9"},
    ]
    once = render_history(history)
    assert render_history(once) == once


def test_input_is_not_modified():
    item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi"}], "status": None}
    snapshot = {**item, "content": [dict(item["content"][0])]}
    render_history([item])
    assert item == snapshot
