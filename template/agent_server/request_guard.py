# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Check and render /invocations and /responses bodies before MLflow sees them.

MLflow's server answers some bad bodies with a 500 (a JSON array, for one) and
rejects chat-completions history (`role: "tool"`, `tool_calls`) before any
handler runs. This ASGI middleware answers bad input with a 400 that names the
problem, and renders the history so that every shape `history.py` knows gets through.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_server import llm, upstream_errors
from agent_server.history import HistoryError, render_history

GUARDED_PATHS = frozenset({"/invocations", "/responses"})
MAX_BODY_BYTES = 16 * 1024 * 1024


class BadRequest(ValueError):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class RequestGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in GUARDED_PATHS:
            await self.app(scope, receive, send)
            return
        try:
            body = checked_body(await _read_body(receive))
        except BadRequest as error:
            await _error_response(error)(scope, receive, send)
            return
        failure = upstream_errors.track()
        await self.app(scope, _replay(json.dumps(body).encode(), receive), _answer_upstream_errors(failure, send))


def checked_body(raw: bytes) -> dict[str, Any]:
    """The request body with its history rendered, or BadRequest saying what is wrong."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadRequest(f"The request body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise BadRequest(f"The request body must be a JSON object with an 'input' list, not a JSON {_kind(body)}.")
    items = body.get("input")
    if isinstance(items, str):  # the Responses API's shorthand for one user message
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise BadRequest("'input' is required and must be a list of items.", param="input")
    if not items:
        raise BadRequest("'input' must hold at least one item.", param="input")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise BadRequest("'stream' must be true or false.", param="stream")
    try:
        body["input"] = render_history(items, api=llm.settings().api)
    except HistoryError as error:
        raise BadRequest(str(error), param=f"input[{error.index}]") from None
    return body


def _answer_upstream_errors(failure: upstream_errors.UpstreamFailure, send: Send) -> Send:
    """Replace MLflow's 500 with the model's own status when the handler recorded one."""
    replacing = False

    async def guarded_send(message: Message) -> None:
        nonlocal replacing
        if message["type"] == "http.response.start" and message["status"] == 500 and failure.error is not None:
            replacing = True
        elif not replacing:
            await send(message)
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            status, body = upstream_errors.status_and_body(failure.error)
            response = JSONResponse(body, status_code=status)
            await send({"type": "http.response.start", "status": status, "headers": response.raw_headers})
            await send({"type": "http.response.body", "body": response.body})

    return guarded_send


def _error_response(error: BadRequest) -> JSONResponse:
    detail = {"message": str(error), "type": "invalid_request_error", "param": error.param}
    return JSONResponse({"error": detail, "detail": str(error)}, status_code=400)


async def _read_body(receive: Receive) -> bytes:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BadRequest(f"The request body is larger than {MAX_BODY_BYTES} bytes.")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """Hand the new body to the app, then pass on the client's own messages.

    A streaming response listens for `http.disconnect` while it runs, so after the
    body this must wait for the real one rather than invent it.
    """
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _kind(value: Any) -> str:
    return {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(value), "null")
