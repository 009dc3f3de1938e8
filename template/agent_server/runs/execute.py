# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Running a run: its turn, served on a task of its own by the same functions that serve `"stream": true` (turn/:
its share, its place, prepare, the events), but no client's connection holds it. Each event of the turn becomes
one of the run's (live.py), on /responses in the API's shapes.

A run that a process died in is resumed (recovery.py): the request again, with the items the run had finished
(its tool calls and their outputs among them) added to its input, so the model goes on from there and no tool
whose output is stored runs again. A call whose output was not stored is answered as interrupted (the history's
orphan-call rule); the model may make it again. After MAX_ATTEMPTS starts the run fails, saying why. A run whose
process died after its turn was stored, before its own end was, finds its items in its conversation: it ends with
them, and neither the model nor the conversation gets the turn again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from agent_server import config, memory
from agent_server.errors import HttpError, error_body, error_of, failure_answer
from agent_server.history import INTERRUPTED_CALL_OUTPUT
from agent_server.memory import Unavailable, holder
from agent_server.runs import events, store
from agent_server.runs.live import LiveRun, StreamTooLong, error_event
from agent_server.runs.store import Run
from agent_server.scheduling import turn_starts
from agent_server.turn import events as serve_events
from agent_server.turn import prepare, rate_limits
from agent_server.turn.responses_api import shaper
from agent_server.turn.responses_shapes import interrupted_calls, items_announced, unfinished
from agent_server.turn_context import INVOCATIONS, RESPONSES, RunAttempt, TurnContext

logger = logging.getLogger("agent_server.runs")

MAX_ATTEMPTS = 3
# The path the run's client posted to, kept in its body: each attempt goes there, so a run answers in the dialect of
# its path (turn/responses_api.py). A run kept before there was one ran on /invocations' format.
PATH_KEY = "agent_server.path"
RUNNING: dict[str, LiveRun] = {}  # this process's runs, by id
SERVER_STOPPED = "The server stopped while this run ran"
ANSWERS = ("message", "mcp_approval_request")  # what a turn ends on: stored only when its turn is (_turn_stored)


def start(run: Run, headers: Mapping[str, str], earlier: list[str]) -> LiveRun:
    """Run `run` on a task of its own, after its `earlier` events (those of the attempts before this one)."""
    live = LiveRun(run, earlier)
    RUNNING[run.id] = live
    live.task = asyncio.get_running_loop().create_task(_attempt(live, dict(headers)), name=f"run {run.id}")
    return live


def attempt_body(run: Run, finished: list[dict[str, Any]]) -> tuple[dict[str, Any], int]:
    """The request as this attempt sends it: the run's own, streamed, with what earlier attempts finished; and the
    index in its `input` where those finished items start (turn_context.RunAttempt.continues_from)."""
    body = dict(run.body)
    body.pop(PATH_KEY, None)
    sent = body.get("input")
    own = [{"role": "user", "content": sent}] if isinstance(sent, str) else list(sent or [])
    body["input"] = [*own, *finished]
    body["stream"] = True
    return body, len(own)


def unanswered_calls(live: LiveRun, since: int = 0) -> list[dict[str, Any]]:
    """Tool calls started (from the run's `since`th on) whose outputs were not stored: sent as calls with no output,
    which the render answers as interrupted, so the model is told, and no tool runs again unasked."""
    done = {item.get("call_id") for item in live.output() if item.get("type") == "function_call_output"}
    done |= {item.get("id") for item in live.output() if item.get("type") == "mcp_call"}  # /responses' (its call id)
    return [call for call in live.run.started_calls[since:] if call.get("call_id") not in done]


