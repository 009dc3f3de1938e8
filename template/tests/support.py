# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Talk to the app the way clients do: post history, read output items, replay them."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from typing import Any

import httpx
from fastapi.testclient import TestClient


class Chat:
    """A client that keeps history the way chat UIs do, and talks to /invocations."""

    def __init__(self, client: TestClient, stream: bool) -> None:
        self.client = client
        self.stream = stream
        self.history: list[dict[str, Any]] = []

    def send(self, text: str, replay: str = "chat_ui") -> list[dict[str, Any]]:
        """Send one user turn; return the output items and add the turn to the history."""
        self.history.append({"role": "user", "content": text})
        items = post(self.client, self.history, self.stream)
        self.history.extend(replayed(items, replay))
        return items


def post(client: TestClient, history: list[dict[str, Any]], stream: bool) -> list[dict[str, Any]]:
    """POST /invocations and return the output items, streaming or not."""
    response = client.post("/invocations", json={"input": history, "stream": stream})
    assert response.status_code == 200, response.text
    if not stream:
        return response.json()["output"]
    events = sse_events(response.text)
    errors = [event for event in events if "error" in event]
    assert not errors, errors
    items = [event["item"] for event in events if event.get("type") == "response.output_item.done"]
    for item in items:
        if item["type"] == "message":
            deltas = [
                e["delta"]
                for e in events
                if e.get("type") == "response.output_text.delta" and e["item_id"] == item["id"]
            ]
            assert "".join(deltas) == message_text(item), "streamed deltas must add up to the final message"
    return items


def sse_events(body: str) -> list[dict[str, Any]]:
    events = []
    for line in body.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            events.append(json.loads(line[len("data: ") :]))
    return events


def replayed(items: list[dict[str, Any]], replay: str) -> list[dict[str, Any]]:
    """How a client sends the app's output back on the next turn.

    - "exact": the items as the app returned them.
    - "chat_ui": a chat UI's replay: assistant text as an id-less output_text message.
    - "chat_completions": chat messages: tool calls on an assistant message, outputs as tool messages.
    """
    if replay == "exact":
        return [dict(item) for item in items]
    if replay == "chat_completions":
        return as_chat_messages(items)
    out = []
    for item in items:
        if item["type"] == "message":
            text = message_text(item)
            out.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
        else:
            out.append(dict(item))
    return out


def as_chat_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The app's output items kept as a chat-completions client keeps them."""
    messages: list[dict[str, Any]] = []
    for item in items:
        if item["type"] == "function_call":
            call = {"id": item["call_id"], "type": "function", "function": {k: item[k] for k in ("name", "arguments")}}
            if messages and messages[-1]["role"] == "assistant" and "tool_calls" in messages[-1]:
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif item["type"] == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
        else:
            messages.append({"role": "assistant", "content": message_text(item)})
    return messages


def message_text(item: dict[str, Any]) -> str:
    return "\n".join(part["text"] for part in item["content"] if part["type"] == "output_text")


def reply_text(items: list[dict[str, Any]]) -> str:
    messages = [item for item in items if item["type"] == "message"]
    assert messages, f"no assistant message in {items}"
    return message_text(messages[-1])


class ServerThread:
    """Serve an ASGI app with uvicorn on a free loopback port, in a thread of this process."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_health(url: str, process: subprocess.Popen, timeout: float = 60) -> None:
    """Wait until `url`/health answers; fail with the process's output if it exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[0]
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError(f"nothing answered on {url}/health within {timeout}s")
