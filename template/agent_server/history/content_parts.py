# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The render's rules for message content: text, refusals, images and files, as both APIs name them.

Stdlib only, like the rest of the render (render.py), which calls these for every message and tool output.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from agent_server.history.errors import HistoryError, json_type, part_name, required_str

logger = logging.getLogger("agent_server.history")

TEXT_PART_TYPES = ("input_text", "output_text", "text")
IMAGE_DETAILS = ("low", "high", "auto", "original")
FILE_DETAILS = ("low", "high", "auto")
FILE_KEYS = ("file_data", "file_id", "file_url", "filename")


def assistant_text(content: Any, index: int) -> str:
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
            texts.append(required_str(part, "text", index))
        elif part_type == "refusal":
            # Kept as text so the model still sees what it refused.
            texts.append(required_str(part, "refusal", index))
        else:
            raise HistoryError(index, f"assistant content part {part_name(part)} is not supported")
    return "\n".join(texts)


def assistant_annotations(content: Any, top_level: Any, index: int) -> list[dict[str, Any]]:
    """The citations of an assistant message (`annotations`: url_citation, file_citation...), kept for the client,
    never sent to the model: each text part's, its positions moved to where the part stands in the text
    assistant_text joins; then the message's own (chat completions', each url_citation in its nested object, or
    what conversation memory keeps: the list this returns)."""
    found: list[dict[str, Any]] = []
    offset = 0
    for part in content if isinstance(content, list) else []:
        text = part if isinstance(part, str) else part.get("text") or part.get("refusal") or ""
        if isinstance(part, Mapping) and part.get("annotations") is not None:
            found += [_moved(note, offset) for note in _annotation_list(part["annotations"], index)]
        offset += len(text) + 1  # the "\n" that joins the parts
    for note in _annotation_list(top_level, index) if top_level is not None else []:
        nested = note.get("url_citation")
        found.append({"type": "url_citation", **nested} if isinstance(nested, Mapping) else note)
    return found


def _annotation_list(annotations: Any, index: int) -> list[dict[str, Any]]:
    if not isinstance(annotations, list):
        raise HistoryError(index, f"'annotations' must be a list, got {json_type(annotations)}")
    for note in annotations:
        if not isinstance(note, Mapping) or not isinstance(note.get("type"), str):
            raise HistoryError(index, "each of 'annotations' must be an object with a 'type'")
    return [dict(note) for note in annotations]


def _moved(note: dict[str, Any], offset: int) -> dict[str, Any]:
    for key in ("start_index", "end_index", "index"):
        if offset and isinstance(note.get(key), int) and not isinstance(note[key], bool):
            note[key] += offset
    return note


def input_content(content: Any, index: int) -> str | list[dict[str, Any]]:
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
        return [{"type": "input_text", "text": required_str(part, "text", index)}]
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
        raise HistoryError(index, f"content part {part_name(part)} is not supported")
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


def check_chat_completions(item: dict[str, Any], index: int) -> None:
    """What the SDK's chat-completions converter cannot send, named here rather than failing inside the SDK."""
    content = item.get("content") if item.get("type") is None else item.get("output")
    for part in content if isinstance(content, list) else []:
        if part["type"] == "input_image" and "image_url" not in part:
            raise HistoryError(index, "an image given only by 'file_id' needs LLM_API=responses; send its URL instead")
        if part["type"] == "input_file" and "file_data" not in part:
            raise HistoryError(index, "a file without 'file_data' needs LLM_API=responses; send its data instead")


def tool_output(output: Any, index: int) -> str | list[dict[str, Any]]:
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
