# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The caller's identity, for everything that belongs to someone: conversations, runs, long-term memories, approval
answers, feedback, and each identity's share of the turns (rate limits). Read with memory off too.

- On Databricks Apps: the user the platform's proxy forwards (`X-Forwarded-User`, else `X-Forwarded-Email`),
  which only a deployed app can trust.
- Elsewhere, with OpenID Connect sign-in on (OIDC_ISSUER): the user the SignIn middleware checked (its session
  cookie or bearer token: agent_server/sign_in/), which it puts in SIGNED_IN_HEADER after dropping any client's own.
- Elsewhere, with MEMORY_USER_HEADER set: the header the owner's own sign-in proxy sets.
- Otherwise: everyone is LOCAL_OWNER, one user on one machine.

A header sent twice is a 400 (a proxy must replace the client's header, not add its own beside it), an identity
longer than MAX_OWNER a 400, and none where one is required a 401.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_server import config
from agent_server.errors import BadRequest, Unauthenticated

LOCAL_OWNER = "local"
SIGNED_IN_HEADER = "x-agent-signed-in-user"  # set by sign_in/middleware.py alone, never taken from a client
MAX_OWNER = 320  # the owner column's width (schema.py): an identity, whole, as a user's e-mail address can be


def owner_of(headers: Mapping[str, str]) -> str:
    """The caller's identity, which owns its conversations (see this module's docstring): exactly as the trusted
    header says it, or a 4xx. Never cut: two identities that share their first MAX_OWNER characters are two."""
    if config.settings().deployment.on_databricks_apps:  # behind the Databricks Apps proxy, which sets these
        names: tuple[str, ...] = ("x-forwarded-user", "x-forwarded-email")
        named = "X-Forwarded-User or X-Forwarded-Email"
    elif config.settings().sign_in.enabled:
        names, named = (SIGNED_IN_HEADER,), "sign in, or send Authorization: Bearer <token>"
    elif config.settings().memory.user_header:  # read with memory off too: feedback checks whose a trace is
        names = (config.settings().memory.user_header or "",)
        named = names[0]
    else:
        return LOCAL_OWNER
    for name in names:
        values = headers.getlist(name) if hasattr(headers, "getlist") else [headers[name]] if name in headers else []
        if len(values) > 1:
            raise BadRequest(
                f"The request carries {name} {len(values)} times: the proxy in front of the app must replace the "
                "client's identity header, not add its own beside it.",
            )
        if values and values[0].strip():
            owner = values[0].strip()
            if len(owner) > MAX_OWNER:
                raise BadRequest(f"The caller's identity ({name}) is {len(owner)} characters; at most {MAX_OWNER}.")
            return owner
    raise Unauthenticated(f"This app keeps conversations per user, and the request names none ({named}).")
