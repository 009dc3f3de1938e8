# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""RequestGuard: what the app refuses before MLflow sees a request, and the history it renders for the rest.

MLflow's server answers some bad bodies with a 500 (a JSON array, for one) and rejects
chat-completions history (`role: "tool"`, `tool_calls`) before any handler runs. This ASGI
middleware answers bad /invocations and /responses bodies with a 4xx that names the problem,
and renders the history so that every shape agent_server/history/ knows gets through. With
conversation memory on, it starts the turn (merged with the stored conversation) and ends it.
What the handlers need of all this, it hands them in one object (request_state.py). Its limits
(README, "Failure modes"; declared in config/):

| variable | default | over it |
|---|---|---|
| MAX_BODY_BYTES | 16 MiB | 413 |
| MAX_INPUT_ITEMS | 300 items in `input` | 413 |
| MAX_INPUT_CHARS | 4,000,000 characters of text in the whole body (inline images count) | 413 |
| ATTACHMENTS_MAX_* | a turn's images and files: their types (415), number and bytes (attachments.py) | 413 |
| BODY_TIMEOUT_SECONDS | 30 s to send the whole body (and the headers: head_deadline.py) | 408 |

JSON nested deeper than 64 levels, a lone surrogate (`"\\ud800"`) and an integer of more
than 4300 digits are a 400. Parsing and rendering run in a worker thread (unless the body is
too small to be worth one: offload.py), so that a large body never holds up other requests,
and a client that hangs up stops its request: tools and model calls included. Once its body is
read, a turn waits for its place among the few starting at once (turn_starts.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_server import attachments, config, identity, llm, memory
from agent_server.errors import BadRequest, HttpError, TooLarge, Unauthenticated, route_error
from agent_server.history import HistoryError, approvals, json_type, pair_calls_with_outputs, render_each
from agent_server.memory import queue as memory_queue
from agent_server.middleware import (
    GUARDED_PATHS,
    RUN_ATTEMPT_KEY,
    STATE_KEY,
    HttpMiddleware,
    read_body,
    replaying,
    request_state,
)
from agent_server.scheduling import turn_starts
from agent_server.scheduling.offload import INLINE_BYTES, INLINE_ITEMS, cpu_work

logger = logging.getLogger(__name__)
MAX_JSON_DEPTH = 64


class RequestGuard(HttpMiddleware):
    """A bad /invocations or /responses body gets a 4xx; a good one, its history rendered (and with
    conversation memory on, merged with the stored conversation: agent_server/memory/)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST" or scope["path"] not in GUARDED_PATHS:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            check_user_token(headers)
            raw = b"" if RUN_ATTEMPT_KEY in scope else await read_body(receive)  # an attempt brings its body parsed
        except HttpError as error:
            await route_error(error)(scope, receive, send)
            return
        place = await turn_starts.take_place()  # the streams running go first (turn_starts.py)
        try:
            await self._checked(scope, receive, send, headers, raw)
        finally:
            place.give_back()

    async def _checked(self, scope: Scope, receive: Receive, send: Send, headers: Headers, raw: bytes) -> None:
        attempt: request_state.RunAttempt | None = scope.get(RUN_ATTEMPT_KEY)
        parsed = attempt.body if attempt is not None else None
        small = len(raw) <= INLINE_BYTES if parsed is None else len(parsed.get("input") or ()) <= INLINE_ITEMS
        try:
            body, sent = await cpu_work(small, checked_body, raw, parsed)
            if sent is None:  # items by reference: the stored items they name, then rendered (memory/references.py)
                body = await memory.resolved_references(headers, body)
                sent = await cpu_work(small, rendered_history, body)
            memory_queue.client_messages.set(receive)  # a turn that waits for its conversation leaves on a hang-up
            turn = await memory.start_turn(headers, body, sent, attempt.continues_from if attempt else None)
        except HttpError as error:
            await route_error(error, "Nothing was stored; try again.")(scope, receive, send)
            return
        try:
            history = sent if turn is None else turn.history
            small = len(history.each) <= INLINE_ITEMS
            ready, state = await cpu_work(small, prepared_body, body, history, turn)
            request_state.begin(state)
            scope[STATE_KEY] = state  # for a background run, which runs this request on a task of its own
            state.run = attempt
            state.owner = turn.owner if turn is not None else caller(headers)
            await _until_disconnect(self.app, scope, ready, receive, send)
        finally:
            if turn is not None:
                if attempt is not None and not turn.done:
                    await _keep_stopped(turn, attempt)
                await turn.end()


async def _keep_stopped(turn: memory.Turn, attempt: request_state.RunAttempt) -> None:
    """A run its client cancelled keeps its turn: the request, then what it had produced, after the turns before."""
    produced = attempt.stopped_output()
    if produced is None:
        return
    try:
        await turn.finish(produced)
    except memory.MemoryFailure as error:
        logger.warning("the stopped turn of conversation %s was not kept: %s", turn.conversation_id, error)


def checked_body(raw: bytes, parsed: Any = None) -> tuple[dict[str, Any], memory.History | None]:
    """The request body, and its history rendered item by item (None: it holds items by reference, which memory
    resolves first); or BadRequest saying what is wrong. `parsed`: the body parsed already (a run's,
    runs/requests.py), checked as it is rather than parsed from `raw` again."""
    body = parsed_body(raw) if parsed is None else parsed
    if not isinstance(body, dict):
        raise BadRequest(f"The request body must be a JSON object with an 'input' list, not a JSON {json_type(body)}.")
    items = body.get("input")
    if isinstance(items, str):  # the Responses API's shorthand for one user message
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise BadRequest("'input' is required and must be a list of items.", param="input")
    if not items:
        raise BadRequest("'input' must hold at least one item.", param="input")
    limit = config.settings().limits.max_input_items
    if len(items) > limit:
        message = f"'input' holds {len(items)} items; the limit is MAX_INPUT_ITEMS={limit}."
        raise TooLarge(message, "input")
    try:
        _check_size(body)
    except TooLarge:  # an attachment over its own limit is why: its 413 names that limit (attachments.py)
        attachments.check_first(items, llm.llm_settings().api)
        raise
    if "stream" in body and not isinstance(body["stream"], bool):
        raise BadRequest("'stream' must be true or false.", param="stream")
    if body.get("previous_response_id") is not None:
        keeps = "send the whole conversation in 'input'"
        if memory.enabled():
            keeps = "name the conversation in 'context.conversation_id' and send its new items"
        raise BadRequest(f"'previous_response_id' cannot be used with this app: {keeps}.", param="previous_response_id")
    if memory.enabled() and memory.has_references(items):
        return body, None
    return body, rendered_history({**body, "input": items})


def rendered_history(body: dict[str, Any]) -> memory.History:
    """The history of a body checked_body checked (its `input` a list), rendered item by item."""
    items = body["input"]
    try:
        each = render_each(items, api=llm.llm_settings().api)
    except HistoryError as error:
        raise BadRequest(str(error), param=f"input[{error.index}]") from None
    attachments.check(items, each)  # a 415 or 413 before anything runs or is stored
    return memory.History(each, items)


def prepared_body(
    body: dict[str, Any], history: memory.History, turn: memory.Turn | None
) -> tuple[bytes, request_state.RequestState]:
    """The body MLflow gets, serialised (off the event loop unless small: offload.py): the history paired and with
    only genuine approvals, and the conversation's id; and the request's state for the handlers."""
    rendered = pair_calls_with_outputs(history.each)
    conversation = turn.named if turn is not None else None  # an approval signed in another conversation is not this
    refused = approvals.honour_only_genuine(history.client_items, rendered, conversation, history.stored)
    for index in refused:
        logger.warning("input[%d]: an approval this app did not sign runs nothing", index - history.stored)
    body["input"] = [r.item for r in rendered]
    if turn is not None:  # the conversation's id, as the request's own inputs, for MLflow and the owner's code
        body["custom_inputs"] = {**(body.get("custom_inputs") or {}), **turn.custom_outputs()}
    ready = json.dumps(body).encode()
    state = request_state.RequestState(
        history=body["input"],  # serialised already; the handlers take copies of its items
        sources=[history.client_index(r) for r in rendered],
        turn=turn,
    )
    return ready, state


def caller(headers: Headers) -> str | None:
    """With memory off, the caller's identity as memory would read it, for the trace (feedback checks it there);
    None when the request names none or names it badly: nothing is stored by it, so that is no reason to refuse."""
    try:
        return identity.owner_of(headers)
    except HttpError:
        return None


def check_user_token(headers: Headers) -> None:
    """With LLM_ON_BEHALF_OF_USER, a request without the user's token is refused, never run as the app."""
    if llm.needs_user_token() and not headers.get("x-forwarded-access-token"):
        raise Unauthenticated(
            "This app calls the model as the signed-in user (LLM_ON_BEHALF_OF_USER=true), and the request "
            "carries no user token (x-forwarded-access-token). Set LLM_ON_BEHALF_OF_USER_FALLBACK=true to run "
            "such requests as the app instead.",
        )


def parsed_body(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except RecursionError:
        raise BadRequest(f"The request body is nested more than {MAX_JSON_DEPTH} levels deep.") from None
    except (UnicodeDecodeError, ValueError) as error:  # JSONDecodeError, and Python's 4300-digit integer limit
        raise BadRequest(f"The request body is not valid JSON: {error}") from None


def _check_size(body: Any) -> None:
    """Depth, total text and lone surrogates, walked without recursion (a deep body must not crash the walk)."""
    chars, stack = 0, [(body, 1)]
    strings: Iterable[Any]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise BadRequest(f"The request body is nested more than {MAX_JSON_DEPTH} levels deep.")
        if isinstance(value, dict):
            stack.extend((inner, depth + 1) for inner in value.values())
            strings = value.keys()
        elif isinstance(value, list):
            stack.extend((inner, depth + 1) for inner in value)
            strings = ()
        else:
            strings = (value,) if isinstance(value, str) else ()
        for text in strings:
            chars += len(text)
            try:
                text.encode()
            except UnicodeEncodeError:
                raise BadRequest(f"The request body holds a lone surrogate in {text!r:.60}: not text.") from None
    limit = config.settings().limits.max_input_chars
    if chars > limit:
        message = f"The request holds {chars} characters of text; the limit is MAX_INPUT_CHARS={limit}."
        raise TooLarge(message)


async def _until_disconnect(app: ASGIApp, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
    """Run the app on the new body; if the client hangs up first, cancel it (its tools and model calls too).

    Only this function reads the client's messages once the body is in: the app gets the body,
    then waits for the disconnect here (a streaming response listens for it while it runs).
    """
    hung_up, answered = asyncio.Event(), False

    async def app_send(message: Message) -> None:
        nonlocal answered
        answered = answered or (message["type"] == "http.response.body" and not message.get("more_body", False))
        await send(message)

    async def hang_up() -> Message:
        await hung_up.wait()
        return {"type": "http.disconnect"}

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        hung_up.set()
        if not answered:  # a server also reports the end of a finished response as a disconnect
            running.cancel()

    running = asyncio.ensure_future(app(scope, replaying(body, hang_up), app_send))
    watcher = asyncio.ensure_future(watch())
    try:
        await running
    except asyncio.CancelledError:
        if not hung_up.is_set() or answered:
            raise  # cancelled from outside, not by the client's hang-up
    finally:
        watcher.cancel()
