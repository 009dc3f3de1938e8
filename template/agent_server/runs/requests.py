# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The requests that become runs, which routes.py hands here once their body is parsed.

A POST to /invocations or /responses becomes a run (execute.py) when its body says `"background": true`, or
when it carries an `Idempotency-Key` header and conversation memory is on. Then:

| the request | the answer |
|---|---|
| `"background": true` | at once: the response object, `"status": "in_progress"`; the run goes on |
| `"background": true, "stream": true` | the run's stream (events.py); if the client goes, the run goes on |
| an `Idempotency-Key`, not background | as without the key (a stream, or the answer when it is done), from the run |

The same key again (same owner, same request) is the same run: its answer, or its stream from the start,
whether it is running or done; no model or tool runs again. The key with another request is a 409. A request the
app refuses (a bad body, a busy conversation) is answered at once as it would be without a run, and no run is kept.
A run names the conversation memory makes for it, unless its request names none and brings the model's own items (a
client that keeps its own history, memory/turns.py): then it keeps its request and its events, and no conversation.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response, StreamingResponse

from agent_server import identity, memory, model_choice
from agent_server.errors import BadRequest, Conflict, HttpError
from agent_server.memory import holder
from agent_server.runs import events, execute, store
from agent_server.runs.live import LiveRun, follow_stored
from agent_server.runs.recovery import run_hold_seconds
from agent_server.runs.store import FINAL, Run
from agent_server.turn.checks import checked_body

IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,200}")  # printable ASCII, no spaces: what a client's request id is
RUN_FIELDS = ("background", "stream")  # how the client wants the answer, not what the run runs


async def started_run(path: str, headers: Headers, body: Any) -> Response | None:
    """The answer of a request that becomes a run (its body parsed once, routes.py), or None for any other (a turn
    of its own). What it refuses is raised, for the app's handler to answer: nothing is run or kept."""
    key = headers.get("idempotency-key")
    try:
        run_body = _run_request(body, key)
        return None if run_body is None else await _run(headers, run_body, key, path)
    except HttpError as error:
        error.then = "Nothing was run; try again."
        raise


def _run_request(body: Any, key: str | None) -> dict[str, Any] | None:
    """The body of a request that becomes a run; None for any other (turn/checks.py checks those)."""
    if not isinstance(body, dict) or (key is None and "background" not in body):
        return None
    background = body.get("background", False)
    for field in RUN_FIELDS:
        if not isinstance(body.get(field, False), bool):
            raise BadRequest(f"'{field}' must be true or false.", param=field)
    if not memory.enabled():
        if background:
            raise BadRequest(
                "'background' runs are kept in conversation memory's database, and this app keeps none "
                "(MEMORY_BACKEND=none): send the request without it, or turn memory on.",
                param="background",
            )
        return None  # an idempotency key needs a store to be kept in: with memory off, the request runs as usual
    if key is not None and not IDEMPOTENCY_KEY.fullmatch(key):
        raise BadRequest("The Idempotency-Key header must be 1 to 200 printable ASCII characters, without spaces.")
    return body if background or key is not None else None


async def _run(headers: Headers, body: dict[str, Any], key: str | None, path: str) -> Response:
    owner = identity.owner_of(headers)
    if memory.has_references(body.get("input")):  # the run keeps the items they name, and runs in their conversation
        body = await memory.resolved_references(headers, body)
    conversation_id = memory.conversation_id_of(body)
    named = conversation_id
    answer_as = {field: body.pop(field, False) for field in RUN_FIELDS}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    sent = checked_body(body)[1] if conversation_id is None else None
    if conversation_id is None and sent is not None and memory.keeps_own_history(body, sent):
        # A client that keeps its own history: the run keeps its request and its events, no conversation (n runs
        # of a growing history would store it n times). Its answer names none.
        conversation_id = ""
    elif conversation_id is None:  # the run names the conversation memory makes for it, to resume it there
        conversation_id = str(uuid.uuid4())
        body["context"] = {**(body.get("context") or {}), "conversation_id": conversation_id}
    body[execute.PATH_KEY] = path  # each attempt goes where its client posted: it answers in that path's dialect
    await model_choice.pinned(path, body, owner, named)  # each attempt on the model its turn started with
    now = time.time()
    new = Run(
        f"resp_{uuid.uuid4().hex}", owner, conversation_id, key, digest, body, bool(answer_as["background"]),
        holder=holder(), heartbeat_until=now + run_hold_seconds(), created_at=now,
    )  # fmt: skip
    found = await memory.transact(store.create(new), write=True)
    if found.id != new.id:  # the key's run
        if found.body_hash != digest:
            message = f"The Idempotency-Key {key!r} was used for another request; use a new key for this one."
            raise Conflict(message)
        return await _answer(found, answer_as)
    live = execute.start(new, dict(headers.items()), [])
    refused = await live.started
    if refused is not None:  # refused before it ran: answered as the request would be without a run
        raise refused
    return await _answer(new, answer_as, live)


async def _answer(run: Run, answer_as: dict[str, Any], live: LiveRun | None = None) -> Response:
    live = live or execute.RUNNING.get(run.id)
    if answer_as["stream"]:
        return event_stream(follow(run, -1))
    if answer_as["background"]:
        current = live.run if live is not None else run
        return JSONResponse(events.response_object(current, live.output() if live else None))
    return await finished_answer(run)


async def finished_answer(run: Run) -> Response:
    """A keyed synchronous request's answer: the run's, once it ends (the app's error shape if it failed)."""
    live = execute.RUNNING.get(run.id)
    if live is not None:
        await live.ended.wait()
        run, output = live.run, live.output()
    else:
        while (found := await _read(run)) is not None and found.status not in FINAL:
            await asyncio.sleep(0.25)
        run, output = found or run, await stored_output(run.id)
    if run.error is not None:
        return JSONResponse(run.error["body"], status_code=run.error["status"])
    return JSONResponse(events.response_object(run, output))


async def stored_output(run_id: str) -> list[dict[str, Any]]:
    """The run's output: its last event's, once it ended (a stopped run's names what it had started), else its
    finished items so far."""
    found: list[str] = []
    cursor = -1
    while batch := await memory.transact(store.events_after(run_id, cursor)):
        found.extend(data for _seq, data in batch)
        cursor = batch[-1][0]
    last = json.loads(found[-1]) if found else {}
    output = last.get("response", {}).get("output") if last.get("type") in events.TERMINAL_EVENTS.values() else None
    if isinstance(output, list) and output:  # []: none, or left out past RUNS_MAX_EVENT_BYTES (live.push_last)
        return events.Output.of_response(last["response"])
    return events.output_items(found)


async def follow(run: Run, cursor: int) -> AsyncIterator[bytes]:
    """The run's events after `cursor` as server-sent events, live while it runs, then `[DONE]`."""
    live = execute.RUNNING.get(run.id)
    source = live.follow(cursor) if live is not None else follow_stored(run.id, run.owner, cursor, execute.RUNNING)
    async for framed in source:
        yield framed
    yield events.DONE


def event_stream(source: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(source, media_type="text/event-stream", headers={"cache-control": "no-store"})


async def _read(run: Run) -> Run | None:
    return await memory.transact(store.get(run.owner, run.id))
