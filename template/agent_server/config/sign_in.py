# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Sign-in's settings (agent_server/sign_in/): OpenID Connect, off by default, for an app deployed off Databricks.
Declared here, beside the rest (config/__init__.py); stdlib only. Set OIDC_ISSUER and OIDC_CLIENT_ID to turn it on;
settings that cannot work are a ConfigurationError, one line at start-up."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from agent_server.config.setting_types import ConfigurationError, listed, number, read_group, setting, text

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class SignInSettings:
    issuer: str = setting("OIDC_ISSUER", text, "", "the OpenID Connect issuer's URL; set: users sign in (sign-in.md)")
    client_id: str = setting("OIDC_CLIENT_ID", text, "", "the app's client id at the issuer")
    # The value, read from the environment only (never a copier answer); kept out of the settings' repr.
    client_secret: str = field(
        default="", repr=False, metadata={"variable": "OIDC_CLIENT_SECRET", "parse": text, "doc": "its secret"}
    )
    identity_claim: str = setting("OIDC_IDENTITY_CLAIM", text, "email", "the claim naming the user; without it, sub")
    audiences: tuple[str, ...] = setting("OIDC_AUDIENCES", listed, (), "API tokens' audiences besides the client id")
    session_seconds: float = setting("OIDC_SESSION_HOURS", number(scale=3600), 12 * 3600.0, "a session lasts")

    @property
    def enabled(self) -> bool:
        return bool(self.issuer)

    @classmethod
    def read(cls, env: Mapping[str, str]) -> SignInSettings:
        """ConfigurationError for settings that cannot work: no way to sign users in is better than a false one."""
        values = read_group(cls, env)
        values["issuer"] = values["issuer"].rstrip("/")
        settings = cls(**values)
        if not (settings.issuer or settings.client_id or settings.client_secret):
            return cls()  # off: the claim, audiences and session length alone turn nothing on
        if (env.get("DATABRICKS_APP_NAME") or "").strip():
            raise ConfigurationError(
                "OIDC_* sign-in settings are unneeded on Databricks Apps, whose proxy signs users in: unset them"
            )
        if (env.get("MEMORY_USER_HEADER") or "").strip():
            raise ConfigurationError("Set OIDC_* sign-in or MEMORY_USER_HEADER (your own proxy's), not both")
        for name, value in (("OIDC_ISSUER", settings.issuer), ("OIDC_CLIENT_ID", settings.client_id)):
            if not value:
                raise ConfigurationError(f"{name} is unset: OpenID Connect sign-in needs it and OIDC_ISSUER")
        if not settings.client_secret:
            raise ConfigurationError("OIDC_CLIENT_SECRET is unset: set it in the environment (never in a file)")
        url = urllib.parse.urlsplit(settings.issuer)
        loopback = url.hostname in LOOPBACK_NAMES
        if url.scheme != "https" and not (url.scheme == "http" and loopback) or not url.hostname:
            raise ConfigurationError(f"OIDC_ISSUER={settings.issuer!r} must be an https:// URL (http on loopback only)")
        if url.query or url.fragment:
            raise ConfigurationError(f"OIDC_ISSUER={settings.issuer!r} must have no query or fragment")
        return settings
