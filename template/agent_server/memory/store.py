# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Where conversations are kept: SQLite or PostgreSQL, through SQLAlchemy (one schema, one query code).

The tables and their forward-only migrations are in store/schema.py; `open` brings a database up to date.

Two requests in one conversation never interleave: a turn first takes the conversation's lease
(a conditional UPDATE, which holds across app instances on one database), and the second gets
Busy, and waits in queue.py, until the first finishes, or its lease runs out (leases.py: its holder stopped renewing
it, or the turn ran past MEMORY_TURN_LEASE_SECONDS). The turn's items are written in one transaction when it finishes,
so a conversation is never half-written. A turn's transactions are in turn_transactions.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from agent_server.errors import NotFound
from agent_server.memory import branches, shares, statements, turn_transactions, waiters
from agent_server.memory.records import Busy, Conversation, StoredItem, Unavailable
from agent_server.store import engines
from agent_server.store.schema import SchemaTooNew, conversations, items, migrate

T = TypeVar("T")
__all__ = ["Busy", "Conversation", "Store", "StoredItem", "Unavailable"]  # what the app imports from here


class Store:
    """The conversations of one database. Each method is one transaction.

    SQLite runs each transaction as one call into a thread of its own, through the standard library's sqlite3:
    through an asyncio driver, each statement was several round trips between the event loop and the driver's
    thread (some 49 a turn, 4 ms of CPU or more). PostgreSQL runs the same transactions on asyncpg.
    """

    def __init__(self, url: sa.URL, password: Callable[[], str] | None = None) -> None:
        self.url = url
        self.sqlite = url.get_backend_name() == "sqlite"
        if self.sqlite:
            # One thread does all of this store's SQLite work, so a connection is only ever used by its own thread.
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-sqlite")
            self._sync_engine = engines.sqlite_engine(url)
            # SQLite has one writer at a time. Writers of this process queue here, not in SQLite's busy wait.
            self._one_writer: contextlib.AbstractAsyncContextManager[Any] = asyncio.Lock()
        else:
            self.engine: AsyncEngine = engines.postgres_engine(url, password)
            self._one_writer = contextlib.nullcontext()

    async def open(self) -> None:
        """Connect, and bring the schema up to SCHEMA_VERSION."""
        await self._run(migrate, write=True)

    async def close(self) -> None:
        if self.sqlite:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._sync_engine.dispose)
            self._thread.shutdown(wait=False)
        else:
            await self.engine.dispose()

    async def start_turn(self, owner: str, conversation_id: str, lease: str, hold_seconds: float) -> list[StoredItem]:
        """Take the conversation's lease for `hold_seconds` (creating it if new) and return its items; Busy if
        another turn holds it."""
        start = functools.partial(turn_transactions.start_turn, owner, conversation_id, lease, hold_seconds)
        try:
            return await self._run(start, write=True, each_statement_alone=True)
        except asyncio.CancelledError:
            # The transaction ran to its end (see _run): a lease this request will never use is given back (or,
            # with the database down, runs out by itself: leases.py).
            with contextlib.suppress(Unavailable):
                await asyncio.shield(self.release(owner, conversation_id, lease))
            raise

    async def finish_turn(
        self, owner: str, conversation_id: str, lease: str, turn: list[StoredItem], replaces: bool, title: str | None,
        max_items: int, keep: int = 0, restore: int | None = None,
    ) -> None:  # fmt: skip
        """Store the turn's items (after the stored ones, or, `replaces`, after their first `keep`, the rest kept as an
        earlier branch; `restore`: after that earlier branch, which the turn continues: branches.py) and give the
        lease back, at once."""
        if self.sqlite or replaces or restore is not None:
            finish = functools.partial(
                turn_transactions.finish_turn, owner, conversation_id, lease, turn, replaces, title, max_items,
                keep=keep, restore=restore,
            )  # fmt: skip
            await self._run(finish, write=True)
            waiters.given_back(owner, conversation_id)
            return
        # One statement, one round trip (turn_transactions.py); the same `now` if it runs again.
        in_one = functools.partial(
            turn_transactions.finish_turn_in_one_statement, owner, conversation_id, lease, turn, title, time.time()
        )
        held = await self._run(in_one, write=True, each_statement_alone=True)
        waiters.given_back(owner, conversation_id)
        if held is not None and 0 < max_items < held:  # under the limit (most turns), nothing more to do
            await self._run(functools.partial(turn_transactions.keep_newest, owner, conversation_id, max_items), True)

    async def release(self, owner: str, conversation_id: str, lease: str) -> None:
        """Give the lease back, storing nothing (a turn that failed or was stopped); a conversation with
        nothing stored (its first turn failed) is not kept."""
        await self._run(functools.partial(turn_transactions.release, owner, conversation_id, lease), write=True)
        waiters.given_back(owner, conversation_id)

    async def conversations(self, owner: str, limit: int = 100) -> list[Conversation]:
        return await self._run(functools.partial(_conversations, owner, limit))

    async def items(self, owner: str, conversation_id: str) -> list[StoredItem] | None:
        """The conversation's items, or None if this owner has no conversation by that id."""
        return await self._run(functools.partial(_items_if_any, owner, conversation_id))

    async def branches(self, owner: str, conversation_id: str) -> list[dict[str, Any]]:
        """The conversation's earlier branches, oldest first (branches.py)."""
        return await self._run(lambda connection: branches.listed(connection, owner, conversation_id))

    async def branch_items(self, owner: str, conversation_id: str, branch: int) -> list[StoredItem]:
        """An earlier branch's items (none: no such branch)."""
        return await self._run(lambda connection: branches.read(connection, owner, conversation_id, branch))

    async def continued_branch(self, owner: str, conversation_id: str, branch: int) -> list[StoredItem]:
        """The items of the earlier branch a turn continues (`custom_inputs.branch`); NotFound if there is none."""
        found = await self.branch_items(owner, conversation_id, branch)
        if not found:
            raise NotFound(f"This conversation has no branch {branch}.", "custom_inputs.branch")
        return found

    async def delete(self, owner: str, conversation_id: str) -> bool:
        return await self._run(functools.partial(_delete, owner, conversation_id), write=True)

    async def delete_older_than(self, cutoff: float) -> int:
        """Delete every conversation last updated before `cutoff` (seconds since the epoch); returns how many."""
        return await self._run(functools.partial(_delete_older_than, cutoff), write=True)

    async def run(
        self, transaction: Callable[[sa.Connection], T], write: bool = False, each_statement_alone: bool = False
    ) -> T:
        """`transaction` in one database transaction, as the store's own methods run theirs (leases.py, queue.py)."""
        return await self._run(transaction, write, each_statement_alone)

    async def _run(
        self, transaction: Callable[[sa.Connection], T], write: bool = False, each_statement_alone: bool = False
    ) -> T:
        """`transaction` in one database transaction; a failed database is Unavailable. `each_statement_alone`: on
        PostgreSQL, each of its statements commits by itself, which saves the round trips of BEGIN and COMMIT
        (for a transaction whose statements each stand alone, and may run again: turn_transactions.py)."""
        try:
            async with self._one_writer if write else contextlib.nullcontext():
                if not self.sqlite:
                    return await self._on_postgres(transaction, each_statement_alone)
                done = asyncio.get_running_loop().run_in_executor(self._thread, self._in_transaction, transaction)
                try:
                    return await asyncio.shield(done)
                except asyncio.CancelledError:
                    # Its thread cannot be stopped: wait for the transaction to end, so that the writers' lock is
                    # held until it has, and the caller knows it ran.
                    with contextlib.suppress(Exception):
                        await done
                    raise
        except (Busy, SchemaTooNew):
            raise
        except (sa.exc.SQLAlchemyError, OSError, TimeoutError) as error:
            raise Unavailable(_reason(error)) from error

    async def _on_postgres(self, transaction: Callable[[sa.Connection], T], each_statement_alone: bool) -> T:
        """`transaction` on a pooled connection; if the server had dropped it (a restart, an idle timeout), once
        more on a new one: a reconnect, not a failed turn. Nothing was committed on a connection that failed before
        its commit, so running the transaction again is safe; a failed commit is not retried (it may have landed)."""
        for last_try in (False, True):
            async with self.engine.connect() as connection:
                if each_statement_alone:
                    await connection.execution_options(isolation_level="AUTOCOMMIT")  # the pool resets it
                begun = None if each_statement_alone else await connection.begin()
                try:
                    result = await connection.run_sync(transaction)
                except sa.exc.DBAPIError as error:
                    if error.connection_invalidated and not last_try:
                        continue
                    raise
                if begun is not None:
                    await begun.commit()
                return result
        raise AssertionError("unreachable: the last try returns or raises")

    def _in_transaction(self, transaction: Callable[[sa.Connection], T]) -> T:
        with self._sync_engine.begin() as connection:
            return transaction(connection)


