# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Ordered turns: a turn of a conversation that is answering another request waits, and runs after the turns that
came before it, with their answers in its history (as Databricks' DurableAgentServer orders a session's turns).

A turn that finds its conversation busy (store.py's Busy) takes a ticket in `agent_turn_queue` (store/schema.py): its
owner, conversation, an increasing ticket, and the lease it will hold the conversation with. Then it tries again,
after a pause that grows from FIRST_PAUSE to LAST_PAUSE, or at once when a turn of this process gives the
conversation back (waiters.py). The lease goes only to a turn that no live waiter came before (statements.TAKE),
so on one database, across workers and instances, turns run in the order they reached it, not in the order their
tries happen to land. A turn that has not waited takes a free conversation only if nobody waits for it, in the
same one statement as before (PostgreSQL's statements.TAKE_AND_READ): no round trip more.

Each try keeps the waiter's place for WAITER_SECONDS more: a waiter whose process died (kill -9) holds up those
behind it no longer than that. A waiter leaves the queue with its turn; when its client hangs up (routes.py cancels the
turn, and with it the wait); and after MEMORY_TURN_QUEUE_SECONDS (30 s; 0: no
wait), with a 409 that says how long the conversation has been busy. The wait is part of the request: with the
Databricks Apps proxy's 120 s a request, 30 s of waiting leaves the turn most of its time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from typing import TYPE_CHECKING

import sqlalchemy as sa

from agent_server.errors import Conflict
from agent_server.memory import database, turn_transactions, waiters
from agent_server.memory.records import Busy, StoredItem, Unavailable
from agent_server.scheduling import turn_starts
from agent_server.store.schema import turn_queue
from agent_server.store.settings import memory_settings

if TYPE_CHECKING:
    from agent_server.memory.store import Store

FIRST_PAUSE, LAST_PAUSE = 0.05, 0.5  # between a waiter's tries, doubling
WAITER_SECONDS = 5.0  # how long a try keeps a waiter's place: ten tries' time
GONE_SECONDS = 60.0  # a place this long out of date is deleted, by the next turn that starts to wait


async def wait_turn(owner: str, conversation_id: str, lease: str) -> list[StoredItem]:
    """The conversation's stored items, once this turn, which found it busy, holds it with `lease`: after the turns
    that came before it. Conflict after MEMORY_TURN_QUEUE_SECONDS, Unavailable if the database fails; a turn
    cancelled as it waits (its client hung up: routes.py) leaves the queue."""
    limit = memory_settings().queue_seconds
    if limit <= 0:
        raise _busy(conversation_id, "is answering another request")
    store, hold, arrived = await database.store(), database.turn_lease_seconds(), time.monotonic()
    turn_starts.waiting()  # the next turn may start meanwhile
    with waiters.waiting(owner, conversation_id) as stirred:
        return await _in_turn(store, owner, conversation_id, lease, hold, limit, arrived, stirred)


async def _in_turn(
    store: Store, owner: str, conversation_id: str, lease: str, hold: float, limit: float, arrived: float,
    stirred: asyncio.Event,
) -> list[StoredItem]:  # fmt: skip
    try:
        ticket = await store.run(functools.partial(_enqueue, owner, conversation_id, lease), write=True)
        pause = FIRST_PAUSE
        while True:
            stirred.clear()  # before the try: a conversation given back while it runs is tried again at once
            take = functools.partial(_take_in_turn, owner, conversation_id, lease, ticket, hold)
            if (found := await store.run(take, write=True, each_statement_alone=True)) is not None:
                return found
            waited = time.monotonic() - arrived
            if waited >= limit:
                why = f"has been answering another request for {waited:.0f} s (MEMORY_TURN_QUEUE_SECONDS={limit:g})"
                raise _busy(conversation_id, why)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(pause, limit - waited)):
                    await stirred.wait()
            pause = min(2 * pause, LAST_PAUSE)
    except BaseException:  # the wait's end, a hang-up, or the request's task cancelled (a run's, the server's stop)
        await _give_up(store, owner, conversation_id, lease)
        raise


def _busy(conversation_id: str, why: str) -> Conflict:
    message = f"Conversation {conversation_id} {why}; send this one when that one is done."
    return Conflict(message, "context.conversation_id")


async def _give_up(store: Store, owner: str, conversation_id: str, lease: str) -> None:
    """Leave the queue, and give the conversation back if this waiter took it as it was stopped."""
    with contextlib.suppress(Unavailable):  # its place and the lease run out by themselves
        await asyncio.shield(store.run(functools.partial(_leave, owner, conversation_id, lease), write=True))
    waiters.given_back(owner, conversation_id)


# --- the queue's transactions (store.run runs each) ------------------------------------------------------------


def _enqueue(owner: str, conversation_id: str, lease: str, connection: sa.Connection) -> int:
    """A place at the end of the conversation's queue: its ticket. Places long out of date (their waiters' processes
    died) go first."""
    now = time.time()
    connection.execute(turn_queue.delete().where(turn_queue.c.expires_at < now - GONE_SECONDS))
    place = {"owner": owner, "conversation_id": conversation_id, "lease": lease, "expires_at": now + WAITER_SECONDS}
    return int(connection.execute(turn_queue.insert().values(place).returning(turn_queue.c.ticket)).scalar_one())


def _take_in_turn(
    owner: str, conversation_id: str, lease: str, ticket: int, hold_seconds: float, connection: sa.Connection
) -> list[StoredItem] | None:
    """The waiter's place kept, and the conversation taken if no live waiter came before it (its items), else None.
    Each statement stands alone, as a turn's start's do (turn_transactions.start_turn), and the whole may run again."""
    keep = turn_queue.update().where(turn_queue.c.lease == lease).values(expires_at=time.time() + WAITER_SECONDS)
    connection.execute(keep)
    try:
        found = turn_transactions.start_turn(owner, conversation_id, lease, hold_seconds, connection, before=ticket)
    except Busy:
        return None
    connection.execute(turn_queue.delete().where(turn_queue.c.lease == lease))
    return found


def _leave(owner: str, conversation_id: str, lease: str, connection: sa.Connection) -> None:
    connection.execute(turn_queue.delete().where(turn_queue.c.lease == lease))
    turn_transactions.release(owner, conversation_id, lease, connection)
