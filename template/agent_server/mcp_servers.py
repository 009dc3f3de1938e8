# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The MCP servers whose tools the agent may call, as the owner declares them.

Declare servers in agent.py (`MCP_SERVERS = [mcp_servers.uc_functions("main", "tools")]`) or at deploy
time in the variable MCP_SERVERS, a JSON array of objects with `url` and optional `name`,
`databricks_auth` (true: the Databricks token the model uses), `headers_from_env` (header name ->
the variable holding its value, so no secret is ever written in code or config) and
`require_approval` (true, or a list of tool names: the user approves each call first; see
history/approvals.py). Both lists are used. agent_server/tools/mcp_connections.py connects to them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_server import config
from agent_server.config import ConfigurationError

SPEC_KEYS = {"url", "name", "databricks_auth", "headers_from_env", "require_approval"}


@dataclass(frozen=True)
class McpServerSpec:
    """One MCP server: a full URL, or a path on the Databricks workspace (with databricks_auth)."""

    url: str
    name: str | None = None
    databricks_auth: bool = False
    headers_from_env: dict[str, str] = field(default_factory=dict)
    require_approval: bool | tuple[str, ...] = False  # every tool, or these tools, wait for the user's approval

    @property
    def label(self) -> str:
        return self.name or self.url


def uc_functions(catalog: str, schema: str, require_approval: bool | Iterable[str] = False) -> McpServerSpec:
    """Unity Catalog functions in `catalog.schema`, as tools (Databricks managed MCP)."""
    return _managed(f"functions/{catalog}/{schema}", f"uc-{catalog}-{schema}", require_approval)


def vector_search(catalog: str, schema: str, require_approval: bool | Iterable[str] = False) -> McpServerSpec:
    """The Vector Search indexes in `catalog.schema` (Databricks managed MCP)."""
    return _managed(f"vector-search/{catalog}/{schema}", f"vs-{catalog}-{schema}", require_approval)


def genie(space_id: str, require_approval: bool | Iterable[str] = False) -> McpServerSpec:
    """A Genie space (Databricks managed MCP)."""
    return _managed(f"genie/{space_id}", f"genie-{space_id}", require_approval)


def _managed(path: str, name: str, require_approval: bool | Iterable[str]) -> McpServerSpec:
    approval = require_approval if isinstance(require_approval, bool) else tuple(require_approval)
    return McpServerSpec(f"/api/2.0/mcp/{path}", name, databricks_auth=True, require_approval=approval)


def server(
    url: str,
    name: str | None = None,
    headers_from_env: dict[str, str] | None = None,
    require_approval: bool | Iterable[str] = False,
) -> McpServerSpec:
    """Any MCP server reached over streamable HTTP at `url`."""
    approval = require_approval if isinstance(require_approval, bool) else tuple(require_approval)
    return McpServerSpec(url, name, headers_from_env=dict(headers_from_env or {}), require_approval=approval)


def from_env(env: dict[str, str] | None = None) -> list[McpServerSpec]:
    """The servers in MCP_SERVERS (config/); a malformed value is a ConfigurationError (start-app checks it)."""
    raw = config.settings().mcp.servers if env is None else (env.get("MCP_SERVERS") or "").strip()
    if not raw:
        return []
    try:
        entries = json.loads(raw)
    except ValueError as error:
        raise ConfigurationError(f"MCP_SERVERS is not JSON: {error}") from None
    if not isinstance(entries, list):
        raise ConfigurationError("MCP_SERVERS must be a JSON array of objects with a 'url'")
    return [_spec(index, entry) for index, entry in enumerate(entries)]


def _spec(index: int, entry: Any) -> McpServerSpec:
    where = f"MCP_SERVERS[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("url"), str) or not entry["url"].strip():
        raise ConfigurationError(f"{where} must be an object with a 'url' string")
    if unknown := set(entry) - SPEC_KEYS:
        raise ConfigurationError(f"{where} has unknown keys {sorted(unknown)}; known: {sorted(SPEC_KEYS)}")
    headers = entry.get("headers_from_env") or {}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise ConfigurationError(f"{where}.headers_from_env must map header names to variable names")
    if not isinstance(entry.get("databricks_auth", False), bool):
        raise ConfigurationError(f"{where}.databricks_auth must be true or false")
    approval = entry.get("require_approval", False)
    tool_names = isinstance(approval, list) and all(isinstance(name, str) for name in approval)
    if not isinstance(approval, bool) and not tool_names:
        raise ConfigurationError(f"{where}.require_approval must be true, false or a list of tool names")
    name = entry.get("name") if isinstance(entry.get("name"), str) else None
    approval = approval if isinstance(approval, bool) else tuple(approval)
    return McpServerSpec(entry["url"].strip(), name, entry.get("databricks_auth", False), headers, approval)


def declared(agent_module: Any) -> list[McpServerSpec]:
    """The servers agent.py declares (its optional MCP_SERVERS list), then those in the variable MCP_SERVERS."""
    return [*getattr(agent_module, "MCP_SERVERS", []), *from_env()]
