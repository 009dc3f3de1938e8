# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The images and documents a user attaches to a turn: which types the app takes, and how many, how large.

They travel as the Responses API's own content parts (`input_image` with a data: URL, `input_file` with
`file_data` and `filename`), from the chat page or any /responses client; the render (history/content_parts.py)
gives the chat-completions shapes these names too. The request guard checks them before anything runs or is
stored (turn/checks.py), so a refused turn leaves no trace in its conversation:

- a type the app does not take is a 415, judged by the data URL's media type and, for a file, by its filename's
  extension (the message names the extension);
- data that is not base64 is a 400 naming the item: the app decodes it, and counts the bytes decoded;
- more than ATTACHMENTS_MAX_FILES parts in the turn, one over ATTACHMENTS_MAX_FILE_BYTES, or all of them over
  ATTACHMENTS_MAX_TURN_BYTES (decoded bytes), a 413 that names the setting (config/ checks that these fit the
  body and memory's limits); a body over MAX_INPUT_CHARS because of an attachment gets this 413 too (check_first).

A data URL is judged with its ends trimmed, and sent on trimmed. A file name loses its control and direction
characters (NUL, line breaks, right-to-left overrides: json_body.hides_text, as a title's are refused), so that
`invoice\u202efdp.txt` is stored, shown and sent to the model as `invoicefdp.txt`, never as `invoicetxt.pdf`.

The turn is the user messages the request ends with; the types are checked in every user message the client
sends. A part given by URL or file id brings no bytes (the model's API fetches it) and counts only in number.

Both API modes carry every type taken here: in chat-completions mode openai-agents' converter (0.24,
models/chatcmpl_converter.py) makes an inline `input_file` the Chat Completions `File` part (`file_data`,
`filename`; openai 3.63, openai.types.chat.ChatCompletionContentPartParam), and an image an `image_url` part. What
that mode cannot send (a file by URL or id) is a 400 before the model is called (history/content_parts.py), and a
model server that refuses a part answers a 400 the app passes on: nothing is dropped. docs/attachments.md.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Sequence
from typing import Any

from agent_server import config
from agent_server.errors import BadRequest, HttpError, TooLarge, UnsupportedType
from agent_server.history import ApiMode, HistoryError, Rendered, render_each
from agent_server.json_body import hides_text

IMAGE_TYPES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WebP", "image/gif": "GIF"}
FILE_TYPES = {"application/pdf": (".pdf",), "text/plain": (".txt", ".text", ".md", ".csv", ".log")}
TAKEN = "images (PNG, JPEG, WebP, GIF), PDF and plain text"
DATA_URL = re.compile(r"data:([^;,]*)((?:;[^;,]*)*),", re.IGNORECASE)


def check(client_items: Sequence[Any], each: Sequence[Rendered]) -> None:
    """An HttpError (415, 413 or 400) for the client's attachments the app does not take; the rest made ready to
    send in place (`each`'s parts: data URLs trimmed, file names cleaned)."""
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


def check_first(client_items: list[Any], api: ApiMode) -> None:
    """check(), for a body that is over another limit (MAX_INPUT_CHARS): if an attachment is why, its own 413 or 415
    names the attachment's limit or type; a history that does not render is left to that other limit."""
    try:
        each = render_each(client_items, api=api)
    except HistoryError:
        return
    check(client_items, each)


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
    take, a 400 for data that is not base64. Trims its data URL and cleans its file name in place."""
    if part["type"] == "input_image":
        url = part.get("image_url", "")
        if not url.strip().lower().startswith("data:"):
            return 0
        url = part["image_url"] = url.strip()
        kind, encoded = _data_url(url, "An image", where)
        if kind not in IMAGE_TYPES:
            raise _not_taken(f"The image is {kind or 'of no type'}", where)
        return _decoded_bytes(encoded, "An image", where)
    name: str | None = part.get("filename")
    if name is not None:
        name = part["filename"] = "".join(character for character in name if not hides_text(character))
    data: str | None = part.get("file_data")
    media: str | None = None
    if data is not None:
        data = part["file_data"] = data.strip()
    if data is not None and data.lower().startswith("data:"):
        media, data = _data_url(data, _name(part), where)
    if name is not None:
        suffix = name[name.rfind(".") :].lower() if "." in name else ""
        fits = [kind for kind, suffixes in FILE_TYPES.items() if suffix in suffixes]
        if not fits:
            raise _not_taken(f"{_name(part)} is {f'a {suffix} file' if suffix else 'a file with no extension'}", where)
        if media is not None and media not in fits:
            holds = f"{_name(part)} is named {suffix} but holds {media or 'data of no type'}"
            raise UnsupportedType(f"{holds}: its name and its data must say the same type ({TAKEN}).", where)
    elif media is not None and media not in FILE_TYPES:
        raise _not_taken(f"A file is {media or 'of no type'}", where)
    elif media is None and data is not None:
        raise _not_taken("A file sent as bare base64 needs a 'filename' (or a data: URL) to say its type", where)
    return 0 if data is None else _decoded_bytes(data, _name(part), where)


def _data_url(url: str, what: str, where: str) -> tuple[str, str]:
    match = DATA_URL.match(url)
    if match is None or "base64" not in [param.strip().lower() for param in match.group(2).split(";")]:
        raise BadRequest(f"{what} must be a base64 data: URL ('data:<media type>;base64,...').", where)
    return match.group(1).strip().lower(), url[match.end() :]


def _decoded_bytes(data: str, what: str, where: str) -> int:
    """The bytes `data` decodes to: decoded here, so that what is not base64 is the app's 400 naming the item, not
    the model's naming a parameter of its own."""
    try:
        return len(binascii.a2b_base64(data, strict_mode=True))
    except (binascii.Error, ValueError):
        raise BadRequest(f"{what} does not hold valid base64 data.", where) from None


def _not_taken(what: str, where: str) -> HttpError:
    return UnsupportedType(f"{what}, which this app does not take: it takes {TAKEN}.", where)


def _name(part: dict[str, Any]) -> str:
    if part["type"] == "input_image":
        return "An image"
    name = part.get("filename")
    return repr(name[:100]) if isinstance(name, str) else "A file"


def _bytes(size: int) -> str:
    return f"{size / config.MIB:.1f} MiB" if size >= config.MIB // 10 else f"{size:,} bytes"
