# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Sign-in's own routes, answered by the SignIn middleware (middleware.py) before any other:

- GET /sign-in?next=/path: a new sign-in (state, nonce and PKCE verifier, sealed in a cookie that expires in ten
  minutes), and a redirect to the provider. `next` is a path on this app, else `/`: never another site.
- GET /sign-in/callback: the provider sends the browser back; the state must be this browser's sign-in's, the code
  is exchanged (with the verifier and the client secret, authlib), the ID token checked (issuer.py, with the
  nonce); then the session cookie, and a redirect to `next`. Anything else is a 400 page that offers a sign-in.
- GET /sign-in/session: who is signed in, for the page (a 401 if nobody).
- POST /sign-out: the session cookie deleted (a POST with JSON, so no other site can sign a user out); the page
  then shows GET /sign-in/signed-out, whose sign-in asks the provider for a login (another user may sign in).
"""

from __future__ import annotations

import hmac
import html
import json
import logging
import secrets
import urllib.parse
from typing import Any

import httpx
from authlib.common.errors import AuthlibBaseError  # type: ignore[import-untyped]
from authlib.integrations.httpx_client import AsyncOAuth2Client  # type: ignore[import-untyped]
from starlette.datastructures import Headers
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import Scope

from agent_server import config
from agent_server.config import LOOPBACK_HOSTS
from agent_server.errors import error_response
from agent_server.sign_in import cookies, issuer

logger = logging.getLogger(__name__)
CALLBACK = "/sign-in/callback"
SCOPE = "openid email"
PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


def origin(scope: Scope) -> str:
    """This app's origin as the browser sees it (BrowserGuard has checked the Host): the redirect URL's."""
    headers = Headers(scope=scope)  # X-Forwarded-Proto from the proxy where TLS ends (deploy/haproxy.cfg)
    return f"{headers.get('x-forwarded-proto') or scope.get('scheme', 'http')}://{headers.get('host', '')}"


def secure(scope: Scope) -> bool:
    """Cookies are Secure everywhere but loopback (plain http there, as the tests and a developer run it)."""
    host = urllib.parse.urlsplit(f"//{Headers(scope=scope).get('host', '')}").hostname or ""
    return f"[{host}]" not in LOOPBACK_HOSTS and host not in LOOPBACK_HOSTS


def same_origin_path(raw: str | None) -> str:
    """`raw` if it is a path on this app, else `/`: no scheme, no host, no `//` or `/\\` (which browsers read as
    another host), no control character."""
    if not raw or not raw.startswith("/") or raw.startswith(("//", "/\\")) or any(c < " " or c == "\\" for c in raw):
        return "/"
    parts = urllib.parse.urlsplit(raw)
    return raw if not parts.scheme and not parts.netloc else "/"


def _client(scope: Scope) -> AsyncOAuth2Client:
    settings = config.settings().sign_in
    return AsyncOAuth2Client(
        settings.client_id, settings.client_secret, scope=SCOPE, redirect_uri=origin(scope) + CALLBACK,
        code_challenge_method="S256", timeout=issuer.TIMEOUT_SECONDS,
    )  # fmt: skip


def page(status: int, message: str, scope: Scope, clear_pending: bool = True) -> Response:
    """A small page that says what went wrong and offers to sign in again (never the provider's text as markup);
    the sign-in asks the provider for a login, so that another user may sign in."""
    body = (
        "<!doctype html><meta charset=utf-8><title>Sign in</title><body style='font-family:sans-serif;margin:3em'>"
        f"<p id=message>{html.escape(message)}</p><p><a id=sign-in href='/sign-in?prompt=login'>Sign in</a></p>"
    )
    response = HTMLResponse(body, status, headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-store"})
    if clear_pending:
        response.raw_headers.append(cookies.set_cookie(cookies.PENDING_COOKIE, "", 0, "/sign-in", secure(scope)))
    return response


async def start(scope: Scope) -> Response:
    query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
    pending = {
        "state": secrets.token_urlsafe(32),
        "nonce": secrets.token_urlsafe(32),
        "verifier": secrets.token_urlsafe(64),
        "next": same_origin_path((query.get("next") or [None])[0]),
    }
    endpoint = (await issuer.metadata())["authorization_endpoint"]
    asked = {"prompt": "login"} if query.get("prompt") == ["login"] else {}  # after a sign-out: maybe another user
    url, _ = _client(scope).create_authorization_url(
        endpoint, state=pending["state"], nonce=pending["nonce"], code_verifier=pending["verifier"], **asked
    )
    response = RedirectResponse(url, 302, headers={"Cache-Control": "no-store"})
    sealed = await cookies.seal(pending, cookies.PENDING_SECONDS)
    response.raw_headers.append(
        cookies.set_cookie(cookies.PENDING_COOKIE, sealed, cookies.PENDING_SECONDS, "/sign-in", secure(scope))
    )
    return response


async def callback(scope: Scope) -> Response:
    query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
    first = {name: values[0] for name, values in query.items() if len(values) == 1}
    if "error" in first:  # the provider's own refusal (the user said no, or the client is not allowed)
        said = first.get("error_description") or first["error"]
        return page(400, f"The identity provider did not sign you in: {said[:300]}.", scope)
    pending = await cookies.unseal(cookies.cookie(Headers(scope=scope), cookies.PENDING_COOKIE) or "")
    if pending is None:
        return page(400, "No sign-in is in progress in this browser, or it took too long: sign in again.", scope)
    if not hmac.compare_digest(str(first.get("state", "")), str(pending.get("state", ""))) or "code" not in first:
        return page(400, "This sign-in's answer is not the one this browser asked for: sign in again.", scope)
    metadata = await issuer.metadata()
    try:
        async with _client(scope) as client:
            token = await client.fetch_token(
                metadata["token_endpoint"], code=first["code"], code_verifier=pending["verifier"]
            )
    except (AuthlibBaseError, httpx.HTTPError, ValueError, OSError) as error:  # used, or expired; never logged
        logger.info("sign-in: the provider refused the code exchange (%s)", type(error).__name__)
        return page(400, "The identity provider did not accept this sign-in (it may have been used already).", scope)
    try:
        claims = await issuer.verify(str(token.get("id_token", "")), nonce=str(pending["nonce"]))
    except issuer.Refused as refused:
        return page(400, f"The identity provider's ID token was refused: {refused}.", scope)
    user = identity_of(claims)
    if user is None:
        return page(400, "The identity provider's ID token names no user (no sub).", scope)
    seconds = config.settings().sign_in.session_seconds
    response = RedirectResponse(str(pending["next"]), 302, headers={"Cache-Control": "no-store"})
    sealed = await cookies.seal({"user": user}, seconds)
    response.raw_headers.append(cookies.set_cookie(cookies.SESSION_COOKIE, sealed, seconds, "/", secure(scope)))
    response.raw_headers.append(cookies.set_cookie(cookies.PENDING_COOKIE, "", 0, "/sign-in", secure(scope)))
    return response


def identity_of(claims: dict[str, Any]) -> str | None:
    """The user a token names: its OIDC_IDENTITY_CLAIM (`email` by default), else its `sub`. An email the provider
    says is not verified names nobody: anyone could have typed it."""
    for name in (config.settings().sign_in.identity_claim, "sub"):
        if name == "email" and claims.get("email_verified") is False:
            continue
        value = claims.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def session(user: str | None) -> Response:
    if user is None:
        return error_response(401, "Nobody is signed in.")
    return JSONResponse({"user": user}, headers={"Cache-Control": "no-store"})


def sign_out(scope: Scope) -> Response:
    response = Response(json.dumps({"signed_out": True}), media_type="application/json")
    response.raw_headers.append(cookies.set_cookie(cookies.SESSION_COOKIE, "", 0, "/", secure(scope)))
    return response
