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

Use it in process with `offline_client()`, an AsyncOpenAI wired to the app, or over HTTP with
`python -m agent_server.offline_model --port 8123` and OPENAI_BASE_URL=http://127.0.0.1:8123/v1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
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
    """What the model says (text, or one tool call) and the numbers its wire formats report."""

    text: str
    tool_call: ToolCall | None
    digest: str  # ids derive from it, so a replayed request gets the same ids
    input_tokens: int
    output_tokens: int


def chat_answer(body: dict[str, Any]) -> Answer:
    tools = [tool["function"]["name"] for tool in _offered_function_tools(body)]
    return answer(body["messages"], chat_turns(body["messages"]), tools)


def responses_answer(body: dict[str, Any]) -> Answer:
    tools = [tool["name"] for tool in _offered_function_tools(body)]
    return answer(body["input"], responses_turns(body["input"]), tools)


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


def answer(history: Any, turns: list[Turn], tool_names: list[str]) -> Answer:
    """Call a tool the latest user turn asks for, or describe the conversation."""
    digest = request_digest(history)
    last_user = max((i for i, turn in enumerate(turns) if turn.role == "user"), default=-1)
    latest_user_text = turns[last_user].text if last_user >= 0 else ""
    tool_outputs = [turn.text for turn in turns[last_user + 1 :] if turn.role == "tool"]
    tool = None if tool_outputs else requested_tool(latest_user_text, tool_names)

    text, tool_call = "", None
    if tool is not None:
        tool_call = ToolCall(call_id=f"call_{digest}", name=tool, arguments="{}")
    else:
        counts = {role: sum(turn.role == role for turn in turns) for role in ("user", "assistant", "tool")}
        text = (
            f"Offline model: I saw {counts['user']} user, {counts['assistant']} assistant and {counts['tool']} "
            f"tool turns. You said: {latest_user_text}"
        )
        if tool_outputs:
            text = f"The tool returned: {tool_outputs[-1]}. {text}"
    spoken = text if tool_call is None else tool_call.name + tool_call.arguments
    return Answer(text, tool_call, digest, token_count(json.dumps(history)), token_count(spoken))


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


def chat_completion(body: dict[str, Any]) -> dict[str, Any]:
    said = chat_answer(body)
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None, "annotations": []}
    if said.tool_call is None:
        message["content"] = said.text
    else:
        call = said.tool_call
        message["tool_calls"] = [
            {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
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
    return "stop" if said.tool_call is None else "tool_calls"


def chat_chunks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed chat completion: role, deltas, finish reason, then usage if asked."""
    said = chat_answer(body)
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
    if said.tool_call is None:
        for piece in split_for_stream(said.text):
            yield chunk({"content": piece})
    else:
        call = said.tool_call
        announce = {
            "index": 0,
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield chunk({"tool_calls": [announce]})
        for piece in split_for_stream(call.arguments):
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(said))
    if include_usage:
        yield {**chunk({}), "choices": [], "usage": chat_usage(said)}


# --------------------------------------------------------------------------------------------
# Responses wire format
# --------------------------------------------------------------------------------------------


def response_completed(body: dict[str, Any]) -> dict[str, Any]:
    said = responses_answer(body)
    return response_object(body, said, [output_item(said, done=True)])


def response_events(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The event sequence of a streamed response, numbered as the real API numbers it."""
    said = responses_answer(body)
    started = response_object(body, said, output=None)
    item = output_item(said, done=False)
    where = {"item_id": item["id"], "output_index": 0}

    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
    ]
    if said.tool_call is None:
        part = {**where, "content_index": 0}
        events.append({"type": "response.content_part.added", **part, "part": output_text_part("")})
        events += [
            {"type": "response.output_text.delta", **part, "delta": piece, "logprobs": []}
            for piece in split_for_stream(said.text)
        ]
        events.append({"type": "response.output_text.done", **part, "text": said.text, "logprobs": []})
        events.append({"type": "response.content_part.done", **part, "part": output_text_part(said.text)})
    else:
        arguments = said.tool_call.arguments
        events += [
            {"type": "response.function_call_arguments.delta", **where, "delta": piece}
            for piece in split_for_stream(arguments)
        ]
        events.append({"type": "response.function_call_arguments.done", **where, "arguments": arguments})
    done_item = output_item(said, done=True)
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": done_item},
        {"type": "response.completed", "response": response_object(body, said, [done_item])},
    ]
    for number, event in enumerate(events):
        yield {**event, "sequence_number": number}


def output_item(said: Answer, done: bool) -> dict[str, Any]:
    """The answer as a Responses output item: finished, or as first announced in a stream."""
    status = "completed" if done else "in_progress"
    if said.tool_call is None:
        return {
            "id": f"msg_{said.digest}",
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": [output_text_part(said.text)] if done else [],
        }
    call = said.tool_call
    return {
        "id": f"fc_{said.digest}",
        "type": "function_call",
        "status": status,
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments if done else "",
    }


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


def create_offline_app() -> FastAPI:
    """The offline model as an ASGI app; `app.state.request_log` records every request."""
    app = FastAPI(title="Offline model", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.request_log = []

    async def handle(request: Request, api: str) -> Response:
        raw = await request.body()
        body: dict[str, Any] = {}
        try:
            body = parse_body(raw)
            if api == "responses":
                check_content_part_types(body)
            validate_schema(api, body)
            if api == "chat":
                check_chat_semantics(body)
                response = _chat_response(body)
            else:
                check_responses_semantics(body)
                response = _responses_response(body)
        except ApiError as exc:
            app.state.request_log.append(
                {"path": request.url.path, "status": exc.status, "error": exc.body, "body": body}
            )
            return JSONResponse({"error": exc.body}, status_code=exc.status)
        app.state.request_log.append({"path": request.url.path, "status": 200, "error": None, "body": body})
        return response

    @app.post(CHAT_PATH)
    async def chat_completions(request: Request) -> Response:
        return await handle(request, "chat")

    @app.post(RESPONSES_PATH)
    async def responses(request: Request) -> Response:
        return await handle(request, "responses")

    return app


# Streams are built in full before the 200 goes out, so a failure can never hide mid-stream.
def _chat_response(body: dict[str, Any]) -> Response:
    if body.get("stream"):
        return StreamingResponse(sse(list(chat_chunks(body)), named=False), media_type="text/event-stream")
    return JSONResponse(chat_completion(body))


def _responses_response(body: dict[str, Any]) -> Response:
    if body.get("stream"):
        return StreamingResponse(sse(list(response_events(body)), named=True), media_type="text/event-stream")
    return JSONResponse(response_completed(body))


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
