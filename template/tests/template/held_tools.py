# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""An MCP server (the `mcp` package's own) whose one tool, held_lookup, answers only once the test lets it go: a call
that runs exactly as long as a test needs, whatever the machine's load. GET /calls lists the calls it got, GET
/release lets every call (those waiting and those to come) answer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

CALLS: list[str] = []  # held_lookup's calls, in this process
RELEASED = asyncio.Event()


def held_tool_server() -> Any:
    """The server's ASGI app, to serve in a thread (ServerThread) or a process (serve_held_tools)."""
    from mcp.server.mcpserver import MCPServer  # here: the repo's own tests load this file too

    tools = MCPServer("held")

    @tools.tool()
    async def held_lookup() -> str:
        """Answers once the test lets it go."""
        CALLS.append("held_lookup")
        while not RELEASED.is_set():  # polled: the test's thread sets it, not this loop's
            await asyncio.sleep(0.05)
        return "let go"

    app = tools.streamable_http_app(streamable_http_path="/mcp")

    async def with_controls(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in ("/calls", "/release"):
            if scope["path"] == "/release":
                RELEASED.set()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": json.dumps(CALLS).encode()})
            return
        await app(scope, receive, send)

    return with_controls


def serve_held_tools(port: int) -> None:
    """Serve held_tool_server() at http://127.0.0.1:PORT/mcp until stopped (for tests that run it as a process)."""
    import uvicorn

    uvicorn.run(held_tool_server(), host="127.0.0.1", port=port, log_level="warning")
