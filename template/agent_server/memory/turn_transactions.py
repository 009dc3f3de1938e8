# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""A turn's transactions (store.py runs them): its start, which takes the conversation's lease and reads what it
holds; its finish, which stores its items and gives the lease back; and its release, which stores nothing.

On PostgreSQL, a turn's start and its usual finish are one statement each (statements.TAKE_AND_READ,
statements.FINISH_AND_ADD): one round trip to the server, where the same work as separate statements takes two,
and four with a finish's BEGIN and COMMIT. Each round trip costs the app about 0.15 ms of CPU on asyncpg, and a
conversation turn is a few milliseconds (benchmarks/README.md). SQLite runs in the app's own process and has no
round trips to save, so it runs the statements one by one, as does a finish that replaces part of the conversation
(and keeps it as an earlier branch: branches.py).
"""

from __future__ import annotations

import json
import time

import sqlalchemy as sa

from agent_server.memory import branches, statements
from agent_server.memory.records import Busy, StoredItem
from agent_server.store.schema import conversations, items
from agent_server.store.search_schema import words_of


def start_turn(
    owner: str, conversation_id: str, lease: str, hold_seconds: float, connection: sa.Connection,
    before: int = statements.NOBODY,
) -> list[StoredItem]:  # fmt: skip
    """Each statement stands alone (on PostgreSQL each commits by itself: Store._run), and the whole may run again
    after a dropped connection: taking the lease is one statement, and taking it again with the same `lease` is
    allowed (statements.TAKE); what is read with it, or after it, is the conversation as that lease holds it.
    Busy while another turn holds it, or a live waiter came before ticket `before` (queue.py)."""
    now = time.time()
    this = statements.named(owner, conversation_id)
    take = {**this, "now": now, "new_lease": lease, "until": now + hold_seconds, "before": before}
    if connection.dialect.name == "postgresql":
        rows = connection.execute(statements.TAKE_AND_READ, take).all()
        if rows:  # taken; a conversation with no items yet gives one row of NULLs
            return [_stored(*row) for row in rows if row.item is not None]
    elif connection.execute(statements.TAKE, take).rowcount:
        return read_items(connection, owner, conversation_id)
    if connection.scalar(statements.EXISTS, this) is not None:
        raise Busy(conversation_id)
    try:
        created = connection.execute(statements.CREATE, take).rowcount
    except sa.exc.IntegrityError:  # another instance created it a moment ago, and holds it
        raise Busy(conversation_id) from None
    if not created:  # turns wait for it (its first turn failed, and was not kept): they go first
        raise Busy(conversation_id)
    return []


def finish_turn(
    owner: str, conversation_id: str, lease: str, turn: list[StoredItem], replaces: bool, title: str | None,
    max_items: int, connection: sa.Connection, keep: int = 0, restore: int | None = None,
) -> None:  # fmt: skip
    """In one transaction: the lease given back, the turn's items after the stored ones (or, `replaces`, after their
    first `keep`, the rest set aside as an earlier branch: branches.py; or, `restore`, after that earlier branch,
    which the turn continues), the title (if it has none yet), and the oldest turns over `max_items` dropped (and
    the oldest branches over it)."""
    this = statements.named(owner, conversation_id)
    now = time.time()
    kept = connection.execute(statements.FINISH, {**this, "held": lease, "now": now}).first()
    if kept is None:  # the lease ran out and another turn took the conversation, or it was deleted
        raise Busy(conversation_id, deleted=connection.scalar(statements.EXISTS, this) is None)
    first, stored = kept  # where the turn's items start, and how many the conversation holds
    if restore is not None:
        first, stored = branches.restore(connection, owner, conversation_id, restore, keep if replaces else None, now)
    elif replaces:
        first, stored = branches.set_aside(connection, owner, conversation_id, keep, now)
    if replaces or restore is not None:
        if max_items > 0:
            branches.keep_within(connection, owner, conversation_id, max_items)
    if turn:
        named = {"owner": owner, "conversation_id": conversation_id}
        connection.execute(items.insert(), [{**named, **_row(item, first + n)} for n, item in enumerate(turn)])
    if title is not None:
        connection.execute(statements.TITLE_UNTITLED, {**this, "new_title": title})
    if 0 < max_items < stored + len(turn):  # under the limit (most turns), no need to read the conversation's seqs
        keep_newest(owner, conversation_id, max_items, connection)


def finish_turn_in_one_statement(
    owner: str, conversation_id: str, lease: str, turn: list[StoredItem], title: str | None, now: float,
    connection: sa.Connection,
) -> int | None:  # fmt: skip
    """PostgreSQL: what finish_turn does for a turn that adds to the conversation, as one statement, committed by
    itself, `now`. Returns how many items the conversation holds now, for the caller to keep it to its limit (or
    None: not known, see below)."""
    this = statements.named(owner, conversation_id)
    added = [_row(item, n) for n, item in enumerate(turn)]
    values = {parameter: [row[column] for row in added] for column, parameter in statements.ADDED.items()}
    kept = connection.execute(
        statements.FINISH_AND_ADD, {**this, "held": lease, "now": now, "new_title": title, **values}
    ).first()
    if kept is not None:
        return int(kept.held_items) + len(turn)
    # Run again (Store._on_postgres) after the connection dropped while the statement ran: if it was carried out,
    # the lease was given back at this `now`. How many items there are is not known then; the next turn keeps the
    # conversation to its limit.
    state = connection.execute(statements.LEASE_STATE, this).first()
    if state is not None and state.lease is None and state.updated_at == now:
        return None
    raise Busy(conversation_id, deleted=state is None)


def release(owner: str, conversation_id: str, lease: str, connection: sa.Connection) -> None:
    """Give the lease back, storing nothing; a conversation with nothing stored (its first turn failed) goes."""
    this = statements.conversation_is(owner, conversation_id)
    connection.execute(
        conversations.update().where(this, conversations.c.lease == lease).values(lease=None, lease_until=None)
    )
    first_item = sa.select(items.c.seq).where(statements.items_of(owner, conversation_id)).limit(1)
    if connection.scalar(first_item) is None:
        connection.execute(conversations.delete().where(this, conversations.c.lease.is_(None)))


def read_items(connection: sa.Connection, owner: str, conversation_id: str) -> list[StoredItem]:
    rows = connection.execute(statements.ITEMS, statements.named(owner, conversation_id))
    return [_stored(*row) for row in rows]


def keep_newest(owner: str, conversation_id: str, max_items: int, connection: sa.Connection) -> None:
    """Over `max_items`, drop the oldest whole turns: cut only before a user message."""
    this = statements.named(owner, conversation_id)
    rows = list(connection.execute(statements.SEQS, this))
    if len(rows) <= max_items:
        return
    cuts = [seq for position, (seq, starts) in enumerate(rows) if starts and len(rows) - position <= max_items]
    cut = cuts[0] if cuts else rows[-1].seq  # one turn longer than the limit: keep from its last item
    connection.execute(statements.DROP_BEFORE, {**this, "cut": cut})


def _row(stored: StoredItem, seq: int) -> dict[str, object]:
    """An item's columns but its conversation's."""
    return {
        "seq": seq, "starts_turn": stored.item.get("role") == "user", "format": stored.format,
        "item": json.dumps(stored.item), "item_id": stored.item_id, "trace_id": stored.trace_id,
        "model": stored.model,
        "words": words_of(stored.item),
    }  # fmt: skip


def _stored(item: str, item_id: str | None, format: int, trace_id: str | None, model: str | None = None) -> StoredItem:
    return StoredItem(json.loads(item), item_id, format, trace_id, model)
