# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Error responses on their way out, in the app's one shape (errors.py): two middlewares, one mechanism.

- OneErrorShape: every error response, whoever answered (MLflow's server and FastAPI answer `{"detail": ...}`).
- UpstreamErrors: MLflow's server turns every exception in a handler into a 500; for a model failure the
  handler recorded (errors.record), that 500 becomes the status that says why (errors.status_and_message).

Both hold back the response they rewrite and send their own in its place.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from starlette.types import Message, Receive, Scope, Send

from agent_server.errors import client_param, error_response, status_and_message
from agent_server.middleware import HttpMiddleware, request_state

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


class UpstreamErrors(HttpMiddleware):
    """MLflow's 500 for a model failure a handler recorded becomes the status that says why."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = request_state.current()  # set by the request guard, for the requests the handlers answer
        if state is None:
            await self.app(scope, receive, send)
            return
        failure = state.model

        async def replace(start: Message, body: bytes, send: Send) -> None:
            assert failure.error is not None
            status, text, param, headers = status_and_message(failure.error)
            response = error_response(status, text, client_param(param, state.sources, failure), headers)
            await send({"type": "http.response.start", "status": status, "headers": response.raw_headers})
            await send({"type": "http.response.body", "body": response.body})

        def failed_on_the_model(start: Message) -> bool:
            return start["status"] == 500 and failure.error is not None

        await self.app(scope, receive, _rewriting(send, failed_on_the_model, replace))
