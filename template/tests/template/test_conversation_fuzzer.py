# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""A conversation fuzzer: a client played against the app and the offline model, turn by turn.

Hypothesis draws each conversation: per turn, the API mode (so it may switch mid-conversation),
streaming or not, the prompt (plain, a tool turn, two calls at once), how the client keeps the
app's answer (as returned, as the chat UI does, as chat-completions messages), and what it then
does to its history (cuts it to a window, records its own error output beside the app's for a
tool call, reorders outputs). The model may be one that numbers every call `call_0` or sends
none. The client keeps whatever it did and replays it on every later turn.

The property: every turn answers with a 200, the offline model rejects nothing, and the model
sees every text, tool name, tool argument and tool output the client sent, except what the
documented repairs drop (docs/history-shapes.md, "Repairs"): of several outputs for one call,
only the app's own, named by the call's id; and where the client kept no id for the call
(chat-completions messages), only the newest.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from history_catalogue import CLIENT_TOOL_ERROR
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import post, replayed

from agent_server import llm

PROMPTS = ["Hello", "What time is it?", "What time is it twice?", "Thanks", "Tell me more"]
REPLAYS = ["exact", "chat_ui", "chat_completions"]
EDITS = ["keep", "keep", "window", "client_error", "reorder_outputs"]

FUZZ_SETTINGS = settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def is_output(item: dict[str, Any]) -> bool:
    return item.get("type") == "function_call_output" or item.get("role") == "tool"


def output_of(item: dict[str, Any]) -> tuple[str, str]:
    """(call id, text) of an output item in either shape."""
    if item.get("role") == "tool":
        return item["tool_call_id"], item["content"]
    return item["call_id"], item["output"]


def calls_in(history: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every call the client kept, by call id: its name, arguments and whether it kept the call's item id."""
    calls = {}
    for item in history:
        if item.get("type") == "function_call":
            calls[item["call_id"]] = {"name": item["name"], "arguments": item["arguments"], "has_id": "id" in item}
        for call in item.get("tool_calls") or []:
            calls[call["id"]] = {**call["function"], "has_id": False}
    return calls


def edit(history: list[dict[str, Any]], data: st.DataObject) -> list[dict[str, Any]]:
    """What the client does to the history it keeps before it sends the next turn."""
    action = data.draw(st.sampled_from(EDITS), label="edit")
    outputs = [i for i, item in enumerate(history) if is_output(item)]
    if action == "window" and len(history) > 1:
        return history[data.draw(st.integers(1, len(history) - 1), label="window start") :]
    if action == "client_error" and outputs:
        i = data.draw(st.sampled_from(outputs), label="output the client also answers")
        error = copy.deepcopy(history[i])
        error["content" if error.get("role") == "tool" else "output"] = CLIENT_TOOL_ERROR
        error["client_made"] = True  # the fuzzer's own mark; removed before sending
        at = i + data.draw(st.sampled_from([0, 1]), label="before or after the app's output")
        return [*history[:at], error, *history[at:]]
    if action == "reorder_outputs" and outputs:
        start = data.draw(st.sampled_from(outputs), label="run of outputs")
        end = start
        while end + 1 < len(history) and is_output(history[end + 1]):
            end += 1
        run = data.draw(st.permutations(history[start : end + 1]), label="order")
        return [*history[:start], *run, *history[end + 1 :]]
    return history


def strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for inner in value.values() for text in strings_in(inner)]
    if isinstance(value, list):
        return [text for inner in value for text in strings_in(inner)]
    return []


def assert_model_saw_what_the_client_sent(sent: list[dict[str, Any]], model_request: dict[str, Any]) -> None:
    seen = strings_in(model_request.get("messages") or model_request.get("input"))

    def saw(text: str) -> bool:
        return any(text in string for string in seen)

    calls = calls_in(sent)
    outputs: dict[str, list[dict[str, Any]]] = {}
    for item in sent:
        if is_output(item):
            outputs.setdefault(output_of(item)[0], []).append(item)
        elif item.get("role") in ("user", "assistant") and isinstance(item.get("content"), (str, list)):
            for text in strings_in(item["content"]):
                if text not in ("output_text", "input_text"):
                    assert saw(text), f"the model never saw {text!r}"
    for call in calls.values():
        assert saw(call["name"]) and saw(call["arguments"])
    for call_id, answers in outputs.items():
        if len(answers) == 1 or call_id not in calls:
            expected = answers  # alone, or an orphan: its text must get through
        elif calls[call_id]["has_id"]:
            expected = [item for item in answers if not item.get("client_made")]  # the app's own
        else:
            expected = answers[-1:]  # no id to name the app's output: the newest
        for item in expected:
            assert saw(output_of(item)[1]), f"the model never saw the output {item}"


@pytest.mark.parametrize("api_mode", ["chat_completions"], indirect=True)  # each turn draws its own mode
@FUZZ_SETTINGS
@given(data=st.data())
def test_every_turn_of_a_fuzzed_conversation_answers(app_client, model_log, app_settings, data):
    model = llm.offline_app()
    model.state.call_ids = data.draw(st.sampled_from(["unique", "unique", "reuse", "empty"]), label="model call ids")
    history: list[dict[str, Any]] = []
    try:
        for _ in range(data.draw(st.integers(2, 4), label="turns")):
            app_settings.setenv("LLM_API", data.draw(st.sampled_from(llm.API_MODES), label="API mode"))
            history = [*edit(history, data), {"role": "user", "content": data.draw(st.sampled_from(PROMPTS))}]
            sent = [{key: value for key, value in item.items() if key != "client_made"} for item in history]
            model_log.clear()
            items = post(app_client, sent, stream=data.draw(st.booleans(), label="stream"))
            assert [entry["status"] for entry in model_log] == [200] * len(model_log) and model_log
            assert_model_saw_what_the_client_sent(history, model_log[0]["body"])
            history += replayed(items, data.draw(st.sampled_from(REPLAYS), label="replay"))
    finally:
        model.state.call_ids = "unique"
