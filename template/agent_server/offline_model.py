# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The built-in offline model: an OpenAI-compatible API that runs in process, with no network.

It serves `POST /v1/chat/completions` and `POST /v1/responses`, streaming or not, and is
deterministic, so tests and demos need no credentials. It is also STRICT: every request is
validated the way the real OpenAI API validates it, so a history bug (an unknown key, a
`null` where a string belongs, a tool output without its call) fails offline with the same
400 it would get in production, instead of passing here and failing there.

The checks live in strict_openai.py.

The reply is computed from the conversation: it either calls a tool the latest user turn
names (or `get_current_time` when it mentions the time), or says
"Offline model: I saw {u} user, {a} assistant and {t} tool turns. You said: {latest user text}".

When the latest user turn also says "twice", it calls the tool twice in one answer.

It can also play a model server with a known fault, to show the app copes with it:
OFFLINE_MODEL_CALL_IDS (or `create_offline_app(call_ids=...)`) is `unique` (the default, as
OpenAI does), `reuse` (every tool call is `call_0`, as some OpenAI-compatible servers do) or
`empty` (tool calls have an empty id).

Use it in process with `offline_client()`, an AsyncOpenAI wired to the app, or over HTTP with
`python -m agent_server.offline_model --port 8123` and OPENAI_BASE_URL=http://127.0.0.1:8123/v1.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from agent_server.strict_openai import (
    ApiError,
    check_chat_semantics,
    check_content_part_types,
    check_responses_semantics,
    describe,
    validate_schema,
)

BASE_URL = "http://offline-model/v1"
API_KEY = "offline"
CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
CALL_ID_STYLES = ("unique", "reuse", "empty")
REQUEST_LOG_SIZE = 1000  # the newest requests, for tests to read; older ones are forgotten

logger = logging.getLogger(__name__)
# --------------------------------------------------------------------------------------------
# The deterministic reply
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    role: str  # "user", "assistant" or "tool"
    text: str


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Answer:
    """What the model says (text, or tool calls) and the numbers its wire formats report."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    digest: str  # ids derive from it, so a replayed request gets the same ids
    input_tokens: int
    output_tokens: int


def chat_answer(body: dict[str, Any]) -> Answer:
    tools = [tool["function"]["name"] for tool in _offered_function_tools(body)]
    return answer(body["messages"], chat_turns(body["messages"]), tools, body.get("tool_choice") == "required")


def responses_answer(body: dict[str, Any]) -> Answer:
    tools = [tool["name"] for tool in _offered_function_tools(body)]
    return answer(body["input"], responses_turns(body["input"]), tools, body.get("tool_choice") == "required")


def _offered_function_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    if body.get("tool_choice") == "none":  # the caller forbade tool calls for this turn
        return []
    return [tool for tool in body.get("tools") or [] if tool["type"] == "function"]


def chat_turns(messages: list[dict[str, Any]]) -> list[Turn]:
    """User, assistant-with-text and tool turns of a chat; system and tool-call-only turns don't count."""
    turns = []
    for message in messages:
        role, text = message["role"], _content_text(message.get("content"))
        if role in ("user", "tool") or (role == "assistant" and text):
            turns.append(Turn(role, text))
    return turns


def responses_turns(items: str | list[dict[str, Any]]) -> list[Turn]:
    """The same turns as `chat_turns`, read from Responses input items."""
    if isinstance(items, str):
        return [Turn("user", items)]
    turns = []
    for item in items:
        kind, role = item.get("type", "message"), item.get("role")
        if kind == "message" and role in ("user", "assistant"):
            text = _content_text(item["content"])
            if role == "user" or text:
                turns.append(Turn(role, text))
        elif kind == "function_call_output":
            turns.append(Turn("tool", _content_text(item["output"])))
    return turns


