# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Property-based tests of the render step over generated histories (hypothesis).

Histories are built turn by turn from the shapes clients send (tests/template/history_catalogue.py
shows real examples), while the generator records what must survive: every text, tool
call and tool output, in order. The properties:
- total: any list of JSON values renders or raises HistoryError, nothing else;
- idempotent: rendering a render changes nothing;
- faithful: order, texts, tool arguments and outputs survive, and each call is followed
  by its output;
- valid: the render validates against the `openai` param types (and the offline model's
  strict request schema), and the SDK's chat-completions converter accepts it and
  produces valid chat messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from agents.models.chatcmpl_converter import Converter
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter

from agent_server import llm
from agent_server.history import INTERRUPTED_CALL_OUTPUT, HistoryError, render_history
from agent_server.offline.validation import validate_schema

API_MODES = list(llm.API_MODES)
RESPONSES_ITEMS = TypeAdapter(list[ResponseInputItemParam])
CHAT_MESSAGES = TypeAdapter(list[ChatCompletionMessageParam])

# Modest counts keep the suite fast; deadline=None because the first examples pay for imports.
PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

# --- arbitrary JSON, for totality -----------------------------------------------------------

KEYS = ["type", "role", "content", "text", "call_id", "name", "arguments", "output", "tool_calls", "tool_call_id"]
KEYS += ["id", "status", "function", "image_url", "file", "file_id", "file_data", "file_url", "refusal", "detail"]
WORDS = ["message", "user", "assistant", "system", "developer", "tool", "function_call", "function_call_output"]
WORDS += ["reasoning", "input_text", "output_text", "text", "refusal", "image_url", "input_image", "input_file"]
WORDS += ["file", "compaction", "item_reference", "function", "c1", "c2", "auto", "low", ""]

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    scalars | st.text(max_size=6) | st.sampled_from(WORDS),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=5)
    ),
    max_leaves=12,
)
item_like = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6)


@PROPERTY_SETTINGS
@given(items=st.lists(item_like | json_values, max_size=6), api=st.sampled_from(API_MODES))
# Found by the search: an id that is a list was looked up among the approvals' ids, and could not be hashed.
@example(items=[{"type": "function_call", "role": None, "call_id": []}], api="chat_completions")
@example(items=[{"type": "mcp_approval_response", "approval_request_id": {}}], api="responses")
def test_render_is_total(items, api):
    try:
        rendered = render_history(items, api)
    except HistoryError as error:
        assert 0 <= error.index < len(items)
        assert str(error).startswith(f"input[{error.index}]: ")
        return
    assert render_history(rendered, api) == rendered


# --- valid histories, with what must survive ------------------------------------------------


@dataclass
class Expected:
    """What the render must keep, recorded while a history is generated."""

    messages: list[tuple[str, str]] = field(default_factory=list)  # (role, text) in order
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (call_id, name, arguments) in order
    outputs: dict[str, str] = field(default_factory=dict)  # call_id -> output text


texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
names = st.sampled_from(["get_current_time", "lookup", "search_docs"])
arguments = st.sampled_from(["{}", '{"q": "x"}', '{"city":"Paris","n":2}'])
uuids = st.uuids().map(str)


