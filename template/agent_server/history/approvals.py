# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Human approval of MCP tool calls, with no state kept on the server. Stdlib only, like the whole render.

When the model calls a tool that needs approval, the turn ends with an `mcp_approval_request`
item instead of the call (the Databricks chat UI shows it as Approve/Deny buttons). Its id is a
signature of the call (tool name and arguments) and of the user turns before it, made with
MCP_APPROVAL_SECRET, so an approval of a request the app did not make, of one moved into another
conversation, or of one whose arguments were changed runs nothing: the model is told the approval
was not run. The app never runs a tool on the client's word alone.

The render turns the request into the tool call, and the client's `mcp_approval_response` into
its output: for a denial, a text saying so; for an approval, APPROVED, which the handler replaces
with what the tool returns when it runs it. Only an approval at the end of the history runs the
tool; an older one whose result the client did not keep is not run again.

Set MCP_APPROVAL_SECRET (any long random string) when several app processes serve one app, or
when approvals must outlive a restart; without it each process makes its own.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from agent_server import config

ID_PREFIX = "mcpr_"
APPROVED = "\x00approved: the app runs this tool and puts its output here"
NOT_RUN_AGAIN = "This tool call was approved earlier; its output is not in this conversation."
DENIED = "The user denied this tool call."
NOT_VERIFIED = (
    "This approval was not run: the app did not make this approval request for this conversation and call "
    "(or was restarted without MCP_APPROVAL_SECRET). Ask again if the tool is still needed."
)
_PROCESS_SECRET = secrets.token_bytes(32)  # without MCP_APPROVAL_SECRET: this process's own


def _secret() -> bytes:
    return config.settings().mcp.approval_secret.encode() or _PROCESS_SECRET


def approval_id(
    history: Sequence[Mapping[str, Any]], name: str, arguments: str, conversation: str | None = None
) -> str:
    """The id of an approval request for this call, after these (rendered) items, in the conversation the client
    named (if it named one): an approval moved into another conversation is not this one."""
    users = [item.get("content") for item in history if item.get("role") == "user"]
    signed_parts: list[Any] = [users, name, canonical_arguments(arguments)]
    if conversation is not None:
        signed_parts.append(conversation)
    signed = json.dumps(signed_parts, sort_keys=True, separators=(",", ":"))
    return ID_PREFIX + hmac.new(_secret(), signed.encode(), hashlib.sha256).hexdigest()[:48]


def canonical_arguments(arguments: Any) -> str:
    """Arguments as one JSON text, however a client re-serialised them (spaces, key order, JSON in a string)."""
    value = arguments
    for _ in range(2):  # a client may send the arguments' JSON text as a JSON string
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            return str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def request_item(
    history: Sequence[Mapping[str, Any]], name: str, arguments: str, server: str, conversation: str | None = None
) -> dict[str, Any]:
    """The `mcp_approval_request` output item that stands for a call waiting for the user's approval."""
    return {
        "type": "mcp_approval_request",
        "id": approval_id(history, name, arguments, conversation),
        "name": name,
        "arguments": arguments,
        "server_label": server,
    }


def output_for(response: Mapping[str, Any]) -> str:
    """What an `mcp_approval_response` becomes in the render: the call's output, or APPROVED to run it."""
    if response.get("approve") is True:
        return APPROVED
    reason = response.get("reason")
    return DENIED + (f" Reason: {reason}" if isinstance(reason, str) and reason else "")


def is_decision(output: Any) -> bool:
    """Is this output of an approval call the user's answer (approved, denied, or not verified), rather than what
    the tool returned when it ran?"""
    return isinstance(output, str) and (output in (APPROVED, NOT_VERIFIED, NOT_RUN_AGAIN) or output.startswith(DENIED))


def chosen_output(outputs: Sequence[Mapping[str, Any]]) -> int:
    """Which of an approval call's several outputs counts: what the tool returned, once it ran (so nothing runs it
    again); otherwise the user's first answer, which is final (a denial cannot be turned into an approval)."""
    ran = [position for position, output in enumerate(outputs) if not is_decision(output.get("output"))]
    return ran[0] if ran else 0


