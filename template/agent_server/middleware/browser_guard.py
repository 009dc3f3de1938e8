# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""BrowserGuard: it keeps the web pages a developer visits from driving the agent with the
developer's keys. The app has no login of its own (Databricks Apps puts one in front of
it), so three checks stand in for one against browsers:
- the `Host` must be one the app answers to (400 otherwise), which stops DNS rebinding: a page
  whose own name was pointed at the app's address sends that name. The names are ALLOWED_HOSTS
  (comma-separated), else the loopback names (localhost, 127.0.0.1, [::1], any port). The app
  checks this itself, so it holds whatever server runs it (start-app, or plain uvicorn on
  0.0.0.0). On Databricks Apps, with no ALLOWED_HOSTS, there is no check: its proxy owns the
  host. `GET /health` is answered to any host, for the health checks of load balancers and
  orchestrators, which name the instance by its address;
- a browser's `Origin` must be the app's own, or one of ALLOWED_ORIGINS (comma-separated
  `scheme://host[:port]`), or the request is refused (403);
- a POST must be `Content-Type: application/json` (415): a page may send `text/plain`
  to any site without asking first, but never JSON.
"""

from __future__ import annotations

import functools
import urllib.parse

from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from agent_server import config
from agent_server.config import LOOPBACK_HOSTS
from agent_server.errors import error_response, quoted
from agent_server.middleware import HttpMiddleware

HEALTH_CHECK = ("/health", frozenset({"GET", "HEAD"}))  # answered to any host (the module docstring)


class BrowserGuard(HttpMiddleware):
    """A request a web page could forge gets a 4xx (see the module docstring)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
        else:
            await error_response(*refusal)(scope, receive, send)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        headers = Headers(scope=scope)
        checks = config.settings().browser
        host, allowed = headers.get("host", ""), allowed_hosts()
        health_check = scope["path"] == HEALTH_CHECK[0] and scope["method"] in HEALTH_CHECK[1]
        if allowed is not None and not health_check and hostname(host) not in _hostnames(allowed):
            return 400, (
                f"Host {quoted(host)} is not one this app answers to: set ALLOWED_HOSTS to the host names clients "
                f"use to reach it (comma-separated; by default only {', '.join(LOOPBACK_HOSTS)})."
            )
        origin = headers.get("origin")
        if origin is not None and origin not in (_own_origin(scope, headers), *checks.allowed_origins):
            return (
                403,
                f"Requests from web pages at {quoted(origin)} are refused; add it to ALLOWED_ORIGINS to allow them.",
            )
        media_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if scope["method"] == "POST" and media_type != "application/json":
            return 415, "The request body must be JSON, sent with 'Content-Type: application/json'."
        return None


def allowed_hosts() -> tuple[str, ...] | None:
    """The host names the app answers to: ALLOWED_HOSTS, else the loopback names; None: any (Databricks Apps)."""
    settings = config.settings()
    if settings.browser.allowed_hosts:
        return settings.browser.allowed_hosts
    return None if settings.deployment.on_databricks_apps else LOOPBACK_HOSTS


def _own_origin(scope: Scope, headers: Headers) -> str:
    scheme = headers.get("x-forwarded-proto") or scope.get("scheme", "http")
    return f"{scheme}://{headers.get('x-forwarded-host') or headers.get('host', '')}"


@functools.lru_cache(maxsize=8)
def _hostnames(allowed: tuple[str, ...]) -> frozenset[str | None]:
    return frozenset(hostname(name) for name in allowed)


@functools.lru_cache(maxsize=256)  # a request's Host parsed once, not on each request (clients use a few)
def hostname(host: str) -> str | None:
    """The host name of a Host header (`host[:port]`, an IPv6 address in brackets) as the URL grammar reads it,
    lowercased and without brackets; None for one that is not a host: userinfo (`a@b`), a bad port, a path."""
    if not host or any(mark in host for mark in "@/?#\\ ") or host.count("]") > 1:
        return None
    try:
        parsed = urllib.parse.urlsplit(f"//{host}")
        parsed.port  # noqa: B018  (raises for a port that is not a number from 0 to 65535)
    except ValueError:
        return None
    return parsed.hostname
