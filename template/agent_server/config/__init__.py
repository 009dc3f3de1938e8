# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Every setting the app reads, declared once: its variable, type, default, limits and what it means.

One policy for all of them: the environment is read once (the first `settings()`, or `start-app`'s check, before
it serves), each value is parsed and checked against its limits, and every module reads the parsed value from here.
A bad value is a ConfigurationError that names the variable, never a silent fall back to the default. Tests change
settings in one way: set the variables, then `reload()` (the app's tests: their `app_settings` fixture). Each
group is read on first use, so a bad setting of one part (memory, say) does not stop another part from reading
its own. docs/configuration.md's table lists every variable declared here (tests/template/test_config.py checks
both ways). Stdlib only, and no import of the rest of the app, so every module may read it.

This face declares the settings; the package's other modules are what it builds on:
- setting_types.py: how a setting's text is parsed and checked (numbers, choices, flags, lists, the page's look);
- defaults.py: the copier answers that LLM_PROVIDER, LLM_MODEL, LLM_API and the memory settings fall back to.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from agent_server.config import defaults
from agent_server.config.models import ModelChoices
from agent_server.config.setting_types import ConfigurationError as ConfigurationError  # its readers catch it
from agent_server.config.setting_types import (
    choice,
    colour,
    flag,
    image_file,
    is_set,
    listed,
    lowercase,
    number,
    prompts,
    read_group,
    setting,
    shown_text,
    text,
)
from agent_server.config.sign_in import SignInSettings

ApiMode = Literal["chat_completions", "responses"]
API_MODES: tuple[ApiMode, ...] = ("chat_completions", "responses")
Provider = Literal["openai", "databricks", "offline"]
PROVIDERS: tuple[Provider, ...] = ("openai", "databricks", "offline")
MemoryBackend = Literal["none", "sqlite", "postgres"]
MEMORY_BACKENDS: tuple[MemoryBackend, ...] = ("none", "sqlite", "postgres")
LOG_LEVELS, LOG_FORMATS = ("DEBUG", "INFO", "WARNING", "ERROR"), ("text", "json")
OFFLINE_CALL_ID_STYLES = ("unique", "reuse", "empty")  # the offline model's tool call ids (offline/__init__.py)
# The loopback names, as a Host header has them: what an app listening on loopback answers to (DNS rebinding:
# no other name reaches it). As an address to listen on, an IPv6 one has no brackets.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
MIB = 1024 * 1024
ATTACHMENT_HEADROOM = MIB // 4  # what a turn's attachments leave of each bound for its text (AttachmentLimits)
DEFAULT_GREETING = "Ask anything. Try \u201cWhat time is it?\u201d"
G = TypeVar("G")


def is_loopback(address: str) -> bool:
    """Is `address` (to listen on) one of LOOPBACK_HOSTS?"""
    return address in (host.strip("[]") for host in LOOPBACK_HOSTS)


# --- the settings, group by group -----------------------------------------------------------------------


@dataclass(frozen=True)
class Deployment:
    app_env: str = setting("APP_ENV", text, "", "`production` marks a deployment outside Databricks Apps")
    databricks_app_name: str = setting("DATABRICKS_APP_NAME", text, "", "set by Databricks Apps: the app runs there")
    databricks_app_port: str = setting("DATABRICKS_APP_PORT", text, "", "set by Databricks Apps: the port")
    port: str = setting("PORT", text, "8000", "the port start-app listens on elsewhere")
    host: str = setting("HOST", text, "", "the address start-app listens on")
    workers: str = setting("WEB_CONCURRENCY", lowercase, "", "start-app's processes: a number, or auto (one per CPU)")

    @property
    def on_databricks_apps(self) -> bool:
        """Behind the Databricks Apps proxy, which sets DATABRICKS_APP_NAME (and forwards the user's identity)."""
        return bool(self.databricks_app_name)

    @property
    def deployed(self) -> bool:
        """On Databricks Apps, or on a host that sets APP_ENV=production."""
        return self.on_databricks_apps or self.app_env.lower() == "production"

    @property
    def listen_on(self) -> tuple[str, str, str]:
        """(host, port, the port's variable) start-app listens on unless told otherwise: all interfaces on the port
        Databricks Apps gives (its proxy comes from outside the container), else loopback on PORT."""
        if self.databricks_app_port:
            return self.host or "0.0.0.0", self.databricks_app_port, "DATABRICKS_APP_PORT"
        return self.host or "127.0.0.1", self.port, "PORT"


