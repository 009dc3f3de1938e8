# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The render boundary: chat history in whatever shape a client sent, out as
items that every supported openai-agents version accepts in both API modes.

Stdlib only, on purpose: no SDK or MLflow import, so these rules can be read
and tested on their own. The handlers call `render_history` on every request,
and the request guard calls it before MLflow's validation.

Why a render step is needed (measured on openai-agents 0.4-0.24, mlflow 3.5-3.17):
- MLflow's `ResponsesAgentRequest` drops the `id` of assistant messages and
  adds `"status": None`. openai-agents >= 0.19 then rejects the item in
  chat-completions mode (`UserError: Unhandled item type or structure`).
- In Responses mode the SDK forwards items untouched, so a null `status`, a
  client-made id or a chat-completions-shaped message reaches the API as is.

The rules (each one is tested in tests/test_history.py; docs/history-shapes.md
shows every shape clients really send, and its render):
- user messages: `{"role": "user", "content": ...}`. A string stays a string (None
  and [] become ""); text parts become `input_text`; chat-completions `image_url`
  and `file` parts become `input_image` and `input_file`. Image and file parts are
  checked (a URL, data or file id; a known `detail`). A `text` key on one (a caption
  some clients add) becomes an `input_text` part right after it: MLflow's request model
  would otherwise read the part as text and lose the image. Other keys are kept, minus
  nulls, for the API to judge.
- system and developer messages: the same, but text only: the chat-completions
  converter would drop an image or file there without a word, so it is a HistoryError.
- assistant messages: `{"role": "assistant", "content": "<text>"}`. Text and
  refusal parts are joined with "\n", as the SDK itself joins them; None is "".
- an assistant message with chat-completions `tool_calls`: its text message (if
  it has text), then one `function_call` per call.
- a chat-completions `role: "tool"` message: a `function_call_output`.
- `function_call` keeps `call_id`, `name`, `arguments` (a JSON string; an object
  is serialised, None or "" is "{}"); `function_call_output` keeps `call_id`,
  `output` (text parts joined with "\n"; a JSON value serialised). Ids are dropped:
  client-made ids (UUIDs) are rejected by the Responses API, and neither API needs them.
- tool calls and outputs are paired by agent_server/tool_pairs.py, which repairs what
  real conversations break: a call with no output, an output out of place, several
  outputs for one call, an output whose call was cut off, reused or empty call ids.
- `reasoning` items are dropped (and logged): reasoning belongs to the turn
  that produced it, and client-made reasoning ids are rejected.
- `compaction` and `item_reference` items are a HistoryError in both modes. The app
  receives history only through MLflow's `ResponsesAgentRequest`, which rejects both,
  and the chat-completions converter cannot read them either; the error says so
  instead of leaving MLflow to answer with a pydantic dump.
- chat-completions mode only: an image given only by `file_id`, or a file without
  `file_data` (given by `file_id` or `file_url`), is a HistoryError: the SDK's
  chat-completions converter cannot send them in every supported version (0.18's
  takes only `file_data`), while the Responses API can.
- anything else is a HistoryError naming the item's index.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from agent_server.tool_pairs import INTERRUPTED_CALL_OUTPUT, Rendered, pair_calls_with_outputs

__all__ = [
    "INTERRUPTED_CALL_OUTPUT",
    "ApiMode",
    "HistoryError",
    "Rendered",
    "json_type",
    "render_history",
    "render_with_sources",
]

logger = logging.getLogger(__name__)

ApiMode = Literal["chat_completions", "responses"]

# Items that point at state held by the Responses API; MLflow's request model rejects them.
SERVER_STATE_TYPES = ("compaction", "item_reference")
DROPPED_TYPES = ("reasoning",)
INPUT_ROLES = ("user", "system", "developer")
TEXT_ONLY_ROLES = ("system", "developer")
TEXT_PART_TYPES = ("input_text", "output_text", "text")
IMAGE_DETAILS = ("low", "high", "auto", "original")
FILE_DETAILS = ("low", "high", "auto")
FILE_KEYS = ("file_data", "file_id", "file_url", "filename")


class HistoryError(ValueError):
    """An item that cannot be rendered. `index` is its position in the input."""

    def __init__(self, index: int, reason: str) -> None:
        self.index = index
        self.reason = reason
        super().__init__(f"input[{index}]: {reason}")


def render_history(items: Sequence[Any], api: ApiMode = "chat_completions") -> list[dict[str, Any]]:
    """Render `items` (Responses or chat-completions shaped) for `Runner.run` in API mode `api`.

    Idempotent: rendering the output again returns it unchanged.
    Raises `HistoryError` for an item that cannot be rendered; never anything else
    for a list of JSON values.
    """
    return [r.item for r in render_with_sources(items, api)]


