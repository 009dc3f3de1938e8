# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""`item_reference` items: the stored items they name, put in their place (with conversation memory on).

A Responses API client that keeps `store: true` (the Vercel AI SDK's OpenAI provider does, by default) sends the
model's earlier items by id: `{"type": "item_reference", "id": "msg_…"}` for a message, and the `mcp_call`'s id (a
tool call's `call_id`) for a tool the app ran, once for the call and once for its result. The app keeps every
answered item with its conversation, so it can answer them as the API does: each id names an item of one of the
caller's conversations, which becomes the turn's conversation when the request names none (the one holding most
of the ids, if a model server reused one; with no message's id, the latest holding a call by one of the ids). A
tool call's id brings the call and its output. An id the caller has no item for is a 400 that says how to send
items whole.
An item a turn set aside (branches.py) is still the caller's: a client that goes back to an earlier branch, by the ids
of its items, continues it (merge.py), rather than meeting a 400 it could never get past.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from agent_server.errors import BadRequest, quoted
from agent_server.identity import owner_of
from agent_server.memory.database import store
from agent_server.memory.turns import conversation_id_of
from agent_server.store.schema import branches, conversations
from agent_server.store.schema import items as items_table

REFERENCE = "item_reference"
SEND_WHOLE = "send the item itself (the AI SDK: providerOptions.openai.store false)"


def has_references(items: Any) -> bool:
    return isinstance(items, list) and any(isinstance(i, dict) and i.get("type") == REFERENCE for i in items)


async def resolved(headers: Mapping[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """The body with each `item_reference` replaced by the stored items it names, naming their conversation."""
    owner, sent = owner_of(headers), body["input"]
    ids = {index: _id_of(item, index) for index, item in enumerate(sent) if item.get("type") == REFERENCE}
    conversation_id = conversation_id_of(body) or await _conversation_of(owner, list(ids.values()))
    kept = await store()
    rows = await kept.items(owner, conversation_id) if conversation_id else None  # or Unavailable: 503
    named = _by_id(rows or [])
    if conversation_id and rows is not None and not set(ids.values()) <= set(named):
        # Some only an earlier branch holds: the branches, oldest first, under the conversation's own items.
        earlier: dict[str, list[dict[str, Any]]] = {}
        for about in await kept.branches(owner, conversation_id):
            earlier.update(_by_id(await kept.branch_items(owner, conversation_id, about["branch"])))
        named = {**earlier, **named}
    items, seen = [], set()
    for index, item in enumerate(sent):
        if index not in ids:
            items.append(item)
        elif ids[index] not in seen:  # a tool's call and its result name one mcp_call
            if ids[index] not in named:
                unknown = f"input[{index}]: an 'item_reference' names {quoted(ids[index])}, and you have no item"
                raise BadRequest(f"{unknown} by that id; {SEND_WHOLE}.", f"input[{index}]")
            items.extend(named[ids[index]])
            seen.add(ids[index])
    context = body["context"] if isinstance(body.get("context"), dict) else {}
    return {**body, "input": items, "context": {**context, "conversation_id": conversation_id}}


def _id_of(item: dict[str, Any], index: int) -> str:
    reference = item.get("id")
    if not isinstance(reference, str) or not 0 < len(reference) <= 200:
        message = f"input[{index}]: an 'item_reference' needs an 'id' of 1 to 200 characters."
        raise BadRequest(message, f"input[{index}]")
    return reference


async def _conversation_of(owner: str, ids: list[str]) -> str | None:
    """The caller's conversation that holds the most items by these ids (the latest of those that hold as many: a
    model server may give the same answer the same id in two conversations, as the offline model does); if none
    does, the one whose earlier branches do."""

    def find(connection: sa.Connection, table: sa.Table) -> str | None:
        holding = sa.and_(table.c.owner == owner, table.c.item_id.in_(ids))
        held = sa.func.count(sa.distinct(table.c.item_id))
        ours = sa.and_(conversations.c.owner == owner, conversations.c.id == table.c.conversation_id)
        query = (
            sa.select(table.c.conversation_id)
            .join(conversations, ours)
            .where(holding)
            .group_by(table.c.conversation_id, conversations.c.updated_at)
            .order_by(held.desc(), conversations.c.updated_at.desc())
            .limit(1)
        )
        return connection.execute(query).scalar()

    def found(connection: sa.Connection) -> str | None:
        by_item = find(connection, items_table) or find(connection, branches)
        return by_item or _of_calls(connection, owner, ids, items_table) or _of_calls(connection, owner, ids, branches)

    return await (await store()).run(found)


def _of_calls(connection: sa.Connection, owner: str, ids: list[str], table: sa.Table) -> str | None:
    """The caller's latest conversation with a tool call by one of these ids: an `mcp_call`'s id is its call's
    `call_id`, which is inside the stored item (as json.dumps writes it), not its item id."""
    named = [table.c.item.contains(f'"call_id": {json.dumps(call_id)}', autoescape=True) for call_id in ids]
    ours = sa.and_(conversations.c.owner == owner, conversations.c.id == table.c.conversation_id)
    query = (
        sa.select(table.c.conversation_id)
        .join(conversations, ours)
        .where(table.c.owner == owner, sa.or_(*named))
        .order_by(conversations.c.updated_at.desc())
        .limit(1)
    )
    return connection.execute(query).scalar()


def _by_id(rows: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """Each stored item under its id, and each tool call with its output under the call's id."""
    named: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        item = {**row.item, "id": row.item_id} if row.item_id else row.item
        call_id = item.get("call_id") if item.get("type") in ("function_call", "function_call_output") else None
        if isinstance(call_id, str):
            named.setdefault(call_id, []).append(item)
        if row.item_id and row.item_id != call_id:
            named[row.item_id] = [item]
    return named