@dataclass(frozen=True)
class LLMSettings:
    """Which model the agent talks to, and through which API (llm.py). `llm.LLMSettings(...)` makes a second one."""

    provider: Provider = setting("LLM_PROVIDER", choice(PROVIDERS), defaults.LLM_PROVIDER, "the model provider")
    model: str = setting("LLM_MODEL", text, defaults.LLM_MODEL, "the model or serving-endpoint name")
    api: ApiMode = setting("LLM_API", choice(API_MODES), defaults.LLM_API, "chat_completions or responses")
    base_url: str | None = setting("OPENAI_BASE_URL", text, None, "an OpenAI-compatible server, for `openai`")

    @classmethod
    def read(cls, env: Mapping[str, str]) -> LLMSettings:
        values = read_group(cls, env)
        values["model"] = ModelChoices.read(env).default  # LLM_MODEL; unset, LLM_MODELS' first (config/models.py)
        if values["provider"] != "openai":
            values["base_url"] = None
        return cls(**values)


@dataclass(frozen=True)
class ModelCalls:
    timeout_seconds: float = setting("LLM_TIMEOUT_SECONDS", number(), 120.0, "how long one model call may take")
    max_retries: int = setting("LLM_MAX_RETRIES", number(allow_zero=True, integer=True), 2, "retries of a call")
    allow_offline: bool = setting("LLM_ALLOW_OFFLINE", flag, False, "a deployed app may serve the offline model")
    on_behalf_of_user: bool = setting("LLM_ON_BEHALF_OF_USER", flag, False, "call Databricks models as the user")
    on_behalf_of_user_fallback: bool = setting(
        "LLM_ON_BEHALF_OF_USER_FALLBACK", flag, False, "run a request without a user token as the app"
    )
    openai_api_key_set: bool = setting("OPENAI_API_KEY", is_set, False, "the key, for `openai` (never kept here)")
    offline_call_ids: str = setting(
        "OFFLINE_MODEL_CALL_IDS", choice(OFFLINE_CALL_ID_STYLES), "unique", "the offline model plays a faulty server"
    )


@dataclass(frozen=True)
class RequestLimits:
    max_body_bytes: int = setting("MAX_BODY_BYTES", number(integer=True), 16 * MIB, "over it, a 413")
    # What an item costs (SDK, MLflow) stalls a server: bounded in count as well as in size.
    max_input_items: int = setting("MAX_INPUT_ITEMS", number(integer=True), 300, "items in `input`; over, a 413")
    max_input_chars: int = setting("MAX_INPUT_CHARS", number(integer=True), 4_000_000, "text in a body; over, a 413")
    body_timeout_seconds: float = setting("BODY_TIMEOUT_SECONDS", number(), 30.0, "to send the head, the body: 408")
    turns_per_minute: int = setting("RATE_LIMIT_TURNS_PER_MINUTE", number(True, True), 0, "an identity's, a minute")
    turns_at_once: int = setting("RATE_LIMIT_CONCURRENT_TURNS", number(True, True), 0, "an identity's turns at once")


