# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The images and documents a user attaches to a turn: which types the app takes, and how many, how large.

They travel as the Responses API's own content parts (`input_image` with a data: URL, `input_file` with
`file_data` and `filename`), from the chat page or any /responses client; the render (history/content_parts.py)
gives the chat-completions shapes these names too. The request guard checks them before anything runs or is
stored (turn/checks.py), so a refused turn leaves no trace in its conversation:

- a type the app does not take is a 415, judged by the data URL's media type and, for a file, by its filename;
- more than ATTACHMENTS_MAX_FILES parts in the turn, one over ATTACHMENTS_MAX_FILE_BYTES, or all of them over
  ATTACHMENTS_MAX_TURN_BYTES (decoded bytes), a 413 that names the setting (config/ checks that these fit the
  body and memory's limits).

The turn is the user messages the request ends with; the types are checked in every user message the client
sends. A part given by URL or file id brings no bytes (the model's API fetches it) and counts only in number.

Both API modes carry every type taken here: in chat-completions mode openai-agents' converter (0.24,
models/chatcmpl_converter.py) makes an inline `input_file` the Chat Completions `File` part (`file_data`,
`filename`; openai 3.63, openai.types.chat.ChatCompletionContentPartParam), and an image an `image_url` part. What
that mode cannot send (a file by URL or id) is a 400 before the model is called (history/content_parts.py), and a
model server that refuses a part answers a 400 the app passes on: nothing is dropped. docs/attachments.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agent_server import config
from agent_server.errors import BadRequest, HttpError, TooLarge, UnsupportedType
from agent_server.history import Rendered

IMAGE_TYPES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WebP", "image/gif": "GIF"}
FILE_TYPES = {"application/pdf": (".pdf",), "text/plain": (".txt", ".text", ".md", ".csv", ".log")}
TAKEN = "images (PNG, JPEG, WebP, GIF), PDF and plain text"
DATA_URL = re.compile(r"data:([^;,]*)((?:;[^;,]*)*),", re.IGNORECASE)


def check(client_items: Sequence[Any], each: Sequence[Rendered]) -> None:
    """An HttpError (415 or 413) for the client's attachments the app does not take; nothing for the rest."""
    turn = _turn_indices(client_items)
    count = total = 0
    limits = None  # read at the first attachment: a turn without any depends on none of these settings
    for entry in each:
        item = client_items[entry.index]
        if not (isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message"):
            continue  # a tool's output, or a tool output given as a user message by the render
        for part in entry.item["content"] if isinstance(entry.item.get("content"), list) else []:
            if part["type"] not in ("input_image", "input_file"):
                continue
            where = f"input[{entry.index}]"
            size = _size(part, where)
            if entry.index not in turn:
                continue
            count, total, limits = count + 1, total + size, limits or config.settings().attachments
            if count > limits.max_files:
                message = f"This turn attaches more than {limits.max_files} images or files: the limit is"
                raise TooLarge(f"{message} ATTACHMENTS_MAX_FILES={limits.max_files}.", where)
            if size > limits.max_file_bytes:
                message = f"{_name(part)} is {_bytes(size)}: the limit is ATTACHMENTS_MAX_FILE_BYTES"
                raise TooLarge(f"{message}={limits.max_file_bytes} ({_bytes(limits.max_file_bytes)}).", where)
            if total > limits.max_turn_bytes:
                message = f"This turn's images and files are over {_bytes(limits.max_turn_bytes)} in all: the limit is"
                raise TooLarge(f"{message} ATTACHMENTS_MAX_TURN_BYTES={limits.max_turn_bytes}.", where)


def _turn_indices(items: Sequence[Any]) -> set[int]:
    """The indices of the user messages the request ends with: what this turn adds."""
    turn: set[int] = set()
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if not (isinstance(item, dict) and item.get("role") == "user"):
            break
        turn.add(index)
    return turn


def _size(part: dict[str, Any], where: str) -> int:
    """The decoded bytes of an image or file part (0 for one given by URL or id); a 415 for a type the app does not
    take."""
    if part["type"] == "input_image":
        url = part.get("image_url", "")
        if not url.lower().startswith("data:"):
            return 0
        kind, encoded = _data_url(url, "an image", where)
        if kind not in IMAGE_TYPES:
            raise _not_taken(f"The image is {kind or 'of no type'}", where)
        return _decoded_bytes(encoded)
    name: str | None = part.get("filename")
    data: str | None = part.get("file_data")
    media: str | None = None
    if data is not None and data.lower().startswith("data:"):
        media, data = _data_url(data, _name(part), where)
        if media not in FILE_TYPES:
            raise _not_taken(f"{_name(part)} is {media or 'of no type'}", where)
    if name is not None:
        suffix = name[name.rfind(".") :].lower() if "." in name else ""
        fits = [kind for kind, suffixes in FILE_TYPES.items() if suffix in suffixes]
        if not fits or (media is not None and media not in fits):
            raise _not_taken(f"{_name(part)} is {media or 'of a type its name does not say'}", where)
    elif media is None and data is not None:
        raise _not_taken("A file sent as bare base64 needs a 'filename' (or a data: URL) to say its type", where)
    return 0 if data is None else _decoded_bytes(data)


def _data_url(url: str, what: str, where: str) -> tuple[str, str]:
    match = DATA_URL.match(url)
    if match is None or "base64" not in [param.strip().lower() for param in match.group(2).split(";")]:
        raise BadRequest(f"{what} must be a base64 data: URL ('data:<media type>;base64,...').", where)
    return match.group(1).strip().lower(), url[match.end() :]


def _decoded_bytes(data: str) -> int:
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


def _not_taken(what: str, where: str) -> HttpError:
    return UnsupportedType(f"{what}, which this app does not take: it takes {TAKEN}.", where)


def _name(part: dict[str, Any]) -> str:
    if part["type"] == "input_image":
        return "An image"
    name = part.get("filename")
    return repr(name[:100]) if isinstance(name, str) else "A file"


def _bytes(size: int) -> str:
    return f"{size / config.MIB:.1f} MiB" if size >= config.MIB // 10 else f"{size:,} bytes"
