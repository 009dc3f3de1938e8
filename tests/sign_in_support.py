"""The sign-in tests' app (tests/test_sign_in*.py): the defaults render, deployed as a container runs it
(APP_ENV=production, memory on, long-term memory on) with OpenID Connect sign-in against the real provider of
tests/oidc_provider.py, on loopback, each stopped by its own process id. The app traces every request and logs to a
file, so that a test can read both for what must never be there (tokens, codes, cookies)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from oidc_provider import API_AUDIENCE, OidcProvider
from renders import clean_env, uv, uv_binary
from servers import ServerProcess, free_port


@dataclass
class SignedInApp:
    url: str
    provider: OidcProvider
    server: ServerProcess
    folder: Path  # its store and traces

    def written(self) -> str:
        """Everything the app wrote: its log, and its traces (every request's)."""
        files = [path for path in (self.folder / "mlruns").rglob("*") if path.is_file()]
        return self.server.output + "".join(path.read_text(errors="replace") for path in files)


# The whole recipe of docs/deploy.md ("Sign-in on any other host"), as the image's environment has it.
DEPLOYED = {"APP_ENV": "production", "LLM_ALLOW_OFFLINE": "true", "LONG_TERM_MEMORY": "true"}


@contextmanager
def signed_in_app(renders, folder: Path, **env: str) -> Iterator[SignedInApp]:
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with OidcProvider(url) as provider:
        settings = clean_env(
            **DEPLOYED, **provider.app_env(OIDC_AUDIENCES=API_AUDIENCE), LLM_PROVIDER="offline",
            MEMORY_BACKEND="sqlite", MEMORY_DATABASE_URL=str(folder / "conversations.db"),
            MLFLOW_TRACKING_URI=f"file:{folder / 'mlruns'}", MLFLOW_TRACE_SAMPLING_RATIO="1",
            MLFLOW_ENABLE_ASYNC_TRACE_LOGGING="false", **env,
        )  # fmt: skip
        command = [uv_binary(), "run", "--locked", "--no-config", "start-app", "--port", str(port)]  # on loopback
        with ServerProcess(command, settings, f"{url}/health", cwd=app, timeout=300) as server:
            yield SignedInApp(url, provider, server, folder)
