# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Sign-in's pieces that need no provider (agent_server/sign_in/): sealed cookies that expire and cannot be
changed, the return path that never leaves the app, the cookie's attributes, and the access log that never holds
a sign-in's code. The whole sign-in against a real provider: the template's own tests/test_sign_in*.py."""

from __future__ import annotations

import asyncio
import base64
import logging

import pytest

from agent_server.observability.logs import NoSignInCodes
from agent_server.sign_in import cookies, flow

ON = {"OIDC_ISSUER": "https://login.example.com", "OIDC_CLIENT_ID": "agent", "OIDC_CLIENT_SECRET": "s3cret"}


@pytest.fixture
def sign_in_on(app_settings):
    for name, value in {**ON, "MEMORY_BACKEND": "none"}.items():
        app_settings.setenv(name, value)
    cookies.forget_key()
    yield
    cookies.forget_key()


def base64url_decoded(sealed: str) -> str:
    """The sealed cookie's dot-separated parts, each decoded: its header is JSON, the rest must be ciphertext."""
    parts = [base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)) for part in sealed.split(".")]
    return b"".join(parts).decode("latin-1")


def test_a_sealed_cookie_opens_until_it_expires_and_not_once_changed(sign_in_on):
    sealed = asyncio.run(cookies.seal({"user": "ada@example.com"}, 60))
    # Encrypted: the browser reads nothing of it. ("ada" alone turns up in random base64url about once in a thousand
    # cookies; the address, with its @ and dot, never does.)
    assert "ada@example.com" not in sealed and "ada@example.com" not in base64url_decoded(sealed)
    assert asyncio.run(cookies.unseal(sealed))["user"] == "ada@example.com"
    assert asyncio.run(cookies.unseal(asyncio.run(cookies.seal({"state": "x"}, -1)))) is None  # a sign-in expires
    changed = sealed[:-3] + ("AAA" if not sealed.endswith("AAA") else "BBB")
    assert asyncio.run(cookies.unseal(changed)) is None
    assert asyncio.run(cookies.unseal("not.a.cookie")) is None


def test_with_memory_off_every_instance_with_the_same_secret_opens_the_others_cookies(sign_in_on, app_settings):
    sealed = asyncio.run(cookies.seal({"user": "ada@example.com"}, 60))
    cookies.forget_key()  # another process, same settings
    assert asyncio.run(cookies.unseal(sealed))["user"] == "ada@example.com"
    app_settings.setenv("OIDC_CLIENT_SECRET", "another")
    cookies.forget_key()
    assert asyncio.run(cookies.unseal(sealed)) is None


@pytest.mark.parametrize(
    ("asked", "goes_to"),
    [
        ("/c/abc?x=1", "/c/abc?x=1"),
        ("/", "/"),
        (None, "/"),
        ("https://evil.example/", "/"),
        ("//evil.example/x", "/"),
        ("/\\evil.example", "/"),
        ("javascript:alert(1)", "/"),
        ("/ok\r\nSet-Cookie: x=1", "/"),
        ("evil.example", "/"),
    ],
)
def test_the_return_path_is_a_path_on_this_app(asked, goes_to):
    assert flow.same_origin_path(asked) == goes_to


def test_cookies_are_http_only_lax_and_secure_off_loopback():
    name, value = cookies.set_cookie("agent_session", "v", 60, "/", secure=True)
    assert name == b"set-cookie" and value == b"agent_session=v; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure"
    loopback = {"type": "http", "headers": [(b"host", b"127.0.0.1:8000")]}
    exposed = {"type": "http", "headers": [(b"host", b"agent.example.com")]}
    assert not flow.secure(loopback) and not flow.secure({"type": "http", "headers": [(b"host", b"[::1]:80")]})
    assert flow.secure(exposed)


def test_the_access_log_never_holds_a_sign_in_code():
    args = ("127.0.0.1:5000", "GET", "/sign-in/callback?code=SECRET&state=S", "1.1", 302)
    record = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d', args, None)
    assert NoSignInCodes().filter(record) and "SECRET" not in record.getMessage()
    assert "/sign-in/callback?(not logged)" in record.getMessage()
    other = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, "%s %s %s", ("a", "GET", "/c/x?y=1"), None)
    assert NoSignInCodes().filter(other) and other.getMessage() == "a GET /c/x?y=1"


def test_the_user_is_the_identity_claim_else_sub_and_never_an_unverified_email(sign_in_on):
    assert flow.identity_of({"sub": "u1", "email": "ada@example.com"}) == "ada@example.com"
    assert flow.identity_of({"sub": "u1"}) == "u1"
    assert flow.identity_of({"sub": "u1", "email": "ada@example.com", "email_verified": False}) == "u1"
    assert flow.identity_of({"email": " "}) is None
