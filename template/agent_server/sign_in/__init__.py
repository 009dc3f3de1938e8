# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""OpenID Connect sign-in, for an app deployed off Databricks (docs/sign-in.md); off unless OIDC_ISSUER is set
(config/sign_in.py declares its settings). With it on, every request but the health check and sign-in's own routes
names its user, and identity.owner_of reads that user, exactly as it reads the platform's header on Databricks Apps:

- middleware.py: SignIn, a pure ASGI middleware: the session cookie or a bearer token, checked, becomes the
  identity header (identity.SIGNED_IN_HEADER; a client's own is always dropped); none, or a bad one, is a 401, and
  the page a redirect to the provider;
- flow.py: the routes /sign-in, /sign-in/callback, /sign-in/session and /sign-out (authorization code flow, PKCE);
- issuer.py: the issuer's metadata and published keys, and the tokens checked against them (joserfc);
- cookies.py: the session and the sign-in in progress, as sealed cookies, with a key every instance shares.

Tokens and codes are never logged, traced nor kept: the session cookie holds the identity and its expiry.
"""

from __future__ import annotations

from agent_server.sign_in.middleware import SignIn

__all__ = ["SignIn"]
