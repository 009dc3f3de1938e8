"""A real OpenID Connect provider for the sign-in tests: the oidc-provider npm package (a certified implementation,
pinned in tests/oidc_provider/package-lock.json, installed by scripts/test), started on loopback by
tests/oidc_provider/provider.mjs and stopped by its process id. And what a user's browser does with it, over HTTP:
sign in (its development login form takes any name), or stop at any step to replay or tamper with it."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
from servers import ServerProcess, clean_env, free_port

FOLDER = Path(__file__).resolve().parent / "oidc_provider"
CLIENT_ID, CLIENT_SECRET = "agent-app", "tests-only-client-secret"
API_AUDIENCE = "https://agent.test/api"  # the audience of its JWT access tokens (provider.mjs)


class OidcProvider(ServerProcess):
    """The provider, whose one client (the app) may be sent back to each of `app_urls`' /sign-in/callback."""

    def __init__(self, *app_urls: str) -> None:
        node = shutil.which("node")
        assert node, "Node 20 or later is needed for the OpenID Connect provider"
        assert (FOLDER / "node_modules" / "oidc-provider").is_dir(), "run scripts/test (npm ci)"
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.keys = Path(tempfile.mkdtemp(prefix="oidc-")) / "issuer-key.json"
        env = clean_env(
            PORT=str(self.port), CLIENT_ID=CLIENT_ID, CLIENT_SECRET=CLIENT_SECRET, KEYS_FILE=str(self.keys),
            REDIRECT_URIS=",".join(f"{url}/sign-in/callback" for url in app_urls),
        )  # fmt: skip
        super().__init__([node, "provider.mjs"], env, f"{self.issuer}/.well-known/openid-configuration", cwd=FOLDER)

    def app_env(self, **more: str) -> dict[str, str]:
        """An app's sign-in settings for this provider."""
        return {"OIDC_ISSUER": self.issuer, "OIDC_CLIENT_ID": CLIENT_ID, "OIDC_CLIENT_SECRET": CLIENT_SECRET, **more}

    def access_token(self) -> str:
        """A JWT access token the provider issues to the app's client for its API (client credentials)."""
        answer = httpx.post(
            f"{self.issuer}/token", auth=(CLIENT_ID, CLIENT_SECRET), timeout=30,
            data={"grant_type": "client_credentials", "resource": API_AUDIENCE, "scope": "agent"},
        )  # fmt: skip
        answer.raise_for_status()
        return str(answer.json()["access_token"])

    def signed(self, issuer_key: bool = True, **claims: Any) -> str:
        """A token signed (RS256) with the issuer's own published key, or with a key it never published."""
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": CLIENT_ID, "sub": "mallory", "iat": now, "exp": now + 300, **claims}
        payload = {"claims": claims, "jwk": json.loads(self.keys.read_text()) if issuer_key else None}
        node = shutil.which("node") or "node"
        done = subprocess.run([node, "sign.mjs"], cwd=FOLDER, input=json.dumps(payload), capture_output=True,
                              text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout


def unsigned(**claims: Any) -> str:
    """A token with `alg: none` and no signature."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


def to_provider(client: httpx.Client, app: str, next_path: str = "/") -> httpx.Response:
    """A browser's first step: the app's /sign-in, which answers with a redirect to the provider."""
    answer = client.get(f"{app}/sign-in", params={"next": next_path})
    assert answer.status_code == 302, answer.text
    return answer


def log_in(client: httpx.Client, authorize: str, user: str) -> str:
    """At the provider: its login form filled in as `user`, then its redirects followed until one leads back to
    the app. Returns that callback URL (with its code and state), not yet visited."""
    url = authorize
    for _ in range(10):
        answer = client.get(url)
        if answer.status_code == 200 and 'name="login"' in answer.text:
            action = re.search(r'action="([^"]+)"', answer.text)
            assert action, answer.text
            answer = client.post(urllib.parse.urljoin(url, action.group(1)),
                                 data={"prompt": "login", "login": user, "password": "any"})  # fmt: skip
        assert answer.status_code in (302, 303), f"{answer.status_code}: {answer.text[:500]}"
        url = urllib.parse.urljoin(url, answer.headers["location"])
        if "/sign-in/callback" in url:
            return url
    raise AssertionError("the provider never sent the browser back to the app")


def signed_in(app: str, user: str, next_path: str = "/") -> httpx.Client:
    """A client (as a browser, with its cookies) signed in to `app` as `user`."""
    client = httpx.Client(timeout=60)
    callback = log_in(client, to_provider(client, app, next_path).headers["location"], user)
    back = client.get(callback)
    assert back.status_code == 302 and back.headers["location"] == next_path, back.text
    return client
