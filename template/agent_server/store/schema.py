# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Conversation memory's tables, and the migrations that bring a database to this release's schema.

Two tables: `agent_conversations` (one row per owner and conversation id, with the turn lease)
and `agent_conversation_items` (the conversation's items in order, as history.render_each
renders them, in JSON; an answer's with the trace of the turn that made it, for feedback).
`agent_conversation_branches` keeps each conversation's earlier branches: the items a turn that edited,
regenerated or diverged from the conversation would have replaced, each branch whole (branches.py).
Two more keep background runs (agent_server/runs/): `agent_runs` (one row per run: its owner,
status, holder and heartbeat) and `agent_run_events` (each run's stream, in order).
Two keep approvals (approval_store.py): `agent_approval_keys`, the key that signs approval requests, and
`agent_approval_answers`, the first answer to each request, per owner.
`agent_turn_queue` holds the turns that wait for a busy conversation, in the order they came (queue.py).
`agent_memories` holds long-term memory's facts, each its owner's (facts.py), searched with SQLite's FTS5
(`agent_memories_search`) or PostgreSQL's full-text index on the same words.
`agent_rate_limits` and `agent_turns_running` count each identity's turns on PostgreSQL, for every instance
(rate_counts.py).
`agent_memory_schema` holds the schema version.

The schema changes only forward: MIGRATIONS[n] takes a database from version n-1 to n, and
store.py's `open` runs the ones a database has not had, in one transaction, at start-up. A
migration, once released, never changes; a new release adds the next one. A database written by
a newer release is refused rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from agent_server.store.search_schema import add_search
from agent_server.store.share_schema import add_shares

ITEM_FORMAT = 1  # an item as history.render_each renders it, in JSON; read back through the render again

metadata = sa.MetaData()


def owner_column(**options: Any) -> sa.Column[str]:
    """Whose the row is: the caller's exact identity (identity.py), as long as an e-mail address may be."""
    return sa.Column("owner", sa.String(320), **options)


def conversation_column(name: str = "conversation_id", **options: Any) -> sa.Column[str]:
    """A conversation's id, as the client names it."""
    return sa.Column(name, sa.String(200), **options)


def time_column(name: str, **options: Any) -> sa.Column[float]:
    """A moment, in seconds since the epoch."""
    return sa.Column(name, sa.Float, nullable=False, **options)


schema_table = sa.Table("agent_memory_schema", metadata, sa.Column("version", sa.Integer, nullable=False))
conversations = sa.Table(
    "agent_conversations",
    metadata,
    owner_column(primary_key=True),
    conversation_column("id", primary_key=True),
    sa.Column("title", sa.String(200), nullable=False),
    time_column("created_at"),
    time_column("updated_at", index=True),
    sa.Column("lease", sa.String(64)),
    sa.Column("lease_until", sa.Float),
    sa.Column("model", sa.String(200)),  # the model its user picked (schema 9; conversation_models.py); None: default
)
items = sa.Table(
    "agent_conversation_items",
    metadata,
    owner_column(primary_key=True),
    conversation_column(primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("starts_turn", sa.Boolean, nullable=False),  # a user message: where retention may cut
    sa.Column("format", sa.Integer, nullable=False),
    sa.Column("item", sa.Text, nullable=False),
    sa.Column("item_id", sa.Text),
    sa.Column("trace_id", sa.String(64)),  # the answer's trace (schema 3), which the chat page rates after a reload
    sa.Column("model", sa.String(200)),  # with LLM_MODELS: the model that made the answer (schema 9)
    sa.Column("words", sa.Text),  # what its user or assistant wrote, which search finds (schema 10: search_schema.py)
)

runs = sa.Table(
    "agent_runs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    owner_column(nullable=False),
    conversation_column(nullable=False),
    sa.Column("idempotency_key", sa.String(200)),  # the client's name for the request, unique per owner
    sa.Column("body_hash", sa.String(64), nullable=False),
    sa.Column("body", sa.Text, nullable=False),  # the request as the run runs it, to resume it after a crash
    sa.Column("background", sa.Boolean, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("holder", sa.String(64)),  # the process running it (leases.holder()); None: free to claim
    time_column("heartbeat_until", index=True),
    sa.Column("cancel_requested", sa.Boolean, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("events_bytes", sa.Integer, nullable=False),
    sa.Column("trace_id", sa.String(64)),
    sa.Column("error", sa.Text),  # {"status": ..., "body": the app's error shape}, in JSON
    sa.Column("started_calls", sa.Text),  # the tool calls the run started, in JSON: their outputs may not be stored
    time_column("created_at"),
    time_column("updated_at", index=True),
    sa.UniqueConstraint("owner", "idempotency_key", name="agent_runs_idempotency"),
)
run_events = sa.Table(
    "agent_run_events",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("data", sa.Text, nullable=False),  # the event's JSON, byte for byte as it was streamed
)
turn_queue = sa.Table(
    "agent_turn_queue",
    metadata,
    # Increasing: the order the waiters came in (SQLite's rowid, a BIGSERIAL on PostgreSQL).
    sa.Column("ticket", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
    owner_column(nullable=False),
    conversation_column(nullable=False),
    sa.Column("lease", sa.String(64), nullable=False, unique=True),  # the lease the waiter will take it with
    time_column("expires_at", index=True),  # kept by the waiter while it waits
    sa.Index("agent_turn_queue_conversation", "owner", "conversation_id", "ticket"),
)

approval_keys = sa.Table(
    "agent_approval_keys",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("key", sa.String(128), nullable=False),
    time_column("created_at"),
)
approval_answers = sa.Table(
    "agent_approval_answers",
    metadata,
    owner_column(primary_key=True),
    sa.Column("approval_id", sa.String(64), primary_key=True),
    sa.Column("approved", sa.Boolean, nullable=False),
    time_column("answered_at", index=True),  # kept while its request can be answered
)


def _version_1(connection: sa.Connection) -> None:
    metadata.create_all(connection, tables=[conversations, items])


def _version_2(connection: sa.Connection) -> None:
    metadata.create_all(connection, tables=[runs, run_events])


def _version_3(connection: sa.Connection) -> None:
    # Version 1 creates the items table as this module declares it, so a new database has the column already.
    if "trace_id" not in {column["name"] for column in sa.inspect(connection).get_columns(items.name)}:
        connection.execute(sa.text(f"ALTER TABLE {items.name} ADD COLUMN trace_id VARCHAR(64)"))


def _version_4(connection: sa.Connection) -> None:
    metadata.create_all(connection, tables=[approval_keys, approval_answers])


def _version_5(connection: sa.Connection) -> None:
    metadata.create_all(connection, tables=[turn_queue])


memories = sa.Table(
    "agent_memories",
    metadata,
    # Never reused (AUTOINCREMENT on SQLite): a stale DELETE /memories/{id} never deletes a newer fact.
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
    owner_column(nullable=False),
    sa.Column("text", sa.Text, nullable=False),  # the fact, plain text (facts.py cleaned it)
    sa.Column("terms", sa.Text, nullable=False),  # its words, lowercased, one space apart: what a search matches
    sa.Column("bytes", sa.Integer, nullable=False),  # the text's, in UTF-8: a user's facts are bounded in bytes
    time_column("created_at"),
    sa.Index("agent_memories_owner", "owner", "id"),
    sqlite_autoincrement=True,
)
# The search index of `terms`, by dialect. SQLite: an FTS5 table over the facts' terms, kept by triggers (a fact is
# never updated, only added and deleted). PostgreSQL: a GIN index on its 'simple' text search vector.
MEMORY_SEARCH = {
    "sqlite": [
        "CREATE VIRTUAL TABLE IF NOT EXISTS agent_memories_search USING fts5(terms, content='agent_memories', "
        "content_rowid='id', tokenize='unicode61 remove_diacritics 0')",
        "CREATE TRIGGER IF NOT EXISTS agent_memories_added AFTER INSERT ON agent_memories BEGIN "
        "INSERT INTO agent_memories_search(rowid, terms) VALUES (new.id, new.terms); END",
        "CREATE TRIGGER IF NOT EXISTS agent_memories_removed AFTER DELETE ON agent_memories BEGIN "
        "INSERT INTO agent_memories_search(agent_memories_search, rowid, terms) "
        "VALUES ('delete', old.id, old.terms); END",
    ],
    "postgresql": [
        "CREATE INDEX IF NOT EXISTS agent_memories_search ON agent_memories USING GIN (to_tsvector('simple', terms))"
    ],
}


def _version_6(connection: sa.Connection) -> None:
    metadata.create_all(connection, tables=[memories])
    for statement in MEMORY_SEARCH[connection.dialect.name]:
        connection.execute(sa.text(statement))


rate_limits = sa.Table(
    "agent_rate_limits",
    metadata,
    owner_column(primary_key=True),
    sa.Column("tokens", sa.Float, nullable=False),  # the identity's token bucket (RATE_LIMIT_TURNS_PER_MINUTE)
    time_column("at", index=True),  # when it was last counted
)
turns_running = sa.Table(
    "agent_turns_running",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    owner_column(nullable=False, index=True),
    sa.Column("holder", sa.String(64), nullable=False, index=True),  # the process running it (leases.holder())
    time_column("expires_at"),  # renewed while it runs: a dead holder's turn stops counting
)


def _version_7(connection: sa.Connection) -> None:
    metadata.create_all(connection, tables=[rate_limits, turns_running])


branches = sa.Table(
    "agent_conversation_branches",
    metadata,
    owner_column(primary_key=True),
    conversation_column(primary_key=True),
    sa.Column("branch", sa.Integer, primary_key=True, autoincrement=False),  # 1, 2, ...: the order they were set aside
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),  # the item's seq in the conversation then
    sa.Column("starts_turn", sa.Boolean, nullable=False),
    sa.Column("format", sa.Integer, nullable=False),
    sa.Column("item", sa.Text, nullable=False),
    sa.Column("item_id", sa.Text),
    sa.Column("trace_id", sa.String(64)),
    time_column("set_aside_at"),  # when a turn replaced it
    sa.Column("model", sa.String(200)),  # an answer's, with LLM_MODELS: the model that made it (schema 12)
)


def _version_8(connection: sa.Connection) -> None:
    metadata.create_all(connection, tables=[branches])


def _version_9(connection: sa.Connection) -> None:
    _add_model_column(connection, conversations, items)


def _version_12(connection: sa.Connection) -> None:
    _add_model_column(connection, branches)


def _add_model_column(connection: sa.Connection, *tables: sa.Table) -> None:
    # An earlier version creates each table as this module declares it, so a new database has the column already.
    for table in tables:
        if "model" not in {column["name"] for column in sa.inspect(connection).get_columns(table.name)}:
            connection.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN model VARCHAR(200)"))


MIGRATIONS: dict[int, Callable[[sa.Connection], None]] = {1: _version_1, 2: _version_2, 3: _version_3, 4: _version_4}
MIGRATIONS[5] = _version_5  # the turn queue
MIGRATIONS[6] = _version_6  # long-term memory
MIGRATIONS[7] = _version_7  # rate limits counted in the store, for every instance
MIGRATIONS[8] = _version_8  # earlier branches of conversations: no turn is deleted by a replayed history
MIGRATIONS[9] = _version_9  # a model per conversation (LLM_MODELS)
MIGRATIONS[10] = add_search  # conversation search (search_schema.py)
MIGRATIONS[11] = add_shares  # share links (share_schema.py)
MIGRATIONS[12] = _version_12  # an earlier branch keeps the model of each of its answers
SCHEMA_VERSION = max(MIGRATIONS)  # this release's: its newest migration's


class SchemaTooNew(RuntimeError):
    """The database was written by a newer release of the template."""


def migrate(connection: sa.Connection) -> None:
    """Bring the database to SCHEMA_VERSION, in the caller's transaction; SchemaTooNew if it is past it."""
    if connection.dialect.name == "postgresql":  # instances starting together migrate one at a time
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(7305243101)"))
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
