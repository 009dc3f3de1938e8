# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""What a turn refuses before anything runs, with a 4xx that names the problem; and its history, rendered so that
every shape agent_server/history/ knows gets through. Its limits (README, "Failure modes"; declared in config/):

| variable | default | over it |
|---|---|---|
| MAX_BODY_BYTES | 16 MiB | 413 (routes.py reads the body) |
| MAX_INPUT_ITEMS | 300 items in `input` | 413 |
| MAX_INPUT_CHARS | 4,000,000 characters of text in the whole body (inline images count) | 413 |
| ATTACHMENTS_MAX_* | a turn's images and files: their types (415), number and bytes (attachments.py) | 413 |
| BODY_TIMEOUT_SECONDS | 30 s to send the whole body (and the headers: head_deadline.py) | 408 |

JSON nested deeper than 64 levels, a lone surrogate (`"\\ud800"`) and an integer of more than 4300 digits are a 400.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from agent_server import attachments, config, identity, llm, memory
from agent_server.errors import BadRequest, HttpError, TooLarge, Unauthenticated
from agent_server.history import HistoryError, json_type, render_each

MAX_JSON_DEPTH = 64


def checked_body(body: Any) -> tuple[dict[str, Any], memory.History | None]:
    """The request body (parsed once, routes.py; a run's as it was stored), and its history rendered item by item
    (None: it holds items by reference, which memory resolves first); or BadRequest saying what is wrong."""
    if not isinstance(body, dict):
        raise BadRequest(f"The request body must be a JSON object with an 'input' list, not a JSON {json_type(body)}.")
    items = body.get("input")
    if isinstance(items, str):  # the Responses API's shorthand for one user message
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise BadRequest("'input' is required and must be a list of items.", param="input")
    if not items:
        raise BadRequest("'input' must hold at least one item.", param="input")
    limit = config.settings().limits.max_input_items
    if len(items) > limit:
        message = f"'input' holds {len(items)} items; the limit is MAX_INPUT_ITEMS={limit}."
        raise TooLarge(message, "input")
    try:
        _check_size(body)
    except TooLarge:  # an attachment over its own limit is why: its 413 names that limit (attachments.py)
        attachments.check_first(items, llm.llm_settings().api)
        raise
    if "stream" in body and not isinstance(body["stream"], bool):
        raise BadRequest("'stream' must be true or false.", param="stream")
    if body.get("previous_response_id") is not None:
        keeps = "send the whole conversation in 'input'"
        if memory.enabled():
            keeps = "name the conversation in 'context.conversation_id' and send its new items"
        raise BadRequest(f"'previous_response_id' cannot be used with this app: {keeps}.", param="previous_response_id")
    if memory.enabled() and memory.has_references(items):
        return body, None
    return body, rendered_history({**body, "input": items})


def rendered_history(body: dict[str, Any]) -> memory.History:
    """The history of a body checked_body checked (its `input` a list), rendered item by item."""
    items = body["input"]
    try:
        each = render_each(items, api=llm.llm_settings().api)
    except HistoryError as error:
        raise BadRequest(str(error), param=f"input[{error.index}]") from None
    attachments.check(items, each)  # a 415 or 413 before anything runs or is stored
    return memory.History(each, items)


def caller(headers: Mapping[str, str]) -> str | None:
    """With memory off, the caller's identity as memory would read it, for the trace (feedback checks it there);
    None when the request names none or names it badly: nothing is stored by it, so that is no reason to refuse."""
    try:
        return identity.owner_of(headers)
    except HttpError:
        return None


def check_user_token(headers: Mapping[str, str]) -> None:
    """With LLM_ON_BEHALF_OF_USER, a request without the user's token is refused, never run as the app."""
    if llm.needs_user_token() and not headers.get("x-forwarded-access-token"):
        raise Unauthenticated(
            "This app calls the model as the signed-in user (LLM_ON_BEHALF_OF_USER=true), and the request "
            "carries no user token (x-forwarded-access-token). Set LLM_ON_BEHALF_OF_USER_FALLBACK=true to run "
            "such requests as the app instead.",
        )


def parsed_body(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except RecursionError:
        raise BadRequest(f"The request body is nested more than {MAX_JSON_DEPTH} levels deep.") from None
    except (UnicodeDecodeError, ValueError) as error:  # JSONDecodeError, and Python's 4300-digit integer limit
        raise BadRequest(f"The request body is not valid JSON: {error}") from None


def _check_size(body: Any) -> None:
    """Depth, total text and lone surrogates, walked without recursion (a deep body must not crash the walk)."""
    chars, stack = 0, [(body, 1)]
    strings: Iterable[Any]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise BadRequest(f"The request body is nested more than {MAX_JSON_DEPTH} levels deep.")
        if isinstance(value, dict):
            stack.extend((inner, depth + 1) for inner in value.values())
            strings = value.keys()
        elif isinstance(value, list):
            stack.extend((inner, depth + 1) for inner in value)
            strings = ()
        else:
            strings = (value,) if isinstance(value, str) else ()
        for text in strings:
            chars += len(text)
            try:
                text.encode()
            except UnicodeEncodeError:
                raise BadRequest(f"The request body holds a lone surrogate in {text!r:.60}: not text.") from None
    limit = config.settings().limits.max_input_chars
    if chars > limit:
        message = f"The request holds {chars} characters of text; the limit is MAX_INPUT_CHARS={limit}."
        raise TooLarge(message)
