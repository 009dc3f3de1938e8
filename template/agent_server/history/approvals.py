# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Human approval of MCP tool calls, signed so that only the app's own requests can be approved. Stdlib only.

When the model calls a tool that needs approval, the turn ends with an `mcp_approval_request`
item instead of the call (the Databricks chat UI shows it as Approve/Deny buttons). Its id is a
signature of the call (tool name and arguments), of the user turns before it, of the conversation
and of the time it was made, so an approval of a request the app did not make, of one moved into
another conversation, of one whose arguments were changed, or of one older than
MCP_APPROVAL_MAX_AGE_HOURS runs nothing: the model is told the approval was not run. The app
never runs a tool on the client's word alone.

The render turns the request into the tool call, and the client's `mcp_approval_response` into
its output: for a denial, a text saying so; for an approval, APPROVED, which the handler replaces
with what the tool returns when it runs it. Only an approval at the end of the history runs the
tool; an older one whose result the client did not keep is not run again. The first answer to a
request is final however the history comes back (approval_answers.py keeps it: `answers`, `keep_first`).

The signing key: MCP_APPROVAL_SECRET if set; else, with memory on, the one kept in its store (`use_key`, at
start-up), which every process and instance on that store shares and which outlives restarts; else this
process's own (start-app makes one for its workers).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agent_server import config

ID_PREFIX = "mcpr_"
ID_LENGTH = len(ID_PREFIX) + 16 + 32  # the prefix, the stamp, the signature (approval_id)
APPROVED = "\x00approved: the app runs this tool and puts its output here"
NOT_RUN_AGAIN = "This tool call was approved earlier; its output is not in this conversation."
DENIED = "The user denied this tool call."
NOT_VERIFIED = (
    "This approval was not run: the app did not make this approval request for this conversation and call "
    "(or made it with a signing key it no longer has). Ask again if the tool is still needed."
)
EXPIRED = (
    "This approval was not run: its request expired (MCP_APPROVAL_MAX_AGE_HOURS). Ask again if the tool is still "
    "needed."
)
_PROCESS_SECRET = secrets.token_bytes(32)  # with no other key: this process's own
_stored_key: bytes | None = None


def use_key(key: str | None) -> None:
    """The key memory keeps in its store (memory/database.py, at start-up; None once it closes)."""
    global _stored_key
    _stored_key = key.encode() if key else None


def _secret() -> bytes:
    return config.settings().mcp.approval_secret.encode() or _stored_key or _PROCESS_SECRET


def approval_id(
    history: Sequence[Mapping[str, Any]], name: str, arguments: str, conversation: str | None = None,
    stamp: str | None = None,
) -> str:  # fmt: skip
    """The id of an approval request for this call, after these (rendered) items, in the conversation the client
    named (if it named one: an approval moved into another conversation is not this one). Its `stamp`, in clear in
    the id and signed with the rest, is the time it was made (so its age can be checked) and a random part (so it
    names this one request, whose first answer is kept by its id): a new one if None."""
    stamp = stamp or f"{int(time.time()):08x}{secrets.token_hex(4)}"
    users = [item.get("content") for item in history if item.get("role") == "user"]
    signed_parts: list[Any] = [users, name, canonical_arguments(arguments), conversation, stamp]
    signed = json.dumps(signed_parts, sort_keys=True, separators=(",", ":"))
    return ID_PREFIX + stamp + hmac.new(_secret(), signed.encode(), hashlib.sha256).hexdigest()[:32]


def stamp_of(request_id: Any) -> str | None:
    """The stamp of an approval id (see approval_id); None: not an id of ours."""
    if not isinstance(request_id, str) or not request_id.startswith(ID_PREFIX):
        return None
    stamp = request_id[len(ID_PREFIX) : len(ID_PREFIX) + 16]
    return stamp if len(stamp) == 16 and all(c in "0123456789abcdef" for c in stamp) else None


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
    return isinstance(output, str) and (output in (APPROVED, NOT_VERIFIED, EXPIRED, NOT_RUN_AGAIN) or is_answer(output))


def is_answer(output: Any) -> bool:
    """Is this output of an approval call the user's own answer, approval or denial, as the render made it?"""
    return output == APPROVED or (isinstance(output, str) and output.startswith(DENIED))


