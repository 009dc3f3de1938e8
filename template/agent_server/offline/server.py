# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The offline model as an ASGI app (`create_offline_app`), an in-process client for it
(`offline_client`), and a CLI to serve it over HTTP (`python -m agent_server.offline`)."""

from __future__ import annotations

import argparse
import collections
import json
import logging
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import httpx
import openai
from fastapi import FastAPI, Request
from fastapi.responses import Response

from agent_server import config
from agent_server.offline.chat_format import chat_chunks, chat_completion
from agent_server.offline.media import check_media
from agent_server.offline.replies import CALL_ID_STYLES, Answer, chat_answer, responses_answer, with_call_ids
from agent_server.offline.responses_format import response_completed, response_events
from agent_server.offline.validation import (
    ApiError,
    check_chat_semantics,
    check_content_part_types,
    check_responses_semantics,
    describe,
    validate_schema,
)
from agent_server.scheduling.offload import INLINE_BYTES, cpu_work

BASE_URL = "http://offline-model/v1"
API_KEY = "offline"
CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
REQUEST_LOG_SIZE = 1000  # the newest requests, for tests to read; older ones are forgotten
REQUEST_LOG_BYTES = 4 * 1024 * 1024  # and of their bodies, at most this much: the log never grows the app

logger = logging.getLogger(__name__)


def parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise ApiError(
            "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload, "
            "but what was sent was not valid JSON.",
            None,
        ) from None
    if not isinstance(body, dict):
        raise ApiError(f"Invalid type for 'body': expected an object, but got {describe(body)} instead.", None)
    return body


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Python's json would accept NaN and Infinity


def sse(events: Iterable[dict[str, Any]], named: bool) -> Iterator[str]:
    """Server-sent events; the Responses API names each event, Chat Completions ends with [DONE]."""
    for event in events:
        prefix = f"event: {event['type']}\n" if named else ""
        yield f"{prefix}data: {json.dumps(event)}\n\n"
    if not named:
        yield "data: [DONE]\n\n"


# What one request gets back: the status, the media type and the whole body. Streams are built in full
# before the 200 goes out, so a failure can never hide mid-stream.
Answered = tuple[int, str, bytes]
JSON = "application/json"
EVENT_STREAM = "text/event-stream"
APIS = {CHAT_PATH: "chat", RESPONSES_PATH: "responses"}


class RequestLog(collections.deque):  # type: ignore[type-arg]
    """The newest requests the model answered, for tests to read, bounded in count and in bytes of body: a body
    larger than the whole budget is kept as a note of its size."""

    def __init__(self, max_requests: int, max_bytes: int) -> None:
        super().__init__()
        self.max_requests, self.max_bytes = max_requests, max_bytes
        self.sizes: collections.deque[int] = collections.deque()
        self.bytes = 0
        self._lock = threading.Lock()  # requests are answered in worker threads too

    def add(self, entry: dict[str, Any], size: int) -> None:
        if size > self.max_bytes:
            entry, size = {**entry, "body": {"omitted": f"{size} bytes, over REQUEST_LOG_BYTES"}}, 0
        with self._lock:
            self.append(entry)
            self.sizes.append(size)
            self.bytes += size
            while len(self) > self.max_requests or self.bytes > self.max_bytes:
                self.popleft()
                self.bytes -= self.sizes.popleft()

    def clear(self) -> None:
        with self._lock:
            super().clear()
            self.sizes.clear()
            self.bytes = 0


def create_offline_app(call_ids: str | None = None) -> FastAPI:
    """The offline model as an ASGI app; `app.state.request_log` records the newest REQUEST_LOG_SIZE requests.

    `call_ids` is the tool call id style (see the module docstring); OFFLINE_MODEL_CALL_IDS by
    default. Tests may change `app.state.call_ids` between requests.
    """
    style = call_ids or config.settings().model_calls.offline_call_ids
    if style not in CALL_ID_STYLES:
        raise ValueError(f"OFFLINE_MODEL_CALL_IDS={style!r} is not one of {', '.join(CALL_ID_STYLES)}")
    app = FastAPI(title="Offline model", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.request_log = RequestLog(REQUEST_LOG_SIZE, REQUEST_LOG_BYTES)
    app.state.call_ids = style

    async def handle(request: Request) -> Response:
        status, media_type, content = await answer(request.url.path, await request.body())
        return Response(content, status_code=status, media_type=media_type)

    async def answer(path: str, raw: bytes) -> Answered:
        # Validating a long history is CPU work: off the event loop, so the app it serves stays responsive.
        return await cpu_work(len(raw) <= INLINE_BYTES, answer_request, path, raw, APIS[path])

    def answer_request(path: str, raw: bytes, api: str) -> Answered:
        body: dict[str, Any] = {}
        try:
            body = parse_body(raw)
            if api == "responses":
                check_content_part_types(body)
            validate_schema(api, body)
            check_media(api, body)
            if api == "chat":
                check_chat_semantics(body)
                response = _chat_response(body, with_call_ids(chat_answer(body), app.state.call_ids))
            else:
                check_responses_semantics(body)
                response = _responses_response(body, with_call_ids(responses_answer(body), app.state.call_ids))
        except ApiError as exc:
            logger.warning("offline model: %d for %s: %s", exc.status, path, exc.body["message"])
            app.state.request_log.add({"path": path, "status": exc.status, "error": exc.body, "body": body}, len(raw))
            return exc.status, JSON, _json_bytes({"error": exc.body})
        app.state.request_log.add({"path": path, "status": 200, "error": None, "body": body}, len(raw))
        return response

    app.state.answer = answer  # what offline_client calls, with no ASGI or routing in between

    @app.post(CHAT_PATH)
    async def chat_completions(request: Request) -> Response:
        return await handle(request)

    @app.post(RESPONSES_PATH)
    async def responses(request: Request) -> Response:
        return await handle(request)

    return app


def _chat_response(body: dict[str, Any], said: Answer) -> Answered:
    if said.ends == "failed":  # chat completions have no failed answer: the server's error is one
        error = {"message": "The offline model failed, as asked.", "type": "server_error", "param": None, "code": None}
        return 500, JSON, _json_bytes({"error": error})
    if body.get("stream"):
        return 200, EVENT_STREAM, "".join(sse(chat_chunks(body, said), named=False)).encode()
    return 200, JSON, _json_bytes(chat_completion(body, said))


def _responses_response(body: dict[str, Any], said: Answer) -> Answered:
    if body.get("stream"):
        return 200, EVENT_STREAM, "".join(sse(response_events(body, said), named=True)).encode()
    return 200, JSON, _json_bytes(response_completed(body, said))


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()  # as JSONResponse


class InProcess(httpx.AsyncBaseTransport):
    """Requests go straight to the offline app's own handler: the same answers as over ASGI or HTTP, without
    the routing, ASGI and streaming machinery of a server in between, which cost as much as the app itself."""

    def __init__(self, app: FastAPI) -> None:
        self.answer = app.state.answer

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or request.url.path not in APIS:
            return httpx.Response(404, json={"detail": "Not Found"})
        status, media_type, content = await self.answer(request.url.path, await request.aread())
        return httpx.Response(status, headers={"content-type": media_type}, content=content)


def offline_client(app: FastAPI | None = None) -> openai.AsyncOpenAI:
    """An AsyncOpenAI that talks to the offline model in process (a new app unless one is given)."""
    transport = InProcess(app if app is not None else create_offline_app())
    return openai.AsyncOpenAI(
        base_url=BASE_URL,
        api_key=API_KEY,
        max_retries=0,
        # openai 3 types this as httpx2's client but takes an httpx one too (openai/_httpx2.py); openai 2 wants httpx's.
        http_client=httpx.AsyncClient(transport=transport, base_url=BASE_URL),  # type: ignore[arg-type]
    )


def main(argv: list[str] | None = None) -> None:
    """Serve the offline model over HTTP, for apps configured with OPENAI_BASE_URL."""
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve the offline model at http://HOST:PORT/v1.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    uvicorn.run(create_offline_app(), host=args.host, port=args.port, log_level="warning")