def _content_text(content: Any) -> str:
    """A string content as is; a list of parts as its text parts joined with newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content if isinstance(part.get("text"), str))
    return ""


def answer(history: Any, turns: list[Turn], tool_names: list[str], tool_required: bool = False) -> Answer:
    """Call a tool the latest user turn asks for (or the first one, when a tool call is required),
    or describe the conversation."""
    digest = request_digest(history)
    last_user = max((i for i, turn in enumerate(turns) if turn.role == "user"), default=-1)
    latest_user_text = turns[last_user].text if last_user >= 0 else ""
    tool_outputs = [turn.text for turn in turns[last_user + 1 :] if turn.role == "tool"]
    tool = None if tool_outputs else requested_tool(latest_user_text, tool_names)
    if tool_required and tool_names:  # as the real API does with tool_choice="required"
        tool = tool or tool_names[0]

    text, tool_calls = "", ()
    if tool is not None:
        count = 2 if re.search(r"\btwice\b", latest_user_text.lower()) else 1
        tool_calls = tuple(ToolCall(call_id=_call_id(digest, n), name=tool, arguments="{}") for n in range(count))
    else:
        counts = {role: sum(turn.role == role for turn in turns) for role in ("user", "assistant", "tool")}
        text = (
            f"Offline model: I saw {counts['user']} user, {counts['assistant']} assistant and {counts['tool']} "
            f"tool turns. You said: {latest_user_text}"
        )
        if tool_outputs:
            text = f"The tool returned: {tool_outputs[-1]}. {text}"
    spoken = text + "".join(call.name + call.arguments for call in tool_calls)
    return Answer(text, tool_calls, digest, token_count(json.dumps(history)), token_count(spoken))


def _call_id(digest: str, number: int) -> str:
    return f"call_{digest}" if number == 0 else f"call_{digest}_{number}"


def with_call_ids(said: Answer, style: str) -> Answer:
    """The answer as a model server with the given call id style would send it."""
    if style == "unique":
        return said
    fixed = "call_0" if style == "reuse" else ""
    calls = tuple(dataclasses.replace(call, call_id=fixed) for call in said.tool_calls)
    return dataclasses.replace(said, tool_calls=calls)


def requested_tool(user_text: str, tool_names: list[str]) -> str | None:
    lowered = user_text.lower()
    for name in tool_names:
        if name.lower() in lowered:
            return name
    if "get_current_time" in tool_names and re.search(r"\btime\b", lowered):
        return "get_current_time"
    return None


def request_digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def token_count(text: str) -> int:
    return max(1, len(text) // 4)  # the usual four-characters-a-token estimate


def split_for_stream(text: str) -> list[str]:
    """At least two deltas (when the text has two characters), as a real stream would send."""
    pieces = re.findall(r"\S+\s*|\s+", text)
    if len(pieces) < 2 and len(text) >= 2:
        pieces = [text[: len(text) // 2], text[len(text) // 2 :]]
    return pieces or [text]


# --------------------------------------------------------------------------------------------
# Chat Completions wire format
# --------------------------------------------------------------------------------------------


def chat_completion(body: dict[str, Any], said: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None, "annotations": []}
    if not said.tool_calls:
        message["content"] = said.text
    else:
        message["tool_calls"] = [
            {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in said.tool_calls
        ]
    return {
        "id": f"chatcmpl-{said.digest}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(said)}],
        "usage": chat_usage(said),
        "service_tier": "default",
        "system_fingerprint": None,
    }


def chat_usage(said: Answer) -> dict[str, Any]:
    return {
        "prompt_tokens": said.input_tokens,
        "completion_tokens": said.output_tokens,
        "total_tokens": said.input_tokens + said.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _finish_reason(said: Answer) -> str:
    return "tool_calls" if said.tool_calls else "stop"


def chat_chunks(body: dict[str, Any], said: Answer) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed chat completion: role, deltas, finish reason, then usage if asked."""
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        data = {
            "id": f"chatcmpl-{said.digest}",
            "object": "chat.completion.chunk",
            "created": created,
            "model": body["model"],
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        return {**data, "usage": None} if include_usage else data  # as the API does when usage is asked for

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    if not said.tool_calls:
        for piece in split_for_stream(said.text):
            yield chunk({"content": piece})
    for index, call in enumerate(said.tool_calls):
        announce = {
            "index": index,
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield chunk({"tool_calls": [announce]})
        for piece in split_for_stream(call.arguments):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(said))
    if include_usage:
        yield {**chunk({}), "choices": [], "usage": chat_usage(said)}


# --------------------------------------------------------------------------------------------
# Responses wire format
# --------------------------------------------------------------------------------------------


def response_completed(body: dict[str, Any], said: Answer) -> dict[str, Any]:
    return response_object(body, said, output_items(said, done=True))


def response_events(body: dict[str, Any], said: Answer) -> Iterator[dict[str, Any]]:
    """The event sequence of a streamed response, numbered as the real API numbers it."""
    started = response_object(body, said, output=None)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    done_items = output_items(said, done=True)
    for index, (item, done_item) in enumerate(zip(output_items(said, done=False), done_items, strict=True)):
        events += _output_item_events(index, item, done_item)
    events.append({"type": "response.completed", "response": response_object(body, said, done_items)})
    for number, event in enumerate(events):
        yield {**event, "sequence_number": number}


def _output_item_events(index: int, item: dict[str, Any], done_item: dict[str, Any]) -> list[dict[str, Any]]:
    where = {"item_id": item["id"], "output_index": index}
    events: list[dict[str, Any]] = [{"type": "response.output_item.added", "output_index": index, "item": item}]
    if item["type"] == "message":
        part = {**where, "content_index": 0}
        text = done_item["content"][0]["text"]
        events.append({"type": "response.content_part.added", **part, "part": output_text_part("")})
        events += [
            {"type": "response.output_text.delta", **part, "delta": piece, "logprobs": []}
            for piece in split_for_stream(text)
        ]
        events.append({"type": "response.output_text.done", **part, "text": text, "logprobs": []})
        events.append({"type": "response.content_part.done", **part, "part": output_text_part(text)})
    else:
        arguments = done_item["arguments"]
        events += [
            {"type": "response.function_call_arguments.delta", **where, "delta": piece}
            for piece in split_for_stream(arguments)
        ]
        events.append({"type": "response.function_call_arguments.done", **where, "arguments": arguments})
    events.append({"type": "response.output_item.done", "output_index": index, "item": done_item})
    return events


def output_items(said: Answer, done: bool) -> list[dict[str, Any]]:
    """The answer as Responses output items: finished, or as first announced in a stream."""
    status = "completed" if done else "in_progress"
    if not said.tool_calls:
        return [
            {
                "id": f"msg_{said.digest}",
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": [output_text_part(said.text)] if done else [],
            }
        ]
    return [
        {
            "id": f"fc_{said.digest}" + (f"_{number}" if number else ""),
            "type": "function_call",
            "status": status,
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments if done else "",
        }
        for number, call in enumerate(said.tool_calls)
    ]


def output_text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def response_object(body: dict[str, Any], said: Answer, output: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A `Response` that echoes the request's settings, as the real API does; in progress without output."""
    done = output is not None
    now = int(time.time())
    usage = {
        "input_tokens": said.input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": said.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": said.input_tokens + said.output_tokens,
    }
    return {
        "id": f"resp_{said.digest}",
        "object": "response",
        "created_at": now,
        "status": "completed" if done else "in_progress",
        "completed_at": now if done else None,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "metadata": body.get("metadata") or {},
        "model": body["model"],
        "output": output or [],
        "parallel_tool_calls": _or(body.get("parallel_tool_calls"), True),
        "previous_response_id": None,
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": _or(body.get("store"), True),
        "temperature": _or(body.get("temperature"), 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": _or(body.get("tool_choice"), "auto"),
        "tools": body.get("tools") or [],
        "top_p": _or(body.get("top_p"), 1.0),
        "truncation": body.get("truncation") or "disabled",
        "usage": usage if done else None,
    }


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


# --------------------------------------------------------------------------------------------
# The app
# --------------------------------------------------------------------------------------------


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


def create_offline_app(call_ids: str | None = None) -> FastAPI:
    """The offline model as an ASGI app; `app.state.request_log` records the newest REQUEST_LOG_SIZE requests.

    `call_ids` is the tool call id style (see the module docstring); OFFLINE_MODEL_CALL_IDS by
    default. Tests may change `app.state.call_ids` between requests.
    """
    style = call_ids or os.environ.get("OFFLINE_MODEL_CALL_IDS") or "unique"
    if style not in CALL_ID_STYLES:
        raise ValueError(f"OFFLINE_MODEL_CALL_IDS={style!r} is not one of {', '.join(CALL_ID_STYLES)}")
    app = FastAPI(title="Offline model", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.request_log = collections.deque(maxlen=REQUEST_LOG_SIZE)
    app.state.call_ids = style

    async def handle(request: Request, api: str) -> Response:
        # Validating a long history is CPU work: in a worker thread, so the app it serves stays responsive.
        return await asyncio.to_thread(answer_request, request.url.path, await request.body(), api)

    def answer_request(path: str, raw: bytes, api: str) -> Response:
        body: dict[str, Any] = {}
        try:
            body = parse_body(raw)
            if api == "responses":
                check_content_part_types(body)
            validate_schema(api, body)
            if api == "chat":
                check_chat_semantics(body)
                response = _chat_response(body, with_call_ids(chat_answer(body), app.state.call_ids))
            else:
                check_responses_semantics(body)
                response = _responses_response(body, with_call_ids(responses_answer(body), app.state.call_ids))
        except ApiError as exc:
            logger.warning("offline model: %d for %s: %s", exc.status, path, exc.body["message"])
            app.state.request_log.append({"path": path, "status": exc.status, "error": exc.body, "body": body})
            return JSONResponse({"error": exc.body}, status_code=exc.status)
        app.state.request_log.append({"path": path, "status": 200, "error": None, "body": body})
        return response

    @app.post(CHAT_PATH)
    async def chat_completions(request: Request) -> Response:
        return await handle(request, "chat")

    @app.post(RESPONSES_PATH)
    async def responses(request: Request) -> Response:
        return await handle(request, "responses")

    return app


# Streams are built in full before the 200 goes out, so a failure can never hide mid-stream.
def _chat_response(body: dict[str, Any], said: Answer) -> Response:
    if body.get("stream"):
        return StreamingResponse(sse(list(chat_chunks(body, said)), named=False), media_type="text/event-stream")
    return JSONResponse(chat_completion(body, said))


def _responses_response(body: dict[str, Any], said: Answer) -> Response:
    if body.get("stream"):
        return StreamingResponse(sse(list(response_events(body, said)), named=True), media_type="text/event-stream")
    return JSONResponse(response_completed(body, said))


def offline_client(app: FastAPI | None = None) -> openai.AsyncOpenAI:
    """An AsyncOpenAI that talks to the offline model in process (a new app unless one is given)."""
    transport = httpx.ASGITransport(app=app if app is not None else create_offline_app())
    return openai.AsyncOpenAI(
        base_url=BASE_URL,
        api_key=API_KEY,
        max_retries=0,
        http_client=httpx.AsyncClient(transport=transport, base_url=BASE_URL),
    )


def main(argv: list[str] | None = None) -> None:
    """Serve the offline model over HTTP, for apps configured with OPENAI_BASE_URL."""
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve the offline model at http://HOST:PORT/v1.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    uvicorn.run(create_offline_app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
