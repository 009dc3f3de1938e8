# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The caller's stored conversations: list, read, rename and delete them.

    GET    /conversations        {"conversations": [{"id", "title", "updated_at"}]}, newest first
    GET    /conversations?q=...  the ones whose title or messages hold the query's words, newest first, each with
                                 "snippet" (its first matching message, shortened) and "in_title" (search.py)
    GET    /conversations/{id}   {"id", "items": [...], "trace_ids": [...], "closed_approvals": {...}}: the items
                                 as the model sees them (a call that waits for the user's approval, with no
                                 output), and beside each the trace of the turn whose answer it is (null for
                                 what the client sent, or an untraced turn): feedback's trace_id; and the
                                 approval request it waits on, if it can no longer be answered, by its id:
                                 "expired" or "not_verified" (`closed_approvals`); and its earlier
                                 branches, oldest first (`branches`: [{"branch", "items", "set_aside_at"}]),
                                 and where they part ways along the items shown (`forks`: forks.py);
                                 with several models listed (LLM_MODELS), its `model` (null: the default), and
                                 beside each item the model that made it (`models`, null for the client's)
    GET    /conversations/{id}?branch=N   the same for earlier branch N, as it was when a turn replaced it
    PATCH  /conversations/{id}   {"title": "..."} -> {"id", "title"}: 1 to 200 characters, no control characters
    DELETE /conversations/{id}   204

A new conversation is titled from its first message; the title stays through edits and regenerations
(merge.py) until its owner renames it. An edit, a regenerate or a history that diverges keeps what it replaced as an
earlier branch (branches.py): the conversation's items are the branch its turns continue.

Each answers for the caller's own conversations only: another identity's id is a 404, as is
an id that does not exist, so the answer says nothing about other people's conversations.
With memory off (MEMORY_BACKEND=none) every one is a 404 that says so.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from agent_server import llm
from agent_server.errors import BadRequest, NotFound, Unavailable, quoted
from agent_server.history import ApiMode, Rendered, approvals, render_with_sources
from agent_server.identity import owner_of
from agent_server.json_body import one_text_field, small_json
from agent_server.memory import branches, cut_short, forks, search, statements, turn_transactions
from agent_server.memory.conversation_models import shown_model
from agent_server.memory.database import store
from agent_server.memory.records import StoredItem
from agent_server.store.settings import enabled

router = APIRouter(prefix="/conversations", include_in_schema=False)


@router.get("")
async def list_conversations(request: Request) -> Response:
    async def answer(owner: str) -> Response:
        query = request.query_params.get("q")
        if query is not None:  # search (search.py): any text is a query, read as words only
            matched = await (await store()).run(functools.partial(search.search, owner, query))
            return JSONResponse({"conversations": [each.shown() for each in matched]})
        found = await (await store()).conversations(owner)
        listed = [{"id": c.id, "title": c.title, "updated_at": c.updated_at} for c in found]
        return JSONResponse({"conversations": listed})

    return await for_caller(request, answer)


@router.get("/{conversation_id}")
async def read_conversation(conversation_id: str, request: Request) -> Response:
    async def answer(owner: str) -> Response:
        branch = branch_asked(request.query_params.get("branch"))
        kept = await store()
        rows = await kept.items(owner, conversation_id)
        if rows is None:
            raise _not_found(conversation_id)
        earlier = await kept.branches(owner, conversation_id)
        if branch is not None:
            rows = await kept.branch_items(owner, conversation_id, branch)
            if not rows:
                raise NotFound(f"Conversation {quoted(conversation_id)} has no branch {branch}.")
        stored = [_with_id(row) for row in rows]
        shown = waiting_shown(stored, llm.llm_settings().api)
        traces = [rows[entry.index].trace_id if 0 <= entry.index < len(rows) else None for entry in shown]
        # An answer with its citations, and its mark if it ended early.
        items = [cut_short.shown(entry.kept(), stored[entry.index]) if entry.index < len(stored) else entry.kept()
                 for entry in shown]  # fmt: skip
        closed = closed_approvals(items, conversation_id)
        found: dict[str, Any] = {"id": conversation_id, "items": items, "trace_ids": traces, "closed_approvals": closed}
        models = [rows[entry.index].model if 0 <= entry.index < len(rows) else None for entry in shown]
        found.update(await shown_model(owner, conversation_id, models))  # with LLM_MODELS: the model, each answer's
        forked = await _forks(owner, conversation_id, branch, _keys(rows, shown)) if earlier else []
        found |= {"branches": earlier, "forks": forked}
        return JSONResponse({**found, **({"branch": branch} if branch is not None else {})})

    return await for_caller(request, answer)


async def _forks(owner: str, conversation_id: str, shown: int | None, keys: list[str]) -> list[dict[str, Any]]:
    """Where the conversation's branches part ways along the one shown (forks.py)."""

    def every(connection: sa.Connection) -> dict[int | None, list[StoredItem]]:
        listed = branches.listed(connection, owner, conversation_id)
        paths = {
            about["branch"]: branches.read(connection, owner, conversation_id, about["branch"]) for about in listed
        }
        return {**paths, None: turn_transactions.read_items(connection, owner, conversation_id)}

    def compared(rows: list[StoredItem]) -> list[str]:
        return _keys(rows, waiting_shown([_with_id(row) for row in rows], llm.llm_settings().api))

    paths = {
        branch: keys if branch == shown else compared(rows)
        for branch, rows in (await (await store()).run(every)).items()
    }
    return forks.forks(paths, shown) if shown in paths else []


def _keys(rows: list[StoredItem], shown: list[Rendered]) -> list[str]:
    """Each shown item as forks.py compares them: as shown, with the id and trace of the row it stands for."""

    def row(entry: Rendered) -> StoredItem | None:
        return rows[entry.index] if 0 <= entry.index < len(rows) else None

    return [
        json.dumps([entry.kept(), *((r.item_id, r.trace_id) if (r := row(entry)) else (None, None))], sort_keys=True)
        for entry in shown
    ]


def _with_id(row: StoredItem) -> dict[str, Any]:
    return {**row.item, "id": row.item_id} if row.item_id else row.item


def branch_asked(value: str | None) -> int | None:
    """The `branch` query parameter: an earlier branch's number, or None; BadRequest if it cannot be one."""
    if value is None:
        return None
    if not value.isascii() or not value.isdigit() or not 0 < len(value) <= 9 or int(value) < 1:
        raise BadRequest("'branch' must be the number of an earlier branch (1, 2, ...), as 'branches' lists them.",
                         "branch")  # fmt: skip
    return int(value)


@router.patch("/{conversation_id}")
async def rename_conversation(conversation_id: str, request: Request) -> Response:
    async def answer(owner: str) -> Response:
        title = checked_title(await small_json(request, 4096, "rename"))

        def retitle(connection: sa.Connection) -> bool:
            named = statements.named(owner, conversation_id)
            return connection.execute(statements.RETITLE, {**named, "new_title": title}).rowcount > 0

        renamed = await (await store()).run(retitle, write=True)
        if not renamed:
            raise _not_found(conversation_id)
        return JSONResponse({"id": conversation_id, "title": title})

    return await for_caller(request, answer)


MAX_TITLE = 200  # store/schema.py's title column


def checked_title(body: Any) -> str:
    """The new title of a PATCH body, its ends stripped; BadRequest naming what is wrong."""
    return one_text_field(body, "title", MAX_TITLE)


@router.delete("/{conversation_id}")
async def delete_conversation(conversation_id: str, request: Request) -> Response:
    async def answer(owner: str) -> Response:
        deleted = await (await store()).delete(owner, conversation_id)
        if not deleted:
            raise _not_found(conversation_id)
        return Response(status_code=204)

    return await for_caller(request, answer)


async def for_caller(
    request: Request, answer: Callable[[str], Awaitable[Response]], kept: str = "conversations", what: str = ""
) -> Response:
    """`answer` for the caller, with memory on (the routes of its `kept`: conversations, memories); an Unavailable
    store names `what` is unavailable (the app's handler answers every HttpError)."""
    if not enabled():
        raise NotFound(f"This app keeps no {kept} (MEMORY_BACKEND=none).")
    try:
        return await answer(owner_of(request.headers))
    except Unavailable as error:
        error.what = what or error.what
        raise


def waiting_shown(stored: list[dict[str, Any]], api: ApiMode) -> list[Rendered]:
    """The stored items as the model sees them (each with the stored item it stands for), except that the call the
    conversation ends on, when it waits for the user's approval, keeps no output: the render would answer it as
    interrupted, and a client (the chat page) would not ask the user again."""
    shown = render_with_sources(stored, api)
    answered = {item.get("call_id") for item in stored if item.get("type") == "function_call_output"}
    last = shown[-1].item if shown else {}
    call_id = str(last.get("call_id", ""))
    if (
        last.get("type") == "function_call_output"
        and call_id.startswith(approvals.ID_PREFIX)
        and call_id not in answered
    ):
        shown.pop()
    # The model's reasoning, kept for the page only (turns.py): shown where it was, as the live answer showed it.
    kept = [Rendered(index, item) for index, item in enumerate(stored) if item.get("type") == "reasoning"]
    return sorted([*shown, *kept], key=lambda entry: entry.index) if kept else shown


def closed_approvals(items: list[dict[str, Any]], conversation_id: str) -> dict[str, str]:
    """The approval request the conversation waits on, by its id, if it can no longer be answered: "expired"
    (older than MCP_APPROVAL_MAX_AGE_HOURS) or "not_verified" (signed with a key the app no longer has). The chat
    page says so on the request instead of offering Approve and Deny."""
    last = items[-1] if items else {}
    call_id = str(last.get("call_id", ""))
    if last.get("type") != "function_call" or not call_id.startswith(approvals.ID_PREFIX):
        return {}
    request = {"id": call_id, "name": last.get("name"), "arguments": last.get("arguments")}
    why = approvals.refusal(items[:-1], request, (conversation_id, None))  # made in it, or in its first turn
    return {} if why is None else {call_id: "expired" if why == approvals.EXPIRED else "not_verified"}


def _not_found(conversation_id: str) -> NotFound:
    return NotFound(f"You have no conversation {quoted(conversation_id)}.")