def interrupted(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each call, then its output saying it was interrupted (the history's orphan-call rule, made explicit)."""
    return [
        item
        for call in calls
        for item in (
            call,
            {"type": "function_call_output", "call_id": call.get("call_id"), "output": INTERRUPTED_CALL_OUTPUT},
        )
    ]


def stopped_output(live: LiveRun, first_event: int = 0, first_call: int = 0) -> list[dict[str, Any]]:
    """What the run produced from its `first_event`th event on, as it stopped: its finished items, the text of a
    message it had not finished, and each call it had started (from its `first_call`th on) with no output,
    answered as interrupted."""
    return [*events.partial_items(live.events[first_event:]), *interrupted(unanswered_calls(live, first_call))]


def stopped_calls(live: LiveRun, path: str) -> list[dict[str, Any]]:
    """The end of each call a cancelled run left running, as its stream's own events (tool progress had announced
    it): the call and its output saying it was interrupted, as the turn keeps them; on /responses its `mcp_call`."""
    ended = interrupted(unanswered_calls(live))
    if path == RESPONSES:
        return interrupted_calls(live.events, ended)
    return [{"type": "response.output_item.done", "item": item} for item in ended]


def identity_headers(owner: str) -> dict[str, str]:
    """Headers that name `owner` to memory (identity.owner_of), for a run resumed with no request of its own."""
    deployment = config.settings().deployment
    if deployment.on_databricks_apps:
        return {"x-forwarded-user": owner}
    header = memory.memory_settings().user_header
    return {header: owner} if header else {}


async def _attempt(live: LiveRun, headers: dict[str, str]) -> None:
    run = live.run
    if await _turn_stored(run, live.output()):
        logger.info("runs: run %s stored its turn before its process stopped: it ends with it", run.id)
        run.status = "cancelled" if run.cancel_requested else "completed"
        await end(live)
        return
    finished = [*live.output(), *unanswered_calls(live)]
    body, continues_from = attempt_body(run, finished)
    first_event, first_call = len(live.events), len(run.started_calls)  # what this attempt adds comes after these
    path = str(run.body.get(PATH_KEY, INVOCATIONS))

    def stopped() -> list[dict[str, Any]] | None:  # the turn's end keeps it, if the client cancels the run
        return stopped_output(live, first_event, first_call) if live.cancel_requested else None

    attempt = RunAttempt(
        live.tool_call_started, continues_from if finished else None, stopped, items_announced(live.events)
    )
    try:
        async with rate_limits.turn_share(headers):
            place = await turn_starts.take_place()  # the streams running go first (turn_starts.py)
            try:
                context = await prepare(path, headers, body, attempt)
                context.return_trace_id = True  # the run's response names its trace
                await _begun(live)
                await _served(live, context)
            finally:
                place.give_back()
        run.status = "failed" if run.error else "completed"
    except HttpError as error:
        if not live.started.done():  # refused before it ran: the request that made it gets this answer, no run kept
            live.started.set_result(error)
            await _forget(live)
            return
        run.status, run.error = "failed", _error(*error_of(error))
    except StreamTooLong as error:
        run.status, run.error = "failed", _error(413, error_body(413, str(error)))
    except asyncio.CancelledError:
        if live.handing_over:
            await _hand_over(live)
            raise
        run.status = "cancelled"  # the turn's end kept what it had produced as its turn (turn_context.RunAttempt)
        with contextlib.suppress(StreamTooLong):  # past the limit: the last event still names each call stopped
            for event in stopped_calls(live, path):
                await live.push(event)
        await end(live, stopped_output(live))
        return
    except Exception as error:  # a bug in the app: the run fails, saying so, rather than staying in progress
        logger.exception("runs: run %s failed", run.id)
        run.status, run.error = "failed", _error(500, error_body(500, f"The run failed: {error}"))
    await end(live)


async def _begun(live: LiveRun) -> None:
    """The run is under way: its first events (a resumed run has them already), and the end of the message its
    stop cut off."""
    run = live.run
    if not live.started.done():
        live.started.set_result(None)
    run.status = "in_progress"
    if not live.events:
        await live.push(events.created(run))
        await live.push({**events.created(run), "type": "response.in_progress"})
        await live.flush()  # stored as its first is: a stream resumed after a crash starts as any does
    for event in unfinished(live.events):
        await live.push(event)


async def _served(live: LiveRun, context: TurnContext) -> None:
    """The turn's events, each one of the run's (on /responses in the API's shapes); a failure is the run's error."""
    shapes = shaper(context) if context.path == RESPONSES else None
    try:
        async for event in serve_events(context):
            for out in shapes.take(event) if shapes is not None else (event,):
                await live.push(out)
    except (StreamTooLong, asyncio.CancelledError):
        raise
    except Exception as error:
        status, body, _headers = failure_answer(error, context.sources, context.model)
        if status == 500:
            logger.exception("runs: the turn of run %s failed", live.run.id)
        live.run.error = _error(status, body)
        await live.push(error_event(status, body))
    for out in shapes.finish() if shapes is not None else ():
        await live.push(out)
    live.run.trace_id = context.trace_id or live.run.trace_id


def _error(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"status": status, "body": body}


async def _turn_stored(run: Run, finished: list[dict[str, Any]]) -> bool:
    """Was the turn of this (resumed) run stored? Its conversation holds each answer the run had finished (its
    messages and approval requests, whose ids the model or the app made for this run; not a tool call's output,
    which /responses names by the id of the approval request an earlier turn stored)."""
    ids = [item["id"] for item in finished if item.get("type") in ANSWERS and isinstance(item.get("id"), str)]
    if not ids or not run.conversation_id:
        return False
    try:
        return await memory.holds_all(run.owner, run.conversation_id, ids)
    except Unavailable:  # the attempt's turn finds the database down too, and says so
        return False


async def end(live: LiveRun, output: list[dict[str, Any]] | None = None) -> None:
    """The run's last event, written with its status and its `output` (default: its finished items); those who
    wait on it are told."""
    run = live.run
    await live.push_last(live.output() if output is None else output)  # even past RUNS_MAX_EVENT_BYTES
    await live.flush_all()
    if not live.started.done():  # it failed before it began: the request that made it answers with the run
        live.started.set_result(None)
    try:
        await memory.transact(store.finish(run), write=True)
    except Unavailable as error:  # its heartbeat stops: another process finds it and ends it
        logger.warning("runs: could not store the end of run %s: %s", run.id, error)
    live.close()
    RUNNING.pop(run.id, None)


async def fail_stopped(run: Run, earlier: list[str], reason: str) -> None:
    """A run that cannot be resumed ends as failed, saying the server stopped."""
    live = LiveRun(run, earlier)
    run.status, run.error = "failed", {"status": 503, "body": error_body(503, f"{SERVER_STOPPED}; {reason}")}
    await end(live)


async def _forget(live: LiveRun) -> None:
    RUNNING.pop(live.run.id, None)
    live.close()
    with contextlib.suppress(Unavailable):
        await memory.transact(store.delete(live.run.id), write=True)


async def _hand_over(live: LiveRun) -> None:
    await live.flush_all()
    with contextlib.suppress(Unavailable):
        await memory.transact(store.hand_over(holder(), [live.run.id]), write=True)
    live.close()
    RUNNING.pop(live.run.id, None)