def answers(items: Iterable[Mapping[str, Any]]) -> dict[str, bool]:
    """The user's answers in these (paired) items, by approval id: True for an approval, False for a denial. Only
    ids of this app's shape (a client's made-up id names no request, and is not kept)."""
    return {
        item["call_id"]: item["output"] == APPROVED
        for item in items
        if item.get("type") == "function_call_output"
        and len(str(item.get("call_id"))) == ID_LENGTH
        and stamp_of(item.get("call_id")) is not None
        and is_answer(item.get("output"))
    }


def keep_first(items: Iterable[dict[str, Any]], first: Mapping[str, bool]) -> list[str]:
    """Make each answer in `items` (in place) the first one given to its request (`first`, by approval id): an
    approval after a denial is that denial; a denial after an approval says the call was approved (it ran, or
    runs, once; never again). Returns the ids of the answers changed."""
    changed = []
    for item in items:
        call_id = str(item.get("call_id"))
        if item.get("type") == "function_call_output" and is_answer(item.get("output")) and call_id in first:
            if (item["output"] == APPROVED) != first[call_id]:
                item["output"] = NOT_RUN_AGAIN if first[call_id] else DENIED
                changed.append(call_id)
    return changed


def chosen_output(outputs: Sequence[Mapping[str, Any]]) -> int:
    """Which of an approval call's several outputs counts: what the tool returned, once it ran (so nothing runs it
    again); otherwise the user's first answer, which is final (a denial cannot be turned into an approval)."""
    ran = [position for position, output in enumerate(outputs) if not is_decision(output.get("output"))]
    return ran[0] if ran else 0


def refusal(
    history: Sequence[Mapping[str, Any]], request: Mapping[str, Any], conversations: Iterable[str | None] = (None,)
) -> str | None:
    """None if this app made `request` (a client's `mcp_approval_request`) after these rendered items, for one of
    `conversations`, within MCP_APPROVAL_MAX_AGE_HOURS; otherwise what an approval of it says instead of running:
    NOT_VERIFIED (not made by this app, or signed with another key), or EXPIRED."""
    request_id, stamp = request.get("id"), stamp_of(request.get("id"))
    if stamp is None:
        return NOT_VERIFIED
    name, arguments = str(request.get("name")), request.get("arguments") or ""
    expected = (approval_id(history, name, arguments, conversation, stamp) for conversation in conversations)
    if not any(hmac.compare_digest(signed, str(request_id)) for signed in expected):
        return NOT_VERIFIED
    too_old = time.time() - int(stamp[:8], 16) > config.settings().mcp.approval_max_age_hours * 3600
    return EXPIRED if too_old else None


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
    """Turn every APPROVED output this app must not honour into NOT_VERIFIED (or EXPIRED); returns their client
    indices.

    `rendered` is the render of `client_items` with sources (history.Rendered). An approval runs a
    tool only when it answers an `mcp_approval_request` this app signed for this conversation and
    call, within MCP_APPROVAL_MAX_AGE_HOURS. Any other (forged, moved, changed, signed with another
    key, or expired) runs nothing, and the model is told why: a 400 would come back with the same history on every
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
            if not answered or request is None:
                why: str | None = NOT_VERIFIED
            else:
                earlier = [e.item for e in rendered[: request[0]]]
                why = refusal(earlier, request[1], [conversation, None] if request[2] else [conversation])
            if why is not None:
                entry.item["output"] = why
                refused.append(entry.index)
    return refused


def replayed_twice(items: Sequence[Any]) -> set[int]:
    """Indices of items that repeat an approved or denied call the history already holds in full.

    After the app runs an approved call, the Databricks chat UI replays the request and its
    response, then the same call again as a `function_call` with the app's output. The request
    and that output are the call; the response and the repeated call would make the model see
    it twice.
    """
    mappings = [(index, item) for index, item in enumerate(items) if isinstance(item, Mapping)]
    requested = {_text(item, "id") for _, item in mappings if item.get("type") == "mcp_approval_request"} - {None}
    answered = {
        _text(item, "call_id")
        for _, item in mappings
        if item.get("type") == "function_call_output" and _text(item, "call_id") in requested
    }
    return {
        index
        for index, item in mappings
        if (item.get("type") == "mcp_approval_response" and _text(item, "approval_request_id") in answered)
        or (item.get("type") == "function_call" and _text(item, "call_id") in requested)
    }


def _text(item: Mapping[str, Any], key: str) -> str | None:
    """item[key] if it is a string: an id of another type (a list, say) matches nothing, and cannot be hashed."""
    value = item.get(key)
    return value if isinstance(value, str) else None
