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


def test_reasoning_items_are_not_replayed():
    reasoning = {"type": "reasoning", "id": "0b6c-uuid", "summary": [{"type": "summary_text", "text": "hmm"}]}
    assert render_history([USER, reasoning, assistant("Hi")]) == [USER, assistant("Hi")]


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
@pytest.mark.parametrize("item_type", ["compaction", "item_reference"])
def test_server_state_items_are_an_error_in_both_modes(item_type, api):
    # MLflow's ResponsesAgentRequest rejects both, so the error must say why, not "set LLM_API".
    with pytest.raises(HistoryError, match=rf"input\[0\]: a '{item_type}' item cannot be replayed here: MLflow"):
        render_history([{"type": item_type, "id": "x_1", "encrypted_content": "gAAAA..."}, USER], api=api)


# --- user-side content -------------------------------------------------------------------------


def test_status_none_is_stripped_from_user_messages():
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}], "status": None}
    assert render_history([item]) == [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]


def test_user_none_content_becomes_empty_text():
    assert render_history([{"role": "user", "content": None}]) == [{"role": "user", "content": ""}]


def test_user_empty_list_content_becomes_empty_text():
    assert render_history([{"role": "user", "content": []}]) == [{"role": "user", "content": ""}]


def test_multimodal_user_content_is_kept():
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "image_url", "image_url": "https://example.com/a.png"},
        {"type": "input_image", "image_url": "https://example.com/b.png", "detail": "low", "file_id": None},
        {"type": "input_file", "file_id": "file_1", "file_url": None},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,AAAA", "filename": "a.pdf"}},
    ]
    assert render_history([{"role": "user", "content": content}], api="responses") == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
                {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
                {"type": "input_image", "image_url": "https://example.com/b.png", "detail": "low"},
                {"type": "input_file", "file_id": "file_1"},
                {"type": "input_file", "file_data": "data:application/pdf;base64,AAAA", "filename": "a.pdf"},
            ],
        }
    ]


def test_part_keys_the_render_has_no_rule_for_are_kept_for_the_api_to_judge():
    part = {"type": "input_image", "image_url": "https://example.com/a.png", "zoom": 2, "file_id": None}
    rendered = render_history([{"role": "user", "content": [part]}])
    expected = {"type": "input_image", "image_url": part["image_url"], "zoom": 2, "detail": "auto"}
    assert rendered[0]["content"] == [expected]


@pytest.mark.parametrize(
    ("part", "reason"),
    [
        ({"type": "input_image", "file_id": "file_1"}, "only by 'file_id' needs LLM_API=responses"),
        ({"type": "input_file", "file_url": "https://example.com/a.pdf"}, "without 'file_data' needs LLM_API="),
        ({"type": "input_file", "file_id": "file_1"}, "without 'file_data' needs LLM_API=responses"),
    ],
    ids=["image-file-id", "file-url", "file-id"],
)
def test_parts_only_the_responses_api_can_fetch(part, reason):
    history = [{"role": "user", "content": [part]}]
    assert render_history(history, api="responses")[0]["content"] == [
        {**part, **({"detail": "auto"} if "image" in part["type"] else {})}
    ]
    with pytest.raises(HistoryError, match=reason):
        render_history(history, api="chat_completions")


def test_tool_output_parts_are_checked_per_mode_too():
    output = {**OUTPUT, "output": [{"type": "input_image", "file_id": "file_1"}]}
    assert render_history([CALL, output], api="responses")[1]["output"] == [
        {"type": "input_image", "file_id": "file_1", "detail": "auto"}
    ]
    with pytest.raises(HistoryError, match=r"input\[1\]: an image given only by 'file_id'"):
        render_history([CALL, output], api="chat_completions")


@pytest.mark.parametrize("role", ["system", "developer"])
def test_system_and_developer_messages_hold_only_text(role):
    image = {"type": "input_image", "image_url": "https://example.com/a.png"}
    with pytest.raises(HistoryError, match=f"input\\[0\\]: a {role} message may hold only text"):
        render_history([{"role": role, "content": [{"type": "input_text", "text": "x"}, image]}])


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
        ({"role": ["user"], "content": "x"}, "role of type array is not supported"),
        ({"type": {"a": 1}}, "item type of type object is not supported"),
        ({"role": "user", "content": [{"type": "input_image"}]}, "an image needs an 'image_url'"),
        ({"role": "user", "content": [{"type": "input_image", "image_url": 7}]}, "'image_url' must be a non-empty"),
        ({"role": "user", "content": [{"type": "input_image", "image_url": "u", "detail": "max"}]}, "'detail' must"),
        ({"role": "user", "content": [{"type": "input_file", "filename": "a.pdf"}]}, "a file needs 'file_data'"),
        ({"role": "user", "content": [{"type": "file", "file": "a.pdf"}]}, "a 'file' part needs a 'file' object"),
    ],
)
def test_unrenderable_items_name_their_index(item, reason):
    with pytest.raises(HistoryError) as error:
        render_history([USER, item])
    assert error.value.index == 1
    assert str(error.value).startswith("input[1]: ")
    assert reason in str(error.value)


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
