# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The statements every turn runs (store.py), built once with bound parameters.

Built per call, SQLAlchemy spent most of a turn's store time making and keying the statement objects (some 2.5 ms
of 2.8 on SQLite, against 0.1 ms in sqlite3 itself): a turn runs some nine. Built once, each call only binds its
values. Parameters: `named(owner, conversation_id)` names the conversation, the rest as each statement says (no
parameter may be named as a column is).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from agent_server.store.schema import conversations, items, turn_queue


def named(owner: str, conversation_id: str) -> dict[str, str]:
    """The parameters that name a conversation."""
    return {"of_owner": owner, "of_id": conversation_id}


def conversation_is(owner: str, conversation_id: str) -> sa.ColumnElement[bool]:
    """For a statement built per call (the rarer ones): this conversation's row."""
    return sa.and_(conversations.c.owner == owner, conversations.c.id == conversation_id)


def items_of(owner: str, conversation_id: str) -> sa.ColumnElement[bool]:
    """For a statement built per call: this conversation's items."""
    return sa.and_(items.c.owner == owner, items.c.conversation_id == conversation_id)


def newest_rows(owner: str, limit: int, *columns: sa.Column[Any], by: sa.Column[Any]) -> sa.Select[Any]:
    """For a statement built per call: `columns` of the owner's `limit` newest rows of `by`'s table, newest (the
    greatest `by`) first."""
    return sa.select(*columns).where(by.table.c.owner == owner).order_by(by.desc()).limit(limit)


_THIS = sa.and_(conversations.c.owner == sa.bindparam("of_owner"), conversations.c.id == sa.bindparam("of_id"))
_ITS_ITEMS = sa.and_(items.c.owner == sa.bindparam("of_owner"), items.c.conversation_id == sa.bindparam("of_id"))

NOBODY = 2**62  # `before` for a turn that has not waited: any live waiter comes before it
# No live waiter for this conversation came before ticket `before` (queue.py): turns take it in the order they came.
_NONE_BEFORE = ~sa.exists().where(
    turn_queue.c.owner == sa.bindparam("of_owner"),
    turn_queue.c.conversation_id == sa.bindparam("of_id"),
    turn_queue.c.expires_at >= sa.bindparam("now"),
    turn_queue.c.ticket < sa.bindparam("before", type_=sa.BigInteger),
)
# A lease free, or run out before `now`, with no waiter before `before`; or `new_lease` already (the same start,
# run again after a dropped connection: store.py), becomes `new_lease` until `until`.
TAKE = (
    conversations.update()
    .where(
        _THIS,
        sa.or_(
            sa.and_(
                sa.or_(conversations.c.lease.is_(None), conversations.c.lease_until < sa.bindparam("now")),
                _NONE_BEFORE,
            ),
            conversations.c.lease == sa.bindparam("new_lease"),
        ),
    )
    .values(lease=sa.bindparam("new_lease"), lease_until=sa.bindparam("until"))
)
EXISTS = sa.select(conversations.c.id).where(_THIS)
# A new conversation, held by `new_lease` until `until`, unless a waiter before `before` waits for it (its first
# turn failed, and was not kept).
CREATE = conversations.insert().from_select(
    ["owner", "id", "title", "created_at", "updated_at", "lease", "lease_until"],
    sa.select(
        *(sa.bindparam(name, type_=sa.String) for name in ("of_owner", "of_id")),
        sa.literal(""),
        *(sa.bindparam(name, type_=sa.Float) for name in ("now", "now")),
        sa.bindparam("new_lease", type_=sa.String),
        sa.bindparam("until", type_=sa.Float),
    ).where(_NONE_BEFORE),
)
ITEMS = (
    sa.select(items.c.item, items.c.item_id, items.c.format, items.c.trace_id, items.c.model)
    .where(_ITS_ITEMS)
    .order_by(items.c.seq)
)
# The turn holding `held` gives it back, at `now`, and learns where its items start and how many the conversation
# holds already, in the same round trip (RETURNING: PostgreSQL, and SQLite since 3.35); no row: it lost the lease.
FINISH_RETURNS = (
    sa.select(sa.func.coalesce(sa.func.max(items.c.seq) + 1, 0)).where(_ITS_ITEMS).scalar_subquery(),
    sa.select(sa.func.count()).where(_ITS_ITEMS).scalar_subquery(),
)
FINISH = (
    conversations.update()
    .where(_THIS, conversations.c.lease == sa.bindparam("held"))
    .values(lease=None, lease_until=None, updated_at=sa.bindparam("now"))
    .returning(*FINISH_RETURNS)
)
RETITLE = conversations.update().where(_THIS).values(title=sa.bindparam("new_title"))
# A first turn's title, from its first message: only while the conversation has none, so that a rename made while
# the turn ran stays (a rename is never empty: api.py).
TITLE_UNTITLED = (
    conversations.update().where(_THIS, conversations.c.title == "").values(title=sa.bindparam("new_title"))
)
SEQS = sa.select(items.c.seq, items.c.starts_turn).where(_ITS_ITEMS).order_by(items.c.seq)
DROP_BEFORE = items.delete().where(_ITS_ITEMS, items.c.seq < sa.bindparam("cut"))
LEASE_STATE = sa.select(conversations.c.lease, conversations.c.updated_at).where(_THIS)

