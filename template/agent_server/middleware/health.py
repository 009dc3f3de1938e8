# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""`GET /health` tells the truth: 503, with the reason, while the conversation store cannot take a write.

A plain `{"status": "healthy"}` (what MLflow's agent server answered, kept by app.py) whatever the app can do would
keep a load balancer sending traffic to an app whose every turn answers 503. With memory on, HealthCheck first asks
the store to take a write (memory.database.writable, at most every PROBE_EVERY_SECONDS, within PROBE_SECONDS) and
answers 503 while it cannot; otherwise the route's answer goes out.
"""

from __future__ import annotations

from starlette.types import Receive, Scope, Send

from agent_server import memory
from agent_server.errors import error_response
from agent_server.middleware import HttpMiddleware


class HealthCheck(HttpMiddleware):
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "GET" and scope["path"] == "/health" and memory.enabled():
            reason = await memory.database.unwritable()
            if reason is not None:
                response = error_response(503, f"The conversation store cannot take a write: {reason}")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
