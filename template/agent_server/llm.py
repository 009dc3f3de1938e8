# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Which model the agent talks to, and through which API, read from the environment.

| variable | values | default |
|---|---|---|
| LLM_PROVIDER | openai, databricks, offline | your copier answer, in agent_server/config/defaults.py |
| LLM_MODEL | the model or serving-endpoint name: the default of the models users may pick | likewise |
| LLM_MODELS | the models users may pick, `name=Label,name2` (config/models.py); unset: LLM_MODEL alone | unset |
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
import dataclasses
import functools
from collections.abc import AsyncGenerator, Generator
from typing import TYPE_CHECKING, Any

import httpx
import httpx2

from agent_server import config
from agent_server.config import API_MODES, PROVIDERS, ConfigurationError, LLMSettings, Provider

if TYPE_CHECKING:
    from agents import Model
    from openai import AsyncOpenAI

__all__ = [
    "API_MODES", "PROVIDERS", "ConfigurationError", "LLMSettings", "Provider", "llm_settings", "model", "model_named",
]  # fmt: skip


def llm_settings() -> LLMSettings:
    """The configured provider, model and API mode (LLM_PROVIDER, LLM_MODEL, LLM_API; config/)."""
    return config.settings().llm


def check_configuration(current: config.Settings | None = None) -> LLMSettings:
    """Fail at start-up, not on the first request, when credentials are missing."""
    current = current or config.settings()
    chosen = current.llm
    if chosen.provider == "openai" and not current.model_calls.openai_api_key_set:
        raise ConfigurationError(
            "LLM_PROVIDER=openai needs OPENAI_API_KEY (and OPENAI_BASE_URL for a server other than OpenAI's). "
            "To try the app without credentials, set LLM_PROVIDER=offline."
        )
    if chosen.provider == "databricks":
        workspace = databricks_config()
        if current.deployment.deployed:
            check_endpoints(workspace, current.models.names)
    if chosen.provider == "offline":
        refuse_offline_when_deployed(current)
    return chosen


def check_endpoints(workspace: Any, names: tuple[str, ...]) -> None:
    """A deployed app queries each serving endpoint it offers (LLM_MODEL, LLM_MODELS): one that does not exist, is
    not ready or is not granted stops start-up, named in one line, instead of failing a user's first turn on it."""
    from databricks.sdk import WorkspaceClient
    from databricks.sdk.errors import NotFound, PermissionDenied
    from databricks.sdk.errors.base import DatabricksError

    client, problems = WorkspaceClient(config=workspace), []
    for name in names:
        try:
            state = client.serving_endpoints.get(name).state
        except NotFound:
            problems.append(f"{name} (does not exist)")
        except PermissionDenied:
            problems.append(f"{name} (the app may not query it: grant CAN_QUERY in databricks.yml)")
        except DatabricksError as error:
            problems.append(f"{name} ({error})".replace("\n", " "))
        else:
            if state is None or state.ready is None or state.ready.value != "READY":
                problems.append(f"{name} (not ready)")
    if problems:
        raise ConfigurationError(
            "LLM_PROVIDER=databricks: serving endpoints this app offers (LLM_MODEL, LLM_MODELS) cannot answer: "
            f"{', '.join(problems)}. Create them or wait until they are ready, or list only the ones that are."
        )


def refuse_offline_when_deployed(current: config.Settings | None = None) -> None:
    """A deployed app serves the offline model only when told to, never by falling back to a default."""
    current = current or config.settings()
    if current.deployment.deployed and not current.model_calls.allow_offline:
        where = "DATABRICKS_APP_NAME is set" if current.deployment.on_databricks_apps else "APP_ENV=production"
        raise ConfigurationError(
            f"LLM_PROVIDER=offline in a deployed app ({where}): the built-in offline model only "
            "gives canned answers. Set LLM_PROVIDER to databricks or openai (with LLM_MODEL), or set "
            "LLM_ALLOW_OFFLINE=true to serve the offline model on purpose."
        )


def model(current: LLMSettings | None = None) -> Model:
    """The SDK model object for the configured provider, model and API mode, its tool call ids made unique
    (output_items.UniqueCallIds): wrapped here once, the handlers need not copy the agent to wrap it per request."""
    return _model(current or llm_settings())


def model_named(name: str) -> Model:
    """The SDK model object for `name` (one of LLM_MODELS), with the configured provider and API mode."""
    return _model(dataclasses.replace(llm_settings(), model=name))


