# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The app's own middlewares, each a pure ASGI middleware with one job (as Starlette's are), in a module of its own:

- request_guard.py: RequestGuard, what the app refuses before MLflow sees a request, and the history it renders;
- request_state.py: what one request carries from the guard to the handlers, in one object;
- browser_guard.py: BrowserGuard, no driving the agent from other web pages or host names;
- error_responses.py: OneErrorShape and UpstreamErrors, every error in one shape, a model's failure its status;
- health.py: HealthCheck, `GET /health` says 503 while conversations cannot be stored;
- rate_limits.py: FairShares, each identity's turns a minute and at once;
- responses_dialect.py (with responses_shapes.py): /responses in the OpenAI Responses API's shapes;
- head_deadline.py: uvicorn's HTTP protocol with a deadline for a request's head.

This face holds what they share: the base class (acting on HTTP requests, passing anything else, such as
lifespan, on), the body reader, and the keys they leave in a request's scope.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_server import config
from agent_server.errors import BadRequest

GUARDED_PATHS = frozenset({"/invocations", "/responses"})
STATE_KEY = "agent_server.request_state"
RUN_ATTEMPT_KEY = "agent_server.run_attempt"  # a background run's attempt (request_state.RunAttempt)


class HttpMiddleware:
    """An ASGI middleware that acts on HTTP requests (`handle`) and passes anything else (lifespan) on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.handle(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


def replaying(body: bytes, then: Receive) -> Receive:
    """A `receive` that gives a request's body (read already), then what `then` gives: the client's hang-up."""
    unread: bytes | None = body

    async def replay() -> Message:
        nonlocal unread
        if unread is not None:
            message: Message = {"type": "http.request", "body": unread, "more_body": False}
            unread = None
            return message
        return await then()

    return replay


async def read_body(receive: Receive) -> bytes:
    limits = config.settings().limits
    loop = asyncio.get_running_loop()
    due = loop.time() + limits.body_timeout_seconds  # for the whole body, however it trickles in
    chunks, size = [], 0
    while True:
        try:
            message = await asyncio.wait_for(receive(), timeout=max(0.0, due - loop.time()))
        except TimeoutError:
            late = f"The request body did not arrive within {limits.body_timeout_seconds:g} s."
            raise BadRequest(late, status=408) from None
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise BadRequest(
                f"The request body is larger than MAX_BODY_BYTES={limits.max_body_bytes} bytes.", status=413
            )
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)