# PostgreSQL runs a turn's start and its usual finish as one statement each (turn_transactions.py), with the
# statements above as parts of it (a data-modifying WITH). Its start: TAKE, and the conversation's items read with it.
# No row: not taken; a row of NULLs: taken, and no item stored yet.
_TAKEN = TAKE.returning(conversations.c.owner, conversations.c.id).cte("taken")
TAKE_AND_READ = (
    sa.select(items.c.item, items.c.item_id, items.c.format, items.c.trace_id)
    .select_from(
        _TAKEN.outerjoin(items, sa.and_(items.c.owner == _TAKEN.c.owner, items.c.conversation_id == _TAKEN.c.id))
    )
    .order_by(items.c.seq)
)
# Its finish: FINISH and TITLE_UNTITLED (`new_title` NULL, or a title there already: kept), and the turn's items
# written after the stored ones from one array parameter per column (ADDED: the column, and its parameter), numbered
# from 0 in `added_seq`. The items are written only if the lease was still held; the row returned says so, with how
# many items there were before.
ADDED = {
    "seq": "added_seq", "starts_turn": "added_starts_turn", "format": "added_format", "item": "added_item",
    "item_id": "added_item_id", "trace_id": "added_trace_id", "model": "added_model", "words": "added_words",
}  # fmt: skip
_KEPT = (
    conversations.update()
    .where(_THIS, conversations.c.lease == sa.bindparam("held"))
    .values(
        lease=None,
        lease_until=None,
        updated_at=sa.bindparam("now"),
        title=sa.func.coalesce(
            sa.func.nullif(conversations.c.title, ""), sa.bindparam("new_title", type_=sa.String), conversations.c.title
        ),
    )  # fmt: skip
    .returning(
        conversations.c.owner,
        conversations.c.id,
        FINISH_RETURNS[0].label("next_seq"),
        FINISH_RETURNS[1].label("held_items"),
    )
    .cte("kept")
)
_NEW = (
    sa.func.unnest(
        *(sa.bindparam(parameter, type_=postgresql.ARRAY(items.c[column].type)) for column, parameter in ADDED.items())
    )
    .table_valued(*ADDED)
    .render_derived()
)
_WRITTEN = (
    items.insert()
    .from_select(
        ["owner", "conversation_id", *ADDED],
        sa.select(
            _KEPT.c.owner, _KEPT.c.id, _KEPT.c.next_seq + _NEW.c.seq, *(_NEW.c[name] for name in list(ADDED)[1:])
        ).select_from(_KEPT.join(_NEW, sa.true())),
    )
    .cte("written")
)
FINISH_AND_ADD = sa.select(_KEPT.c.next_seq, _KEPT.c.held_items).add_cte(_WRITTEN)
