# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Conversation memory's settings (agent_server/memory.py), read from the environment:

- MEMORY_BACKEND: none, sqlite or postgres (default: your copier answer, in defaults.py).
- MEMORY_DATABASE_URL: for sqlite, a file path or `sqlite:///path` (default ./conversations.db);
  for postgres, `postgresql://user@host:port/db` (default: from PGHOST, PGPORT, PGDATABASE,
  PGUSER and PGSSLMODE, which a Databricks `database` resource sets).
- MEMORY_LAKEBASE_INSTANCE: a Lakebase instance, whose OAuth tokens are the password
  (memory_lakebase.py; databricks.yml sets it when you answered postgres).
- MEMORY_USER_HEADER: off Databricks Apps, the header your own sign-in proxy sets to the
  user's identity. Unset, a local app has one owner, `local`: it listens on loopback, for one
  person, unless told otherwise. A deployed app (APP_ENV=production) needs it, or
  MEMORY_BACKEND=none: one owner for everyone would show each user's conversations to all.
- MEMORY_MAX_AGE_DAYS (30; 0: never): conversations idle for longer are deleted.
- MEMORY_MAX_ITEMS (1000; 0: no limit): per conversation; the oldest whole turns go first.
- MEMORY_MAX_TURN_BYTES (4 MiB): what one request may add, as stored JSON; over it, a 413.
- MEMORY_TURN_LEASE_SECONDS (900): how long a turn may hold its conversation before another
  turn may take it (a process that died mid-turn).

start-app reads them before it serves (memory.check_database): a bad one stops it in one line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import sqlalchemy as sa

from agent_server import defaults, llm

Backend = Literal["none", "sqlite", "postgres"]
BACKENDS: tuple[Backend, ...] = ("none", "sqlite", "postgres")
SQLITE_FILE = "conversations.db"


@dataclass(frozen=True)
class MemorySettings:
    backend: Backend
    url: sa.URL | None = None
    lakebase_instance: str | None = None
    user_header: str | None = None
    max_age_days: float = 30
    max_items: int = 1000
    max_turn_bytes: int = 4 * 1024 * 1024
    lease_seconds: float = 900

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> MemorySettings:
        env = os.environ if env is None else env
        backend = (env.get("MEMORY_BACKEND") or defaults.MEMORY_BACKEND).strip().lower()
        if backend not in BACKENDS:
            raise llm.ConfigurationError(f"MEMORY_BACKEND={backend!r} is not one of {', '.join(BACKENDS)}")
        if backend == "none":
            return cls("none")
        user_header = (env.get("MEMORY_USER_HEADER") or "").strip().lower() or None
        if llm.deployed(env) and not env.get("DATABRICKS_APP_NAME") and user_header is None:
            # Off Databricks Apps nothing says who calls: one owner for everyone would show each user's
            # conversations to all the others.
            raise llm.ConfigurationError(
                f"MEMORY_BACKEND={backend} on a deployed app (APP_ENV=production) needs MEMORY_USER_HEADER, the "
                "header your sign-in proxy sets to the user's identity; or set MEMORY_BACKEND=none"
            )
        return cls(
            backend,
            url=database_url(backend, env),
            lakebase_instance=(env.get("MEMORY_LAKEBASE_INSTANCE") or "").strip() or None,
            user_header=user_header,
            max_age_days=llm.env_number("MEMORY_MAX_AGE_DAYS", 30, allow_zero=True, env=env),
            max_items=int(llm.env_number("MEMORY_MAX_ITEMS", 1000, allow_zero=True, env=env)),
            max_turn_bytes=int(llm.env_number("MEMORY_MAX_TURN_BYTES", 4 * 1024 * 1024, env=env)),
            lease_seconds=llm.env_number("MEMORY_TURN_LEASE_SECONDS", 900, env=env),
        )


def database_url(backend: Backend, env: Mapping[str, str]) -> sa.URL:
    """The SQLAlchemy URL: the standard library's sqlite3 for SQLite (memory_store.py runs it in a thread of its
    own), asyncpg for PostgreSQL."""
    raw = (env.get("MEMORY_DATABASE_URL") or "").strip()
    if backend == "sqlite":
        for prefix in ("sqlite:///", "sqlite+pysqlite:///", "sqlite+aiosqlite:///"):  # the last: releases before 0.2
            raw = raw.removeprefix(prefix)
        return sa.URL.create("sqlite+pysqlite", database=str(Path(raw or SQLITE_FILE).expanduser().resolve()))
    if raw:
        try:
            url = sa.make_url(raw)
        except sa.exc.ArgumentError:
            raise llm.ConfigurationError(f"MEMORY_DATABASE_URL={raw!r} is not a database URL") from None
        if url.get_backend_name() not in ("postgresql", "postgres"):
            raise llm.ConfigurationError(f"MEMORY_DATABASE_URL must be a postgresql:// URL, not {url.drivername}://")
        return url.set(drivername="postgresql+asyncpg")
    if not env.get("PGHOST"):
        raise llm.ConfigurationError(
            "MEMORY_BACKEND=postgres needs MEMORY_DATABASE_URL, or PGHOST and friends (a Databricks database "
            "resource sets them)"
        )
    return sa.URL.create(
        "postgresql+asyncpg",
        username=env.get("PGUSER") or None,
        host=env["PGHOST"],
        port=int(llm.env_number("PGPORT", 5432, env=env)),
        database=env.get("PGDATABASE") or None,
        query={"ssl": env["PGSSLMODE"]} if env.get("PGSSLMODE") else {},
    )


_settings: MemorySettings | None = None


def settings() -> MemorySettings:
    global _settings
    if _settings is None:
        _settings = MemorySettings.from_env()
    return _settings


def enabled() -> bool:
    return settings().backend != "none"
