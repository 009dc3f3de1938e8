# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Talk to the app the way clients do: post history, read output items, replay them. The servers the tests start
(app_servers.py) are named here too. The template's own repo tests use these as well."""

from __future__ import annotations

import json
from typing import Any

import httpx
from app_servers import (  # noqa: F401  (the tests import them from here, as they always have)
    DELETED,
    LOG_NUMBERS,
    NOT_INHERITED,
    SCRATCH,
    START_APP,
    TOOL_CALLS,
    TRACED,
    PortTaken,
    ServerProcess,
    ServerThread,
    StartedApp,
    ToolServer,
    app_env,
    clean_env,
    free_port,
    free_ports,
    fresh_database,
    mcp_tool_server,
    serve_mcp_tools,
    served_with_memory,
    wait_until_answering,
)


class Chat:
    """A client that keeps history the way chat UIs do, and talks to /invocations.

    `client` is an httpx.Client with the app's base URL: a FastAPI TestClient, or one for a real server.
    """

    def __init__(self, client: httpx.Client, stream: bool) -> None:
        self.client = client
        self.stream = stream
        self.history: list[dict[str, Any]] = []

    def send(self, text: str, replay: str = "chat_ui") -> list[dict[str, Any]]:
        """Send one user turn; return the output items and add the turn to the history."""
        self.history.append({"role": "user", "content": text})
        items = post(self.client, self.history, self.stream)
        self.history.extend(replayed(items, replay))
        return items

    def approve(self, approval: dict[str, Any], approve: bool = True) -> list[dict[str, Any]]:
        """The user's answer to `approval`, sent: the output items."""
        answer = {"type": "mcp_approval_response", "approval_request_id": approval["id"], "approve": approve}
        self.history.append(answer)
        return post(self.client, self.history, self.stream)

    def approved_and_ran(self, approval: dict[str, Any], output: str) -> list[dict[str, Any]]:
        """The user approves: the call runs, its `output` comes first, and the model is told it."""
        items = self.approve(approval)
        assert items[0] == {"type": "function_call_output", "call_id": approval["id"], "output": output}
        assert f"The tool returned: {output}" in reply_text(items)
        return items


def asked_to_approve(
    client: httpx.Client, stream: bool, tool: str, server_label: str, ran: list[Any]
) -> tuple[Chat, dict[str, Any]]:
    """A new chat: a greeting, then a turn that asks for `tool`, which asks first; the approval request it ends
    with. Nothing has run (`ran`, the tool's record, is empty) before the user answers."""
    ran.clear()
    chat = Chat(client, stream)
    chat.send("Hello")
    [approval] = chat.send(f"Use {tool}, please")
    assert approval["type"] == "mcp_approval_request" and approval["name"] == tool
    assert approval["id"].startswith("mcpr_") and approval["server_label"] == server_label
    assert ran == [], "a tool that asks first does not run before the user answers"
    return chat, approval


def post(client: httpx.Client, history: list[dict[str, Any]], stream: bool) -> list[dict[str, Any]]:
    """POST /invocations and return the output items, streaming or not."""
    return post_turn(client, {"input": history}, stream)[0]


def post_turn(
    client: httpx.Client, body: dict[str, Any], stream: bool, headers: dict[str, str] | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """POST /invocations with `body`; the output items and the answer's custom_outputs."""
    response = client.post("/invocations", json={**body, "stream": stream}, headers=headers)
    assert response.status_code == 200, response.text
    if not stream:
        return response.json()["output"], response.json().get("custom_outputs")
    events = sse_events(response.text)
    errors = [event for event in events if "error" in event]
    assert not errors, errors
    done = [event for event in events if event.get("type") == "response.output_item.done"]
    items = [event["item"] for event in done]
    for item in items:
        if item["type"] == "message":
            deltas = [
                e["delta"]
                for e in events
                if e.get("type") == "response.output_text.delta" and e["item_id"] == item["id"]
            ]
            assert "".join(deltas) == message_text(item), "streamed deltas must add up to the final message"
    return items, done[-1].get("custom_outputs") if done else None


class Conversation:
    """A client of the app's conversation memory: it names the conversation and sends only its new
    turn, or (full=True) the whole conversation again, as a client that keeps its own history does."""

    def __init__(self, client: httpx.Client, stream: bool, full: bool = False, user: str | None = None) -> None:
        self.client, self.stream, self.full = client, stream, full
        self.headers = {"x-test-user": user} if user else None
        self.id: str | None = None
        self.history: list[dict[str, Any]] = []

    def send(self, text: str, replay: str = "chat_ui") -> list[dict[str, Any]]:
        return self.send_items([{"role": "user", "content": text}], replay)

    def send_items(self, turn: list[dict[str, Any]], replay: str = "chat_ui") -> list[dict[str, Any]]:
        self.history.extend(turn)
        body: dict[str, Any] = {"input": self.history if self.full else turn}
        if self.id:
            body["context"] = {"conversation_id": self.id}
        items, outputs = post_turn(self.client, body, self.stream, self.headers)
        assert outputs and outputs.get("session_id"), f"every answer names its conversation: {outputs}"
        assert self.id in (None, outputs["session_id"])
        self.id = outputs["session_id"]
        self.history.extend(replayed(items, replay))
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
