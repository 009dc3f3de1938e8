# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The app's own middlewares, each a pure ASGI middleware with one job (as Starlette's are), in a module of its own:

- browser_guard.py: BrowserGuard, no driving the agent from other web pages or host names;
- error_responses.py: OneErrorShape, every error response in one shape;
- health.py: HealthCheck, `GET /health` says 503 while conversations cannot be stored;
- head_deadline.py: uvicorn's HTTP protocol with a deadline for a request's head.

Only what applies to every route is here: what only a turn needs is in turn/ (its checks, its user's fair share:
turn/rate_limits.py). This face holds what they share: the base class (acting on HTTP requests, passing
anything else, such as lifespan, on), and the body reader, which every route that takes a body uses.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Receive, Scope, Send

from agent_server import config
from agent_server.errors import BodyTimeout, TooLarge


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


async def read_body(receive: Receive) -> bytes:
    limits = config.settings().limits
    loop = asyncio.get_running_loop()
    due = loop.time() + limits.body_timeout_seconds  # for the whole body, however it trickles in
    chunks, size = [], 0
    while True:
        try:
            async with asyncio.timeout_at(due):  # no task per message, as wait_for would start in Python 3.11
                message = await receive()
        except TimeoutError:
            late = f"The request body did not arrive within {limits.body_timeout_seconds:g} s."
            raise BodyTimeout(late) from None
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise TooLarge(
                f"The request body is larger than MAX_BODY_BYTES={limits.max_body_bytes} bytes.",
            )
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)
