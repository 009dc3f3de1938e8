# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Images and files in a request: checked as the real API checks inline data, and named in the reply.

The schema check (validation.py) knows only that `image_url` and `file_data` are strings. The real API also
refuses an inline image that is not a base64 data: URL of an image type, and inline file data that is not base64,
with a 400 that names the part. The reply says what it saw ("I saw 1 image (png) and 1 file (report.pdf)"), so a
test sees that every attachment reached the model, in either API's shape.
"""

from __future__ import annotations

import binascii
import re
from typing import Any

from agent_server.offline.validation import ApiError

IMAGE_DATA_URL = re.compile(r"data:image/(png|jpeg|webp|gif);base64,", re.IGNORECASE)
DATA_URL = re.compile(r"data:[^;,]+(?:;[^;,]*)*;base64,", re.IGNORECASE)
EXAMPLE = "'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='"


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
    _check_base64(url[match.end() :], param)


def _check_file(data: str, param: str) -> None:
    match = DATA_URL.match(data)
    _check_base64(data[match.end() :] if match else data, param)


def _check_base64(data: str, param: str) -> None:
    try:
        binascii.a2b_base64(data, strict_mode=True)
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