def _conversations(owner: str, limit: int, connection: sa.Connection) -> list[Conversation]:
    columns = (conversations.c.id, conversations.c.title, conversations.c.updated_at)
    query = statements.newest_rows(owner, limit, *columns, by=conversations.c.updated_at)
    return [Conversation(*row) for row in connection.execute(query)]


def _items_if_any(owner: str, conversation_id: str, connection: sa.Connection) -> list[StoredItem] | None:
    found = connection.scalar(sa.select(conversations.c.id).where(statements.conversation_is(owner, conversation_id)))
    return None if found is None else turn_transactions.read_items(connection, owner, conversation_id)


def _delete(owner: str, conversation_id: str, connection: sa.Connection) -> bool:
    connection.execute(items.delete().where(statements.items_of(owner, conversation_id)))
    branches.delete(connection, owner, conversation_id)
    shares.delete(connection, owner, conversation_id)  # its links: a 404 from now on
    deleted = connection.execute(conversations.delete().where(statements.conversation_is(owner, conversation_id)))
    return deleted.rowcount > 0


def _delete_older_than(cutoff: float, connection: sa.Connection) -> int:
    old = sa.select(conversations.c.owner, conversations.c.id).where(conversations.c.updated_at < cutoff)
    gone = list(connection.execute(old))
    for owner, conversation_id in gone:
        _delete(owner, conversation_id, connection)
    return len(gone)


def _reason(error: BaseException) -> str:
    original = getattr(error, "orig", None) or error
    text = str(original).strip().splitlines()
    return f"{type(original).__name__}: {text[0] if text else ''}".rstrip(": ")
