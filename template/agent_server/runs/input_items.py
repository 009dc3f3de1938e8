# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""A run's input items as the Responses API lists them (`GET /responses/{id}/input_items`,
openai.types.responses ResponseItemList): a page of `limit` items (1 to 100, 20 by default) in `order` (`desc`
by default), after the item whose id is `after`, with `first_id`, `last_id` and `has_more`.

Each item has an id: its own when the client sent one (and no earlier item has it), else one made from the run's
id and the item's place, so a page's `after` finds the same item on every call. A message's text content is a
list of text parts, as the API's input message item holds it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from agent_server.errors import BadRequest, quoted

DEFAULT_LIMIT, MAX_LIMIT = 20, 100
_PREFIXES = {"message": "msg_", "function_call": "fc_", "function_call_output": "fco_", "reasoning": "rs_"}


def page(run_id: str, sent: Any, query: Mapping[str, str]) -> dict[str, Any]:
    """The page of the run's input items that the query asks for; a bad query is a 400 that names its parameter."""
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise BadRequest("'order' must be asc or desc.", param="order")
    limit = _limit(query.get("limit"))
    items = listed(run_id, sent)
    if order == "desc":
        items.reverse()
    start = 0
    if (after := query.get("after")) is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            raise BadRequest(f"'after' names no input item of this response: {quoted(after)}.", param="after")
        start = ids.index(after) + 1
    data = items[start : start + limit]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": start + limit < len(items),
    }


def listed(run_id: str, sent: Any) -> list[dict[str, Any]]:
    """The run's input items, oldest first, each with its id (and a message with its type and content parts)."""
    raw = [{"role": "user", "content": sent}] if isinstance(sent, str) else list(sent or [])
    items: list[dict[str, Any]] = []
    taken: set[str] = set()
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            continue  # a run's body passed the request's checks: every item is an object
        item = _message(item) if "type" not in item or item["type"] == "message" else dict(item)
        own = item.get("id")
        if not isinstance(own, str) or not own or own in taken:
            digest = hashlib.sha256(f"{run_id}\x00{index}".encode()).hexdigest()[:32]
            item["id"] = f"{_PREFIXES.get(str(item.get('type')), 'item_')}{digest}"
        taken.add(item["id"])
        items.append(item)
    return items


def _message(item: dict[str, Any]) -> dict[str, Any]:
    content = item.get("content")
    if isinstance(content, str):  # the API's message items hold a list of parts
        part = "output_text" if item.get("role") == "assistant" else "input_text"
        content = [{"type": part, "text": content, **({"annotations": []} if part == "output_text" else {})}]
    status = item.get("status") or "completed"
    return {**item, "type": "message", "content": content if content is not None else [], "status": status}


def _limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_LIMIT
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 3 and 1 <= int(raw) <= MAX_LIMIT):
        raise BadRequest(f"'limit' must be an integer from 1 to {MAX_LIMIT}.", param="limit")
    return int(raw)
