# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""A tool's output, in the one shape every item, event, stored turn and later model input gives it.

What a tool returns reaches the app in several shapes: a string (the owner's function tools), a list of the
Responses API's input parts (openai-agents gives every MCP tool's answer so: `[{"type": "input_text", ...}]`), or
the SDK's own parts (`{"type": "text"}`, `{"type": "image", "image_url": ...}`). `tool_output_shape` makes each of
them the API's `function_call_output` output: text as text (text parts joined with "\n", as the render joins
them), and several parts with an image or file as the API's parts. An `mcp_call`'s output is only a string
(`tool_output_text`): there such parts go as their JSON, which the render reads back as parts (`parts_in_text`), so
a client that replays the `mcp_call` gives the model the image again. `unrepr` repairs the Python repr of those
parts that earlier versions of this app stored and sent in their place.

Stdlib only, like the rest of the render.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

from agent_server.history.content_parts import tool_output
from agent_server.history.errors import HistoryError

# The SDK's own part types (agents.tool ToolOutputImageDict, ToolOutputFileContentDict), as the API names them.
_SDK_PART_TYPES = {"image": "input_image", "file": "input_file"}
_MEDIA_TYPES = ("input_image", "input_file")
_REPR_START, _REPR_TYPES = "[{'type': '", ("input_text", "input_image", "input_file")
ToolOutput = str | list[dict[str, Any]]  # a function_call_output's output: text, or the API's input parts


def tool_output_shape(output: Any) -> ToolOutput:
    """What a tool returned, as a `function_call_output`'s output the API accepts; never fails (it is the
    app's own tool's answer, not a client's item): a value with no rule is its JSON text."""
    output = _plain(output)
    if isinstance(output, Mapping) and isinstance(output.get("type"), str):
        output = [output]  # one part, as the SDK gives an MCP tool's single content block
    if isinstance(output, list):
        output = [_api_part(_plain(part)) for part in output]
    try:
        return tool_output(output, 0)
    except (HistoryError, TypeError, ValueError):
        return json.dumps(output, ensure_ascii=False, default=str)


def tool_output_text(output: Any) -> str:
    """The output as an `mcp_call` carries it (a string): text as is, parts with an image or file as their JSON."""
    shaped = tool_output_shape(output)
    return shaped if isinstance(shaped, str) else json.dumps(shaped, ensure_ascii=False)


def parts_in_text(output: Any) -> Any:
    """An `mcp_call`'s output that `tool_output_text` made of parts, as those parts again; anything else as it is."""
    if not isinstance(output, str) or not output.startswith("[{"):
        return output
    try:
        parts = json.loads(output)
    except ValueError:
        return output
    if not isinstance(parts, list) or not all(isinstance(part, dict) for part in parts):
        return output
    if not any(part.get("type") in _MEDIA_TYPES for part in parts):
        return output  # a tool's own JSON text stays its text
    try:
        return tool_output(parts, 0)
    except HistoryError:
        return output


def mcp_content_parts(content: Any) -> list[dict[str, Any]]:
    """An MCP result's content blocks as openai-agents gives them (agents/mcp/util.py): text, an image as its
    data URL, any other block as its JSON text (`mcp` 1.x names the image's type `mimeType`, 2.x `mime_type`)."""
    parts: list[dict[str, Any]] = []
    for block in content or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append({"type": "text", "text": block.text})
        elif kind == "image":
            mime = getattr(block, "mime_type", None) or getattr(block, "mimeType", None)
            parts.append({"type": "image", "image_url": f"data:{mime};base64,{block.data}"})
        else:
            parts.append({"type": "text", "text": block.model_dump_json()})
    return parts


def _plain(value: Any) -> Any:
    """A pydantic model (the SDK's ToolOutputText and its kin) as its JSON value; anything else as it is."""
    if isinstance(value, tuple):
        return list(value)
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", exclude_none=True) if callable(dump) and not isinstance(value, type) else value


def unrepr(output: Any) -> Any:
    """A tool output that earlier versions of this app stored and sent as the Python repr of openai-agents' parts
    (`"[{'type': 'input_text', 'text': '...'}]"`), as the tool's output again: conversations kept from then, and
    clients that replay them, would give the model that repr on every later turn. Anything else as it is."""
    if not isinstance(output, str) or not output.startswith(_REPR_START) or not output.endswith("}]"):
        return output
    try:
        parts = ast.literal_eval(output)  # literals only: no name or call is evaluated
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return output
    if not isinstance(parts, list) or not all(isinstance(p, dict) and p.get("type") in _REPR_TYPES for p in parts):
        return output
    return tool_output_shape(parts)


def _api_part(part: Any) -> Any:
    if isinstance(part, Mapping) and part.get("type") in _SDK_PART_TYPES and "file" not in part:
        return {**part, "type": _SDK_PART_TYPES[part["type"]]}
    return part
