# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Which model the agent talks to, and through which API, read from the environment.

| variable | values | default |
|---|---|---|
| LLM_PROVIDER | openai, databricks, offline | your copier answer, in agent_server/defaults.py |
| LLM_MODEL | the model or serving-endpoint name | likewise |
| LLM_API | chat_completions, responses | likewise |
| LLM_ALLOW_OFFLINE | true lets a deployed app serve the offline model | unset |
| LLM_ON_BEHALF_OF_USER | true: call Databricks models as the caller (x-forwarded-access-token); none: 401 | unset |
| LLM_ON_BEHALF_OF_USER_FALLBACK | true: with the above, run a request without a user token as the app instead | unset |
| LLM_TIMEOUT_SECONDS | how long one model call may take before it fails (504) | 120 |
| LLM_MAX_RETRIES | retries of a model call that failed for a reason worth retrying (429, 5xx, no connection) | 2 |

A deployed app (Databricks Apps sets DATABRICKS_APP_NAME; elsewhere set APP_ENV=production)
refuses the offline model unless LLM_ALLOW_OFFLINE=true, so it never gives canned answers by accident.

Nothing here touches the network at import time: clients are built on first use. Nor does it import the SDK
or the openai client, which take a second or more: start-app checks these settings before anything loads them.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import AsyncGenerator, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import httpx

from agent_server import defaults
from agent_server.history import API_MODES, ApiMode

if TYPE_CHECKING:
    from agents import Model
    from openai import AsyncOpenAI

Provider = Literal["openai", "databricks", "offline"]

PROVIDERS: tuple[Provider, ...] = ("openai", "databricks", "offline")
DEFAULTS = {"LLM_PROVIDER": defaults.LLM_PROVIDER, "LLM_MODEL": defaults.LLM_MODEL, "LLM_API": defaults.LLM_API}


class ConfigurationError(RuntimeError):
    """The environment does not describe a usable model. The message says what to set."""


@dataclass(frozen=True)
class LLMSettings:
    provider: Provider
    model: str
    api: ApiMode
    base_url: str | None = None  # OPENAI_BASE_URL, for the openai provider

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LLMSettings:
        env = os.environ if env is None else env

        def read(name: str) -> str:
            return (env.get(name) or DEFAULTS[name]).strip()

        provider, model, api = read("LLM_PROVIDER"), read("LLM_MODEL"), read("LLM_API")
        if provider not in PROVIDERS:
            raise ConfigurationError(f"LLM_PROVIDER={provider!r} is not one of {', '.join(PROVIDERS)}")
        if api not in API_MODES:
            raise ConfigurationError(f"LLM_API={api!r} is not one of {', '.join(API_MODES)}")
        if not model:
            raise ConfigurationError("LLM_MODEL is empty: set it to a model or serving-endpoint name")
        base_url = (env.get("OPENAI_BASE_URL") or None) if provider == "openai" else None
        return cls(provider=provider, model=model, api=api, base_url=base_url)


def settings() -> LLMSettings:
    return LLMSettings.from_env()


def check_configuration(env: Mapping[str, str] | None = None) -> LLMSettings:
    """Fail at start-up, not on the first request, when credentials are missing."""
    env = os.environ if env is None else env
    current = LLMSettings.from_env(env)
    if current.provider == "openai" and not env.get("OPENAI_API_KEY"):
        raise ConfigurationError(
            "LLM_PROVIDER=openai needs OPENAI_API_KEY (and OPENAI_BASE_URL for a server other than OpenAI's). "
            "To try the app without credentials, set LLM_PROVIDER=offline."
        )
    if current.provider == "databricks":
        databricks_config()
    if current.provider == "offline":
        refuse_offline_when_deployed(env)
    call_limits(env)  # a bad LLM_TIMEOUT_SECONDS or LLM_MAX_RETRIES fails here, at start-up
    return current


def deployed(env: Mapping[str, str]) -> bool:
    """Inside Databricks Apps (which sets DATABRICKS_APP_NAME), or on a host that sets APP_ENV=production."""
    return bool(env.get("DATABRICKS_APP_NAME")) or env.get("APP_ENV", "").strip().lower() == "production"


def refuse_offline_when_deployed(env: Mapping[str, str]) -> None:
    """A deployed app serves the offline model only when told to, never by falling back to a default."""
    if deployed(env) and not _true(env.get("LLM_ALLOW_OFFLINE")):
        where = "DATABRICKS_APP_NAME is set" if env.get("DATABRICKS_APP_NAME") else "APP_ENV=production"
        raise ConfigurationError(
            f"LLM_PROVIDER=offline in a deployed app ({where}): the built-in offline model only gives canned "
            "answers. Set LLM_PROVIDER to databricks or openai (with LLM_MODEL), or set LLM_ALLOW_OFFLINE=true "
            "to serve the offline model on purpose."
        )


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes")


def model(current: LLMSettings | None = None) -> Model:
    """The SDK model object for the configured provider, model and API mode, its tool call ids made unique
    (output_items.UniqueCallIds): wrapped here once, the handlers need not copy the agent to wrap it per request."""
    return _model(current or settings())


