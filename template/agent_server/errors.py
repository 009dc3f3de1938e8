# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The one shape of every error the app answers, whoever finds the problem.

    {"error": {"message": "...", "type": "...", "param": "input[3]" or null}, "detail": "..."}

`error` is the OpenAI API's error shape, which OpenAI clients read; `detail` repeats the message
for FastAPI-style clients (MLflow's own errors use it). See the README, "Failure modes".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "unavailable_error",
    504: "upstream_timeout",
}
DROPPED_HEADERS = (b"content-length", b"content-type")  # the shaped body brings its own


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": TYPES.get(status, "server_error"), "param": param}, "detail": message}


def error_response(
    status: int, message: str, param: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(status, message, param), status_code=status, headers=dict(headers or {}))


class OneErrorShape:
    """ASGI middleware: every error response leaves in the one shape, whoever answered.

    The app's own errors have it already; MLflow's server and FastAPI answer with
    `{"detail": ...}` (a request MLflow's request model rejects, an unknown path).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        chunks: list[bytes] = []

        async def shaping_send(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and message["status"] >= 400 and _is_json(message):
                held = message
            elif held is None:
                await send(message)
            else:
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    await _send_in_shape(held, b"".join(chunks), send)

        await self.app(scope, receive, shaping_send)


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
