# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""What the app's own middlewares share: each is a pure ASGI middleware with one job (as Starlette's are),
acting on HTTP requests and passing anything else (lifespan) on."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


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
