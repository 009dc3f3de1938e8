# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The JSON body of a small request (feedback, a conversation's new title), read only as far as it can be long and
only for as long as BODY_TIMEOUT_SECONDS, and the text it brings checked for characters that would hide or disguise
what is shown."""

from __future__ import annotations

import asyncio
import json
import unicodedata
from typing import Any

from starlette.requests import Request

from agent_server import config
from agent_server.errors import BadRequest, BodyTimeout, TooLarge

# Characters that would let a text pass for another: bidirectional overrides and isolates.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def hides_text(character: str) -> bool:
    """A control character (NUL, ESC, C0 and C1, line breaks), a lone surrogate or a direction override: shown
    on the page, in MLflow or in a terminal, each can hide, reorder or disguise the text around it."""
    return unicodedata.category(character) in ("Cc", "Cs") or character in BIDI_CONTROLS


def check_shown_text(text: str, param: str, lines: bool = False) -> None:
    """BadRequest naming `param` if `text` holds a character that hides_text; `lines`: line breaks and tabs may stay."""
    allowed = "\n\t" if lines else ""
    if any(hides_text(character) and character not in allowed for character in text):
        which = "NUL, ESC, carriage returns, direction overrides" if lines else "line breaks, tabs, direction overrides"
        raise BadRequest(f"{param!r} must not hold control characters ({which}).", param)


def one_text_field(body: Any, name: str, limit: int, what: str = "") -> str:
    """The text of a body that is a JSON object with the one field `name` (a new title, a link's shown name), its ends
    stripped, at most `limit` characters and nothing that hides_text; BadRequest naming what is wrong. `what` says what
    the text is for, after each message."""
    why = f", {what}" if what else ""
    if not isinstance(body, dict) or set(body) != {name}:
        raise BadRequest(f"The body must be a JSON object with one field: {json.dumps({name: '...'})}{why}.")
    text = body[name]
    if not isinstance(text, str) or not text.strip():
        raise BadRequest(f"{name!r} must be text, not empty{why}.", name)
    text = text.strip()
    if len(text) > limit:
        raise BadRequest(f"{name!r} is {len(text)} characters; at most {limit}.", name)
    check_shown_text(text, name)
    return text


async def small_json(request: Request, limit: int, what: str) -> Any:
    """The body as JSON: a body over `limit` bytes is a 413 before it is all read, one that is not JSON a 400, and
    one that takes longer than BODY_TIMEOUT_SECONDS to arrive, however it trickles, a 408 (as the turn routes')."""
    seconds = config.settings().limits.body_timeout_seconds
    raw = b""
    try:
        async with asyncio.timeout(seconds):
            async for chunk in request.stream():
                raw += chunk
                if len(raw) > limit:
                    raise TooLarge(f"The {what} body is over {limit} bytes.")
    except TimeoutError:
        raise BodyTimeout(f"The request body did not arrive within {seconds:g} s.") from None
    try:
        return json.loads(raw)
    except ValueError:
        raise BadRequest("The body must be JSON.") from None
