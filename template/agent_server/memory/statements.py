# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The statements every turn runs (store.py), built once with bound parameters.

Built per call, SQLAlchemy spent most of a turn's store time making and keying the statement objects (some 2.5 ms
of 2.8 on SQLite, against 0.1 ms in sqlite3 itself): a turn runs some nine. Built once, each call only binds its
values. Parameters: `named(owner, conversation_id)` names the conversation, the rest as each statement says (no
parameter may be named as a column is).
"""

from __future__ import annotations

import sqlalchemy as sa

from agent_server.memory.schema import conversations, items


def named(owner: str, conversation_id: str) -> dict[str, str]:
    """The parameters that name a conversation."""
    return {"of_owner": owner, "of_id": conversation_id}


_THIS = sa.and_(conversations.c.owner == sa.bindparam("of_owner"), conversations.c.id == sa.bindparam("of_id"))
_ITS_ITEMS = sa.and_(items.c.owner == sa.bindparam("of_owner"), items.c.conversation_id == sa.bindparam("of_id"))

# A lease free, or run out before `now`, or `new_lease` already (the same start, run again after a dropped
# connection: store.py), becomes `new_lease` until `until`.
TAKE = (
    conversations.update()
    .where(
        _THIS,
        sa.or_(
            conversations.c.lease.is_(None),
            conversations.c.lease_until < sa.bindparam("now"),
            conversations.c.lease == sa.bindparam("new_lease"),
        ),
    )
    .values(lease=sa.bindparam("new_lease"), lease_until=sa.bindparam("until"))
)
EXISTS = sa.select(conversations.c.id).where(_THIS)
ITEMS = (
    sa.select(items.c.item, items.c.item_id, items.c.format, items.c.trace_id).where(_ITS_ITEMS).order_by(items.c.seq)
)
# The turn holding `held` gives it back, at `now`, and learns where its items start and how many the conversation
# holds already, in the same round trip (RETURNING: PostgreSQL, and SQLite since 3.35); no row: it lost the lease.
FINISH = (
    conversations.update()
    .where(_THIS, conversations.c.lease == sa.bindparam("held"))
    .values(lease=None, lease_until=None, updated_at=sa.bindparam("now"))
    .returning(
        sa.select(sa.func.coalesce(sa.func.max(items.c.seq) + 1, 0)).where(_ITS_ITEMS).scalar_subquery(),
        sa.select(sa.func.count()).where(_ITS_ITEMS).scalar_subquery(),
    )
)
DELETE_ITEMS = items.delete().where(_ITS_ITEMS)
RETITLE = conversations.update().where(_THIS).values(title=sa.bindparam("new_title"))
SEQS = sa.select(items.c.seq, items.c.starts_turn).where(_ITS_ITEMS).order_by(items.c.seq)
DROP_BEFORE = items.delete().where(_ITS_ITEMS, items.c.seq < sa.bindparam("cut"))
