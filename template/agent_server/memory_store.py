# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Where conversations are kept: SQLite or PostgreSQL, through SQLAlchemy (one schema, one query code).

Two tables: `agent_conversations` (one row per owner and conversation id, with the turn lease)
and `agent_conversation_items` (the conversation's items in order, as history.render_each
renders them, in JSON). A third, `agent_memory_schema`, holds the schema version.

The schema changes only forward: MIGRATIONS[n] takes a database from version n-1 to n, and
`open` runs the ones a database has not had, in one transaction, at start-up. A migration,
once released, never changes; a new release adds the next one. A database written by a newer
release is refused rather than guessed at.

Two requests in one conversation never interleave: a turn first takes the conversation's lease
(a conditional UPDATE, which holds across app instances on one database), and the second gets
Busy (409) until the first finishes, or its lease runs out (MEMORY_TURN_LEASE_SECONDS, for a
process that died mid-turn). The turn's items are written in one transaction when it finishes,
so a conversation is never half-written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

SCHEMA_VERSION = 1
ITEM_FORMAT = 1  # an item as history.render_each renders it, in JSON; read back through the render again

metadata = sa.MetaData()
schema_table = sa.Table("agent_memory_schema", metadata, sa.Column("version", sa.Integer, nullable=False))
conversations = sa.Table(
    "agent_conversations",
    metadata,
    sa.Column("owner", sa.String(320), primary_key=True),
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False, index=True),
    sa.Column("lease", sa.String(64)),
    sa.Column("lease_until", sa.Float),
)
items = sa.Table(
    "agent_conversation_items",
    metadata,
    sa.Column("owner", sa.String(320), primary_key=True),
    sa.Column("conversation_id", sa.String(200), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("starts_turn", sa.Boolean, nullable=False),  # a user message: where retention may cut
    sa.Column("format", sa.Integer, nullable=False),
    sa.Column("item", sa.Text, nullable=False),
    sa.Column("item_id", sa.Text),
)


def _version_1(connection: sa.Connection) -> None:
    metadata.create_all(connection, tables=[conversations, items])


MIGRATIONS: dict[int, Callable[[sa.Connection], None]] = {1: _version_1}


class Unavailable(RuntimeError):
    """The database could not be reached or failed: a 503, and nothing of the turn is stored."""


class Busy(RuntimeError):
    """Another turn of this conversation is running (a 409)."""


class SchemaTooNew(RuntimeError):
    """The database was written by a newer release of the template."""


@dataclass(frozen=True)
class StoredItem:
    item: dict[str, Any]
    item_id: str | None
    format: int = ITEM_FORMAT


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    updated_at: float


class Store:
    def __init__(self, url: sa.URL, password: Callable[[], str] | None = None) -> None:
        self.url = url
        sqlite = url.get_backend_name() == "sqlite"
        self.engine: AsyncEngine = create_async_engine(
            url,
            pool_pre_ping=True,  # a server restart or a dropped connection costs a reconnect, not a failed turn
            connect_args={"timeout": 10},
        )
        # SQLite has one writer at a time. Writers of this process queue here, not in SQLite's busy wait:
        # a write transaction spans several awaits, and on a busy event loop they can outlast any timeout.
        self._one_writer = asyncio.Lock() if sqlite else contextlib.nullcontext()
        if sqlite:
            sa.event.listen(self.engine.sync_engine, "connect", _sqlite_pragmas)
        if password is not None:  # a token that changes (Lakebase): read when a connection is made
            sa.event.listen(self.engine.sync_engine, "do_connect", _with_password(password))

    async def open(self) -> None:
        """Connect, and bring the schema up to SCHEMA_VERSION."""
        async with self._transaction(write=True) as connection:
            if connection.dialect.name == "postgresql":  # instances starting together migrate one at a time
                await connection.execute(sa.text("SELECT pg_advisory_xact_lock(7305243101)"))
            await connection.run_sync(_migrate)

    async def close(self) -> None:
        await self.engine.dispose()

    async def start_turn(self, owner: str, conversation_id: str, lease: str, lease_seconds: float) -> list[StoredItem]:
        """Take the conversation's lease (creating it if new) and return its items; Busy if another turn holds it."""
        now = time.time()
        this = _conversation(owner, conversation_id)
        async with self._transaction(write=True) as connection:
            taken = await connection.execute(
                conversations.update()
                .where(this, sa.or_(conversations.c.lease.is_(None), conversations.c.lease_until < now))
                .values(lease=lease, lease_until=now + lease_seconds)
            )
            if taken.rowcount == 0:
                if await connection.scalar(sa.select(conversations.c.id).where(this)) is not None:
                    raise Busy(conversation_id)
                try:
                    async with connection.begin_nested():
                        await connection.execute(
                            conversations.insert().values(
                                owner=owner, id=conversation_id, title="", created_at=now, updated_at=now,
                                lease=lease, lease_until=now + lease_seconds,
                            )
                        )  # fmt: skip
                except sa.exc.IntegrityError:  # another instance created it a moment ago, and holds it
                    raise Busy(conversation_id) from None
            return await self._items(connection, owner, conversation_id)

    async def finish_turn(
        self, owner: str, conversation_id: str, lease: str, turn: list[StoredItem], replaces: bool, title: str | None,
        max_items: int,
    ) -> None:  # fmt: skip
        """Store the turn's items (after the stored ones, or instead of them) and give the lease back, at once."""
        this = _conversation(owner, conversation_id)
        async with self._transaction(write=True) as connection:
            kept = await connection.execute(
                conversations.update()
                .where(this, conversations.c.lease == lease)
                .values(lease=None, lease_until=None, updated_at=time.time())
            )
            if kept.rowcount == 0:  # the lease ran out and another turn took the conversation
                raise Busy(conversation_id)
            of_this = _items_of(owner, conversation_id)
            if replaces:
                await connection.execute(items.delete().where(of_this))
                first = 0
            else:
                first = (await connection.scalar(sa.select(sa.func.max(items.c.seq)).where(of_this)) or -1) + 1
            if turn:
                await connection.execute(
                    items.insert(),
                    [
                        {
                            "owner": owner, "conversation_id": conversation_id, "seq": first + n,
                            "starts_turn": stored.item.get("role") == "user", "format": stored.format,
                            "item": json.dumps(stored.item), "item_id": stored.item_id,
                        }
                        for n, stored in enumerate(turn)
                    ],
                )  # fmt: skip
            if title is not None:
                await connection.execute(conversations.update().where(this).values(title=title))
            await _keep_newest(connection, owner, conversation_id, max_items)

    async def release(self, owner: str, conversation_id: str, lease: str) -> None:
        """Give the lease back, storing nothing (a turn that failed or was stopped); a conversation with
        nothing stored (its first turn failed) is not kept."""
        this = _conversation(owner, conversation_id)
        async with self._transaction(write=True) as connection:
            await connection.execute(
                conversations.update().where(this, conversations.c.lease == lease).values(lease=None, lease_until=None)
            )
            first_item = sa.select(items.c.seq).where(_items_of(owner, conversation_id)).limit(1)
            if await connection.scalar(first_item) is None:
                await connection.execute(conversations.delete().where(this, conversations.c.lease.is_(None)))

    async def conversations(self, owner: str, limit: int = 100) -> list[Conversation]:
        query = (
            sa.select(conversations.c.id, conversations.c.title, conversations.c.updated_at)
            .where(conversations.c.owner == owner)
            .order_by(conversations.c.updated_at.desc())
            .limit(limit)
        )
        async with self._transaction() as connection:
            return [Conversation(*row) for row in await connection.execute(query)]

    async def items(self, owner: str, conversation_id: str) -> list[StoredItem] | None:
        """The conversation's items, or None if this owner has no conversation by that id."""
        async with self._transaction() as connection:
            found = await connection.scalar(sa.select(conversations.c.id).where(_conversation(owner, conversation_id)))
            return None if found is None else await self._items(connection, owner, conversation_id)

    async def delete(self, owner: str, conversation_id: str) -> bool:
        async with self._transaction(write=True) as connection:
            await connection.execute(items.delete().where(_items_of(owner, conversation_id)))
            deleted = await connection.execute(conversations.delete().where(_conversation(owner, conversation_id)))
            return deleted.rowcount > 0

    async def delete_older_than(self, cutoff: float) -> int:
        """Delete every conversation last updated before `cutoff` (seconds since the epoch); returns how many."""
        old = sa.select(conversations.c.owner, conversations.c.id).where(conversations.c.updated_at < cutoff)
        async with self._transaction(write=True) as connection:
            gone = list(await connection.execute(old))
            for owner, conversation_id in gone:
                await connection.execute(items.delete().where(_items_of(owner, conversation_id)))
                await connection.execute(conversations.delete().where(_conversation(owner, conversation_id)))
            return len(gone)

    @staticmethod
    async def _items(connection: AsyncConnection, owner: str, conversation_id: str) -> list[StoredItem]:
        query = (
            sa.select(items.c.item, items.c.item_id, items.c.format)
            .where(_items_of(owner, conversation_id))
            .order_by(items.c.seq)
        )
        rows = await connection.execute(query)
        return [StoredItem(json.loads(item), item_id, format) for item, item_id, format in rows]

    @asynccontextmanager
    async def _transaction(self, write: bool = False) -> AsyncIterator[AsyncConnection]:
        try:
            async with self._one_writer if write else contextlib.nullcontext(), self.engine.begin() as connection:
                yield connection
        except (Busy, SchemaTooNew):
            raise
        except (sa.exc.SQLAlchemyError, OSError, TimeoutError) as error:
            raise Unavailable(_reason(error)) from error


def _conversation(owner: str, conversation_id: str) -> sa.ColumnElement[bool]:
    return sa.and_(conversations.c.owner == owner, conversations.c.id == conversation_id)


def _items_of(owner: str, conversation_id: str) -> sa.ColumnElement[bool]:
    return sa.and_(items.c.owner == owner, items.c.conversation_id == conversation_id)


async def _keep_newest(connection: AsyncConnection, owner: str, conversation_id: str, max_items: int) -> None:
    """Over `max_items`, drop the oldest whole turns: cut only before a user message."""
    if max_items <= 0:
        return
    rows = list(
        await connection.execute(
            sa.select(items.c.seq, items.c.starts_turn).where(_items_of(owner, conversation_id)).order_by(items.c.seq)
        )
    )
    if len(rows) <= max_items:
        return
    cuts = [seq for position, (seq, starts) in enumerate(rows) if starts and len(rows) - position <= max_items]
    cut = cuts[0] if cuts else rows[-1].seq  # one turn longer than the limit: keep from its last item
    await connection.execute(items.delete().where(_items_of(owner, conversation_id), items.c.seq < cut))


def _migrate(connection: sa.Connection) -> None:
    schema_table.create(connection, checkfirst=True)
    version = connection.scalar(sa.select(sa.func.max(schema_table.c.version))) or 0
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"the conversation database is at schema version {version}, written by a newer release of this app "
            f"(this one knows up to {SCHEMA_VERSION}); update the app, or point MEMORY_DATABASE_URL elsewhere"
        )
    for step in range(version + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[step](connection)
    if version < SCHEMA_VERSION:
        connection.execute(schema_table.delete())
        connection.execute(schema_table.insert().values(version=SCHEMA_VERSION))


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


def _reason(error: BaseException) -> str:
    original = getattr(error, "orig", None) or error
    text = str(original).strip().splitlines()
    return f"{type(original).__name__}: {text[0] if text else ''}".rstrip(": ")
