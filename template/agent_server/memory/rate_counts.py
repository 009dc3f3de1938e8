# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Each identity's turns counted in the store (schema 7), so RATE_LIMIT_* hold across every worker and instance on
one PostgreSQL database (rate_limits.py asks here only with a limit set, and memory on PostgreSQL).

- Turns a minute: a token bucket per identity in `agent_rate_limits`, full at RATE_LIMIT_TURNS_PER_MINUTE and
  refilled at that rate, in wall-clock time (the instances' clocks are the hosts'). A bucket idle for a minute is
  full again, so idle ones are deleted.
- Turns at once: a row per running turn in `agent_turns_running`, naming its process (leases.holder()) and renewed by
  it every MEMORY_LEASE_RENEW_SECONDS for three renewals' time, so a turn whose process died (kill -9) stops counting
  within 30 s, as a turn lease is freed.

A claim is one transaction: it locks the identity's bucket row (an upsert), so the claims of one identity run one
at a time on every instance, then counts its running turns and takes a token. A few round trips, paid only by a turn
with a limit set; a turn with no limit pays none. A store that fails is logged, and the turn counted in its process.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
import uuid

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from agent_server.memory import database, leases
from agent_server.memory.records import Unavailable
from agent_server.store.schema import rate_limits, turns_running
from agent_server.store.settings import memory_settings

logger = logging.getLogger("agent_server.memory")

CLEAN_EVERY_SECONDS = 300.0  # idle buckets and dead turns' rows are deleted this often, by each process
IDLE_SECONDS = 120.0  # a bucket unused this long is full again (it refills in a minute): deleted

Refusal = tuple[str, int]  # why, and the seconds until the identity may try again (Retry-After)

_held: set[str] = set()  # this process's running turns' rows
_renewing: asyncio.Task[None] | None = None


def shared() -> bool:
    """Are the counts the store's? With memory on PostgreSQL; with SQLite or none, each process keeps its own."""
    return memory_settings().backend == "postgres"


def running_row_seconds() -> float:
    return memory_settings().lease_renew_seconds * leases.RENEWALS_PER_LEASE


async def claim(owner: str, per_minute: int, at_once: int) -> tuple[Refusal | None, str | None]:
    """Take a turn for `owner` on every instance's count: (why not, None), or (None, the turn's row id to release;
    None when no row was kept). Unavailable if the store failed."""
    turn = f"{leases.holder()}/{uuid.uuid4().hex[:24]}" if at_once else None
    now = time.time()

    def transaction(connection: sa.Connection) -> Refusal | None:
        return _claim(connection, owner, per_minute, at_once, turn, now, now + running_row_seconds())

    refused = await (await database.store()).run(transaction, write=True)  # or Unavailable (also: not open)
    if refused is None and turn is not None:
        _held.add(turn)
        _keep_renewed()
    return refused, None if refused else turn


async def release(turn: str) -> None:
    """The turn ended: it counts no more (with the store down, its row runs out by itself)."""
    _held.discard(turn)
    try:
        store = await database.store()
        await store.run(lambda c: c.execute(turns_running.delete().where(turns_running.c.id == turn)), True, True)
    except Unavailable as error:
        logger.warning("memory: could not release a running turn's count: %s", error)


def _claim(
    connection: sa.Connection, owner: str, per_minute: int, at_once: int, turn: str | None, now: float, until: float
) -> Refusal | None:
    # Made, or locked: every claim of this identity waits here for the one before it to commit.
    locked = (
        postgresql.insert(rate_limits)
        .values(owner=owner, tokens=float(per_minute), at=now)
        .on_conflict_do_update(index_elements=[rate_limits.c.owner], set_={"owner": owner})
        .returning(rate_limits.c.tokens, rate_limits.c.at)
    )
    tokens, at = connection.execute(locked).one()
    if at_once:
        running = sa.select(sa.func.count()).where(turns_running.c.owner == owner, turns_running.c.expires_at > now)
        if (connection.scalar(running) or 0) >= at_once:
            return f"at most {at_once} turns at once (RATE_LIMIT_CONCURRENT_TURNS)", 1
    if per_minute:
        tokens = min(float(per_minute), tokens + max(0.0, now - at) * per_minute / 60)
        if tokens < 1:
            return f"at most {per_minute} turns a minute (RATE_LIMIT_TURNS_PER_MINUTE)", math.ceil(
                (1 - tokens) * 60 / per_minute
            )
        connection.execute(rate_limits.update().where(rate_limits.c.owner == owner).values(tokens=tokens - 1, at=now))
    if turn is not None:
        started = {"id": turn, "owner": owner, "holder": leases.holder(), "expires_at": until}
        connection.execute(turns_running.insert().values(started))
    return None


async def stop() -> None:
    """The store closes (memory.close_memory): no more renewals from this process."""
    global _renewing
    if _renewing is not None:
        _renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError, RuntimeError):
            await _renewing
        _renewing = None


def _keep_renewed() -> None:
    global _renewing
    loop = asyncio.get_running_loop()
    if _renewing is None or _renewing.done() or _renewing.get_loop() is not loop:
        _renewing = loop.create_task(_renew_and_clean(), name="memory-rate-counts")


async def _renew_and_clean() -> None:
    """Every MEMORY_LEASE_RENEW_SECONDS: this process's running turns, renewed; now and then, idle rows deleted."""
    cleaned = 0.0
    while True:
        await asyncio.sleep(memory_settings().lease_renew_seconds)
        now = time.time()
        clean = now - cleaned > CLEAN_EVERY_SECONDS
        with contextlib.suppress(Unavailable):
            await (await database.store()).run(functools.partial(_renew, list(_held), now, clean), write=True)
            cleaned = now if clean else cleaned


def _renew(held: list[str], now: float, clean: bool, connection: sa.Connection) -> None:
    if held:
        renewed = turns_running.update().where(turns_running.c.id.in_(held))
        connection.execute(renewed.values(expires_at=now + running_row_seconds()))
    if clean:
        connection.execute(turns_running.delete().where(turns_running.c.expires_at < now))
        connection.execute(rate_limits.delete().where(rate_limits.c.at < now - IDLE_SECONDS))