@functools.lru_cache(maxsize=8)
def _model(current: LLMSettings) -> Model:
    from agents import OpenAIChatCompletionsModel, OpenAIResponsesModel

    from agent_server.output_items import UniqueCallIds

    client = _client(current.provider, current.base_url)
    if current.api == "responses":
        return UniqueCallIds(OpenAIResponsesModel(model=current.model, openai_client=client))
    return UniqueCallIds(OpenAIChatCompletionsModel(model=current.model, openai_client=client))


@functools.lru_cache(maxsize=4)
def _client(provider: Provider, base_url: str | None) -> AsyncOpenAI:
    from openai import AsyncOpenAI

    if provider == "offline":
        from agent_server.offline import offline_client

        refuse_offline_when_deployed(os.environ)  # also when the app is served without start-app
        return offline_client(offline_app())
    if provider == "databricks":
        config = databricks_config()
        return AsyncOpenAI(
            base_url=f"{config.host.rstrip('/')}/serving-endpoints",
            api_key="set-per-request",  # replaced by DatabricksAuth on every request
            # openai 3 types this as httpx2's client but takes an httpx one too (openai/_httpx2.py); openai 2 wants
            # httpx's, and DatabricksAuth is an httpx.Auth.
            http_client=httpx.AsyncClient(  # type: ignore[arg-type]
                auth=DatabricksAuth(config, on_behalf_of_user=_true(os.environ.get("LLM_ON_BEHALF_OF_USER")))
            ),
            **call_limits(),
        )
    return AsyncOpenAI(base_url=base_url, **call_limits())  # also honours OPENAI_API_KEY


def call_limits(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Bounded model calls: the openai client's own 600 s timeout would hold a request for ten minutes."""
    env = os.environ if env is None else env
    timeout = env_number("LLM_TIMEOUT_SECONDS", 120.0, env=env)
    retries = int(env_number("LLM_MAX_RETRIES", 2.0, allow_zero=True, env=env))
    return {"timeout": httpx.Timeout(timeout, connect=min(10.0, timeout)), "max_retries": retries}


def env_number(name: str, default: float, allow_zero: bool = False, env: Mapping[str, str] | None = None) -> float:
    """A positive (or, with allow_zero, non-negative) number setting; unset is `default`.

    The app's one reader of number variables: a bad value is a ConfigurationError, which start-app
    reports in one line at start-up, never a silent fall back to the default.
    """
    raw = ((os.environ if env is None else env).get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or (value == 0 and not allow_zero) or value == float("inf"):
        raise ConfigurationError(f"{name}={raw!r} must be a {'non-negative' if allow_zero else 'positive'} number")
    return value


def needs_user_token() -> bool:
    """On-behalf-of-user calls, with no fallback to the app's own identity (request_guard checks the token)."""
    return (
        settings().provider == "databricks"
        and _true(os.environ.get("LLM_ON_BEHALF_OF_USER"))
        and not _true(os.environ.get("LLM_ON_BEHALF_OF_USER_FALLBACK"))
    )


@functools.lru_cache(maxsize=1)
def offline_app() -> Any:
    """The one in-process offline model this process talks to (tests read its request log)."""
    from agent_server.offline import create_offline_app

    return create_offline_app()


def databricks_config() -> Any:
    """The workspace and credentials from the environment, checked by authenticating (databricks-sdk refreshes them)."""
    from databricks.sdk.core import Config

    try:
        config = Config()
        config.authenticate()
    except Exception as error:
        raise ConfigurationError(
            "LLM_PROVIDER=databricks needs Databricks credentials: set DATABRICKS_HOST with DATABRICKS_TOKEN, "
            "or DATABRICKS_HOST with DATABRICKS_CLIENT_ID and DATABRICKS_CLIENT_SECRET, "
            f"or DATABRICKS_CONFIG_PROFILE. ({error})"
        ) from error
    return config


class DatabricksAuth(httpx.Auth):
    """Adds a fresh Databricks token to every request; databricks-sdk refreshes it when it expires.

    `Config.authenticate()` returns the cached token while it is fresh and fetches a new one (OAuth M2M
    for an app's service principal) before it expires. With on_behalf_of_user, a request that came in
    with Databricks Apps' `x-forwarded-access-token` header calls the model as that user instead.
    """

    def __init__(self, config: Any, on_behalf_of_user: bool = False) -> None:
        self._config = config
        self._on_behalf_of_user = on_behalf_of_user

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers.update(self._user_headers() or self._config.authenticate())
        yield request

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        # A refresh is a blocking HTTP call inside databricks-sdk: keep it off the event loop.
        request.headers.update(self._user_headers() or await asyncio.to_thread(self._config.authenticate))
        yield request

    def _user_headers(self) -> dict[str, str] | None:
        token = user_token() if self._on_behalf_of_user else None
        return {"Authorization": f"Bearer {token}"} if token else None


def user_token() -> str | None:
    """With LLM_ON_BEHALF_OF_USER=true, the signed-in user's token that came with this request
    (Databricks Apps' x-forwarded-access-token); None otherwise."""
    if not _true(os.environ.get("LLM_ON_BEHALF_OF_USER")):
        return None
    from mlflow.genai.agent_server import get_request_headers

    return get_request_headers().get("x-forwarded-access-token") or None
