# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""OneErrorShape: every error response leaves in the app's one shape (errors.py), whoever answered: the app's
routes raise HttpErrors, which its handler answers in that shape already; FastAPI and Starlette answer their own
(a 404 for an unknown path, a 405, a 422) with `{"detail": ...}`, which this middleware holds back and sends in the
one shape instead.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from starlette.types import Message, Receive, Scope, Send

from agent_server.errors import error_response
from agent_server.middleware import HttpMiddleware

DROPPED_HEADERS = (b"content-length", b"content-type")  # the shaped body brings its own


class OneErrorShape(HttpMiddleware):
    """Every error response leaves in the one shape, whoever answered."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, _rewriting(send, _is_json_error, _send_in_shape))


def _rewriting(
    send: Send, hold: Callable[[Message], bool], rewrite: Callable[[Message, bytes, Send], Awaitable[None]]
) -> Send:
    """A `send` that holds back a response whose start `hold` picks, and has `rewrite` send it instead."""
    held: Message | None = None
    chunks: list[bytes] = []

    async def rewriting_send(message: Message) -> None:
        nonlocal held
        if message["type"] == "http.response.start" and hold(message):
            held = message
        elif held is None:
            await send(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                await rewrite(held, b"".join(chunks), send)

    return rewriting_send


def _is_json_error(start: Message) -> bool:
    return start["status"] >= 400 and _is_json(start)


def _is_json(start: Message) -> bool:
    return any(name.lower() == b"content-type" and b"json" in value for name, value in start.get("headers", []))


async def _send_in_shape(start: Message, body: bytes, send: Send) -> None:
    try:
        content = json.loads(body)
    except ValueError:
        content = None
    if isinstance(content, dict) and isinstance(content.get("error"), dict):
        await send(start)
        await send({"type": "http.response.body", "body": body})
        return
    detail = content.get("detail") if isinstance(content, dict) else content
    message = detail if isinstance(detail, str) else json.dumps(detail)
    shaped = error_response(start["status"], message)
    kept = [(name, value) for name, value in start.get("headers", []) if name.lower() not in DROPPED_HEADERS]
    await send({"type": "http.response.start", "status": start["status"], "headers": kept + shaped.raw_headers})
    await send({"type": "http.response.body", "body": shaped.body})
