# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The render of each item: messages, tool calls and outputs, MCP items, in whatever shape a client sent them,
out as the one shape both API modes accept (the rules for message content are in content_parts.py; pairing
calls with outputs, and its repairs, in tool_pairs.py). Stdlib only, like the whole package."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from agent_server.config import ApiMode
from agent_server.history import approvals
from agent_server.history.content_parts import (
    assistant_annotations,
    assistant_text,
    check_chat_completions,
    input_content,
    tool_output,
)
from agent_server.history.errors import HistoryError, json_type, show
from agent_server.history.tool_outputs import parts_in_text, unrepr
from agent_server.history.tool_pairs import Rendered, orphan_output_message, pair_calls_with_outputs

logger = logging.getLogger("agent_server.history")

# Items that point at state held by the Responses API; MLflow's request model rejects them.
SERVER_STATE_TYPES = ("compaction", "item_reference")
DROPPED_TYPES = ("reasoning", "mcp_list_tools")
MALFORMED_ARGUMENTS = "arguments_as_sent"  # the key that holds a call's arguments that were not a JSON object
INPUT_ROLES = ("user", "system", "developer")
TEXT_ONLY_ROLES = ("system", "developer")
ANNOTATIONS = (
    "annotations"  # an assistant message's citations, as Rendered.annotations and conversation memory keep them
)


def render_history(items: Sequence[Any], api: ApiMode = "chat_completions") -> list[dict[str, Any]]:
    """Render `items` (Responses or chat-completions shaped) for `Runner.run` in API mode `api`.

    Idempotent: rendering the output again returns it unchanged.
    Raises `HistoryError` for an item that cannot be rendered; never anything else
    for a list of JSON values.
    """
    return [r.item for r in render_with_sources(items, api)]


def render_with_sources(items: Sequence[Any], api: ApiMode = "chat_completions") -> list[Rendered]:
    """`render_history`, each rendered item with the index of the client's item it stands for."""
    return pair_calls_with_outputs(render_each(items, api))


def render_each(items: Sequence[Any], api: ApiMode = "chat_completions") -> list[Rendered]:
    """Each item rendered on its own, before tool calls are paired with their outputs (tool_pairs.py).

    Conversation memory stores this form (agent_server/memory/): pairing depends on what comes
    later in the conversation, so it runs on the whole history each time it is sent to the model.
    """
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError(f"history must be a list of items, got {type(items).__name__}")
    rendered: list[Rendered] = []
    replayed_twice = approvals.replayed_twice(items)
    for index, item in enumerate(items):
        if index in replayed_twice:
            logger.info("history: input[%d] repeats an MCP tool call the history holds already", index)
            continue
        for out in _render_item(item, index):
            media = None
            if api == "chat_completions":
                check_chat_completions(out, index)
                media = media_of_tool_output(out, index)
            notes = tuple(out.pop(ANNOTATIONS, ()))  # an answer's citations: for the client, not the model
            rendered.append(Rendered(index, out, item.get("id"), notes))
            if media is not None:
                rendered.append(Rendered(index, media, None))  # pairing keeps it after the call's outputs
    return rendered


def media_of_tool_output(out: dict[str, Any], index: int) -> dict[str, Any] | None:
    """In chat-completions mode a tool message holds only text, and the SDK would put "[tool output omitted]" in
    place of an image: the images and files of a tool output move to a user message of their own, which the
    tool message names. Returns that message (and makes `out` text), or None for an output of text only."""
    output = out.get("output") if out.get("type") == "function_call_output" else None
    if not isinstance(output, list):
        return None
    texts = [part["text"] for part in output if part["type"] == "input_text"]
    media = [part for part in output if part["type"] != "input_text"]
    note = f"[The tool's output holds {len(media)} image or file part(s), in the user message that follows]"
    out["output"] = "\n".join([*texts, note])
    logger.info("history: input[%d] is a tool output with images or files: they follow as a user message", index)
    header = f"[The image or file part(s) of the output of tool call {out['call_id']!r}]"
    return {"role": "user", "content": [{"type": "input_text", "text": header}, *media]}


