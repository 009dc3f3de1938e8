# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""A turn's start: its request checked and rendered (checks.py), merged with its stored conversation (memory on),
and made into the one state the turn runs on (turn_context.py).

Parsing, checking and rendering run in a worker thread unless the body is too small to be worth one (offload.py),
so that a large body never holds up other requests.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from agent_server import memory, model_choice
from agent_server.errors import BadRequest
from agent_server.history import approvals, pair_calls_with_outputs
from agent_server.scheduling.offload import INLINE_ITEMS, cpu_work
from agent_server.turn.checks import caller, checked_body, rendered_history
from agent_server.turn_context import RunAttempt, TurnContext

logger = logging.getLogger("agent_server.turn")
RETURN_TRACE_HEADER = "x-mlflow-return-trace-id"  # MLflow's: the answer's metadata names its trace


async def prepare(path: str, headers: Mapping[str, str], body: Any, attempt: RunAttempt | None = None) -> TurnContext:
    """The turn of a parsed request `body` posted to `path`: a 4xx HttpError if the request is bad, or its memory
    turn cannot start (busy, unavailable). With memory on, the conversation is held until the turn ends."""
    _share_user_headers(headers)
    small = len(body.get("input") or ()) <= INLINE_ITEMS if isinstance(body, dict) else True
    body, sent = await cpu_work(small, checked_body, body)
    _check_mlflow_fields(body)
    asked = model_choice.requested(path, body)  # a bad one refused before the conversation is taken
    if sent is None:  # items by reference: the stored items they name, then rendered (memory/references.py)
        body = await memory.resolved_references(headers, body)
        sent = await cpu_work(small, rendered_history, body)
    turn = await memory.start_turn(headers, body, sent, attempt.continues_from if attempt else None)
    try:
        history = sent if turn is None else turn.history
        context = await cpu_work(len(history.each) <= INLINE_ITEMS, _context, path, headers, body, history, turn)
        context.model_name = await _model(asked, turn)
    except BaseException:
        if turn is not None:
            await turn.end()
        raise
    context.run = attempt
    context.owner = turn.owner if turn is not None else caller(headers)
    context.return_trace_id = (headers.get(RETURN_TRACE_HEADER) or "").lower() == "true"
    return context


async def _model(asked: str | None, turn: memory.Turn | None) -> str:
    """The turn's model (model_choice.py), kept as its conversation's; read and written only when several are listed."""
    if turn is None or not model_choice.choices().several:
        return model_choice.chosen(asked, None)
    stored = await memory.stored_model(turn.owner, turn.conversation_id)
    name = model_choice.chosen(asked, stored)
    if name != stored:
        await memory.keep_model(turn.owner, turn.conversation_id, name)
    turn.model = name  # kept with the turn's answer
    return name


def _share_user_headers(headers: Mapping[str, str]) -> None:
    """The request's headers where MLflow's agent server kept them (mlflow.genai.agent_server.get_request_headers),
    for this turn's task: llm.py reads the user's token there (LLM_ON_BEHALF_OF_USER), and so may the owner's code."""
    from mlflow.genai.agent_server.utils import set_request_headers

    shared: dict[str, str] = {}
    for name, value in headers.items():  # Headers: every one sent, in order
        shared.setdefault(name, value)  # a name sent twice keeps its first value, as Headers[name] reads it
    set_request_headers(shared)


def _context(
    path: str, headers: Mapping[str, str], body: dict[str, Any], history: memory.History, turn: memory.Turn | None
) -> TurnContext:
    """The history paired, with only genuine approvals, and the conversation's id in the request's own inputs."""
    rendered = pair_calls_with_outputs(history.each)
    conversation = turn.named if turn is not None else None  # an approval signed in another conversation is not this
    refused = approvals.honour_only_genuine(history.client_items, rendered, conversation, history.stored)
    for index in refused:
        logger.warning("input[%d]: an approval this app did not sign runs nothing", index - history.stored)
    body = {**body, "input": [r.item for r in rendered]}
    if turn is not None:  # the conversation's id, as the request's own inputs, for the trace and the owner's code
        body["custom_inputs"] = {**(body.get("custom_inputs") or {}), **turn.custom_outputs()}
    sources = [history.client_index(r) for r in rendered]
    return TurnContext(path=path, headers=headers, body=body, history=body["input"], sources=sources, turn=turn)


def _check_mlflow_fields(body: dict[str, Any]) -> None:
    """`context` and `custom_inputs` as MLflow's ResponsesAgentRequest has them: objects (or null)."""
    for name in ("context", "custom_inputs"):
        if body.get(name) is not None and not isinstance(body[name], dict):
            raise BadRequest(f"'{name}' must be an object.", param=name)
    context = body.get("context") or {}
    for name in ("conversation_id", "user_id"):
        if context.get(name) is not None and not isinstance(context[name], str):
            raise BadRequest(f"'context.{name}' must be a string.", param=f"context.{name}")