def render_with_sources(items: Sequence[Any], api: ApiMode = "chat_completions") -> list[Rendered]:
    """`render_history`, each rendered item with the index of the client's item it stands for."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError(f"history must be a list of items, got {type(items).__name__}")
    rendered: list[Rendered] = []
    for index, item in enumerate(items):
        for out in _render_item(item, index):
            if api == "chat_completions":
                _check_chat_completions(out, index)
            rendered.append(Rendered(index, out, item.get("id")))
    return pair_calls_with_outputs(rendered)


def _render_item(item: Any, index: int) -> list[dict[str, Any]]:
    if not isinstance(item, Mapping):
        raise HistoryError(index, f"expected an object, got {json_type(item)}")
    item_type = item.get("type")
    if item_type in (None, "message") and "role" in item:
        return _render_message(item, index)
    if item_type == "function_call":
        return [_function_call(item.get("call_id"), item.get("name"), item.get("arguments"), index)]
    if item_type == "function_call_output":
        return [_function_call_output(item.get("call_id"), item.get("output"), index)]
    if item_type in DROPPED_TYPES:
        logger.info("history: input[%d] is a %s item, which is not replayed", index, item_type)
        return []
    if item_type in SERVER_STATE_TYPES:
        raise HistoryError(
            index,
            f"a {item_type!r} item cannot be replayed here: MLflow's agent server accepts only messages, "
            "tool calls, tool outputs and reasoning; send the conversation's messages instead",
        )
    if item_type is None:
        raise HistoryError(index, "item has neither 'type' nor 'role'")
    raise HistoryError(index, f"item type {_show(item_type)} is not supported")


def _render_message(item: Mapping[str, Any], index: int) -> list[dict[str, Any]]:
    role = item["role"]
    content = item.get("content")
    if role in INPUT_ROLES:
        parts = _input_content(content, index)
        if role in TEXT_ONLY_ROLES and isinstance(parts, list):
            if any(part["type"] != "input_text" for part in parts):
                raise HistoryError(index, f"a {role} message may hold only text")
        return [{"role": role, "content": parts}]
    if role == "assistant":
        text = _assistant_text(content, index)
        tool_calls = item.get("tool_calls") or []
        if not isinstance(tool_calls, list):
            raise HistoryError(index, "'tool_calls' must be a list")
        rendered = [{"role": "assistant", "content": text}] if text or not tool_calls else []
        rendered.extend(_chat_tool_call(call, index) for call in tool_calls)
        return rendered
    if role == "tool":
        return [_function_call_output(item.get("tool_call_id"), content, index, key="tool_call_id")]
    raise HistoryError(index, f"role {_show(role)} is not supported")


def _assistant_text(content: Any, index: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise HistoryError(index, f"assistant content must be text or a list, got {json_type(content)}")
    texts = []
    for part in content:
        part_type = part.get("type") if isinstance(part, Mapping) else None
        if isinstance(part, str):
            texts.append(part)
        elif part_type in TEXT_PART_TYPES:
            texts.append(_required_str(part, "text", index))
        elif part_type == "refusal":
            # Kept as text so the model still sees what it refused.
            texts.append(_required_str(part, "refusal", index))
        else:
            raise HistoryError(index, f"assistant content part {_part_name(part)} is not supported")
    return "\n".join(texts)


def _input_content(content: Any, index: int) -> str | list[dict[str, Any]]:
    if content is None or content == []:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise HistoryError(index, f"content must be text or a list, got {json_type(content)}")
    return _input_parts(content, index)


def _input_parts(parts: list[Any], index: int) -> list[dict[str, Any]]:
    return [rendered for part in parts for rendered in _input_part(part, index)]


def _input_part(part: Any, index: int) -> list[dict[str, Any]]:
    """One user-side content part, as the Responses API names it: the part, then its caption if it has one."""
    if isinstance(part, str):
        return [{"type": "input_text", "text": part}]
    part_type = part.get("type") if isinstance(part, Mapping) else None
    if part_type in TEXT_PART_TYPES:
        return [{"type": "input_text", "text": _required_str(part, "text", index)}]
    if part_type == "input_image":
        rendered = _image(part, part.get("image_url"), part.get("file_id"), part.get("detail"), index)
    elif part_type == "image_url":  # chat-completions shape
        payload = part.get("image_url")
        if isinstance(payload, Mapping):
            rendered = _image({}, payload.get("url"), None, payload.get("detail"), index)
        else:
            rendered = _image({}, payload, None, None, index)
    elif part_type == "input_file":
        rendered = _file(part, index)
    elif part_type == "file":  # chat-completions shape
        payload = part.get("file")
        if not isinstance(payload, Mapping):
            raise HistoryError(index, "a 'file' part needs a 'file' object")
        rendered = _file(payload, index)
    else:
        raise HistoryError(index, f"content part {_part_name(part)} is not supported")
    return [rendered, *_caption(part, index)]


def _caption(part: Mapping[str, Any], index: int) -> list[dict[str, Any]]:
    """A `text` key on an image or file part, as its own text part: MLflow would read the part as text."""
    text = part.get("text")
    if text is None or text == "":
        return []
    if not isinstance(text, str):
        raise HistoryError(index, f"an image's or file's 'text' must be a string, got {json_type(text)}")
    logger.info("history: input[%d] has a caption on an image or file part; sent as a text part after it", index)
    return [{"type": "input_text", "text": text}]


def _image(part: Mapping[str, Any], url: Any, file_id: Any, detail: Any, index: int) -> dict[str, Any]:
    image = _other_keys(part, ("image_url", "file_id", "detail", "text"))
    image["type"] = "input_image"
    for key, value in (("image_url", url), ("file_id", file_id)):
        if value is not None:
            if not isinstance(value, str) or not value:
                raise HistoryError(index, f"an image's {key!r} must be a non-empty string")
            image[key] = value
    if not {"image_url", "file_id"} & image.keys():
        raise HistoryError(index, "an image needs an 'image_url' (a URL or data URL) or a 'file_id'")
    if detail not in (None, *IMAGE_DETAILS):
        raise HistoryError(index, f"an image's 'detail' must be one of {', '.join(IMAGE_DETAILS)}")
    image["detail"] = detail or "auto"  # required by the Responses API
    return image


def _file(part: Mapping[str, Any], index: int) -> dict[str, Any]:
    file = _other_keys(part, (*FILE_KEYS, "detail", "text"))
    file["type"] = "input_file"
    for key in FILE_KEYS:
        value = part.get(key)
        if value is not None:
            if not isinstance(value, str) or not value:
                raise HistoryError(index, f"a file's {key!r} must be a non-empty string")
            file[key] = value
    if not {"file_data", "file_id", "file_url"} & file.keys():
        raise HistoryError(index, "a file needs 'file_data', 'file_id' or 'file_url'")
    detail = part.get("detail")
    if detail is not None:
        if detail not in FILE_DETAILS:
            raise HistoryError(index, f"a file's 'detail' must be one of {', '.join(FILE_DETAILS)}")
        file["detail"] = detail
    return file


def _other_keys(part: Mapping[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    """Keys the render has no rule for, kept (without nulls) so the API can judge them; nothing is dropped silently."""
    return {key: value for key, value in part.items() if key not in known and key != "type" and value is not None}


def _check_chat_completions(item: dict[str, Any], index: int) -> None:
    """What the SDK's chat-completions converter cannot send, named here rather than failing inside the SDK."""
    content = item.get("content") if item.get("type") is None else item.get("output")
    for part in content if isinstance(content, list) else []:
        if part["type"] == "input_image" and "image_url" not in part:
            raise HistoryError(index, "an image given only by 'file_id' needs LLM_API=responses; send its URL instead")
        if part["type"] == "input_file" and "file_data" not in part:
            raise HistoryError(index, "a file without 'file_data' needs LLM_API=responses; send its data instead")


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
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def _function_call_output(call_id: Any, output: Any, index: int, key: str = "call_id") -> dict[str, Any]:
    if not isinstance(call_id, str):
        raise HistoryError(index, f"a tool output needs a '{key}' string")
    return {"type": "function_call_output", "call_id": call_id, "output": _tool_output(output, index)}


def _tool_output(output: Any, index: int) -> str | list[dict[str, Any]]:
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        parts = _input_parts(output, index)
        if all(part["type"] == "input_text" for part in parts):
            return "\n".join(part["text"] for part in parts)
        return parts
    return json.dumps(output)  # a tool that returned a JSON value


def _required_str(part: Mapping[str, Any], key: str, index: int) -> str:
    value = part.get(key)
    if not isinstance(value, str):
        raise HistoryError(index, f"a {_show(part.get('type'))} part needs a '{key}' string")
    return value


def _part_name(part: Any) -> str:
    if isinstance(part, Mapping):
        return _show(part.get("type"))
    return f"of type {json_type(part)}"


def _show(value: Any) -> str:
    """A client-sent value, quoted for an error message, whatever JSON type it has."""
    return repr(value) if isinstance(value, str) else f"of type {json_type(value)}"


def json_type(value: Any) -> str:
    """A JSON value's type as JSON names it, for messages about what a client sent (the app's one such helper)."""
    if value is None:
        return "null"
    names = ((bool, "boolean"), (Mapping, "object"), (list, "array"), (str, "string"), ((int, float), "number"))
    return next((name for kind, name in names if isinstance(value, kind)), type(value).__name__)
