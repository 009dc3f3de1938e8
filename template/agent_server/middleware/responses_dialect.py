# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""ResponsesDialect: POST /responses answers in the OpenAI Responses API's shapes (responses_shapes.py), which its
clients (the `openai` package, the AI SDK's `openai.responses`) validate; /invocations keeps MLflow's agent format
(a tool call and its output as `function_call` and `function_call_output`), which the Databricks clients read.

It sits below BackgroundRuns, so a background run started on /responses (runs/execute.py sends each attempt
through the app on the path its client used) is shaped here too, once, before its events are numbered and kept:
a synchronous stream, a run's stream, its replay from a cursor and a resumed attempt carry the same fields. A
synchronous stream gets its own first and last events here (`response.created`, `response.in_progress`, then
`response.completed` or `response.failed`); a run's come from runs/events.py.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from agent_server.errors import status_and_message
from agent_server.middleware import RUN_ATTEMPT_KEY, STATE_KEY, HttpMiddleware
from agent_server.middleware.responses_shapes import (
    OUTPUT_INDEX_KEY,
    EventShaper,
    error_code,
    openai_output,
    response_fields,
)

PATH = "/responses"


class ResponsesDialect(HttpMiddleware):
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST" or scope["path"] != PATH:
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _Answer(scope, send).send)


def call_lookup(scope: Scope) -> Any:
    """The `function_call` of the request's rendered history with a given call id (an approved call's)."""

    def lookup(call_id: str) -> dict[str, Any] | None:
        state = scope.get(STATE_KEY)
        for item in state.history if state is not None else []:
            if item.get("type") == "function_call" and item.get("call_id") == call_id:
                return dict(item)
        return None

    return lookup


class _Answer:
    """One answer on its way out: a stream shaped event by event, or a JSON body shaped whole."""

    def __init__(self, scope: Scope, send: Send) -> None:
        self.scope, self.downstream = scope, send
        self.run_attempt = RUN_ATTEMPT_KEY in scope  # a run's: its first and last events are the run's own
        self.shaper = EventShaper(scope.get(OUTPUT_INDEX_KEY, 0), call_lookup(scope))
        self.mode: str | None = None  # "stream", "json", or None: passed on as it is
        self.start: Message | None = None
        self.buffer = b""
        self.sequence = 0
        self.error: dict[str, Any] | None = None
        self.metadata: dict[str, Any] = {}
        self.response = {"id": f"resp_{uuid.uuid4().hex}", "created_at": int(time.time()), "background": False}

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.mode = _mode(message)
            if self.mode is None:
                await self.downstream(message)
                return
            headers = [(name, value) for name, value in message.get("headers", []) if name.lower() != b"content-length"]
            self.start = {**message, "headers": headers}
            if self.mode == "stream":
                await self.downstream(self.start)
                if not self.run_attempt:
                    await self._events([self._lifecycle("response.created"), self._lifecycle("response.in_progress")])
            return
        if self.mode is None:
            await self.downstream(message)
            return
        self.buffer += message.get("body", b"")
        more = message.get("more_body", False)
        if self.mode == "stream":
            await self._stream(more)
        elif not more:
            await self._json()

    async def _stream(self, more: bool) -> None:
        while (end := self.buffer.find(b"\n\n")) >= 0:
            block, self.buffer = self.buffer[:end], self.buffer[end + 2 :]
            data = b"\n".join(line[5:].removeprefix(b" ") for line in block.split(b"\n") if line.startswith(b"data:"))
            if data:
                await self._data(data.decode())
        if not more:
            await self.downstream({"type": "http.response.body", "body": b"", "more_body": False})

    async def _data(self, data: str) -> None:
        if data == "[DONE]":
            out = self.shaper.finish()
            if not self.run_attempt:
                out.append(self._last())
            await self._events(out)
            await self._framed("[DONE]")
            return
        event = json.loads(data)
        if isinstance(event, dict) and "type" not in event:
            if self.run_attempt:  # MLflow's trace id or failure: the run reads them (runs/execute.py)
                await self._framed(data)
                return
            if "trace_id" in event:  # MLflow's, for x-mlflow-return-trace-id: the response's metadata says it
                self.metadata["trace_id"] = event["trace_id"]
                return
            if "error" in event:  # MLflow's for a failure in the handler: the API's error event
                self.error = self._failure(event["error"])
                await self._events([{"type": "error", "param": None, **self.error}])
                return
        await self._events(self.shaper.take(event) if isinstance(event, dict) else [event])

    async def _events(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            await self._framed(json.dumps({**event, "sequence_number": self.sequence}))
            self.sequence += 1

    async def _framed(self, data: str) -> None:
        await self.downstream({"type": "http.response.body", "body": f"data: {data}\n\n".encode(), "more_body": True})

    def _lifecycle(self, kind: str, status: str = "in_progress", **fields: Any) -> dict[str, Any]:
        response = {**self.response, "status": status, "error": None, "output": [], **fields}
        return {"type": kind, "response": response_fields(response)}

    def _last(self) -> dict[str, Any]:
        extra = {"custom_outputs": self.shaper.extra, **({"metadata": self.metadata} if self.metadata else {})}
        if self.error is not None:
            return self._lifecycle("response.failed", "failed", error=self.error, output=self.shaper.output, **extra)
        return self._lifecycle("response.completed", "completed", output=self.shaper.output, **extra)

    def _failure(self, message: Any) -> dict[str, Any]:
        """The error the synchronous path answers with (the handler recorded its cause), as the API's."""
        state = self.scope.get(STATE_KEY)
        status, text = 500, str(message)
        if state is not None and state.model.error is not None:
            status, text, _param, _headers = status_and_message(state.model.error)
        return {"code": error_code(status), "message": text}

    async def _json(self) -> None:
        assert self.start is not None
        body = json.loads(self.buffer)
        output = openai_output(body.get("output") or [], call_lookup(self.scope))
        response = response_fields({**body, **self.response, "status": "completed", "output": output})
        content = json.dumps(response).encode()
        headers = [*self.start["headers"], (b"content-length", str(len(content)).encode())]
        await self.downstream({**self.start, "headers": headers})
        await self.downstream({"type": "http.response.body", "body": content, "more_body": False})


def _mode(start: Message) -> str | None:
    if start["status"] != 200:
        return None
    content_type = next((value for name, value in start.get("headers", []) if name.lower() == b"content-type"), b"")
    if content_type.startswith(b"text/event-stream"):
        return "stream"
    return "json" if b"json" in content_type else None
