# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Unit tests of the render's rules that the catalogue of real clients' shapes does not show.

Every shape in tests/template/history_catalogue.py is rendered, in both API modes, by
tests/template/test_history_catalogue.py; the tests here cover the variants and errors between them.
"""

from __future__ import annotations

import pytest

from agent_server.history import HistoryError, render_each, render_history

USER = {"role": "user", "content": "What time is it?"}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


# --- assistant messages ---------------------------------------------------------------------


def test_several_segments_are_joined_with_newline():
    parts = [{"type": "output_text", "text": "one"}, {"type": "output_text", "text": "two"}]
    assert render_history([{"role": "assistant", "content": parts}]) == [assistant("one\ntwo")]


def test_mlflow_string_content_message():
    item = {"type": "message", "role": "assistant", "content": "Hi", "status": None}
    assert render_history([item]) == [assistant("Hi")]


# --- chat-completions shaped history ---------------------------------------------------------

TOOL_CALL = {"id": "call_1", "type": "function", "function": {"name": "get_current_time", "arguments": "{}"}}
TOOL_MESSAGE = {"role": "tool", "tool_call_id": "call_1", "content": "12:00"}
CALL = {"type": "function_call", "call_id": "call_1", "name": "get_current_time", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "12:00"}


@pytest.mark.parametrize("content", [{"content": ""}, {}], ids=["empty-string", "no-content-key"])
def test_chat_tool_turn_without_text_has_no_text_message(content):
    # With `"content": None` this is the catalogue's chat-completions-tool-calls shape.
    history = [USER, {"role": "assistant", **content, "tool_calls": [TOOL_CALL]}, TOOL_MESSAGE]
    assert render_history(history) == [USER, CALL, OUTPUT]


def test_tool_message_with_none_content_becomes_empty_output():
    history = [{"role": "assistant", "tool_calls": [TOOL_CALL]}, {**TOOL_MESSAGE, "content": None}]
    assert render_history(history)[1] == {**OUTPUT, "output": ""}


def test_tool_message_with_text_parts_is_joined():
    parts = [{"type": "text", "text": "12"}, {"type": "text", "text": "00"}]
    history = [{"role": "assistant", "tool_calls": [TOOL_CALL]}, {**TOOL_MESSAGE, "content": parts}]
    assert render_history(history)[1] == {**OUTPUT, "output": "12\n00"}


# --- Responses items --------------------------------------------------------------------------


def test_function_call_keeps_only_what_both_apis_accept():
    item = {**CALL, "id": "3f9a1c1e-uuid", "status": "completed", "caller": None, "namespace": None}
    assert render_history([item, OUTPUT]) == [CALL, OUTPUT]


def test_missing_arguments_become_empty_object():
    item = {"type": "function_call", "call_id": "call_1", "name": "get_current_time", "arguments": None}
    assert render_history([item, OUTPUT])[0]["arguments"] == "{}"


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


def test_an_answers_citations_are_kept_beside_the_item_the_model_gets_never_in_it():
    """Each text part's annotations, their positions moved to where the part stands in the joined text; a chat
    message's (a url_citation in its own object) flattened; and what memory keeps (`kept()`) renders back the same."""
    cite = {"type": "url_citation", "url": "https://example.com/a", "title": "A", "start_index": 0, "end_index": 2}
    parts = [
        {"type": "output_text", "text": "Hello", "annotations": []},
        {"type": "output_text", "text": "[1] ok", "annotations": [cite, {"type": "file_citation", "index": 1}]},
    ]
    [entry] = render_each([{"type": "message", "role": "assistant", "content": parts, "id": "msg_1"}])
    assert entry.item == {"role": "assistant", "content": "Hello\n[1] ok"}
    moved = {**cite, "start_index": 6, "end_index": 8}
    assert list(entry.annotations) == [moved, {"type": "file_citation", "index": 7}]
    assert entry.item["content"][6:8] == "[1"
    [again] = render_each([entry.kept()])
    assert again.item == entry.item and again.annotations == entry.annotations
    nested = {"type": "url_citation", "url_citation": {k: v for k, v in moved.items() if k != "type"}}
    [chat] = render_each([{"role": "assistant", "content": entry.item["content"], "annotations": [nested]}])
    assert list(chat.annotations) == [moved]
    for bad in ("x", ["x"], [{"url": "https://example.com/a"}]):
        with pytest.raises(HistoryError, match="annotations"):
            render_each([{"role": "assistant", "content": [{"type": "output_text", "text": "a", "annotations": bad}]}])


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
        (
            {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": False, "reason": 5},
            "'reason' must be text, got number",
        ),
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
