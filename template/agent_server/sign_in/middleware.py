# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""SignIn: with OpenID Connect sign-in on (OIDC_ISSUER), every request names its user, checked here, before anything
that keeps data per caller reads it (identity.owner_of):

- the session cookie (sealed by this app: cookies.py), or `Authorization: Bearer <token>`, an access or ID token of
  the issuer (issuer.py: signature, issuer, audience, expiry); the user it names goes in identity.SIGNED_IN_HEADER,
  and a client's own header of that name is dropped from every request, so none can name itself;
- none, or one that is refused, is a 401 that says why; the page (`/`, `/c/...`) redirects to the sign-in instead;
- sign-in's own routes (flow.py) and the health check need none;
- past it, the request holds neither the token nor the cookie (nothing after reads them; so no trace keeps them).

Off (no OIDC_ISSUER), it passes every request on as it is. Under BrowserGuard, which still refuses cross-site writes.
"""

from __future__ import annotations

import logging
import urllib.parse

from starlette.datastructures import Headers
from starlette.responses import RedirectResponse, Response
from starlette.types import Receive, Scope, Send

from agent_server import config
from agent_server.errors import error_response
from agent_server.identity import MAX_OWNER, SIGNED_IN_HEADER
from agent_server.middleware import HttpMiddleware
from agent_server.sign_in import cookies, flow, issuer

logger = logging.getLogger(__name__)
OPEN = {("/health", "GET"), ("/health", "HEAD")}
HEADER = SIGNED_IN_HEADER.encode("latin-1")
PROOFS = (b"authorization", b"cookie")  # the bearer token and the session cookie, which nothing past here reads


class SignIn(HttpMiddleware):
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not config.settings().sign_in.enabled:
            await self.app(scope, receive, send)
            return
        # Whatever a client sent under the identity's header is dropped, whatever the route.
        scope["headers"] = [(name, value) for name, value in scope["headers"] if name.lower() != HEADER]
        path, method = scope["path"], scope["method"]
        try:
            answer = await self._route(scope, path, method)
            if answer is not None:
                await answer(scope, receive, send)
                return
            if (path, method) in OPEN:
                await self.app(scope, receive, send)
                return
            user, refusal = await self._user(scope)
        except issuer.IssuerUnavailable as error:
            logger.warning("sign-in: %s", error)
            await error_response(503, f"Sign-in is unavailable: {error}. Try again.")(scope, receive, send)
            return
        if user is None:
            await self._refuse(scope, path, method, refusal)(scope, receive, send)
            return
        # What proved it stays here: past this point the app (its traces, its logs) never holds the token or cookie.
        scope["headers"] = [(name, value) for name, value in scope["headers"] if name.lower() not in PROOFS]
        scope["headers"].append((HEADER, user.encode("utf-8")))
        await self.app(scope, receive, send)

    async def _route(self, scope: Scope, path: str, method: str) -> Response | None:
        """Sign-in's own routes' answers (flow.py), or None for any other route."""
        if path == "/sign-in" and method == "GET":
            return await flow.start(scope)
        if path == flow.CALLBACK and method == "GET":
            return await flow.callback(scope)
        if path == "/sign-in/session" and method == "GET":
            return flow.session((await self._user(scope))[0])
        if path == "/sign-out" and method == "POST":
            return flow.sign_out(scope)
        if path == "/sign-in/signed-out" and method == "GET":
            return flow.page(200, "You are signed out.", scope, clear_pending=False)
        return None

    async def _user(self, scope: Scope) -> tuple[str | None, str]:
        """(the user, None) or (None, why nobody): a bearer token wins over the cookie."""
        headers = Headers(scope=scope)
        authorizations = headers.getlist("authorization")
        if authorizations:
            scheme, _, token = authorizations[0].partition(" ")
            if len(authorizations) > 1 or scheme.lower() != "bearer" or not token.strip():
                return None, "Send one Authorization header, as 'Authorization: Bearer <token>'."
            try:
                user = flow.identity_of(await issuer.verify(token.strip()))
            except issuer.Refused as refused:
                return None, f"The bearer token was refused: {refused}."
            return _fits(user), "The bearer token names no user (no sub)."
        sealed = cookies.cookie(headers, cookies.SESSION_COOKIE)
        if sealed is None:
            return None, "Sign in first: open the app's page, or send 'Authorization: Bearer <token>' from the issuer."
        claims = await cookies.unseal(sealed)
        user = claims.get("user") if claims else None
        if not isinstance(user, str):
            return None, "Your session has expired or is not valid: sign in again."
        return _fits(user), "Your session names no user: sign in again."

    def _refuse(self, scope: Scope, path: str, method: str, why: str) -> Response:
        if method in ("GET", "HEAD") and (path == "/" or path.startswith("/c/")):
            query = scope.get("query_string", b"").decode("latin-1")
            back = urllib.parse.quote(path + (f"?{query}" if query else ""), safe="/")
            return RedirectResponse(f"/sign-in?next={back}", 302, headers={"Cache-Control": "no-store"})
        return error_response(401, why, headers={"WWW-Authenticate": 'Bearer realm="agent"'})


def _fits(user: str | None) -> str | None:
    """An identity the store can keep whole (identity.MAX_OWNER); a longer one is no identity."""
    return user if user and len(user) <= MAX_OWNER else None
