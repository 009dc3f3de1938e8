# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""A run, read, followed and cancelled, by its owner only (another identity's run is a 404, as an unknown id is):

    GET  /responses/{id}                                  the response object: status, output, error, trace id
    GET  /responses/{id}?stream=true&starting_after=N     the run's events after N, then live until it ends
    GET  /responses/{id}/input_items?limit=&after=&order=  its input items, as the client sent them, each with an id,
                                                          a page at a time (the chat page shows a resumed turn's
                                                          message, attachments too)
    POST /responses/{id}/cancel                           stop it; what it had produced is kept as a turn

A failed run's GET answers with the status the synchronous request would have had, in the app's error shape
(with the response's `id` and `status` beside `error`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from agent_server import memory
from agent_server.errors import BadRequest, NotFound, quoted
from agent_server.identity import owner_of
from agent_server.memory import enabled
from agent_server.runs import events, execute, input_items, store
from agent_server.runs.live import LiveRun
from agent_server.runs.requests import event_stream, follow, stored_output
from agent_server.runs.store import FINAL, Run

router = APIRouter(prefix="/responses", include_in_schema=False)
CANCEL_WAIT_SECONDS = 10.0
CURSOR = re.compile(r"-1|[0-9]{1,10}")


@router.get("/{run_id}")
async def read_run(run_id: str, request: Request) -> Response:
    run = await _owned(run_id, request)
    query = request.query_params
    stream = query.get("stream", "false").lower()
    if stream not in ("true", "false"):
        raise BadRequest("'stream' must be true or false.", param="stream")
    if stream == "true":
        return event_stream(follow(run, _cursor(query.get("starting_after"))))
    if "starting_after" in query:
        raise BadRequest("'starting_after' is a cursor in the run's stream: use it with stream=true.")
    return await _described(run)


@router.get("/{run_id}/input_items")
async def read_run_input(run_id: str, request: Request) -> Response:
    """The Responses API's list of a response's input items, a page at a time (runs/input_items.py)."""
    run = await _owned(run_id, request)
    return JSONResponse(input_items.page(run.id, run.body.get("input"), request.query_params))


@router.post("/{run_id}/cancel")
async def cancel_run(run_id: str, request: Request) -> Response:
    run = await _owned(run_id, request, read=False)
    if run.status not in FINAL:
        live = _mine(run)
        if live is not None and live.task is not None:
            live.cancel_requested = True
            live.task.cancel()
        else:  # another process runs it: its next heartbeat stops it
            await memory.transact(store.request_cancel(run.owner, run.id), write=True)
        await _until_ended(run)
    return await _described(await _owned(run_id, request))


async def _owned(run_id: str, request: Request, read: bool = True) -> Run:
    """The caller's run: the one this process runs, while the database says it still does; else the stored one. A
    run its owner deleted is a 404 at once, whichever process runs it (its process stops it: live.LiveRun.lose).
    `read=False`: this process's run as it has it, without waiting on the database (a cancel, whose writes are
    fenced all the same)."""
    if not enabled():
        raise NotFound("This app keeps no runs (MEMORY_BACKEND=none).")
    owner = owner_of(request.headers)
    live = execute.RUNNING.get(run_id)
    if not read and live is not None and not live.lost and live.run.owner == owner:
        return live.run
    found = await memory.transact(store.get(owner, run_id))
    if found is None:
        raise NotFound(f"You have no response {quoted(run_id)}.")
    live = _live(found)
    return live.run if live is not None else found


def _live(found: Run) -> LiveRun | None:
    """This process's live run of `found`, while the database names it (its holder and start) as the run's."""
    live = execute.RUNNING.get(found.id)
    if live is None or live.lost or live.run.owner != found.owner:
        return None
    return live if (found.holder, found.attempts) == (live.run.holder, live.run.attempts) else None


def _mine(run: Run) -> LiveRun | None:
    """The live run `_owned` gave, if it gave this process's."""
    live = execute.RUNNING.get(run.id)
    return live if live is not None and live.run is run else None


async def _described(run: Run) -> Response:
    live = _mine(run)
    output = live.output() if live is not None else await stored_output(run.id)
    described = events.response_object(run, output)
    if run.error is not None and run.status == "failed":  # not before its end: a run that saw an error may still be
        return JSONResponse({**described, **run.error["body"]}, status_code=run.error["status"])  # ending
    return JSONResponse(described)


async def _until_ended(run: Run) -> None:
    live = _mine(run)
    if live is not None:
        with contextlib.suppress(TimeoutError):  # answered with the status it has by then
            await asyncio.wait_for(live.ended.wait(), CANCEL_WAIT_SECONDS)
        return
    loop = asyncio.get_running_loop()
    due = loop.time() + CANCEL_WAIT_SECONDS
    while loop.time() < due:
        found = await memory.transact(store.get(run.owner, run.id))
        if found is None or found.status in FINAL:
            return
        await asyncio.sleep(0.25)


def _cursor(raw: str | None) -> int:
    """A sequence number, or -1: plain ASCII digits (Python's int() takes "1_0", " 1" and other scripts' digits),
    and no more than the database's column holds (a larger one failed there, mid-stream)."""
    if raw is None:
        return -1
    if not CURSOR.fullmatch(raw) or int(raw) > store.MAX_SEQUENCE_NUMBER:
        message = f"'starting_after' must be a sequence number: an integer from -1 to {store.MAX_SEQUENCE_NUMBER}."
        raise BadRequest(message, "starting_after")
    return int(raw)
