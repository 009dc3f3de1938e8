# Owned by the template: changes here are overwritten by `copier update`. Put your own cases in evals/cases.yaml.
"""Talk to the app as the chat page does, turn by turn, and trace each turn for MLflow to score.

The app is this project's, in process (its ASGI app on an event loop of its own, with its lifespan: memory,
MCP servers, background runs), or a running one at a URL. Each turn is POST /invocations, streamed, sent the
way the chat page sends it: with memory on, the new message and the conversation's id only; with memory off,
the whole history, each earlier answer replayed as the client got it (an assistant message as an id-less
output_text message, the rest as it came). A turn marked `new_conversation` opens another chat of the same user
(the same headers, so the same identity): with memory on it sends no conversation id, with memory off no history.

Each turn is one MLflow trace of the evaluation's own (`evaluate_turn`): the user's message as its inputs, the
answer's items as its outputs (the Responses shape MLflow's judges read), and the turn's error and seconds as
attributes (scorers.py). In process, the app's own spans (agent run, model and tool calls) are inside it. A turn
that fails (an HTTP error, an error event, a failed response, no answer at all, the app unreachable) records
its error, and its case sends no further turns: it fails with that error, never as a shorter conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import mlflow

from agent_server.evaluation.scorers import ERROR_ATTRIBUTE, SECONDS_ATTRIBUTE, TURN_ATTRIBUTE

TURN_TIMEOUT_SECONDS = 600.0  # a real model with tools can take minutes; the app's own limits come first
FAILED_STATES = ("response.failed", "response.incomplete", "response.cancelled", "error")
T = TypeVar("T")


@dataclass
class TurnResult:
    user: str
    items: list[dict[str, Any]]
    seconds: float
    trace_id: str  # this turn's trace; the scored copy's, once scored (report.py)
    turn_id: str
    error: str | None = None
    original_trace_id: str = ""  # the trace the turn made, which MLflow may score a copy of
    model: str | None = None  # the model that answered, as the answer's custom_outputs said (None: not said)

    def __post_init__(self) -> None:
        self.original_trace_id = self.original_trace_id or self.trace_id


@dataclass
class Chat:
    """One conversation's state on the client's side: its id with memory on, else its history."""

    session: str  # the MLflow session its turns' traces share
    conversation_id: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    failed: bool = False
    opened: int = 1  # the case's conversations so far, this one included
    model: str | None = None  # the model its turns ask for (custom_inputs.model; `evaluate --model`); None: default
    answered_by: str | None = None  # the model its last answer named (custom_outputs.model)

    def next_conversation(self) -> Chat:
        """The same user's next conversation, as a new chat on the chat page: no id, no history, its own session."""
        base = self.session.removesuffix(f"#{self.opened}") if self.opened > 1 else self.session
        return Chat(session=f"{base}#{self.opened + 1}", opened=self.opened + 1, model=self.model)


