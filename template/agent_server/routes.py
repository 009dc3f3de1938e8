# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""POST /invocations and POST /responses: the app's own turn routes.

Each reads its body once (within MAX_BODY_BYTES and BODY_TIMEOUT_SECONDS) and parses it once, then either starts a
background run (runs/requests.py: `"background": true`, or an `Idempotency-Key` with memory on) or serves the turn:
its place among the turns starting (turn_starts.py) and its user's fair share (rate_limits.py), then turn/: the
request made one state (prepare), and its answer (serve's events), streamed as they come or collected. Each event
is encoded once. A client that hangs up stops its turn: tools and model calls included, and a turn waiting for its
conversation leaves the queue.

/invocations answers in MLflow's ResponsesAgent format, which the Databricks chat UI and MLflow's clients read;
/responses in the OpenAI Responses API's (turn/responses_api.py). What the route refuses is an HttpError, which the
app's one exception handler answers (app.py); a turn that fails after its stream began ends with an error event.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from agent_server.errors import HttpError, failure_answer
from agent_server.middleware import read_body
from agent_server.runs import requests as run_requests
from agent_server.scheduling import turn_starts
from agent_server.scheduling.offload import INLINE_BYTES, cpu_work
from agent_server.turn import collected, events, invocations_body, prepare, rate_limits
from agent_server.turn.checks import check_user_token, parsed_body
from agent_server.turn.responses_api import ResponseStream, response_body
from agent_server.turn_context import INVOCATIONS, RESPONSES, TurnContext

logger = logging.getLogger("agent_server.turn")

STREAM_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-store")]
DONE = b"data: [DONE]\n\n"
NOT_STORED = "Nothing was stored; try again."


def framed(event: Any) -> bytes:
    """One server-sent event: the event encoded once."""
    return b"data: " + json.dumps(event).encode() + b"\n\n"


class TurnRoute:
    """The pure-ASGI endpoint of one turn route."""

    def __init__(self, path: str) -> None:
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        check_user_token(headers)
        raw = await read_body(receive)
        body = await cpu_work(len(raw) <= INLINE_BYTES, parsed_body, raw)
        started = await run_requests.started_run(self.path, headers, body)
        if started is not None:  # a background run, or a request kept by its Idempotency-Key
            await started(scope, receive, send)
            return
        await until_disconnect(lambda send: self._serve(headers, body, send), receive, send)

    async def _serve(self, headers: Headers, body: Any, send: Send) -> None:
        async with rate_limits.turn_share(headers):
            place = await turn_starts.take_place()  # the streams running go first (turn_starts.py)
            try:
                try:
                    context = await prepare(self.path, headers, body)
                except HttpError as error:
                    error.then = NOT_STORED
                    raise
                if context.stream:
                    await _stream(context, send)
                else:
                    await _answer(context, send)
            finally:
                place.give_back()


async def _answer(context: TurnContext, send: Send) -> None:
    """The turn collected, answered whole; or its failure, with the status that says why."""
    try:
        output = await collected(context)
    except Exception as error:
        status, body, headers = _failed(context, error)
        await JSONResponse(body, status_code=status, headers=headers)({"type": "http"}, _no_receive, send)
        return
    answer = invocations_body(context, output) if context.path == INVOCATIONS else response_body(context, output)
    content = json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode()  # as FastAPI's JSONResponse
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": start})
    await send({"type": "http.response.body", "body": content})


async def _stream(context: TurnContext, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": STREAM_HEADERS})
    if context.path == RESPONSES:
        await _responses_stream(context, send)
        return
    try:
        async for event in events(context):
            await _send_chunk(send, framed(event))
        if context.trace_id:  # MLflow's last event, for x-mlflow-return-trace-id
            await _send_chunk(send, framed({"trace_id": context.trace_id}))
    except Exception as error:
        _failed(context, error)
        await _send_chunk(send, framed({"error": str(error)}))  # MLflow's agent server's failure event
    await send({"type": "http.response.body", "body": DONE, "more_body": False})


async def _responses_stream(context: TurnContext, send: Send) -> None:
    stream = ResponseStream(context)
    await _send_chunk(send, b"".join(framed(event) for event in stream.first()))
    try:
        async for event in events(context):
            if shaped := stream.take(event):
                await _send_chunk(send, b"".join(framed(out) for out in shaped))
        last = stream.last()
    except Exception as error:
        last = stream.failed(*_failed(context, error)[:2])
    await _send_chunk(send, b"".join(framed(event) for event in last))
    await send({"type": "http.response.body", "body": DONE, "more_body": False})


def _failed(context: TurnContext, error: Exception) -> tuple[int, dict[str, Any], dict[str, str]]:
    """What a failed turn answers; logged in one line if the app answers it on purpose, else with its traceback."""
    answer = failure_answer(error, context.sources, context.model)
    if isinstance(error, HttpError) or answer[0] != 500:
        logger.warning("the turn failed: %s (%d)", answer[1]["error"]["message"], answer[0])
    else:
        logger.exception("the turn failed")
    return answer


async def _send_chunk(send: Send, chunk: bytes) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


async def until_disconnect(serve: Callable[[Send], Awaitable[None]], receive: Receive, send: Send) -> None:
    """Serve the request in this task; if the client hangs up first, cancel it (its tools and model calls too).

    Only this function reads the client's messages once the body is in: a server also reports the end of a
    finished response as a disconnect, which stops nothing.
    """
    answered = False
    this = asyncio.current_task()
    assert this is not None

    async def answering(message: Message) -> None:
        nonlocal answered
        answered = answered or (message["type"] == "http.response.body" and not message.get("more_body", False))
        await send(message)

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        if not answered:
            hung_up.set()
            this.cancel()  # as asyncio.timeout() cancels the task it runs in

    hung_up = asyncio.Event()
    watcher = asyncio.ensure_future(watch())
    try:
        await serve(answering)
    except asyncio.CancelledError:
        if not hung_up.is_set() or this.uncancel() > 0:
            raise  # cancelled from outside, not (only) by the client's hang-up
    else:
        if hung_up.is_set():  # the turn took the hang-up's cancel and ended anyway: the task is not being cancelled
            this.uncancel()
    finally:
        watcher.cancel()


routes = [Route(path, TurnRoute(path), methods=["POST"]) for path in (INVOCATIONS, RESPONSES)]
