"""A zero-cost OpenAI-compatible model server for benchmarks/serve.py: a fixed reply, at once.

Standard library only (a raw asyncio HTTP/1.1 server with keep-alive), so it runs with any Python
3.11+ and costs the benchmarked app nothing but its own side of the HTTP calls. It answers:
- POST /v1/chat/completions, with "stream": true as server-sent chunks (usage last when
  stream_options.include_usage asks for it), else one ChatCompletion;
- POST /v1/responses, likewise (the event sequence of a one-message answer), else one Response;
- GET /stats: how many model calls it answered, by path and streaming, and how many input
  messages or items each call carried (the benchmark checks that the apps sent the whole history);
- GET /health.
Every body is built to validate against the `openai` package's types (tests/test_benchmark_serve.py).

    python benchmarks/stub_model.py --port 0     # prints "stub model listening on http://127.0.0.1:PORT/v1"
    python benchmarks/stub_model.py --port 0 --delay-seconds 5    # each model call answered 5 s late
    python benchmarks/stub_model.py --port 0 --chunks 20 --over-seconds 5    # a streamed chat completion's
        reply in 20 deltas, one every 0.25 s (chunked transfer encoding), as a slow model streams; each delta's
        text names when it was sent (streams.py)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import signal
import time

REPLY = "Hello from the stub model."
USAGE_CHAT = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
USAGE_RESPONSES = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 15,
}
MAX_BODY_BYTES = 64 * 1024 * 1024
DELAY_SECONDS = 0.0
PACED: tuple[int, float] | None = None  # (deltas, over seconds) of a streamed chat completion's reply
STATUS_TEXT = {200: "OK", 400: "Bad Request", 404: "Not Found", 411: "Length Required", 413: "Payload Too Large"}


class Stats:
    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.input_sizes: collections.Counter[int] = collections.Counter()

    def as_json(self) -> dict:
        return {"calls": dict(self.calls), "input_sizes": {str(k): v for k, v in sorted(self.input_sizes.items())}}


def chat_completion(number: int, model: str) -> dict:
    return {
        "id": f"chatcmpl-stub-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": REPLY, "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": USAGE_CHAT,
    }


def chat_chunks(number: int, model: str, include_usage: bool) -> list[dict]:
    head = {
        "id": f"chatcmpl-stub-{number}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict, finish_reason: str | None = None) -> dict:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}

    chunks = [chunk({"role": "assistant", "content": ""}), chunk({"content": REPLY}), chunk({}, "stop")]
    if include_usage:
        chunks.append({**head, "choices": [], "usage": USAGE_CHAT})
    return chunks


def response_object(number: int, model: str, status: str = "completed") -> dict:
    done = status == "completed"
    return {
        "id": f"resp_stub{number}",
        "object": "response",
        "created_at": time.time(),
        "model": model,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "output": [message_item(number, "completed")] if done else [],
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "usage": USAGE_RESPONSES if done else None,
    }


def message_item(number: int, status: str, text: str | None = REPLY) -> dict:
    content = [] if text is None else [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {"type": "message", "id": f"msg_stub{number}", "status": status, "role": "assistant", "content": content}


def response_events(number: int, model: str) -> list[dict]:
    item_id = f"msg_stub{number}"
    part = {"type": "output_text", "text": REPLY, "annotations": [], "logprobs": []}
    at = {"item_id": item_id, "output_index": 0, "content_index": 0}
    events = [
        {"type": "response.created", "response": response_object(number, model, "in_progress")},
        {"type": "response.in_progress", "response": response_object(number, model, "in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": message_item(number, "in_progress", None)},
        {"type": "response.content_part.added", **at, "part": {**part, "text": ""}},
        {"type": "response.output_text.delta", **at, "delta": REPLY, "logprobs": []},
        {"type": "response.output_text.done", **at, "text": REPLY, "logprobs": []},
        {"type": "response.content_part.done", **at, "part": part},
        {"type": "response.output_item.done", "output_index": 0, "item": message_item(number, "completed")},
        {"type": "response.completed", "response": response_object(number, model)},
    ]
    return [{**event, "sequence_number": sequence} for sequence, event in enumerate(events)]


def sse(events: list[dict], named: bool) -> bytes:
    lines = []
    for event in events:
        data = json.dumps(event, separators=(",", ":"))
        lines.append(f"event: {event['type']}\ndata: {data}\n\n" if named else f"data: {data}\n\n")
    if not named:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def answer(method: str, path: str, body: bytes, stats: Stats) -> tuple[int, str, bytes]:
    """(status, content type, body) for one request."""
    path = path.split("?", 1)[0]
    if method == "GET" and path in ("/health", "/v1/health"):
        return 200, "application/json", b'{"status":"ok"}'
    if method == "GET" and path == "/stats":
        return 200, "application/json", json.dumps(stats.as_json()).encode()
    if method != "POST" or path not in ("/v1/chat/completions", "/v1/responses"):
        return 404, "application/json", b'{"error":{"message":"not found","type":"invalid_request_error"}}'
    try:
        request = json.loads(body)
        model = str(request.get("model") or "stub")
    except (ValueError, AttributeError):
        return (
            400,
            "application/json",
            b'{"error":{"message":"body is not a JSON object","type":"invalid_request_error"}}',
        )
    stream = request.get("stream") is True
    chat = path == "/v1/chat/completions"
    stats.calls[f"{'chat' if chat else 'responses'} {'stream' if stream else 'json'}"] += 1
    number = sum(stats.calls.values())
    sent = request.get("messages") if chat else request.get("input")
    stats.input_sizes[len(sent) if isinstance(sent, list) else 1] += 1
    if chat and stream:
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        return 200, "text/event-stream", sse(chat_chunks(number, model, include_usage), named=False)
    if chat:
        return 200, "application/json", json.dumps(chat_completion(number, model)).encode()
    if stream:
        return 200, "text/event-stream", sse(response_events(number, model), named=True)
    return 200, "application/json", json.dumps(response_object(number, model)).encode()


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stats: Stats) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, path, _ = request_line.split(" ", 2)
            headers = {}
            for line in header_lines:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            if "chunked" in headers.get("transfer-encoding", "").lower():
                status, kind, body = 411, "application/json", b'{"error":{"message":"send Content-Length"}}'
                keep_alive = False
            else:
                length = int(headers.get("content-length") or 0)
                if length > MAX_BODY_BYTES:
                    status, kind, body, keep_alive = 413, "application/json", b"{}", False
                else:
                    status, kind, body = answer(method, path, await reader.readexactly(length), stats)
                    if method == "POST" and DELAY_SECONDS:
                        await asyncio.sleep(DELAY_SECONDS)  # a slow model: background_runs.py's many runs at once
                    keep_alive = headers.get("connection", "").lower() != "close"
            if PACED and status == 200 and kind == "text/event-stream" and path.startswith("/v1/chat"):
                await paced(writer, json.loads(body.split(b"data: ", 2)[1].split(b"\n", 1)[0]), *PACED)
                continue
            writer.write(
                (
                    f"HTTP/1.1 {status} {STATUS_TEXT[status]}\r\ncontent-type: {kind}\r\n"
                    f"content-length: {len(body)}\r\nconnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
                ).encode()
                + body
            )
            await writer.drain()
            if not keep_alive:
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        writer.close()


async def paced(writer: asyncio.StreamWriter, first: dict, deltas: int, seconds: float) -> None:
    """A streamed chat completion whose reply comes in `deltas` pieces over `seconds`, in chunked encoding."""
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")

    def send(data: bytes) -> None:
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def chunk(delta: dict, finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return b"data: " + json.dumps({**first, "choices": [choice]}).encode() + b"\n\n"

    send(chunk({"role": "assistant", "content": ""}))
    for number in range(deltas):
        await writer.drain()
        await asyncio.sleep(seconds / deltas)
        send(chunk({"content": f"w{number}@{time.time():.6f} "}))  # when it was sent, for streams.py
    send(chunk({}, "stop") + b"data: [DONE]\n\n")
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def main(port: int, seconds: float) -> None:
    stats = Stats()
    server = await asyncio.start_server(
        lambda reader, writer: serve_connection(reader, writer, stats), "127.0.0.1", port, limit=MAX_BODY_BYTES
    )
    bound = server.sockets[0].getsockname()[1]
    print(f"stub model listening on http://127.0.0.1:{bound}/v1", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with server:
        try:
            await asyncio.wait_for(stop.wait(), seconds)  # bounded: it stops by itself
        except TimeoutError:
            pass


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--max-seconds", type=float, default=3600, help="stop by itself after this long")
    parser.add_argument("--delay-seconds", type=float, default=0.0, help="answer each model call this much later")
    parser.add_argument("--chunks", type=int, default=0, help="stream a chat reply in this many deltas, paced")
    parser.add_argument("--over-seconds", type=float, default=5.0, help="the paced deltas' time, all told")
    args = parser.parse_args()
    DELAY_SECONDS = args.delay_seconds
    PACED = (args.chunks, args.over_seconds) if args.chunks else None
    asyncio.run(main(args.port, args.max_seconds))
