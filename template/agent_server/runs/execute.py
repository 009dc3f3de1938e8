# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Running a run: the request goes through the app as a streaming request of its own, on a task of its own,
so it is served exactly as `"stream": true` serves it (the request guard, memory, MCP, the handlers) but no
client's connection holds it. Each event it streams becomes one of the run's (live.py).

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

from starlette.types import ASGIApp, Message, Scope

from agent_server import config, memory
from agent_server.errors import client_param, error_body, status_and_message
from agent_server.history import INTERRUPTED_CALL_OUTPUT
from agent_server.memory import HOLDER, Unavailable
from agent_server.middleware import RUN_ATTEMPT_KEY, STATE_KEY, replaying
from agent_server.middleware.request_state import RunAttempt
from agent_server.middleware.responses_dialect import PATH as RESPONSES_PATH
from agent_server.middleware.responses_shapes import OUTPUT_INDEX_KEY, interrupted_calls, items_announced, unfinished
from agent_server.runs import events, store
from agent_server.runs.live import LiveRun, StreamTooLong, error_event, parsed
from agent_server.runs.store import Run

logger = logging.getLogger("agent_server.runs")

MAX_ATTEMPTS = 3
NOT_PASSED_ON = ("content-length", "idempotency-key")  # an attempt's body is its own; its key is the run's
# The path the run's client posted to, kept in its body: each attempt goes there, so a run answers in the dialect of
# its path (responses_dialect.py). A run kept before there was one ran on /invocations' format.
PATH_KEY = "agent_server.path"
RUNNING: dict[str, LiveRun] = {}  # this process's runs, by id
SERVER_STOPPED = "The server stopped while this run ran"
ANSWERS = ("message", "mcp_approval_request")  # what a turn ends on: stored only when its turn is (_turn_stored)

_app: ASGIApp | None = None  # the app below the runs' middleware, which runs each attempt
_scope: dict[str, Any] = {}  # what a synthetic request's scope needs of the app's (its app, its state)


def serve_with(app: ASGIApp) -> None:
    global _app
    _app = app


def remember_scope(scope: Scope) -> None:
    """The app's own scope keys, for the requests of runs resumed when no request is there to copy."""
    if not _scope:
        _scope.update({key: scope[key] for key in ("app", "state", "root_path") if key in scope})


def start(run: Run, headers: Mapping[str, str], earlier: list[str]) -> LiveRun:
    """Run `run` on a task of its own, after its `earlier` events (those of the attempts before this one)."""
    live = LiveRun(run, earlier)
    RUNNING[run.id] = live
    live.task = asyncio.get_running_loop().create_task(_attempt(live, dict(headers)), name=f"run {run.id}")
    return live


def attempt_body(run: Run, finished: list[dict[str, Any]]) -> tuple[dict[str, Any], int]:
    """The request as this attempt sends it: the run's own, streamed, with what earlier attempts finished; and the
    index in its `input` where those finished items start (request_state.RunAttempt.continues_from)."""
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
    if path == RESPONSES_PATH:
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
    path = str(run.body.get(PATH_KEY, "/invocations"))

    def stopped() -> list[dict[str, Any]] | None:  # the request guard's, if the client cancels the run
        return stopped_output(live, first_event, first_call) if live.cancel_requested else None

    attempt = RunAttempt(live.tool_call_started, continues_from if finished else None, stopped, body)
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        OUTPUT_INDEX_KEY: items_announced(live.events),
        "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 0), **_scope, RUN_ATTEMPT_KEY: attempt,
        "headers": [
            *[(k.encode(), v.encode()) for k, v in headers.items() if k.lower() not in NOT_PASSED_ON],
            (b"content-length", b"0"), (b"x-mlflow-return-trace-id", b"true"),  # its body: in the attempt, parsed
        ],
    }  # fmt: skip
    refusal: list[Any] = []  # (status, headers) and the body of an answer that is not a stream
    reader, saw_done = events.SseReader(), False
    never = asyncio.Event()

    async def never_hangs_up() -> Message:  # a run has no client to hang up: cancelling its task stops it
        await never.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal saw_done
        if message["type"] == "http.response.start":
            if message["status"] != 200:
                refusal.extend([message["status"], message.get("headers", []), b""])
            elif not live.started.done():
                live.started.set_result(None)
                run.status = "in_progress"
                if not live.events:  # a resumed run has its first event already
                    await live.push(events.created(run))
                    await live.push({**events.created(run), "type": "response.in_progress"})
                    await live.flush()  # stored as its first is: a stream resumed after a crash starts as any does
                for event in unfinished(live.events):  # a resumed run's: the message its stop cut off ends
                    await live.push(event)
            return
        chunk = message.get("body", b"")
        if refusal:
            refusal[2] += chunk
            return
        for data in reader.feed(chunk):
            saw_done = await _took(live, scope, data) or saw_done

    try:
        await _app(scope, replaying(b"", never_hangs_up), send)  # type: ignore[misc]
        if refusal:
            status, body = refusal[0], parsed(refusal[2].decode(errors="replace")) or {}
            if not live.started.done():  # the first attempt: the client gets this answer, and no run is kept
                live.started.set_result((status, refusal[1], refusal[2]))
                await _forget(live)
                return
            run.error = {"status": status, "body": body if "error" in body else error_body(status, str(body))}
        elif run.error is None and not saw_done:
            run.error = {"status": 502, "body": error_body(502, "The run's stream ended before its answer did.")}
        run.status = "failed" if run.error else "completed"
    except StreamTooLong as error:
        run.status, run.error = "failed", {"status": 413, "body": error_body(413, str(error))}
    except asyncio.CancelledError:
        if live.handing_over:
            await _hand_over(live)
            raise
        run.status = "cancelled"  # the request guard kept what it had produced as its turn (RunAttempt)
        with contextlib.suppress(StreamTooLong):  # past the limit: the last event still names each call stopped
            for event in stopped_calls(live, path):
                await live.push(event)
        await end(live, stopped_output(live))
        return
    except Exception as error:  # a bug in the app: the run fails, saying so, rather than staying in progress
        logger.exception("runs: run %s failed", run.id)
        run.status, run.error = "failed", {"status": 500, "body": error_body(500, f"The run failed: {error}")}
    await end(live)


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


async def _took(live: LiveRun, scope: Scope, data: str) -> bool:
    """One event of the attempt's stream; True for the stream's own end (`[DONE]`)."""
    if data == "[DONE]":
        return True
    event = parsed(data)
    if not isinstance(event, dict):
        return False
    if set(event) == {"trace_id"}:  # MLflow's last event, for x-mlflow-return-trace-id
        live.run.trace_id = str(event["trace_id"])
        return False
    if "error" in event and "type" not in event:  # MLflow's event for a failure in the handler
        status, body = _failure(scope, event["error"])
        live.run.error = {"status": status, "body": body}
        await live.push(error_event(status, body))
        return False
    await live.push(event, data)
    return False


def _failure(scope: Scope, message: Any) -> tuple[int, dict[str, Any]]:
    """The status and body the synchronous path would have answered for the failure the handler recorded."""
    state = scope.get(STATE_KEY)
    if state is None or state.model.error is None:
        return 500, error_body(500, str(message))
    status, text, param, _headers = status_and_message(state.model.error)
    return status, error_body(status, text, client_param(param, state.sources, state.model))


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
        await memory.transact(store.hand_over(HOLDER, [live.run.id]), write=True)
    live.close()
    RUNNING.pop(live.run.id, None)
