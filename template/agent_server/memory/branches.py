# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""A conversation's earlier branches: what turns that replaced part of it (an edit, a regenerate, a history that
diverged: merge.py) would have deleted, kept whole, so that no stored turn is lost to what a client sends.

A turn that replaces the conversation from its `keep`-th item on copies the whole conversation, as it stood, into
`agent_conversation_branches` as its next branch (1, 2, ...), then deletes those items: the conversation goes on
from the items it kept. GET /conversations/{id} lists the branches, and `?branch=N` returns one (api.py). They go
with their conversation (its DELETE, DELETE /me, MEMORY_MAX_AGE_DAYS), and MEMORY_MAX_ITEMS bounds them: a
conversation's earlier branches hold at most that many items together, the oldest branches dropped first (the
newest is kept whole, however long), so a conversation keeps at most about twice MEMORY_MAX_ITEMS items.

A turn says which branch it continues: the conversation's own items, or (`custom_inputs.branch`: N) earlier branch
N, as the chat page does after its user switched to it. The model sees that branch only (merged with what was sent,
by merge.py's rule), and the turn `restore`s it: the conversation as it stood is kept as its next branch, and branch
N (all of it, or the part the turn keeps, when it edits or regenerates in it) becomes the conversation again, the
turn's items after it. Branch N itself is gone once all of it is the conversation again; a part leaves it as it was.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from agent_server.errors import BadRequest
from agent_server.memory import statements
from agent_server.memory.records import StoredItem
from agent_server.store.schema import branches, items
from agent_server.store.search_schema import words_of

COPIED = ["owner", "conversation_id", "seq", "starts_turn", "format", "item", "item_id", "trace_id", "model"]


def of(owner: str, conversation_id: str) -> sa.ColumnElement[bool]:
    """This conversation's branch rows."""
    return sa.and_(branches.c.owner == owner, branches.c.conversation_id == conversation_id)


def set_aside(connection: sa.Connection, owner: str, conversation_id: str, keep: int, now: float) -> tuple[int, int]:
    """The conversation's items from the `keep`-th on replaced: the whole conversation kept as its next branch, then
    those items deleted. Returns where the turn's items start (a seq) and how many items the conversation keeps."""
    mine = statements.items_of(owner, conversation_id)
    cut = connection.scalar(sa.select(items.c.seq).where(mine).order_by(items.c.seq).offset(keep).limit(1))
    if cut is None:  # nothing after them: nothing is replaced
        after = connection.scalar(sa.select(sa.func.coalesce(sa.func.max(items.c.seq) + 1, 0)).where(mine))
        return int(after), int(connection.scalar(sa.select(sa.func.count()).where(mine)) or 0)
    number = connection.scalar(
        sa.select(sa.func.coalesce(sa.func.max(branches.c.branch), 0) + 1).where(of(owner, conversation_id))
    )
    copied = sa.select(*(items.c[name] for name in COPIED), sa.literal(int(number or 1)), sa.literal(now)).where(mine)
    connection.execute(branches.insert().from_select([*COPIED, "branch", "set_aside_at"], copied))
    connection.execute(items.delete().where(mine, items.c.seq >= cut))
    return int(cut), keep


def continued(body: Any, named: str | None) -> int | None:
    """The earlier branch a request's turn continues (`custom_inputs.branch`), or None: the conversation's own items.
    BadRequest if it cannot be a branch's number, or the request names no conversation (`named`)."""
    custom = body.get("custom_inputs") if isinstance(body, dict) else None
    number = custom.get("branch") if isinstance(custom, dict) else None
    if number is None:
        return None
    if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 10**9:
        raise BadRequest("custom_inputs.branch must be the number of an earlier branch (1, 2, ...), as GET "
                         "/conversations/{id} lists them.", "custom_inputs.branch")  # fmt: skip
    if named is None:
        raise BadRequest("custom_inputs.branch needs the conversation it is a branch of.", "custom_inputs.branch")
    return number


def restore(
    connection: sa.Connection, owner: str, conversation_id: str, branch: int, keep: int | None, now: float
) -> tuple[int, int]:
    """Earlier branch `branch` (its first `keep` items; None: all) made the conversation again, for a turn that
    continues it; the conversation as it stood kept as the next branch. Returns where the turn's items start (a
    seq) and how many items the conversation keeps."""
    mine = statements.items_of(owner, conversation_id)
    if connection.scalar(sa.select(items.c.seq).where(mine).limit(1)) is not None:
        set_aside(connection, owner, conversation_id, 0, now)
    chosen = sa.and_(of(owner, conversation_id), branches.c.branch == branch)
    size = int(connection.scalar(sa.select(sa.func.count()).where(chosen)) or 0)
    taken = size if keep is None else min(keep, size)
    query = sa.select(*(branches.c[name] for name in COPIED)).where(chosen).order_by(branches.c.seq).limit(taken)
    rows = [dict(row._mapping) for row in connection.execute(query)]
    for row in rows:  # what search finds of it, indexed as any stored item is (store/search_schema.py)
        row["words"] = words_of(json.loads(row["item"]))
    if rows:
        connection.execute(items.insert(), rows)
    if taken == size:  # all of it is the conversation again: no longer an earlier branch
        connection.execute(branches.delete().where(chosen))
    after = connection.scalar(sa.select(sa.func.coalesce(sa.func.max(items.c.seq) + 1, 0)).where(mine))
    return int(after), taken


def keep_within(connection: sa.Connection, owner: str, conversation_id: str, max_items: int) -> None:
    """Over `max_items` items in the conversation's branches together, drop the oldest branches (never the newest)."""
    sizes = listed(connection, owner, conversation_id)
    total = sum(size["items"] for size in sizes)
    dropped = []
    for size in sizes[:-1]:
        if total <= max_items:
            break
        dropped.append(size["branch"])
        total -= size["items"]
    if dropped:
        connection.execute(branches.delete().where(of(owner, conversation_id), branches.c.branch.in_(dropped)))


def listed(connection: sa.Connection, owner: str, conversation_id: str) -> list[dict[str, Any]]:
    """The conversation's earlier branches, oldest first: {"branch", "items", "set_aside_at"}."""
    query = (
        sa.select(branches.c.branch, sa.func.count(), sa.func.max(branches.c.set_aside_at))
        .where(of(owner, conversation_id))
        .group_by(branches.c.branch)
        .order_by(branches.c.branch)
    )
    return [{"branch": n, "items": count, "set_aside_at": at} for n, count, at in connection.execute(query)]


def read(connection: sa.Connection, owner: str, conversation_id: str, branch: int) -> list[StoredItem]:
    """A branch's items, in order (none: no such branch)."""
    columns = (branches.c.item, branches.c.item_id, branches.c.format, branches.c.trace_id, branches.c.model)
    query = sa.select(*columns).where(of(owner, conversation_id), branches.c.branch == branch).order_by(branches.c.seq)
    return [
        StoredItem(json.loads(item), item_id, format, trace, model)
        for item, item_id, format, trace, model in connection.execute(query)
    ]


def delete(connection: sa.Connection, owner: str, conversation_id: str | None = None) -> int:
    """The branches of one conversation of the owner's, or (None) of all of them; how many items went."""
    where = of(owner, conversation_id) if conversation_id is not None else branches.c.owner == owner
    return connection.execute(branches.delete().where(where)).rowcount