def _render_item(item: Any, index: int) -> list[dict[str, Any]]:
    if not isinstance(item, Mapping):
        raise HistoryError(index, f"expected an object, got {json_type(item)}")
    item_type = item.get("type")
    if item_type in (None, "message") and "role" in item:
        return _render_message(item, index)
    if item_type == "function_call":
        return [_function_call(item.get("call_id"), item.get("name"), item.get("arguments"), index)]
    if item_type == "function_call_output":
        if item.get("call_id") is None:  # a client that lost it: as an output whose call is gone (tool_pairs.py)
            logger.info("history: input[%d] is a tool output that names no call: given as a user message", index)
            return [orphan_output_message(None, tool_output(item.get("output"), index))]
        return [_function_call_output(item.get("call_id"), item.get("output"), index)]
    if item_type in ("mcp_approval_request", "mcp_call"):
        return _mcp_call(item, index)
    if item_type == "mcp_approval_response":
        if not isinstance(item.get("approve"), bool):
            raise HistoryError(index, "an 'mcp_approval_response' needs 'approve' true or false")
        if item.get("reason") is not None and not isinstance(item["reason"], str):
            got = json_type(item["reason"])
            raise HistoryError(index, f"an 'mcp_approval_response''s 'reason' must be text, got {got}")
        request_id = item.get("approval_request_id")
        return [_function_call_output(request_id, approvals.output_for(item), index, key="approval_request_id")]
    if item_type in DROPPED_TYPES:
        logger.info("history: input[%d] is a %s item, which is not replayed", index, item_type)
        return []
    if item_type == "item_reference":  # with memory on, resolved before the render (memory/references.py)
        raise HistoryError(
            index,
            "an 'item_reference' names an item by id, which this app keeps only with conversation memory on; "
            "send the item itself (the AI SDK: providerOptions.openai.store false)",
        )
    if item_type in SERVER_STATE_TYPES:
        raise HistoryError(
            index,
            f"a {item_type!r} item cannot be replayed here: MLflow's agent server accepts only messages, "
            "tool calls, tool outputs and reasoning; send the conversation's messages instead",
        )
    if item_type is None:
        raise HistoryError(index, "item has neither 'type' nor 'role'")
    raise HistoryError(index, f"item type {show(item_type)} is not supported")


def _mcp_call(item: Mapping[str, Any], index: int) -> list[dict[str, Any]]:
    """An MCP tool call, as the function call it was: approved or not yet (a request), or run by a
    hosted MCP tool or this app's /responses (`mcp_call`, with its output or error; after an approval, only the
    output of the request it names)."""
    call = _function_call(item.get("id"), item.get("name"), item.get("arguments"), index, key="id")
    if item["type"] == "mcp_approval_request":
        return [call]
    output = parts_in_text(item.get("output")) if item.get("error") in (None, "") else f"Error: {item['error']}"
    if isinstance(item.get("approval_request_id"), str):  # an approved call: its call is the approval request
        return [_function_call_output(item["approval_request_id"], output, index, key="approval_request_id")]
    return [call, _function_call_output(call["call_id"], output, index, key="id")]


def _render_message(item: Mapping[str, Any], index: int) -> list[dict[str, Any]]:
    role = item["role"]
    content = item.get("content")
    if role in INPUT_ROLES:
        parts = input_content(content, index)
        if role in TEXT_ONLY_ROLES and isinstance(parts, list):
            if any(part["type"] != "input_text" for part in parts):
                raise HistoryError(index, f"a {role} message may hold only text")
        return [{"role": role, "content": parts}]
    if role == "assistant":
        text = assistant_text(content, index)
        tool_calls = item.get("tool_calls") or []
        if not isinstance(tool_calls, list):
            raise HistoryError(index, "'tool_calls' must be a list")
        rendered: list[dict[str, Any]] = [{"role": "assistant", "content": text}] if text or not tool_calls else []
        notes = assistant_annotations(content, item.get(ANNOTATIONS), index)
        if rendered and notes:
            rendered[0][ANNOTATIONS] = notes
        rendered.extend(_chat_tool_call(call, index) for call in tool_calls)
        return rendered
    if role == "tool":
        return [_function_call_output(item.get("tool_call_id"), content, index, key="tool_call_id")]
    raise HistoryError(index, f"role {show(role)} is not supported")


def _chat_tool_call(call: Any, index: int) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        raise HistoryError(index, "each of 'tool_calls' needs a 'function' object")
    return _function_call(call.get("id"), function.get("name"), function.get("arguments"), index, key="id")


def _function_call(call_id: Any, name: Any, arguments: Any, index: int, key: str = "call_id") -> dict[str, Any]:
    # An empty id is allowed: some model servers send none, and tool_pairs.py gives the call one.
    if not isinstance(call_id, str):
        raise HistoryError(index, f"a tool call needs a '{key}' string")
    if not isinstance(name, str) or not name:
        raise HistoryError(index, "a tool call needs a 'name' string")
    if arguments is None or arguments == "":
        arguments = "{}"  # what the SDK sends for a call without arguments
    elif not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    if not _is_json_object(arguments):
        # A model cut off mid-call (`{"lim`): strict servers refuse such a history on every later turn. The model
        # still sees what it sent, inside an object they accept.
        logger.info("history: input[%d] is a tool call whose arguments are not a JSON object: kept as text", index)
        arguments = json.dumps({MALFORMED_ARGUMENTS: arguments})
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _function_call_output(call_id: Any, output: Any, index: int, key: str = "call_id") -> dict[str, Any]:
    if not isinstance(call_id, str):
        raise HistoryError(index, f"a tool output needs a '{key}' string")
    repaired = unrepr(output)
    if repaired is not output:
        logger.info("history: input[%d] is a tool output given as the Python repr of its parts: read as them", index)
    return {"type": "function_call_output", "call_id": call_id, "output": tool_output(repaired, index)}
