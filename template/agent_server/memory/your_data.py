# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Everything the app keeps about the caller, to take away or to delete.

    GET    /me/export   one JSON document, streamed: {"owner", "exported_at", "about", "conversations": [{"id",
                        "title", "created_at", "updated_at", "items", "trace_ids", "branches": [{"branch",
                        "set_aside_at", "items", "trace_ids"}]}], "runs": [{..., "request", "events"}],
                        "memories": [...], "approval_answers": [...], "shares": [...] (the caller's share links,
                        without their tokens), "trace_ids": [...]}
    DELETE /me          {"deleted": {"conversations", "items", "branch_items", "runs", "run_events", "memories",
                        "approval_answers", "waiting_turns", "shares", "traces"}, "about"}: all of it, in one
                        transaction (the traces, in the trace store, after it)

Both answer for the caller alone (identity.owner_of), and read or delete by owner in every statement. Each answer's
MLflow trace (the turn's inputs and outputs, and the feedback given on it, as its `user_feedback` assessment) is
kept in MLflow: the export lists them by id in `trace_ids`, and DELETE /me deletes the caller's traces from the
trace store the app writes to (observability/your_traces.py), counting them in `deleted.traces`; `about` names what
the app cannot delete there (on Databricks, the copies the workspace keeps). A run still running is stopped by its
process, on any instance, at its next write or heartbeat, and writes nothing after the delete (runs/store.py's
fence). With memory off nothing is kept server-side but those traces, and the answers say so. Each request is
logged as one line of counts, no content. The export reads one conversation (or run) a transaction: a turn that
ends during it may or may not be in it.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from agent_server.identity import owner_of
from agent_server.memory import branches, facts, shares, turn_transactions
from agent_server.memory.database import store
from agent_server.memory.store import Store, StoredItem, Unavailable
from agent_server.observability import your_traces
from agent_server.store.schema import approval_answers, conversations, items, run_events, runs, turn_queue
from agent_server.store.settings import enabled

logger = logging.getLogger("agent_server.memory")
router = APIRouter(prefix="/me", include_in_schema=False)

TRACES = (
    "Each answer's MLflow trace holds the turn's inputs and outputs, and any feedback given on it (its user_feedback "
    "assessment). Traces are kept in MLflow, not in this app's store: `trace_ids` lists them, and DELETE /me deletes "
    "them from the app's trace store (TRACES_MAX_AGE_DAYS prunes the local store meanwhile)."
)
NOTHING_KEPT = "This app keeps nothing about you server-side (MEMORY_BACKEND=none): your client keeps your chats. "
EVENTS_PAGE = 500


@router.get("/export")
async def export(request: Request) -> Response:
    owner = owner_of(request.headers)
    kept = await store() if enabled() else None
    about = TRACES + your_traces.platform_note()
    head = {"owner": owner, "exported_at": time.time(), "about": about if kept else NOTHING_KEPT + about}
    if kept is None:
        empty: dict[str, list[Any]] = dict.fromkeys(
            ("conversations", "runs", "memories", "approval_answers", "shares"), []
        )
        empty["trace_ids"] = []
        logger.info("memory: a user exported their data: nothing is kept (MEMORY_BACKEND=none)")
        return JSONResponse({**head, **empty})
    try:
        listed = await kept.run(functools.partial(_listed, owner))  # a failed store is a 503 before the stream starts
    except Unavailable as error:
        error.what = "Memory"
        raise
    return StreamingResponse(
        _document(kept, owner, head, *listed),
        media_type="application/json",
        headers={"content-disposition": 'attachment; filename="my-data.json"'},
    )


async def _document(
    kept: Store, owner: str, head: dict[str, Any], conversation_rows: list[Any], run_ids: list[str]
) -> AsyncIterator[bytes]:
    """The export, a conversation or a run at a time. A store that fails midway ends the document unclosed, so
    that no client takes what it got for the whole."""
    traces: list[str] = []
    yield json.dumps(head)[:-1].encode() + b', "conversations": ['
    for n, row in enumerate(conversation_rows):
        stored, earlier = await kept.run(functools.partial(_conversation, owner, row.id))
        every = [*stored, *(each for _, rows in earlier for each in rows)]
        traces += [trace for each in every if (trace := each.trace_id)]
        conversation = {**dict(row._mapping), **_shown(stored)}
        conversation["branches"] = [{**about, **_shown(rows)} for about, rows in earlier]
        yield (b", " if n else b"") + json.dumps(conversation).encode()
    yield b'], "runs": ['
    separator = b""
    for run_id in run_ids:
        run = await kept.run(functools.partial(_run, owner, run_id))
        if run is None:  # pruned since it was listed
            continue
        traces += [run["trace_id"]] if run["trace_id"] else []
        yield separator + json.dumps(run).encode()
        separator = b", "
    found = await kept.run(functools.partial(facts.newest, owner, 1_000_000))
    answered = await kept.run(functools.partial(_approval_answers, owner))
    tail = {
        "memories": [fact.shown() for fact in found],
        "approval_answers": answered,
        "shares": await kept.run(functools.partial(shares.of_owner, owner)),
        "trace_ids": sorted(set(traces)),
    }
    yield b"], " + json.dumps(tail)[1:].encode()
    logger.info(
        "memory: a user exported their data: %d conversations, %d runs, %d memories",
        len(conversation_rows), len(run_ids), len(found),
    )  # fmt: skip


def _conversation(owner: str, conversation_id: str, connection: sa.Connection) -> tuple[list[StoredItem], list[Any]]:
    """A conversation's items, and each earlier branch's ({"branch", "set_aside_at"} and its items), in one read."""
    stored = turn_transactions.read_items(connection, owner, conversation_id)
    earlier = [
        ({"branch": about["branch"], "set_aside_at": about["set_aside_at"]},
         branches.read(connection, owner, conversation_id, about["branch"]))
        for about in branches.listed(connection, owner, conversation_id)
    ]  # fmt: skip
    return stored, earlier


def _shown(stored: list[StoredItem]) -> dict[str, list[Any]]:
    """Items as the export shows them, with each answer's trace beside it, and its model (LLM_MODELS; else None)."""
    shown = [{**each.item, "id": each.item_id} if each.item_id else each.item for each in stored]
    return {"items": shown, "trace_ids": [each.trace_id for each in stored], "models": [each.model for each in stored]}


def _listed(owner: str, connection: sa.Connection) -> tuple[list[Any], list[str]]:
    columns = [conversations.c.id, conversations.c.title, conversations.c.created_at, conversations.c.updated_at,
               conversations.c.model]  # fmt: skip
    oldest_first = (conversations.c.created_at, conversations.c.id)
    found = connection.execute(sa.select(*columns).where(conversations.c.owner == owner).order_by(*oldest_first))
    run_ids = connection.scalars(sa.select(runs.c.id).where(runs.c.owner == owner).order_by(runs.c.created_at))
    return list(found), list(run_ids)


def _run(owner: str, run_id: str, connection: sa.Connection) -> dict[str, Any] | None:
    """A run of the owner's, with its request and its stream's events."""
    columns = [runs.c.id, runs.c.conversation_id, runs.c.status, runs.c.background, runs.c.idempotency_key]
    columns += [runs.c.body, runs.c.error, runs.c.trace_id, runs.c.created_at, runs.c.updated_at]
    row = connection.execute(sa.select(*columns).where(runs.c.owner == owner, runs.c.id == run_id)).first()
    if row is None:
        return None
    run = dict(row._mapping)
    run["request"], run["error"] = json.loads(run.pop("body")), json.loads(run["error"]) if run["error"] else None
    events = sa.select(run_events.c.data).where(run_events.c.run_id == run_id).order_by(run_events.c.seq)
    run["events"] = [json.loads(data) for data in connection.scalars(events)]
    return run


def _approval_answers(owner: str, connection: sa.Connection) -> list[dict[str, Any]]:
    """The owner's answers to approval requests (the first answer to each is final: approval_store.py)."""
    columns = [approval_answers.c.approval_id, approval_answers.c.approved, approval_answers.c.answered_at]
    query = sa.select(*columns).where(approval_answers.c.owner == owner).order_by(approval_answers.c.answered_at)
    return [dict(row._mapping) for row in connection.execute(query)]


@router.delete("")
async def delete_everything(request: Request) -> Response:
    owner = owner_of(request.headers)
    try:
        deleted = await (await store()).run(functools.partial(_delete, owner), write=True) if enabled() else {}
    except Unavailable as error:
        error.what, error.then = "Memory", "Nothing was deleted. Try again."
        raise
    traces = await run_in_threadpool(your_traces.delete_traces_of, owner)  # after the store: no turn adds one now
    kinds: tuple[str, ...] = ("conversations", "items", "branch_items", "runs", "run_events", "memories")
    kinds += ("approval_answers", "waiting_turns", "shares")
    counts = {name: deleted.get(name, 0) for name in kinds} | {"traces": traces.count}
    logger.info("memory: a user deleted their data: %s", ", ".join(f"{n} {name}" for name, n in counts.items()))
    return JSONResponse({"deleted": counts, "about": traces.about if enabled() else NOTHING_KEPT + traces.about})


def _delete(owner: str, connection: sa.Connection) -> dict[str, int]:
    """Every row of the owner's, in one transaction; how many of each kind."""
    theirs = list(connection.scalars(sa.select(runs.c.id).where(runs.c.owner == owner)))
    return {
        "items": connection.execute(items.delete().where(items.c.owner == owner)).rowcount,
        "branch_items": branches.delete(connection, owner),
        "conversations": connection.execute(conversations.delete().where(conversations.c.owner == owner)).rowcount,
        # The runs first: a live run's write under way holds its row until its events are in, which go next; a
        # write after this finds no row and is refused (runs/store.py's fence), and its process stops the run.
        "runs": connection.execute(runs.delete().where(runs.c.owner == owner)).rowcount,
        "run_events": sum(
            connection.execute(run_events.delete().where(run_events.c.run_id.in_(theirs[n : n + 500]))).rowcount
            for n in range(0, len(theirs), 500)
        ),
        "memories": facts.forget_all(owner, connection),
        "shares": shares.delete(connection, owner),
        "approval_answers": connection.execute(
            approval_answers.delete().where(approval_answers.c.owner == owner)
        ).rowcount,
        # Places of turns waiting for a busy conversation (queue.py): a waiter whose process died leaves its own.
        "waiting_turns": connection.execute(turn_queue.delete().where(turn_queue.c.owner == owner)).rowcount,
    }