@dataclass(frozen=True)
class AttachmentLimits:  # images and documents in a user's turn (attachments.py); docs/attachments.md
    max_files: int = setting("ATTACHMENTS_MAX_FILES", number(True, True), 4, "a turn's images and files; 0: none")
    max_file_bytes: int = setting("ATTACHMENTS_MAX_FILE_BYTES", number(integer=True), 2 * MIB, "one, decoded: 413")
    max_turn_bytes: int = setting("ATTACHMENTS_MAX_TURN_BYTES", number(integer=True), 5 * MIB // 2, "a turn's, all")

    @classmethod
    def read(cls, env: Mapping[str, str]) -> AttachmentLimits:
        """ConfigurationError for limits that a turn could never meet: a turn's attachments travel as base64 (4/3 of
        their bytes) and must leave room for its text in the body, in MAX_INPUT_CHARS and in a stored turn."""
        values, limits = read_group(cls, env), RequestLimits(**read_group(RequestLimits, env))
        if values["max_files"] == 0:  # none taken: what they could weigh bounds nothing
            return cls(**values)
        if values["max_file_bytes"] > values["max_turn_bytes"]:
            raise ConfigurationError("ATTACHMENTS_MAX_FILE_BYTES must not be over ATTACHMENTS_MAX_TURN_BYTES")
        bounds = {"MAX_BODY_BYTES": limits.max_body_bytes, "MAX_INPUT_CHARS": limits.max_input_chars}
        if read_group(MemoryVariables, env)["backend"] != "none":
            bounds["MEMORY_MAX_TURN_BYTES"] = read_group(MemoryVariables, env)["max_turn_bytes"]
        needs = -(-values["max_turn_bytes"] // 3) * 4 + ATTACHMENT_HEADROOM
        for variable, bound in bounds.items():
            if needs > bound:
                raise ConfigurationError(
                    f"ATTACHMENTS_MAX_TURN_BYTES={values['max_turn_bytes']} does not fit {variable}={bound}: in base64,"
                    f" with {ATTACHMENT_HEADROOM} for the turn's text, it needs {needs}. Lower the one, or raise the"
                    " other"
                )
        return cls(**values)


@dataclass(frozen=True)
class BrowserChecks:
    allowed_hosts: tuple[str, ...] = setting("ALLOWED_HOSTS", listed, (), "host names the app answers to")
    allowed_origins: tuple[str, ...] = setting("ALLOWED_ORIGINS", listed, (), "other origins whose pages may call")


@dataclass(frozen=True)
class TraceLimits:
    payload_chars: int = setting("TRACE_PAYLOAD_MAX_CHARS", number(integer=True), 20_000, "longer: a preview")
    max_bytes: int = setting("TRACES_MAX_MB", number(integer=True, scale=MIB), 200 * MIB, "the local trace store")
    max_age_seconds: float = setting("TRACES_MAX_AGE_DAYS", number(scale=86400), 7 * 86400.0, "local traces' age")
    feedback_chars: int = setting("FEEDBACK_MAX_COMMENT_CHARS", number(integer=True), 2000, "a feedback comment")


@dataclass(frozen=True)
class McpSettings:
    servers: str = setting("MCP_SERVERS", text, "", "a JSON array of MCP servers (mcp_servers.from_env parses it)")
    connect_timeout: float = setting("MCP_CONNECT_TIMEOUT_SECONDS", number(), 10.0, "connecting to one server")
    timeout: float = setting("MCP_TIMEOUT_SECONDS", number(), 30.0, "one request to a server")
    tools_ttl: float = setting("MCP_TOOLS_TTL_SECONDS", number(), 300.0, "how long a tool list is cached")
    retry_every: float = setting("MCP_RETRY_SECONDS", number(), 30.0, "how often a server that is down is retried")
    max_output_chars: int = setting("MCP_MAX_OUTPUT_CHARS", number(integer=True), 20_000, "a longer output is cut")
    approval_secret: str = setting("MCP_APPROVAL_SECRET", text, "", "signs approval requests; unset: memory's key")
    approval_max_age_hours: float = setting("MCP_APPROVAL_MAX_AGE_HOURS", number(), 24.0, "a request expires after")


@dataclass(frozen=True)
class LogSettings:
    level: str = setting("LOG_LEVEL", choice(LOG_LEVELS, str.upper), "INFO", "DEBUG, INFO, WARNING or ERROR")
    format: str | None = setting("LOG_FORMAT", choice(LOG_FORMATS), None, "text, or json; unset: json when deployed")


@dataclass(frozen=True)
class MemoryVariables:
    """Conversation memory's variables as they are set; store/settings.py makes the database URL of them."""

    backend: MemoryBackend = setting("MEMORY_BACKEND", choice(MEMORY_BACKENDS), defaults.MEMORY_BACKEND, "the store")
    database_url: str = setting("MEMORY_DATABASE_URL", text, "", "a SQLite file, or a postgresql:// URL")
    lakebase_instance: str | None = setting("MEMORY_LAKEBASE_INSTANCE", text, None, "log in with Lakebase tokens")
    user_header: str | None = setting("MEMORY_USER_HEADER", lowercase, None, "the header a sign-in proxy sets")
    max_age_days: float = setting("MEMORY_MAX_AGE_DAYS", number(allow_zero=True), 30.0, "idle longer: deleted")
    max_items: int = setting("MEMORY_MAX_ITEMS", number(allow_zero=True, integer=True), 1000, "per conversation")
    max_turn_bytes: int = setting("MEMORY_MAX_TURN_BYTES", number(integer=True), 4 * MIB, "what one turn may add")
    lease_seconds: float = setting("MEMORY_TURN_LEASE_SECONDS", number(), 900.0, "how long a live turn may hold it")
    lease_renew_seconds: float = setting("MEMORY_LEASE_RENEW_SECONDS", number(), 10.0, "a dead holder's: free in 3x")
    long_term: bool = setting("LONG_TERM_MEMORY", flag, defaults.LONG_TERM_MEMORY, "remember/recall facts per user")
    max_facts: int = setting("LONG_TERM_MEMORY_MAX_FACTS", number(integer=True), 200, "a user's; oldest go first")
    max_fact_bytes: int = setting("LONG_TERM_MEMORY_MAX_BYTES", number(integer=True), 64 * 1024, "a user's, in all")
    share_links: bool = setting("SHARE_LINKS", flag, False, "owners may share read-only links to a conversation")
    queue_seconds: float = setting("MEMORY_TURN_QUEUE_SECONDS", number(True), 30.0, "a busy one's next turn waits")
    pghost: str = setting("PGHOST", text, "", "PostgreSQL's host, when MEMORY_DATABASE_URL is unset")
    pgport: int = setting("PGPORT", number(integer=True), 5432, "its port")
    pgdatabase: str | None = setting("PGDATABASE", text, None, "its database")
    pguser: str | None = setting("PGUSER", text, None, "its user")
    pgsslmode: str | None = setting("PGSSLMODE", text, None, "its SSL mode")


@dataclass(frozen=True)
class RunSettings:  # background runs and idempotent requests (agent_server/runs/), in the app's database
    max_age_hours: float = setting("RUNS_MAX_AGE_HOURS", number(), 24.0, "a run and its events are kept this long")
    max_event_bytes: int = setting("RUNS_MAX_EVENT_BYTES", number(integer=True), 8 * MIB, "one run's stream, stored")
    # Databricks Apps kills an app 15 s after SIGTERM: 10 leaves the time to hand runs over and send traces.
    grace_seconds: float = setting("RUNS_SHUTDOWN_GRACE_SECONDS", number(allow_zero=True), 10.0, "then hand over")


@dataclass(frozen=True)
class PageSettings:  # the chat page's look, the owner's to set (chat_ui.html reads them as it loads: app.py)
    title: str = setting("CHAT_TITLE", shown_text(60), "Agent chat", "the page's title and heading")
    greeting: str = setting("CHAT_GREETING", shown_text(300), DEFAULT_GREETING, "what a new chat says")
    prompts: tuple[str, ...] = setting("CHAT_PROMPTS", prompts, (), "up to 4 suggested prompts, separated by |")
    accent: str = setting("CHAT_ACCENT", colour, "", "the buttons' colour, #rgb or #rrggbb; unset: the page's")
    logo: str = setting("CHAT_LOGO", image_file, "", "an image file beside the title: PNG, JPEG, WebP, GIF or SVG")


@dataclass(frozen=True)
class EvaluationSettings:  # `uv run evaluate` (agent_server/evaluation/); --judge wins
    judge_model: str = setting("EVAL_JUDGE_MODEL", text, "", "the judges' model: `offline`, or as MLflow names one")


class Group(Generic[G]):
    """A group of settings, parsed from the snapshot the first time it is asked for, then kept."""

    def __init__(self, cls: type[G]) -> None:
        self.cls = cls

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    def __get__(self, settings: Settings, owner: type[Any] | None = None) -> G:
        reader = getattr(self.cls, "read", None)
        value: G = reader(settings.env) if reader else self.cls(**read_group(self.cls, settings.env))
        settings.__dict__[self.name] = value  # an attribute of the instance now: asked again, it is just read
        return value


class Settings:
    """The app's settings, read from one snapshot of the environment; each group parsed when first asked for."""

    deployment = Group(Deployment)
    llm = Group(LLMSettings)
    models = Group(ModelChoices)  # config/models.py
    model_calls = Group(ModelCalls)
    limits = Group(RequestLimits)
    attachments = Group(AttachmentLimits)
    browser = Group(BrowserChecks)
    traces = Group(TraceLimits)
    mcp = Group(McpSettings)
    logs = Group(LogSettings)
    memory = Group(MemoryVariables)
    runs = Group(RunSettings)
    evaluation = Group(EvaluationSettings)
    page = Group(PageSettings)
    sign_in = Group(SignInSettings)  # config/sign_in.py

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)

    def check(self) -> None:
        """Parse every group now (start-app, before it serves): the first bad value is a ConfigurationError."""
        for name in GROUPS:
            getattr(self, name)


GROUPS = {name: group.cls for name, group in vars(Settings).items() if isinstance(group, Group)}

_current: Settings | None = None


def settings() -> Settings:
    """The process's settings: the environment as it was at the first call (or the last reload)."""
    global _current
    if _current is None:
        _current = Settings(os.environ)
    return _current


def reload(env: Mapping[str, str] | None = None) -> Settings:
    """Read the settings again, from `env` or the environment as it is now: start-app after it reads .env, and
    tests after they set a variable. The only way settings change in a running process."""
    global _current
    _current = Settings(os.environ if env is None else env)
    return _current


def variables() -> Iterator[tuple[str, str, Any]]:
    """(variable, what it means, default) for every setting declared here, group by group."""
    for cls in GROUPS.values():
        for field in (each for each in dataclasses.fields(cls) if "variable" in each.metadata):
            yield field.metadata["variable"], field.metadata["doc"], field.default
