# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Images and files in a request: checked as the real API checks inline data, and named in the reply.

The schema check (validation.py) knows only that `image_url` and `file_data` are strings. The real API also
refuses an inline image that is not a base64 data: URL of an image type, or whose bytes are not an image it can
decode (`data:image/png;base64,AAAA`), and inline file data that is not base64, with a 400 that names the part.
Here an image decodes if its bytes begin as a PNG, JPEG, GIF or WebP does, with a header that gives its size.
The reply says what it saw ("I saw 1 image (png) and 1 file (report.pdf)"), so a
test sees that every attachment reached the model, in either API's shape.
"""

from __future__ import annotations

import binascii
import re
import struct
from typing import Any

from agent_server.offline.validation import ApiError

IMAGE_DATA_URL = re.compile(r"data:image/(png|jpeg|webp|gif);base64,", re.IGNORECASE)
DATA_URL = re.compile(r"data:[^;,]+(?:;[^;,]*)*;base64,", re.IGNORECASE)
EXAMPLE = "'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='"
SUPPORTED = "['image/jpeg', 'image/png', 'image/gif', 'image/webp']"
JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # the start-of-frame markers, which give the size


def check_media(api: str, body: dict[str, Any]) -> None:
    """An ApiError (400) for the first inline image or file the real API would refuse."""
    items = body.get("messages" if api == "chat" else "input")
    for i, item in enumerate(items if isinstance(items, list) else []):
        content = item.get("content") if isinstance(item, dict) else None
        for j, part in enumerate(content if isinstance(content, list) else []):
            where = f"messages.[{i}].content.[{j}]" if api == "chat" else f"input[{i}].content[{j}]"
            image, data = _inline(part)
            if image is not None and image.lower().startswith("data:"):
                _check_image(image, f"{where}.image_url" + (".url" if api == "chat" else ""))
            if data is not None:
                _check_file(data, f"{where}.file.file_data" if api == "chat" else f"{where}.file_data")


def _inline(part: Any) -> tuple[str | None, str | None]:
    """(the image's URL, the file's data) of a content part, in either API's shape."""
    if not isinstance(part, dict):
        return None, None
    kind = part.get("type")
    if kind == "input_image":
        return part.get("image_url"), None
    if kind == "image_url":
        return (part.get("image_url") or {}).get("url"), None
    if kind == "input_file":
        return None, part.get("file_data")
    if kind == "file":
        return None, (part.get("file") or {}).get("file_data")
    return None, None


def _check_image(url: str, param: str) -> None:
    match = IMAGE_DATA_URL.match(url)
    if match is None:
        kind = url[5 : url.find(";")] if ";" in url else "none"
        raise ApiError(
            f"Invalid '{param}'. Expected a base64-encoded data URL with an image MIME type (e.g. {EXAMPLE}), "
            f"but got unsupported MIME type '{kind[:50]}'.",
            param,
            code="invalid_image_format",
        )
    if not is_image(_check_base64(url[match.end() :], param)):
        raise ApiError(
            f"Invalid '{param}'. The image data you provided does not represent a valid image. Please check your "
            f"input and try again with one of the supported image formats: {SUPPORTED}.",
            param,
            code="invalid_image",
        )


def is_image(data: bytes) -> bool:
    """Whether `data` begins as a PNG, JPEG, GIF or WebP image does, with a size that is not 0."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return len(data) >= 24 and data[12:16] == b"IHDR" and 0 not in struct.unpack(">II", data[16:24])
    if data.startswith((b"GIF87a", b"GIF89a")):
        return len(data) >= 10 and 0 not in struct.unpack("<HH", data[6:10])
    if data.startswith(b"RIFF"):
        return len(data) >= 30 and data[8:12] == b"WEBP" and data[12:15] == b"VP8"
    if data.startswith(b"\xff\xd8"):
        return _jpeg_has_frame(data)
    return False


def _jpeg_has_frame(data: bytes) -> bool:
    """A JPEG's segments, walked to its frame header (a start-of-frame marker with a height and width)."""
    at = 2
    while at + 4 <= len(data) and data[at] == 0xFF:
        marker, length = data[at + 1], struct.unpack(">H", data[at + 2 : at + 4])[0]
        if marker in JPEG_FRAMES:
            return at + 9 <= len(data) and 0 not in struct.unpack(">HH", data[at + 5 : at + 9])
        at += 2 + length
    return False


def _check_file(data: str, param: str) -> None:
    match = DATA_URL.match(data)
    _check_base64(data[match.end() :] if match else data, param)


def _check_base64(data: str, param: str) -> bytes:
    try:
        return binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        raise ApiError(f"Invalid '{param}'. Expected base64-encoded data.", param, code="invalid_base64") from None


def attachments_of(content: Any) -> tuple[str, ...]:
    """How the reply names each image and file of a message: `image (png)`, or a file by its filename."""
    named = []
    for part in content if isinstance(content, list) else []:
        image = _inline(part)[0]
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_image", "image_url"):
            match = IMAGE_DATA_URL.match(image or "")
            named.append(f"image:{match.group(1).lower() if match else 'url'}")
        elif kind in ("input_file", "file"):
            file = (part.get("file") or {}) if kind == "file" else part
            named.append(f"file:{file.get('filename') or 'unnamed'}")
    return tuple(named)


def seen(attachments: list[str]) -> str:
    """`I saw 1 image (png) and 1 file (report.pdf).`, or "" for none."""
    images = [name.split(":", 1)[1] for name in attachments if name.startswith("image:")]
    files = [name.split(":", 1)[1] for name in attachments if name.startswith("file:")]
    said = [
        f"{len(names)} {noun}{'s' if len(names) > 1 else ''} ({', '.join(names)})"
        for noun, names in (("image", images), ("file", files))
        if names
    ]
    return f"I saw {' and '.join(said)}." if said else ""
