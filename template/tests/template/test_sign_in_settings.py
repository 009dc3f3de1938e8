# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""OpenID Connect sign-in's settings (agent_server/config/sign_in.py, docs/sign-in.md): off by default; settings
that cannot work stop start-app in one line; with it on, a deployed app keeps memory per signed-in user, and the
identity is the one the SignIn middleware checked, never a header a client sends. The sign-in itself, against a
real provider, is tested by the template's own tests (tests/test_sign_in*.py)."""

from __future__ import annotations

import re
import subprocess

import pytest
from support import START_APP, app_env, free_port

from agent_server import config, identity
from agent_server.errors import Unauthenticated
from agent_server.store.settings import MemorySettings

ON = {"OIDC_ISSUER": "https://login.example.com/tenant/", "OIDC_CLIENT_ID": "agent", "OIDC_CLIENT_SECRET": "s3cret"}


def test_off_by_default_and_its_defaults_alone_turn_nothing_on():
    assert not config.Settings({}).sign_in.enabled
    assert not config.Settings({"OIDC_IDENTITY_CLAIM": "sub", "OIDC_SESSION_HOURS": "2"}).sign_in.enabled


def test_on_with_issuer_client_and_secret_and_the_secret_never_shown():
    settings = config.Settings(ON).sign_in
    assert settings.enabled and settings.issuer == "https://login.example.com/tenant"  # no trailing slash
    assert settings.identity_claim == "email" and settings.session_seconds == 12 * 3600
    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({**ON, "OIDC_ISSUER": "http://login.example.com"}, "must be an https:// URL (http on loopback only)"),
        ({**ON, "OIDC_ISSUER": "login.example.com"}, "must be an https:// URL"),
        ({**ON, "OIDC_CLIENT_SECRET": ""}, "OIDC_CLIENT_SECRET is unset: set it in the environment"),
        ({**ON, "OIDC_CLIENT_ID": ""}, "OIDC_CLIENT_ID is unset"),
        ({"OIDC_CLIENT_ID": "agent", "OIDC_CLIENT_SECRET": "s"}, "OIDC_ISSUER is unset"),
        ({**ON, "DATABRICKS_APP_NAME": "my-agent"}, "unneeded on Databricks Apps, whose proxy signs users in"),
        ({**ON, "MEMORY_USER_HEADER": "x-user"}, "Set OIDC_* sign-in or MEMORY_USER_HEADER"),
    ],
    ids=["http-issuer", "no-scheme", "no-secret", "no-client", "no-issuer", "databricks-apps", "proxy-header-too"],
)
def test_settings_that_cannot_work_are_refused(env, message):
    with pytest.raises(config.ConfigurationError, match=re.escape(message)):
        config.Settings(env).check()


@pytest.mark.parametrize("issuer", ["http://127.0.0.1:9000", "http://localhost:9000/realms/x"])
def test_an_http_issuer_on_loopback_is_allowed(issuer):
    assert config.Settings({**ON, "OIDC_ISSUER": issuer}).sign_in.enabled


def test_start_app_stops_in_one_line(tmp_path):
    env = app_env(**{**ON, "OIDC_ISSUER": "http://login.example.com"}, HOME=str(tmp_path))
    done = subprocess.run([START_APP, "--port", str(free_port())], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if "OIDC_ISSUER" in line]
    assert len(lines) == 1 and "https://" in lines[0], done.stderr


def test_a_deployed_app_keeps_memory_per_signed_in_user():
    deployed = {"APP_ENV": "production", "MEMORY_BACKEND": "sqlite"}
    with pytest.raises(config.ConfigurationError, match="OIDC_ISSUER"):  # says how to name users
        MemorySettings.from_config(config.Settings(deployed))
    kept = MemorySettings.from_config(config.Settings({**deployed, **ON}))
    assert kept.backend == "sqlite" and kept.user_header == identity.SIGNED_IN_HEADER  # resumed runs name the user
    long_term = {**ON, "MEMORY_BACKEND": "sqlite", "LONG_TERM_MEMORY": "true", "HOST": "0.0.0.0"}
    MemorySettings.from_config(config.Settings(long_term))  # users are told apart: facts may be kept off loopback


def test_with_sign_in_on_the_identity_is_the_checked_one_only(app_settings):
    for name, value in ON.items():
        app_settings.setenv(name, value)
    assert identity.owner_of({identity.SIGNED_IN_HEADER: "ada@example.com"}) == "ada@example.com"
    with pytest.raises(Unauthenticated, match="sign in, or send Authorization: Bearer"):
        identity.owner_of({"x-forwarded-user": "ada@example.com", "x-forwarded-email": "ada@example.com"})
