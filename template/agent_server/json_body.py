# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The JSON body of a small request (feedback, a conversation's new title), read only as far as it can be long."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from agent_server.errors import BadRequest


async def small_json(request: Request, limit: int, what: str) -> Any:
    """The body as JSON: a body over `limit` bytes is a 413 before it is all read, one that is not JSON a 400."""
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise BadRequest(f"The {what} body is over {limit} bytes.", status=413)
    try:
        return json.loads(raw)
    except ValueError:
        raise BadRequest("The body must be JSON.") from None
