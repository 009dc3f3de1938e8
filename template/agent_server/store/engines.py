# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The store's engines (store.py): how it connects to SQLite and to PostgreSQL, and the settings each connection
gets as it is made."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def sqlite_engine(url: sa.URL) -> sa.Engine:
    """The standard library's sqlite3, for one thread of the store's own (store.py)."""
    engine = sa.create_engine(url.set(drivername="sqlite+pysqlite"), connect_args={"timeout": 10})
    sa.event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def postgres_engine(url: sa.URL, password: Callable[[], str] | None = None) -> AsyncEngine:
    """asyncpg, pooled. No pre-ping (a round trip before each transaction): a connection that the server dropped is
    found by the first statement, and the store runs the transaction again on a new one (store.py)."""
    engine = create_async_engine(url, connect_args={"timeout": 10})
    if password is not None:  # a token that changes (Lakebase): read when a connection is made
        sa.event.listen(engine.sync_engine, "do_connect", _with_password(password))
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers do not wait for a writer
    # In WAL mode, NORMAL never corrupts the file; a power cut may lose the newest turns, not a crash of the app.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")  # another process writing the same file
    cursor.close()


def _with_password(password: Callable[[], str]) -> Callable[..., None]:
    def set_password(_dialect: Any, _record: Any, _args: Any, params: dict[str, Any]) -> None:
        params["password"] = password()

    return set_password
