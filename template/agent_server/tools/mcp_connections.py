# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The process's connections to the declared MCP servers (mcp_servers.py): connected once, kept apart when
they fail, and the tools the user approved run through them. Their settings (MCP_*) are in config/; their HTTP
client is mcp_http.py's. Connections open when the app starts and close when it stops. A server that cannot be
reached or refuses the credentials is left out of requests (a warning in the log, and on the request's trace)
until a retry connects it (MCP_RETRY_SECONDS); one whose session breaks gets a new session at once, in the
background. A tool call that fails, or times out (MCP_TIMEOUT_SECONDS), is an error output the model reads,
never a failed request, and it leaves the server in: one user's slow call switches nothing off for the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
import httpx2
import mlflow
from agents.mcp import MCPServer, MCPServerManager, MCPServerStreamableHttp
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent
from mcp_types import CONNECTION_CLOSED
from mlflow.entities import SpanType

from agent_server import config, llm
from agent_server.history.tool_outputs import ToolOutput, mcp_content_parts, tool_output_shape, tool_output_text
from agent_server.mcp_servers import McpServerSpec
from agent_server.tools import mcp_http

logger = logging.getLogger(__name__)


class CappedOutputServer(MCPServerStreamableHttp):
    """A streamable-HTTP MCP server whose tool outputs are cut to MCP_MAX_OUTPUT_CHARS, marked as cut."""

    def __init__(self, *args: Any, max_output_chars: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_output_chars = max_output_chars

    async def call_tool(self, tool_name: str, arguments: dict[str, Any] | None, meta: Any = None) -> Any:
        # A span of its own names the server (the SDK's tool span does not) and times the call to it.
        with mlflow.start_span(name=f"mcp {self.name}/{tool_name}", span_type=SpanType.TOOL) as span:
            span.set_attributes({"mcp.server": self.name, "mcp.tool": tool_name})
            result = await super().call_tool(tool_name, arguments, meta)
        budget = self.max_output_chars
        for part in result.content:
            if isinstance(part, TextContent):
                text = part.text
                if len(text) > budget:
                    note = f"[cut: the tool returned {len(text)} characters; MCP_MAX_OUTPUT_CHARS]"
                    part.text = f"{text[:budget]}\n{note}"
                budget = max(0, budget - len(text))
        return result


class McpConnections:
    """The process's MCP connections: opened at start-up, retried while down or dropped, closed at shutdown."""

    def __init__(self, specs: Iterable[McpServerSpec], settings: config.McpSettings | None = None) -> None:
        self.settings = settings or config.settings().mcp
        self.specs = list(specs)
        self.servers = [self._server(spec) for spec in self.specs]
        self.manager = MCPServerManager(
            self.servers, connect_timeout_seconds=self.settings.connect_timeout, connect_in_parallel=True
        )
        self.dropped: set[MCPServer] = set()  # its session broke: left out until a new one is open
        self.reopened: dict[int, MCPServer] = {}  # a server's new session, by its index, in place of the broken one
        self.broken: list[MCPServer] = []  # sessions replaced, closed at shutdown (a running request may hold one)
        self.tools_listed_at = time.monotonic()
        self._retrying: asyncio.Task[None] | None = None
        self._reopening: dict[int, asyncio.Task[None]] = {}

    def _server(self, spec: McpServerSpec, user_token: str | None = None) -> MCPServer:
        """A server for `spec`; a Databricks one called as the user who holds `user_token`, when given."""
        env = config.settings().env  # the variables the owner named, read with every other setting
        headers = {header: env.get(variable, "") for header, variable in spec.headers_from_env.items()}
        url, auth = spec.url, None
        if spec.databricks_auth:
            workspace = llm.databricks_config()
            url = f"{workspace.host.rstrip('/')}{spec.url}" if spec.url.startswith("/") else spec.url
            if user_token is None:
                auth = llm.DatabricksAuth(workspace)  # the app's own token: a shared connection
            else:
                headers["Authorization"] = f"Bearer {user_token}"
        params: dict[str, Any] = {"url": url, "headers": headers, "timeout": self.settings.timeout}
        params["httpx_client_factory"] = mcp_http.client  # the SDK's client, with the process's one TLS context
        if auth is not None:
            params["auth"] = auth
        server_ref: list[MCPServer] = []

        def tool_failed(context: Any, error: Exception) -> str:
            # Called for a call that raised (a timeout, no connection), not for a tool that reported an error. The
            # failure is that call's: the model reads it. Only a broken session takes the server out, and only
            # until it is reopened, at once, in the background; one user's slow call switches nothing off.
            if session_broken(error):
                logger.warning(
                    "MCP server %s: its session broke, left out until it reconnects (now): %s", spec.label, error
                )
                self.drop(server_ref[0])
            else:
                logger.warning("MCP server %s failed a tool call, and stays in: %s", spec.label, error)
            return f"Error: the tool's server ({spec.label}) did not answer: {error}"

        approval: Any = "always" if spec.require_approval is True else None
        if isinstance(spec.require_approval, tuple):  # these tools only
            approval = {"always": {"tool_names": list(spec.require_approval)}}
        created = CappedOutputServer(
            params,
            name=spec.label,
            require_approval=approval,
            cache_tools_list=True,
            client_session_timeout_seconds=self.settings.timeout,
            failure_error_function=tool_failed,
            max_output_chars=self.settings.max_output_chars,
        )
        server_ref.append(created)
        return created

    def drop(self, server: MCPServer) -> None:
        """Leave `server` out of requests, and open a new session to it now, in the background: the broken one is
        left as it is (a running request may still hold it) and replaced once the new one is open."""
        self.dropped.add(server)
        index = next((i for i, (_, each) in enumerate(self.all()) if each is server), None)
        if index is not None and (index not in self._reopening or self._reopening[index].done()):
            self._reopening[index] = asyncio.get_running_loop().create_task(self._reopen(index), name="mcp-reopen")

    async def _reopen(self, index: int) -> None:
        """A new session to server `index`, tried again (after 1, 2, 4 ... s, at most MCP_RETRY_SECONDS) until open."""
        wait = 1.0
        while True:
            fresh = self._server(self.specs[index])
            try:
                await asyncio.wait_for(fresh.connect(), self.settings.connect_timeout)
                await asyncio.wait_for(fresh.list_tools(), self.settings.timeout)  # in use, it has them at hand
            except Exception as error:
                logger.warning("MCP server %s is still down, tried again in %g s: %s", fresh.name, wait, error)
                with contextlib.suppress(Exception):
                    await fresh.cleanup()
                await asyncio.sleep(wait)
                wait = min(wait * 2, self.settings.retry_every)
                continue
            old = self.all()[index][1]
            self.broken.append(old)
            self.reopened[index] = fresh
            self.dropped.discard(old)
            logger.info("MCP server %s is back, on a new session", fresh.name)
            return

    def all(self) -> list[tuple[McpServerSpec, MCPServer]]:
        """Each declared server with the server object requests use for it (its newest session)."""
        pairs = enumerate(zip(self.specs, self.servers, strict=True))
        return [(spec, self.reopened.get(index, server)) for index, (spec, server) in pairs]

    async def start(self) -> None:
        await self.manager.__aenter__()
        await self._list_tools()
        self._report()
        self._retrying = asyncio.create_task(self._keep_connected(), name="mcp-retry")

    def active(self) -> list[MCPServer]:
        """The servers a request may use now: connected, and not dropped since."""
        return [server for _, server in self.serving()]

    def serving(self) -> list[tuple[McpServerSpec, MCPServer]]:
        connected = set(self.manager.active_servers) | set(self.reopened.values())
        return [(spec, server) for spec, server in self.all() if server in connected and server not in self.dropped]

    async def _list_tools(self) -> None:
        """Each server's tool list, fetched (or, cached, read) now: a request never waits on a server to list them,
        and a server that cannot is dropped here rather than failing the run that asked."""
        for server in self.active():
            try:
                await asyncio.wait_for(server.list_tools(), self.settings.timeout)
            except Exception as error:
                logger.warning(
                    "MCP server %s could not list its tools, reopened in the background: %s", server.name, error
                )
                self.drop(server)

    async def refresh_tools(self) -> None:
        """Once MCP_TOOLS_TTL_SECONDS have passed, list each server's tools again, here rather than inside a run."""
        if time.monotonic() - self.tools_listed_at <= self.settings.tools_ttl:
            return
        self.tools_listed_at = time.monotonic()
        for server in self.active():
            if isinstance(server, CappedOutputServer):  # every server made here; the SDK's base class has no cache
                server.invalidate_tools_cache()
        await self._list_tools()

    async def stop(self) -> None:
        for task in [self._retrying, *self._reopening.values()]:
            if task is not None:
                task.cancel()
        for server in [*self.reopened.values(), *self.broken]:
            if server not in self.servers:  # the manager closes its own
                with contextlib.suppress(Exception):
                    await server.cleanup()
        await self.manager.__aexit__(None, None, None)

    async def _keep_connected(self) -> None:
        while True:
            await asyncio.sleep(self.settings.retry_every)
            try:
                await self.retry()
            except Exception as error:  # a retry that fails leaves things as they were; try again later
                logger.warning("MCP servers could not be reconnected: %s", error)

    async def retry(self) -> None:
        """Connect the servers that were down at start-up (a broken session is reopened by `drop`)."""
        if self.manager.failed_servers:
            await self.manager.reconnect(failed_only=True)  # touches no session a request uses
            await self._list_tools()
            self._report()

    def _report(self) -> None:
        for server, error in self.manager.errors.items():
            logger.warning("MCP server %s is left out of requests until it connects: %s", server.name, error)
        if self.manager.active_servers:
            logger.info("MCP servers connected: %s", ", ".join(s.name for s in self.manager.active_servers))


def session_broken(error: BaseException) -> bool:
    """Is the session to the server gone (closed, refused, reset), rather than this one call failed (a timeout, an
    error the server answered with)? Read from the error and what caused it."""
    seen: BaseException | None = error
    for _ in range(6):
        if seen is None:
            return False
        if isinstance(seen, MCPError):
            return seen.error.code == CONNECTION_CLOSED
        if isinstance(seen, TimeoutError | httpx2.TimeoutException):
            return False
        if isinstance(seen, httpx2.TransportError | anyio.ClosedResourceError | anyio.BrokenResourceError | OSError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


_connections: McpConnections | None = None


async def open_connections(specs: list[McpServerSpec]) -> None:
    """At start-up: connect the declared servers (none declared: nothing to do)."""
    global _connections
    if specs:
        _connections = McpConnections(specs)
        await _connections.start()


async def close_connections() -> None:
    """At shutdown."""
    global _connections
    if _connections is not None:
        await _connections.stop()
        _connections = None


@contextlib.asynccontextmanager
async def servers_for_request() -> AsyncIterator[list[MCPServer]]:
    """The MCP servers one request uses: the shared connections that are up.

    With LLM_ON_BEHALF_OF_USER=true and the user's token on the request, each Databricks server is
    called as that user instead, over a connection of the request's own, opened before the run and
    closed after it (a shared connection carries one identity).
    """
    if _connections is not None:
        await _connections.refresh_tools()
    shared = active_servers()
    token = llm.user_token()
    if _connections is None or token is None:
        yield shared
        return
    pairs = _connections.all()
    servers = [server for spec, server in pairs if server in shared and not spec.databricks_auth]
    own: list[MCPServer] = []
    for spec, _ in pairs:
        if spec.databricks_auth:
            as_user = _connections._server(spec, user_token=token)
            try:
                await asyncio.wait_for(as_user.connect(), _connections.settings.connect_timeout)
                own.append(as_user)
            except Exception as error:  # left out of this request, like a shared server that is down
                logger.warning("MCP server %s is left out of this request: as the user, %s", spec.label, error)
    try:
        yield servers + own
    finally:
        for server in own:
            await server.cleanup()


def active_servers() -> list[MCPServer]:
    """The MCP servers a request may use now. The names of those left out are on the request's trace."""
    if _connections is None:
        return []
    active = _connections.active()
    if left_out := [server.name for _, server in _connections.all() if server not in active]:
        span = mlflow.get_current_active_span()
        if span is not None:
            span.set_attribute("mcp.left_out", left_out)
    return active


async def run_tool(name: str, arguments: str, servers: list[MCPServer]) -> ToolOutput:
    """Call tool `name` on the first of `servers` that offers it; a failure is the output's text."""
    for server in servers:
        try:
            if name not in {tool.name for tool in await server.list_tools()}:
                continue
            result = await server.call_tool(name, json.loads(arguments or "{}"))
        except Exception as error:  # the model reads what went wrong, as with any failed tool call
            return f"Error: the tool's server ({server.name}) did not answer: {error}"
        output = tool_output_shape(mcp_content_parts(result.content))  # as the SDK's run gives it
        failed = getattr(result, "is_error", None) or getattr(result, "isError", None)  # mcp 2.x, 1.x
        return f"Error: {tool_output_text(output)}" if failed else output
    return f"Error: no MCP server that is up now offers the tool {name!r}."
