# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Share links: a read-only snapshot of a conversation, as it was when its owner shared it (shares_api.py).

`agent_shares` (store/share_schema.py) holds each link with its snapshot: the conversation's title and stored items,
copied at share time, so later turns are not in it. A link's token is never stored (its SHA-256 is), logged, or
shown again after it is made. Deleting the conversation, or DELETE /me, deletes its links; revoking one deletes it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from agent_server.memory import statements, turn_transactions
from agent_server.memory.records import StoredItem
from agent_server.store.schema import conversations, items
from agent_server.store.search_schema import words_of
from agent_server.store.share_schema import shares


@dataclass(frozen=True)
class Shared:
    title: str
    shown_name: str
    created_at: float
    items: list[StoredItem]


def hashed(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create(owner: str, conversation_id: str, shown_name: str, connection: sa.Connection) -> dict[str, Any] | None:
    """A new link to a snapshot of the conversation as it is now, with its token (shown this once); None if the
    owner has no such conversation."""
    title = connection.scalar(sa.select(conversations.c.title).where(
        statements.conversation_is(owner, conversation_id)
    ))  # fmt: skip
    if title is None:
        return None
    stored = turn_transactions.read_items(connection, owner, conversation_id)
    snapshot = json.dumps([{"item": each.item, "item_id": each.item_id} for each in stored])
    token, share_id, now = secrets.token_urlsafe(32), secrets.token_urlsafe(12), time.time()
    row = {"id": share_id, "token_hash": hashed(token), "owner": owner, "conversation_id": conversation_id,
           "shown_name": shown_name, "title": title, "items": snapshot, "created_at": now}  # fmt: skip
    connection.execute(shares.insert().values(row))
    return {**listed_row(row), "token": token}


def listed_row(row: Any) -> dict[str, Any]:
    mapping = row if isinstance(row, dict) else row._mapping
    names = ("id", "conversation_id", "title", "shown_name", "created_at")
    return {name: mapping[name] for name in names}


def of_owner(owner: str, connection: sa.Connection) -> list[dict[str, Any]]:
    """The owner's links, newest first, without their tokens (never kept)."""
    columns = (shares.c.id, shares.c.conversation_id, shares.c.title, shares.c.shown_name, shares.c.created_at)
    query = sa.select(*columns).where(shares.c.owner == owner).order_by(shares.c.created_at.desc(), shares.c.id)
    return [listed_row(row) for row in connection.execute(query)]


def revoke(owner: str, share_id: str, connection: sa.Connection) -> bool:
    return connection.execute(shares.delete().where(shares.c.owner == owner, shares.c.id == share_id)).rowcount > 0


def delete(connection: sa.Connection, owner: str, conversation_id: str | None = None) -> int:
    """The links to one conversation of the owner's, or (None) all the owner's links; how many went."""
    where = shares.c.owner == owner
    if conversation_id is not None:
        where = sa.and_(where, shares.c.conversation_id == conversation_id)
    return connection.execute(shares.delete().where(where)).rowcount


def read(token: str, connection: sa.Connection) -> Shared | None:
    """The snapshot a token names; None for any token that names none (revoked, deleted, made up)."""
    columns = (shares.c.title, shares.c.shown_name, shares.c.created_at, shares.c["items"])
    row = connection.execute(sa.select(*columns).where(shares.c.token_hash == hashed(token))).first()
    if row is None:
        return None
    title, shown_name, created_at, snapshot = row
    return Shared(title, shown_name, created_at, [StoredItem(e["item"], e["item_id"]) for e in json.loads(snapshot)])


def copy_to(owner: str, shared: Shared, connection: sa.Connection) -> str:
    """A new conversation of `owner` holding the snapshot's items (without their ids, which are the sharer's);
    its id."""
    conversation_id, now = str(uuid.uuid4()), time.time()
    connection.execute(conversations.insert().values(
        owner=owner, id=conversation_id, title=shared.title, created_at=now, updated_at=now
    ))  # fmt: skip
    rows = [
        {"owner": owner, "conversation_id": conversation_id, "seq": seq, "starts_turn": each.item.get("role") == "user",
         "format": each.format, "item": json.dumps(each.item), "item_id": None, "trace_id": None,
         "words": words_of(each.item)}
        for seq, each in enumerate(shared.items)
    ]  # fmt: skip
    if rows:
        connection.execute(items.insert(), rows)
    return conversation_id
