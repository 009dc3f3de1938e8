# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The session cookie and the sign-in in progress, sealed with one key (JWE, dir + A256GCM: authenticated
encryption, so the browser can neither read nor change them): the key memory's store keeps for every worker and
instance (as it keeps the approvals' key, memory/approval_store.py); with memory off, one derived from the client
secret, which every instance has too."""

from __future__ import annotations

import functools
import hashlib
import time
from typing import Any

from joserfc import jwe, jwt
from joserfc.errors import JoseError
from joserfc.jwk import OctKey

from agent_server import config, memory

SESSION_COOKIE = "agent_session"
PENDING_COOKIE = "agent_sign_in"  # the sign-in in progress: state, nonce, PKCE verifier, return path
PENDING_SECONDS = 600  # a sign-in not finished in ten minutes is refused: start again
KEY_NAME = "sign_in"  # its row in memory's key table
_HEADER = {"alg": "dir", "enc": "A256GCM"}
_REGISTRY = jwe.JWERegistry(algorithms=["dir", "A256GCM"])

_key: OctKey | None = None


async def key() -> OctKey:
    """The key every worker and instance seals with (the module docstring), read once a process."""
    global _key
    if _key is None:
        if memory.enabled():
            from agent_server.memory import approval_store, database

            stored = await database.transact(functools.partial(approval_store.signing_key, name=KEY_NAME), write=True)
            raw = hashlib.sha256(bytes.fromhex(stored) + b"sign-in cookies").digest()
        else:
            secret = config.settings().sign_in.client_secret.encode()
            raw = hashlib.sha256(b"sign-in cookies\0" + secret).digest()
        _key = OctKey.import_key(raw)
    return _key


def forget_key() -> None:
    """Read the key again at the next use (tests, after their store changes)."""
    global _key
    _key = None


async def seal(claims: dict[str, Any], seconds: float) -> str:
    """`claims` with an expiry `seconds` from now, sealed."""
    now = int(time.time())
    return jwt.encode(_HEADER, {**claims, "iat": now, "exp": now + int(seconds)}, await key(), registry=_REGISTRY)


async def unseal(value: str) -> dict[str, Any] | None:
    """The claims of a cookie this app sealed and that has not expired; None for anything else."""
    try:
        claims = dict(jwt.decode(value, await key(), registry=_REGISTRY).claims)
    except (JoseError, ValueError, TypeError):
        return None
    expires = claims.get("exp")
    return claims if isinstance(expires, int) and expires > time.time() else None


def set_cookie(name: str, value: str, seconds: float, path: str, secure: bool) -> tuple[bytes, bytes]:
    """A Set-Cookie header: HttpOnly, SameSite=Lax (sent when the provider sends the browser back), Secure off
    loopback. `seconds` 0: deleted."""
    attributes = [f"{name}={value}", f"Path={path}", f"Max-Age={int(seconds)}", "HttpOnly", "SameSite=Lax"]
    if secure:
        attributes.append("Secure")
    return b"set-cookie", "; ".join(attributes).encode("latin-1")


def cookie(headers: Any, name: str) -> str | None:
    """The value of cookie `name` in a request's Cookie header, if it is there once."""
    found = []
    for header in headers.getlist("cookie"):
        for part in header.split(";"):
            key_, _, value = part.strip().partition("=")
            if key_ == name:
                found.append(value)
    return found[0] if len(found) == 1 else None
