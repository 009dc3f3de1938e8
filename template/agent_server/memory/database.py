# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The process's conversation store: opened at start-up (checked first by start-app), closed at shutdown,
pruned of old conversations now and then, and handed to each turn with a fresh Lakebase token."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import sqlalchemy as sa

from agent_server import config
from agent_server.config import ConfigurationError
from agent_server.history import approvals
from agent_server.memory import approval_store, leases
from agent_server.memory.store import Store, Unavailable
from agent_server.store import schema
from agent_server.store.lakebase import LakebaseToken
from agent_server.store.schema import SchemaTooNew
from agent_server.store.settings import memory_settings

T = TypeVar("T")

logger = logging.getLogger("agent_server.memory")

PRUNE_EVERY_SECONDS = 3600
PROBE_EVERY_SECONDS, PROBE_SECONDS = 2.0, 2.0  # GET /health's write probe: how often, and how long it may take

_store: Store | None = None
_token: LakebaseToken | None = None
_leases: leases.Leases | None = None
_last_prune = 0.0
_probed: tuple[float, str | None] = (-PROBE_EVERY_SECONDS, None)  # when the store was last probed, and why it failed


async def open_memory() -> None:
    """Connect and migrate (app start-up); a database that cannot be used stops the app with the reason."""
    global _store, _token, _leases
    current = memory_settings()
    if current.backend == "none":
        return
    where = current.url.render_as_string(hide_password=True) if current.url else "?"
    if current.backend == "sqlite":
        try:
            private_sqlite_file(current.url.database or "")  # type: ignore[union-attr]
        except OSError as error:
            raise ConfigurationError(f"conversation memory (sqlite, {where}): {error}") from None
    _token = LakebaseToken(current.lakebase_instance) if current.lakebase_instance else None
    if _token is not None:
        await _token.fresh()
    _store = Store(current.url, password=_token.current if _token else None)  # type: ignore[arg-type]
    try:
        await _store.open()
        # Every process on this store signs approval requests with its key, made by the first (approval_store.py).
        approvals.use_key(await _store.run(approval_store.signing_key, write=True))
    except (Unavailable, SchemaTooNew) as error:
        await _store.close()
        _store = None
        raise ConfigurationError(f"conversation memory ({current.backend}, {where}): {error}") from None
    await _free_dead_predecessors(_store)
    _leases = leases.Leases(current.lease_renew_seconds, current.lease_seconds)
    _leases.start(_store)
    await _prune()


def check_database() -> str:
    """Open the database once and close it again (start-app, before it serves); says where conversations are kept.

    ConfigurationError, with the reason, if the settings are wrong or the database cannot be used.
    """
    current = memory_settings()
    if current.backend == "none":
        return "no store (MEMORY_BACKEND=none): clients send the whole conversation"

    where = current.url.render_as_string(hide_password=True) if current.url else ""
    if current.backend == "sqlite":
        # Opened here first, so that a file that cannot be opened is the one-line reason, not a traceback.
        try:
            private_sqlite_file(current.url.database or "")  # type: ignore[union-attr]
            sqlite3.connect(current.url.database or "").close()  # type: ignore[union-attr]
        except (sqlite3.Error, OSError) as error:
            reason = f"{type(error).__name__}: {error}"
            raise ConfigurationError(f"conversation memory (sqlite, {where}): {reason}") from None

    async def once() -> None:
        await open_memory()
        await close_memory()

    asyncio.run(once())
    return f"{current.backend} ({where})"


def private_sqlite_file(path: str) -> None:
    """The conversations' file, and the -wal and -shm files SQLite makes beside it (with the file's own mode), are
    the app's user's alone (0600): they hold what users said, as the trace store does."""
    database = Path(path)
    os.close(os.open(database, os.O_CREAT | os.O_RDWR, 0o600))  # made with its mode, never readable by others
    for each in (database, database.with_name(f"{database.name}-wal"), database.with_name(f"{database.name}-shm")):
        if each.exists():
            each.chmod(0o600)  # a file an earlier release made 0644


async def close_memory() -> None:
    """The store closed, after what runs on it (memory.close_memory stops the shared rate counts first)."""
    global _store, _leases
    if _leases is not None:
        await _leases.stop()
        _leases = None
    if _store is not None:
        await _store.close()
        _store = None
        approvals.use_key(None)


