# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The issuer: its metadata (OpenID Connect discovery), its published keys, and the tokens checked against them
with joserfc: the signature by a key the issuer publishes (an unknown key id fetches the keys again, at most once a
minute, for a rotation), the issuer, the audience (the client id, or OIDC_AUDIENCES), the expiry, and for a
sign-in's ID token its nonce. Unsigned tokens (`alg: none`) and shared-secret algorithms are never accepted."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError, UnsupportedAlgorithmError
from joserfc.jwk import KeySet

from agent_server import config

ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
LEEWAY_SECONDS = 60  # clocks differ a little between the issuer and this app
REFETCH_SECONDS = 60
TIMEOUT_SECONDS = 10.0


class IssuerUnavailable(Exception):
    """The issuer's metadata or keys could not be read (a 503: nothing the caller did)."""


class Refused(Exception):
    """A token that is not the issuer's, for this app, now. The message says why, and holds nothing of the token."""


_metadata: dict[str, Any] | None = None
_keys: KeySet | None = None
_keys_read_at = 0.0
_lock = asyncio.Lock()


def forget() -> None:
    """Read the metadata and keys again at the next use (tests that start another issuer)."""
    global _metadata, _keys, _keys_read_at
    _metadata, _keys, _keys_read_at = None, None, 0.0


async def _get(url: str) -> dict[str, Any]:
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as client:
            response = await client.get(url)
            response.raise_for_status()
            found = response.json()
    except (httpx.HTTPError, ValueError) as error:
        raise IssuerUnavailable(f"the identity provider could not be read ({type(error).__name__})") from None
    if not isinstance(found, dict):
        raise IssuerUnavailable("the identity provider answered with something other than a JSON object")
    return found


async def metadata() -> dict[str, Any]:
    """The issuer's OpenID Connect discovery document, read once a process; its `issuer` must be OIDC_ISSUER."""
    global _metadata
    if _metadata is None:
        issuer = config.settings().sign_in.issuer
        found = await _get(f"{issuer}/.well-known/openid-configuration")
        if str(found.get("issuer", "")).rstrip("/") != issuer:
            raise IssuerUnavailable("the identity provider's metadata names another issuer than OIDC_ISSUER")
        for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not isinstance(found.get(name), str):
                raise IssuerUnavailable(f"the identity provider's metadata has no {name}")
        _metadata = found
    return _metadata


async def _key_set(refresh: bool = False) -> KeySet:
    global _keys, _keys_read_at
    async with _lock:
        if _keys is None or (refresh and time.monotonic() - _keys_read_at > REFETCH_SECONDS):
            published = await _get((await metadata())["jwks_uri"])
            try:
                _keys = KeySet.import_key_set(published)  # type: ignore[arg-type]
            except (JoseError, ValueError, TypeError, KeyError):
                raise IssuerUnavailable("the identity provider's published keys could not be read") from None
            _keys_read_at = time.monotonic()
        return _keys


async def verify(token: str, nonce: str | None = None) -> dict[str, Any]:
    """The claims of `token` if it is the issuer's, for this app, and unexpired (the module docstring); else
    Refused, saying why."""
    keys = await _key_set()
    try:
        decoded = _decode(token, keys)
    except _UnknownKey:
        try:
            decoded = _decode(token, await _key_set(refresh=True))  # the issuer may have rotated its keys
        except _UnknownKey:
            raise Refused("it is signed with a key the issuer does not publish") from None
    settings = config.settings().sign_in
    audiences = [settings.client_id, *settings.audiences]
    claims: dict[str, Any] = {
        "iss": {"essential": True, "value": settings.issuer},
        "aud": {"essential": True, "values": audiences},
        "exp": {"essential": True},
    }
    if nonce is not None:
        claims["nonce"] = {"essential": True, "value": nonce}
    try:
        jwt.JWTClaimsRegistry(leeway=LEEWAY_SECONDS, **claims).validate(decoded)
    except JoseError as error:
        raise Refused(_why(error)) from None
    return decoded


class _UnknownKey(Exception):
    pass


def _decode(token: str, keys: KeySet) -> dict[str, Any]:
    try:
        return dict(jwt.decode(token, keys, algorithms=ALGORITHMS).claims)
    except InvalidKeyIdError:
        raise _UnknownKey from None
    except UnsupportedAlgorithmError:
        raise Refused("it is not signed with an algorithm the issuer uses (unsigned tokens are refused)") from None
    except (ValueError, JoseError) as error:
        raise Refused(f"it is not a token signed by the issuer ({type(error).__name__})") from None


def _why(error: JoseError) -> str:
    name = type(error).__name__
    if name == "ExpiredTokenError":
        return "it has expired"
    claim = getattr(error, "claim", None) or ""
    if claim == "iss":
        return "it is another issuer's"
    if claim == "aud":
        return "it is meant for another audience (not this app's client id, nor OIDC_AUDIENCES)"
    if claim == "nonce":
        return "its nonce is not this sign-in's"
    return f"its claims are not valid ({name}{': ' + claim if claim else ''})"
