# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""MCP connections (agent_server/mcp_servers.py, tools/mcp_connections.py), each test with a real MCP server of
its own on a loopback port (support.mcp_tool_server) or none: Databricks-managed servers get the app's token,
headers from the variables named, the tool list's cache, a malformed MCP_SERVERS at start-up, and a server gone
when its tool list expires."""

from __future__ import annotations

import asyncio
import json
import ssl
import time

import app_fork_server
import pytest
from fastapi.testclient import TestClient
from support import START_APP, Chat, ServerThread, app_env, free_port, mcp_tool_server, reply_text

from agent_server import mcp_servers
from agent_server.tools import mcp_connections, mcp_http

from .test_mcp_servers import no_approval_ran_yet, tool_output  # noqa: F401  (no_approval_ran_yet: autouse, as there)

MANAGED_PATH = "/api/2.0/mcp/functions/main/tools"


def test_databricks_managed_servers_get_the_apps_token(monkeypatch):
    managed = mcp_tool_server(MANAGED_PATH)
    with ServerThread(managed.app) as workspace:
        monkeypatch.setenv("DATABRICKS_HOST", workspace)
        monkeypatch.setenv("DATABRICKS_TOKEN", "dapi-test-token")
        spec = mcp_servers.uc_functions("main", "tools")
        assert spec.url == MANAGED_PATH and spec.databricks_auth

        async def call() -> str:
            connections = mcp_connections.McpConnections([spec])
            await connections.start()
            try:
                [server] = connections.active()
                result = await server.call_tool("lookup_weather", {"city": "Oslo"})
                return result.content[0].text
            finally:
                await connections.stop()

        assert asyncio.run(call()) == "Sunny in Oslo"
    mcp_requests = [headers for headers in managed.seen if headers["path"] == MANAGED_PATH]
    assert mcp_requests and all(headers.get("authorization") == "Bearer dapi-test-token" for headers in mcp_requests)


def test_every_mcp_connection_shares_the_processs_one_tls_context(monkeypatch):
    """httpx2 builds a TLS context per client, loading the CA bundle (about 20 ms of CPU); a server called as the
    user is connected again on every turn, so the app's connections share one context (tools/mcp_http.py)."""
    loads: list[object] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(context: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        loads.append(context)
        load(context, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    mcp_http.tls_context.cache_clear()  # built afresh, here, where its loads are counted
    tools = mcp_tool_server()
    with ServerThread(tools.app) as url:
        spec = mcp_servers.server(f"{url}/mcp", "tools")

        async def three_connections() -> list[str]:
            answers = []
            for _ in range(3):
                connections = mcp_connections.McpConnections([spec])
                await connections.start()
                try:
                    [server] = connections.active()
                    answers.append((await server.call_tool("lookup_weather", {"city": "Oslo"})).content[0].text)
                finally:
                    await connections.stop()
            return answers

        assert asyncio.run(three_connections()) == ["Sunny in Oslo"] * 3
    assert len(loads) == 1, "one CA bundle load for the three connections"


@pytest.mark.parametrize("token_set", [True, False], ids=["token", "no-token"])
def test_headers_come_from_the_variables_named_and_a_refused_server_is_left_out(app_settings, caplog, token_set):
    guarded = mcp_tool_server(token="s3cret")
    with ServerThread(guarded.app) as url:
        if token_set:
            app_settings.setenv("TOOLS_AUTH", "Bearer s3cret")
        spec = mcp_servers.server(f"{url}/mcp", "guarded", headers_from_env={"Authorization": "TOOLS_AUTH"})

        async def tools_offered() -> list[str]:
            connections = mcp_connections.McpConnections([spec])
            await connections.start()
            try:
                return [tool.name for server in connections.active() for tool in await server.list_tools()]
            finally:
                await connections.stop()

        offered = asyncio.run(tools_offered())
    if token_set:
        assert "lookup_weather" in offered
    else:
        assert offered == [], "a server that refuses the credentials is left out"
        assert any("guarded is left out" in record.getMessage() for record in caplog.records)


def test_a_tool_added_while_the_app_runs_is_offered_once_the_cache_expires(app_settings):
    growing = mcp_tool_server()
    with ServerThread(growing.app) as url:
        app_settings.setenv("MCP_TOOLS_TTL_SECONDS", "0.2")

        async def offered_before_and_after() -> tuple[set[str], set[str]]:
            connections = mcp_connections.McpConnections([mcp_servers.server(f"{url}/mcp", "growing")])
            await connections.start()
            try:
                [server] = connections.active()
                before = {tool.name for tool in await server.list_tools()}

                def new_tool() -> str:
                    """Added while the server runs."""
                    return "new"

                growing.tools.add_tool(new_tool)
                cached = {tool.name for tool in await server.list_tools()}
                assert cached == before, "within MCP_TOOLS_TTL_SECONDS the cached list is used"
                await asyncio.sleep(0.3)
                await connections.refresh_tools()  # what each request does first
                [server] = connections.active()
                return before, {tool.name for tool in await server.list_tools()}
            finally:
                await connections.stop()

        before, after = asyncio.run(offered_before_and_after())
    assert after - before == {"new_tool"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not json", "MCP_SERVERS is not JSON"),
        ('{"url": "http://x"}', "MCP_SERVERS must be a JSON array"),
        ('[{"name": "x"}]', "MCP_SERVERS[0] must be an object with a 'url' string"),
        ('[{"url": "http://x", "token": "secret"}]', "MCP_SERVERS[0] has unknown keys ['token']"),
    ],
)
def test_a_malformed_mcp_servers_is_a_one_line_error_at_start_up(value, message):
    env = app_env(LLM_PROVIDER="offline", MCP_SERVERS=value)
    result = app_fork_server.run([START_APP, "--port", str(free_port())], env)
    assert result.returncode != 0
    assert result.stderr.strip().startswith(f"start-app: {message}"), result.stderr


def test_a_server_gone_when_its_tool_list_expires_is_left_out_not_a_failed_turn(app_settings, api_mode, model_log):
    """The tool list is refreshed before the run: a server down by then is dropped, and the turn answers."""
    from agent_server.app import app

    stopping = ServerThread(mcp_tool_server().app)
    url = stopping.__enter__()
    app_settings.setenv("MCP_SERVERS", json.dumps([{"name": "brief", "url": f"{url}/mcp"}]))
    app_settings.setenv("MCP_TOOLS_TTL_SECONDS", "0.2")
    with TestClient(app) as client:
        assert "Sunny in Paris" in tool_output(Chat(client, stream=True).send("Use lookup_weather"))
        stopping.__exit__(None, None, None)
        time.sleep(0.3)
        items = Chat(client, stream=True).send("Use lookup_weather")
        assert "You said: Use lookup_weather" in reply_text(items), "no tool to call, and no failed turn"