class AppUnderTest:
    """The app, with a blocking `turn()`: in process (url=None) or at `url`. Enter it to start, exit to stop."""

    def __init__(self, url: str | None = None, headers: dict[str, str] | None = None) -> None:
        self.url, self.headers = url, dict(headers or {})
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="evaluate-app", daemon=True)
        self.stack = contextlib.AsyncExitStack()
        self.memory = False

    def __enter__(self) -> AppUnderTest:
        self.thread.start()
        self._run(self._start)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._run(self.stack.aclose)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=30)

    async def _start(self) -> None:
        if self.url is None:
            from agent_server.app import app  # imported here: it reads the settings the CLI has just set

            await self.stack.enter_async_context(app.router.lifespan_context(app))
            transport = httpx.ASGITransport(app=app)
            self.client = httpx.AsyncClient(transport=transport, base_url="http://localhost", headers=self.headers)
        else:
            self.client = httpx.AsyncClient(base_url=self.url, headers=self.headers)
        await self.stack.enter_async_context(self.client)
        try:  # memory on: GET /conversations answers (with memory off it is a 404 that says so)
            self.memory = (await self.client.get("/conversations", timeout=30)).status_code == 200
        except httpx.HTTPError as error:
            raise ConnectionError(f"The app at {self.url} does not answer: {error}") from None

    def _run(self, work: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run `work(*args)` on the app's loop, in this thread's context, so the app's spans nest in the turn's."""
        context = contextvars.copy_context()

        async def in_context() -> T:
            return await asyncio.get_running_loop().create_task(work(*args), context=context)  # type: ignore[arg-type]

        return asyncio.run_coroutine_threadsafe(in_context(), self.loop).result()

    def turn(self, chat: Chat, text: str) -> TurnResult:
        """Send one user message in `chat`, traced as one turn; the chat's state moves on unless it failed."""
        turn_id = uuid.uuid4().hex
        with mlflow.start_span(name="evaluate_turn", span_type="AGENT", attributes={TURN_ATTRIBUTE: turn_id}) as span:
            span.set_inputs({"input": [{"role": "user", "content": text}]})
            started = time.monotonic()
            try:
                items, error = self._run(self._send, chat, text)
            except Exception as failure:  # whatever it is, it fails this turn and says what it was
                items, error = [], f"{type(failure).__name__}: {failure}"
            seconds = time.monotonic() - started
            span.set_outputs({"output": items})
            span.set_attributes({SECONDS_ATTRIBUTE: seconds, ERROR_ATTRIBUTE: error or ""})
            mlflow.update_current_trace(metadata={"mlflow.trace.session": chat.session})
            trace_id = span.trace_id
        chat.failed = error is not None
        if not chat.failed and not self.memory:
            chat.history += [{"role": "user", "content": text}, *(replayed(item) for item in items)]
        return TurnResult(text, items, seconds, trace_id, turn_id, error, model=chat.answered_by)

    async def _send(self, chat: Chat, text: str) -> tuple[list[dict[str, Any]], str | None]:
        """(the answer's items, the turn's error or None)."""
        body: dict[str, Any] = {"input": [*chat.history, {"role": "user", "content": text}], "stream": True}
        if chat.conversation_id is not None:
            body["context"] = {"conversation_id": chat.conversation_id}
        if chat.model is not None:
            body["custom_inputs"] = {"model": chat.model}
        items: list[dict[str, Any]] = []
        error = None
        async with self.client.stream("POST", "/invocations", json=body, timeout=TURN_TIMEOUT_SECONDS) as r:
            if r.status_code != 200:
                return [], f"HTTP {r.status_code}: {error_message(await r.aread())}"
            async for event in sse_events(r.aiter_lines()):
                outputs = event.get("custom_outputs") or {}
                chat.conversation_id = outputs.get("session_id") or chat.conversation_id
                chat.answered_by = outputs.get("model") or chat.answered_by
                if event.get("type") == "response.output_item.done":
                    items.append(event["item"])
                elif "error" in event or event.get("type") in FAILED_STATES:
                    error = error or error_message(json.dumps(event).encode())
        if error is None and not items:
            error = "The app's answer held no items."
        return items, error


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """The JSON events of a server-sent event stream, without its `[DONE]`."""
    async for line in lines:
        if line.startswith("data:") and (data := line[5:].strip()) and data != "[DONE]":
            with contextlib.suppress(ValueError):
                yield json.loads(data)


ERROR_PLACES = (("error", "message"), ("error",), ("response", "error", "message"), ("detail",), ("message",))


def error_message(raw: bytes) -> str:
    """The message of an error body or event, in whichever shape it comes (the app's, MLflow's, OpenAI's)."""
    try:
        found = json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")[:500]
    for place in ERROR_PLACES:
        value = found
        for key in place:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str):
            return value[:500]
    return json.dumps(found)[:500]


def replayed(item: dict[str, Any]) -> dict[str, Any]:
    """An answer's item as the chat page sends it back: a message as id-less output_text, the rest as it came."""
    if item.get("type") == "message" and item.get("role") == "assistant":
        text = "".join(part.get("text") or "" for part in item.get("content") or [] if isinstance(part, dict))
        return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    return item
