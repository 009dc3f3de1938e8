# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The HTTP client of every MCP connection: the one openai-agents makes by default (httpx2, no redirects
followed), with one TLS context for the process.

httpx2 builds a TLS context for each client, and loading the CA bundle into it costs about 20 ms of CPU. A
server called as the user (a Databricks one, with on-behalf-of-user) gets a connection of its own on every turn,
so without this each such turn paid that, several times the CPU of the rest of a turn.
"""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpx2


@functools.cache
def tls_context() -> ssl.SSLContext:
    """What httpx2 builds for a client by default (its CA bundle, or SSL_CERT_FILE / SSL_CERT_DIR), built once."""
    return httpx2.create_ssl_context()


def client(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> httpx2.AsyncClient:
    """An MCP connection's client (the SDK's `httpx_client_factory`): as the SDK's default, with the shared context."""
    options: dict[str, Any] = {"follow_redirects": False, "verify": tls_context()}
    if headers is not None:
        options["headers"] = headers
    if timeout is not None:
        options["timeout"] = timeout
    if auth is not None:
        options["auth"] = auth
    return httpx2.AsyncClient(**options)
