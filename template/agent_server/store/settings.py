# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Conversation memory's settings: the MEMORY_* variables (declared in agent_server/config/) made into what
the store needs, the database URL above all.

- MEMORY_BACKEND: none, sqlite or postgres (default: your copier answer, in config/defaults.py).
- MEMORY_DATABASE_URL: for sqlite, a file path or `sqlite:///path` (default ./conversations.db);
  for postgres, `postgresql://user@host:port/db` (default: from PGHOST, PGPORT, PGDATABASE,
  PGUSER and PGSSLMODE, which a Databricks `database` resource sets).
- MEMORY_LAKEBASE_INSTANCE: a Lakebase instance, whose OAuth tokens are the password
  (lakebase.py; databricks.yml sets it when you answered postgres).
- MEMORY_USER_HEADER: off Databricks Apps, the header your own sign-in proxy sets to the
  user's identity. Unset, a local app has one owner, `local`: it listens on loopback, for one
  person, unless told otherwise. A deployed app (APP_ENV=production) needs it, or
  MEMORY_BACKEND=none: one owner for everyone would show each user's conversations to all.
- MEMORY_MAX_AGE_DAYS (30; 0: never): conversations idle for longer are deleted.
- MEMORY_MAX_ITEMS (1000; 0: no limit): per conversation; the oldest whole turns go first. Its earlier branches
  (branches.py) hold at most as many items together; the oldest branches go first.
- MEMORY_MAX_TURN_BYTES (4 MiB): what one request may add, as stored JSON; over it, a 413.
- MEMORY_TURN_LEASE_SECONDS (900): how long a live turn may hold its conversation before another
  turn may take it.
- MEMORY_LEASE_RENEW_SECONDS (10): how often a process renews its turns' leases; one whose holder
  stopped renewing it (a process that died mid-turn) is free after three times that (leases.py).
- MEMORY_TURN_QUEUE_SECONDS (30; 0: no wait): how long a turn of a conversation that is answering another
  request waits for its turn (queue.py) before its 409.
- LONG_TERM_MEMORY (false), LONG_TERM_MEMORY_MAX_FACTS (200), LONG_TERM_MEMORY_MAX_BYTES (64 KiB): the remember and
  recall tools (long_term.py), and how many facts of how many bytes a user keeps. They need the store, and a user
  for each caller: on a host others reach, without MEMORY_USER_HEADER, everyone would be `local` and share facts.

start-app reads them before it serves (memory.check_database): a bad one stops it in one line.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from agent_server import config
from agent_server.config import ConfigurationError, MemoryBackend
from agent_server.identity import SIGNED_IN_HEADER

SQLITE_FILE = "conversations.db"


@dataclass(frozen=True)
class MemorySettings:
    backend: MemoryBackend
    url: sa.URL | None = None
    lakebase_instance: str | None = None
    user_header: str | None = None
    max_age_days: float = 30
    max_items: int = 1000
    max_turn_bytes: int = 4 * 1024 * 1024
    lease_seconds: float = 900
    lease_renew_seconds: float = 10
    long_term: bool = False
    max_facts: int = 200
    max_fact_bytes: int = 64 * 1024
    queue_seconds: float = 30

    @classmethod
    def from_config(cls, current: config.Settings) -> MemorySettings:
        """ConfigurationError, naming the variable, for settings memory cannot work with."""
        variables = current.memory
        if variables.long_term:
            check_long_term(current)
        if variables.backend == "none":
            return cls("none")
        deployment, user_header = current.deployment, identity_header(current)
        if deployment.deployed and not deployment.on_databricks_apps and user_header is None:
            # Off Databricks Apps nothing says who calls: one owner for everyone would show each user's
            # conversations to all the others.
            raise ConfigurationError(
                f"MEMORY_BACKEND={variables.backend} on a deployed app (APP_ENV=production) needs MEMORY_USER_HEADER, "
                "the header your sign-in proxy sets to the user's identity, or OpenID Connect sign-in (OIDC_ISSUER, "
                "docs/sign-in.md); or set MEMORY_BACKEND=none"
            )
        return cls(
            variables.backend,
            url=database_url(variables),
            lakebase_instance=variables.lakebase_instance,
            user_header=user_header,
            max_age_days=variables.max_age_days,
            max_items=variables.max_items,
            max_turn_bytes=variables.max_turn_bytes,
            lease_seconds=variables.lease_seconds,
            lease_renew_seconds=variables.lease_renew_seconds,
            long_term=variables.long_term,
            max_facts=variables.max_facts,
            max_fact_bytes=variables.max_fact_bytes,
            queue_seconds=variables.queue_seconds,
        )