@st.composite
def user_turn(draw: st.DrawFn, expected: Expected) -> list[dict[str, Any]]:
    role = draw(st.sampled_from(["user", "user", "system", "developer"]))
    pieces = draw(st.lists(texts, min_size=1, max_size=3))
    shape = draw(st.sampled_from(["string", "input_text", "chat_text", "mixed"]))
    if shape == "string" or len(pieces) == 1 and shape == "mixed":
        content: Any = pieces[0]
        pieces = pieces[:1]
    elif shape == "input_text":
        content = [{"type": "input_text", "text": piece} for piece in pieces]
    elif shape == "chat_text":
        content = [{"type": "text", "text": piece} for piece in pieces]
    else:
        content = [piece if i % 2 else {"type": "input_text", "text": piece} for i, piece in enumerate(pieces)]
    if role == "user" and isinstance(content, list) and draw(st.booleans()):
        content.append(
            draw(
                st.sampled_from(
                    [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                        {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"},
                        {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a"},
                        {"type": "file", "file": {"file_data": "data:text/plain;base64,aGk=", "filename": "b"}},
                    ]
                )
            )
        )
    expected.messages.append((role, "\n".join(pieces)))
    item: dict[str, Any] = {"role": role, "content": content}
    if draw(st.booleans()):
        item.update(type="message", status=None)  # as MLflow's request model hands it over
    return [item]


@st.composite
def assistant_turn(draw: st.DrawFn, expected: Expected) -> list[dict[str, Any]]:
    pieces = draw(st.lists(texts, min_size=1, max_size=3))
    shape = draw(st.sampled_from(["string", "output_text", "chat_ui", "mlflow", "refusal", "sdk"]))
    if shape == "string":
        pieces = pieces[:1]
        item: dict[str, Any] = {"role": "assistant", "content": pieces[0]}
    elif shape == "refusal":
        item = {"role": "assistant", "content": [{"type": "refusal", "refusal": piece} for piece in pieces]}
    else:
        parts = [{"type": "output_text", "text": piece, "annotations": []} for piece in pieces]
        item = {"role": "assistant", "content": parts}
        extra = {
            "output_text": {"type": "message"},
            "chat_ui": {"id": draw(uuids)},
            "mlflow": {"type": "message", "status": None},
            "sdk": {"type": "message", "id": "__fake_id__", "status": "completed", "provider_data": {"model": "m"}},
        }[shape]
        item.update(extra)
    expected.messages.append(("assistant", "\n".join(pieces)))
    items = [item]
    if draw(st.booleans()):  # a chat UI's reasoning summary before the answer
        items.insert(0, {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hmm"}], "id": draw(uuids)})
    return items


@st.composite
def tool_turn(draw: st.DrawFn, expected: Expected, counter: list[int]) -> list[dict[str, Any]]:
    count = draw(st.integers(min_value=1, max_value=3))
    calls = []
    for _ in range(count):
        counter[0] += 1
        calls.append((f"call_{counter[0]}", draw(names), draw(arguments)))
    answered = [draw(st.booleans()) or draw(st.booleans()) for _ in calls]  # mostly answered
    outputs = {}
    for (call_id, _, _), done in zip(calls, answered, strict=True):
        if done:
            outputs[call_id] = draw(texts)
    expected.calls.extend(calls)
    for call_id, _, _ in calls:
        expected.outputs[call_id] = outputs.get(call_id, INTERRUPTED_CALL_OUTPUT)

    if draw(st.booleans()):  # chat-completions shape
        content = draw(st.sampled_from([None, "", "Let me check."]))
        if content:
            expected.messages.append(("assistant", content))
        tool_calls = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            for call_id, name, args in calls
        ]
        items = [{"role": "assistant", "content": content, "tool_calls": tool_calls}]
        items += [{"role": "tool", "tool_call_id": call_id, "content": text} for call_id, text in outputs.items()]
        return items
    items = []
    for call_id, name, args in calls:
        item = {"type": "function_call", "call_id": call_id, "name": name, "arguments": args}
        item |= draw(st.sampled_from([{}, {"id": draw(uuids)}, {"id": "fc_1", "status": "completed"}]))
        items.append(item)
    for call_id, text in outputs.items():
        shape = draw(st.sampled_from(["string", "parts"]))
        value: Any = text if shape == "string" else [{"type": "input_text", "text": text}]
        items.append({"type": "function_call_output", "call_id": call_id, "output": value})
    return items


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[dict[str, Any]], Expected]:
    expected, counter, items = Expected(), [0], []
    for kind in draw(st.lists(st.sampled_from(["user", "assistant", "tool"]), min_size=1, max_size=7)):
        if kind == "user":
            items += draw(user_turn(expected))
        elif kind == "assistant":
            items += draw(assistant_turn(expected))
        else:
            items += draw(tool_turn(expected, counter))
    return items, expected


def message_text(item: dict[str, Any]) -> str:
    content = item["content"]
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content if part["type"] == "input_text")


@PROPERTY_SETTINGS
@given(generated=histories(), api=st.sampled_from(API_MODES))
def test_render_keeps_order_texts_calls_and_outputs(generated, api):
    items, expected = generated
    rendered = render_history(items, api)
    assert render_history(rendered, api) == rendered, "idempotent"

    messages = [(item["role"], message_text(item)) for item in rendered if "role" in item]
    assert messages == expected.messages
    calls = [
        (item["call_id"], item["name"], item["arguments"]) for item in rendered if item.get("type") == "function_call"
    ]
    assert calls == expected.calls
    outputs = {item["call_id"]: item["output"] for item in rendered if item.get("type") == "function_call_output"}
    assert outputs == expected.outputs

    # Each run of calls is followed at once by their outputs, in call order.
    i = 0
    while i < len(rendered):
        run = []
        while i < len(rendered) and rendered[i].get("type") == "function_call":
            run.append(rendered[i]["call_id"])
            i += 1
        answers = [item["call_id"] for item in rendered[i : i + len(run)]]
        assert all(item.get("type") == "function_call_output" for item in rendered[i : i + len(run)])
        assert answers == run
        i += len(run) or 1


@PROPERTY_SETTINGS
@given(generated=histories(), api=st.sampled_from(API_MODES))
def test_render_is_valid_for_both_apis_and_the_sdk(generated, api):
    rendered = render_history(generated[0], api)
    RESPONSES_ITEMS.validate_python(rendered)
    validate_schema("responses", {"model": "m", "input": rendered or "hi"})

    messages = Converter.items_to_messages(rendered)
    CHAT_MESSAGES.validate_python(messages)
    json.dumps(messages)
    if messages:
        validate_schema("chat", {"model": "m", "messages": messages})


@pytest.mark.parametrize("api", API_MODES)
def test_mlflow_normalisation_then_render_is_stable(api):
    # What MLflow's request model adds (status None, type message) never changes the render.
    items = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Hi"}], "id": "0b6c"},
    ]
    normalised = [{**item, "type": "message", "status": None} for item in items]
    assert render_history(normalised, api) == render_history(items, api)