@functools.lru_cache(maxsize=32)  # LLM_MODELS lists at most 20 (config/models.py)
def _model(current: LLMSettings) -> Model:
    from agents import OpenAIChatCompletionsModel, OpenAIResponsesModel

    from agent_server.output_items import UniqueCallIds

    client = _client(current.provider, current.base_url)
    if current.api == "responses":
        return UniqueCallIds(OpenAIResponsesModel(model=current.model, openai_client=client))
    return UniqueCallIds(OpenAIChatCompletionsModel(model=current.model, openai_client=client))


@functools.lru_cache(maxsize=4)
def _client(provider: Provider, base_url: str | None) -> AsyncOpenAI:
    """The provider's client, which all its models share, set up once: its calls send plain JSON arguments as they
    are (model_requests.py), and a Responses answer cut short keeps its text (model_ends.py)."""
    from agent_server.model_ends import keep_ended_answers
    from agent_server.model_requests import send_plain_json

    return keep_ended_answers(send_plain_json(_new_client(provider, base_url)))


def _new_client(provider: Provider, base_url: str | None) -> AsyncOpenAI:
    from openai import AsyncOpenAI

    if provider == "offline":
        from agent_server.offline import offline_client

        refuse_offline_when_deployed()  # also when the app is served without start-app
        return offline_client(offline_app())
    if provider == "databricks":
        workspace = databricks_config()
        return AsyncOpenAI(
            base_url=f"{workspace.host.rstrip('/')}/serving-endpoints",
            api_key="set-per-request",  # replaced by DatabricksAuth on every request
            # openai 3 types this as httpx2's client but takes an httpx one too (openai/_httpx2.py); openai 2 wants
            # httpx's, and DatabricksAuth is an httpx.Auth.
            http_client=httpx.AsyncClient(  # type: ignore[arg-type]
                auth=DatabricksAuth(workspace, on_behalf_of_user=config.settings().model_calls.on_behalf_of_user)
            ),
            **call_limits(),
        )
    return AsyncOpenAI(base_url=base_url, **call_limits())  # also honours OPENAI_API_KEY


def call_limits(current: config.Settings | None = None) -> dict[str, Any]:
    """Bounded model calls: the openai client's own 600 s timeout would hold a request for ten minutes."""
    from openai import Timeout  # the client's own: httpx2's in openai 3, which refuses httpx's since 3.63

    calls = (current or config.settings()).model_calls
    timeout = calls.timeout_seconds
    return {"timeout": Timeout(timeout, connect=min(10.0, timeout)), "max_retries": calls.max_retries}


def needs_user_token() -> bool:
    """On-behalf-of-user calls, with no fallback to the app's own identity (turn/checks.py checks the token)."""
    calls = config.settings().model_calls
    return llm_settings().provider == "databricks" and calls.on_behalf_of_user and not calls.on_behalf_of_user_fallback


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


class DatabricksAuth(httpx.Auth, httpx2.Auth):
    """Adds a fresh Databricks token to every request; databricks-sdk refreshes it when it expires.

    `Config.authenticate()` returns the cached token while it is fresh and fetches a new one (OAuth M2M
    for an app's service principal) before it expires. With on_behalf_of_user, a request that came in
    with Databricks Apps' `x-forwarded-access-token` header calls the model as that user instead.

    The one Databricks auth of the app: for the model's client (httpx, or openai 3's httpx2) and for the MCP
    servers' (the mcp package's httpx2), whose Auth classes have the same flow methods.
    """

    def __init__(self, config: Any, on_behalf_of_user: bool = False) -> None:
        self._config = config
        self._on_behalf_of_user = on_behalf_of_user

    def auth_flow(self, request: Any) -> Generator[Any, Any, None]:
        request.headers.update(self._user_headers() or self._config.authenticate())
        yield request

    def sync_auth_flow(self, request: Any) -> Generator[Any, Any, None]:  # a sync client's: the flow as it is
        yield from self.auth_flow(request)

    async def async_auth_flow(self, request: Any) -> AsyncGenerator[Any, Any]:
        # A refresh is a blocking HTTP call inside databricks-sdk: keep it off the event loop.
        request.headers.update(self._user_headers() or await asyncio.to_thread(self._config.authenticate))
        yield request

    def _user_headers(self) -> dict[str, str] | None:
        token = user_token() if self._on_behalf_of_user else None
        return {"Authorization": f"Bearer {token}"} if token else None


def user_token() -> str | None:
    """With LLM_ON_BEHALF_OF_USER=true, the signed-in user's token that came with this request
    (Databricks Apps' x-forwarded-access-token); None otherwise."""
    if not config.settings().model_calls.on_behalf_of_user:
        return None
    from mlflow.genai.agent_server import get_request_headers

    return get_request_headers().get("x-forwarded-access-token") or None