def check_long_term(current: config.Settings) -> None:
    """LONG_TERM_MEMORY=true needs the store, and an identity for each user: ConfigurationError if it has neither."""
    variables, deployment = current.memory, current.deployment
    if variables.backend == "none":
        raise ConfigurationError(
            "LONG_TERM_MEMORY=true keeps its facts in memory's store: set MEMORY_BACKEND=sqlite or postgres, "
            "or LONG_TERM_MEMORY=false"
        )
    host = deployment.listen_on[0]
    if not deployment.on_databricks_apps and identity_header(current) is None and not config.is_loopback(host):
        # Locally (loopback) there is one user, `local`; a host others reach would give them all that one's facts.
        raise ConfigurationError(
            f"LONG_TERM_MEMORY=true keeps facts per user, and nothing names the user: listening on {host}, everyone "
            "would be the one owner `local` and recall each other's facts. Set OIDC_ISSUER (sign-in), or "
            "MEMORY_USER_HEADER (the header your sign-in proxy sets), or LONG_TERM_MEMORY=false"
        )


def identity_header(current: config.Settings) -> str | None:
    """The header that names the user off Databricks Apps: sign-in's (identity.py), or the owner's proxy's."""
    return SIGNED_IN_HEADER if current.sign_in.enabled else current.memory.user_header


def database_url(variables: config.MemoryVariables) -> sa.URL:
    """The SQLAlchemy URL: the standard library's sqlite3 for SQLite (store.py runs it in a thread of its
    own), asyncpg for PostgreSQL."""
    raw = variables.database_url
    if variables.backend == "sqlite":
        for prefix in ("sqlite:///", "sqlite+pysqlite:///", "sqlite+aiosqlite:///"):  # the last: releases before 0.2
            raw = raw.removeprefix(prefix)
        return sa.URL.create("sqlite+pysqlite", database=str(Path(raw or SQLITE_FILE).expanduser().resolve()))
    if raw:
        try:
            url = sa.make_url(raw)
        except sa.exc.ArgumentError:
            raise ConfigurationError(f"MEMORY_DATABASE_URL={raw!r} is not a database URL") from None
        if url.get_backend_name() not in ("postgresql", "postgres"):
            raise ConfigurationError(f"MEMORY_DATABASE_URL must be a postgresql:// URL, not {url.drivername}://")
        return url.set(drivername="postgresql+asyncpg")
    if not variables.pghost:
        raise ConfigurationError(
            "MEMORY_BACKEND=postgres needs MEMORY_DATABASE_URL, or PGHOST and friends (a Databricks database "
            "resource sets them)"
        )
    return sa.URL.create(
        "postgresql+asyncpg",
        username=variables.pguser,
        host=variables.pghost,
        port=variables.pgport,
        database=variables.pgdatabase,
        query={"ssl": variables.pgsslmode} if variables.pgsslmode else {},
    )


def memory_settings() -> MemorySettings:
    """Memory's settings, made once per read of the app's settings (config.reload makes them again)."""
    return _made_from(config.settings())


@functools.lru_cache(maxsize=1)
def _made_from(current: config.Settings) -> MemorySettings:
    return MemorySettings.from_config(current)


def enabled() -> bool:
    return config.settings().memory.backend != "none"