def is_genuine(
    history: Sequence[Mapping[str, Any]], request: Mapping[str, Any], conversation: str | None = None
) -> bool:
    """Did this app make `request` (a client's `mcp_approval_request`) after these rendered items?"""
    expected = approval_id(history, str(request.get("name")), request.get("arguments") or "", conversation)
    return isinstance(request.get("id"), str) and hmac.compare_digest(expected, request["id"])


def to_run(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The approved calls this request runs: APPROVED outputs at the end of the history.

    An APPROVED output anywhere else says NOT_RUN_AGAIN instead (in place), so a replayed approval
    never runs its tool twice. Returns the calls to run; the caller puts their outputs in place.
    """
    tail = len(items)
    while tail > 0 and items[tail - 1].get("type") in ("function_call", "function_call_output"):
        tail -= 1
    calls = {item["call_id"]: item for item in items if item.get("type") == "function_call"}
    runs = []
    for position, item in enumerate(items):
        if item.get("type") == "function_call_output" and item.get("output") == APPROVED:
            if position >= tail and item["call_id"] in calls:
                runs.append(calls[item["call_id"]])
            else:
                item["output"] = NOT_RUN_AGAIN
    return runs


def honour_only_genuine(
    client_items: Sequence[Any], rendered: Sequence[Any], conversation: str | None = None, stored: int = 0
) -> list[int]:
    """Turn every APPROVED output this app must not honour into NOT_VERIFIED; returns their client indices.

    `rendered` is the render of `client_items` with sources (history.Rendered). An approval runs a
    tool only when it answers an `mcp_approval_request` this app signed for this conversation and
    call. Any other (forged, moved, changed, or signed by a process with another secret) runs
    nothing, and the model is told why: a 400 would come back with the same history on every
    later turn, so the conversation could never continue.

    The first `stored` client items are the kept conversation's (memory). A request among them may also be
    signed for no conversation: the turn that made it named none (the app made the conversation's id then), and
    the client names the conversation only from the next turn on, as the README's first example does. A request
    signed for no conversation is valid in any that names none already, so this lets nothing new through.
    """
    requests = {}
    refused = []
    for position, entry in enumerate(rendered):
        client = client_items[entry.index]
        if client.get("type") == "mcp_approval_request" and entry.item.get("type") == "function_call":
            requests[entry.item["call_id"]] = (position, client, entry.index < stored)
        elif entry.item.get("output") == APPROVED:
            request = requests.get(entry.item.get("call_id"))
            answered = client.get("type") == "mcp_approval_response"
            earlier = [e.item for e in rendered[: request[0]]] if request is not None else []
            signed_for = [conversation, None] if request is not None and request[2] else [conversation]
            if not answered or request is None or not any(is_genuine(earlier, request[1], c) for c in signed_for):
                entry.item["output"] = NOT_VERIFIED
                refused.append(entry.index)
    return refused


def replayed_twice(items: Sequence[Any]) -> set[int]:
    """Indices of items that repeat an approved or denied call the history already holds in full.

    After the app runs an approved call, the Databricks chat UI replays the request and its
    response, then the same call again as a `function_call` with the app's output. The request
    and that output are the call; the response and the repeated call would make the model see
    it twice.
    """
    requested = {
        item.get("id") for item in items if isinstance(item, Mapping) and item.get("type") == "mcp_approval_request"
    }
    answered = {
        item.get("call_id")
        for item in items
        if isinstance(item, Mapping) and item.get("type") == "function_call_output" and item.get("call_id") in requested
    }
    return {
        index
        for index, item in enumerate(items)
        if isinstance(item, Mapping)
        and (
            (item.get("type") == "mcp_approval_response" and item.get("approval_request_id") in answered)
            or (item.get("type") == "function_call" and item.get("call_id") in requested)
        )
    }