async def store() -> Store:
    """The open store, with a fresh Lakebase token for any connection it makes next."""
    if _store is None:
        raise Unavailable("it is not open: the app is starting or stopping")
    if _token is not None:
        try:
            await _token.fresh()
        except Exception as error:  # the workspace could not be asked: the database cannot be reached either
            raise Unavailable(f"no database token ({error})") from None
    return _store


async def transact(transaction: Callable[[sa.Connection], T], write: bool = False) -> T:
    """`transaction` in one transaction of the open store (Store.run): how the rest of the app writes its own
    tables (runs/store.py) through memory's face."""
    return await (await store()).run(transaction, write=write)


async def unwritable() -> str | None:
    """Why the store cannot take a write now, or None when it can (GET /health). Probed at most every
    PROBE_EVERY_SECONDS, and a probe that takes longer than PROBE_SECONDS counts as a failure."""
    global _probed
    now = time.monotonic()
    if now - _probed[0] < PROBE_EVERY_SECONDS:
        return _probed[1]
    if _store is None:
        reason: str | None = "it is not open (the app is starting or stopping)"
    else:
        try:
            await asyncio.wait_for(asyncio.shield(_store.run(_touch_schema, write=True)), PROBE_SECONDS)
            reason = None
        except TimeoutError:
            reason = f"a write did not finish within {PROBE_SECONDS:g} s"
        except Unavailable as error:
            reason = str(error)
    _probed = (time.monotonic(), reason)
    return reason


def _touch_schema(connection: sa.Connection) -> None:
    connection.execute(schema.schema_table.update().values(version=schema.schema_table.c.version))


def turn_lease_seconds() -> float:
    """How long a turn's lease is good for between renewals (leases.py)."""
    return _leases.hold_seconds if _leases is not None else memory_settings().lease_seconds


def holding(lease: str, owner: str, conversation_id: str) -> None:
    """A turn took `lease`: renewed while it runs."""
    if _leases is not None:
        _leases.hold(lease, owner, conversation_id)


def let_go(lease: str) -> None:
    """A turn ended, stored or not: its lease is no longer renewed."""
    if _leases is not None:
        _leases.let_go(lease)


async def _free_dead_predecessors(store: Store) -> None:
    """At start-up: the leases that processes of this instance held when they died are free at once."""
    try:
        found = await store.run(leases.leases_of_this_instance)
        dead = [
            (owner, conversation_id, lease)
            for owner, conversation_id, lease in found
            if leases.is_dead_predecessor(lease)
        ]
        for owner, conversation_id, lease in dead:
            await store.release(owner, conversation_id, lease)
    except Unavailable as error:  # they run out by themselves
        logger.warning("memory: could not free the turn leases of stopped processes: %s", error)
        return
    if dead:
        logger.info("memory: freed %d turn leases held by processes of this instance that stopped", len(dead))


async def release(owner: str, conversation_id: str, lease: str) -> None:
    """Give a turn's lease back, storing nothing; with the database down, the lease runs out by itself."""
    let_go(lease)
    if _store is None:
        return
    try:
        await _store.release(owner, conversation_id, lease)
    except Unavailable as error:  # the lease runs out by itself (leases.py)
        logger.warning("memory: could not release conversation %s: %s", conversation_id, error)


def prune_soon() -> None:
    if time.time() - _last_prune > PRUNE_EVERY_SECONDS:
        asyncio.get_running_loop().create_task(_prune())


async def _prune() -> None:
    """Delete conversations idle for longer than MEMORY_MAX_AGE_DAYS, and the answers to approval requests that
    have expired (at start-up, then at most hourly)."""
    global _last_prune
    _last_prune = time.time()
    days = memory_settings().max_age_days
    if _store is None:
        return
    expired = _last_prune - config.settings().mcp.approval_max_age_hours * 3600
    try:
        await _store.run(functools.partial(approval_store.forget_answers_before, expired), write=True)
    except Unavailable as error:
        logger.warning("memory: could not delete the answers to expired approval requests: %s", error)
    if days <= 0:
        return
    try:
        gone = await _store.delete_older_than(time.time() - days * 86400)
    except Unavailable as error:
        logger.warning("memory: could not delete old conversations: %s", error)
        return
    if gone:
        logger.info("memory: deleted %d conversations idle for more than %g days", gone, days)
