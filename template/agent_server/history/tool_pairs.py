# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Pair each tool call in a rendered history with exactly one output: the render's last step.

Stdlib only, like the rest of the render (render.py), which calls `pair_calls_with_outputs`. Both APIs need every
call answered by one output, right after the calls, before the next message. Real
conversations break that in ways a client replays on every later turn, so each is
repaired here (logged at INFO with the item's index; docs/history-shapes.md, "Repairs"):
- a call with no output (a stream the user stopped): answered with INTERRUPTED_CALL_OUTPUT;
- an output that arrives after other items: moved up to follow its call;
- several outputs for one call (a client that also tried to run a tool the app ran, as
  the AI SDK's generateText does): the model sees one, the app's own. The app gives each
  call it answers the item id `output_bound_call_id(call_id, output)`, which clients
  replay with the call, so the app's output is the one that id names. Without such an
  id (a history the app did not produce) the newest output wins;
- an output with no call before it (a client that cut its history window between a call
  and its output): its text reaches the model as a user message saying what it is;
- a call id used by two calls, or empty (model servers that number every call `call_0`,
  or send none): each output goes to the earliest unanswered call with its id, and the
  later calls get fresh ids.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from agent_server.history import approvals

logger = logging.getLogger("agent_server.history")

INTERRUPTED_CALL_OUTPUT = "Error: this tool call was interrupted before it returned a result."
# The item id prefixes the Responses API insists on: the ids the app gives its output items and
# these repairs, and the ones the offline model checks, as the real API does.
ID_PREFIXES = {"message": "msg_", "function_call": "fc_", "function_call_output": "fc_", "reasoning": "rs_"}


def output_bound_call_id(call_id: str, output: str | list[dict[str, Any]]) -> str:
    """The item id the app gives a call it answered: names that call's output (its text, or its parts) among any
    others."""
    text = output if isinstance(output, str) else json.dumps(output, sort_keys=True, ensure_ascii=False)
    digest = hashlib.sha256(f"{call_id}\x00{text}".encode()).hexdigest()
    return f"{ID_PREFIXES['function_call']}{digest[:40]}"


def orphan_output_message(call_id: str | None, output: str | list[dict[str, Any]]) -> dict[str, Any]:
    """An output whose call is gone (or that names none), as a message both APIs accept, saying what it is."""
    if call_id is None:
        note = "[Output of a tool call, which the output does not name]"
    else:
        note = f"[Output of tool call {call_id!r}, whose call is no longer in this conversation]"
    if isinstance(output, str):
        return {"role": "user", "content": f"{note}\n{output}"}
    return {"role": "user", "content": [{"type": "input_text", "text": note}, *output]}


@dataclass(frozen=True)
class Rendered:
    """One rendered item, the index of the client's item it came from, and that item's `id`; an answer's citations
    (its `annotations`, render.py), which the model is never sent."""

    index: int
    item: dict[str, Any]
    client_id: Any = None
    annotations: tuple[dict[str, Any], ...] = ()

    def kept(self) -> dict[str, Any]:
        """The item as conversation memory keeps and shows it: with its citations, which render back to this."""
        return {**self.item, "annotations": list(self.annotations)} if self.annotations else self.item


@dataclass
class _Call:
    index: int
    item: dict[str, Any]
    client_call_id: str
    client_id: Any
    outputs: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


@dataclass
class _Orphan:
    index: int
    item: dict[str, Any]


@dataclass
class _OutputSlot:
    """Where a call's first output stood: its answer goes there, unless something came between."""

    call: _Call


def pair_calls_with_outputs(rendered: list[Rendered]) -> list[Rendered]:
    """The items in order, each call followed (after its run of calls) by its one output, each with the
    index of the client's item it stands for."""
    fresh = _FreshIds({r.item["call_id"] for r in rendered if r.item.get("type") == "function_call"})
    calls_by_id: dict[str, list[_Call]] = {}
    sequence: list[_Call | _OutputSlot | _Orphan | Rendered] = []
    for r in rendered:
        kind = r.item.get("type")
        if kind == "function_call":
            call = _Call(r.index, dict(r.item), r.item["call_id"], r.client_id)
            same_id = calls_by_id.setdefault(call.client_call_id, [])
            if same_id or not call.client_call_id:
                renamed = call.item["call_id"] = fresh.new(call.client_call_id)
                logger.info("history: input[%d] reuses call_id %r; renamed %r", r.index, call.client_call_id, renamed)
            same_id.append(call)
            sequence.append(call)
        elif kind == "function_call_output":
            same_id = calls_by_id.get(r.item["call_id"], [])
            paired = next((c for c in same_id if not c.outputs), same_id[-1] if same_id else None)
            if paired is None:
                sequence.append(_Orphan(r.index, r.item))
            else:
                if not paired.outputs:
                    sequence.append(_OutputSlot(paired))
                paired.outputs.append((r.index, r.item))
        else:
            sequence.append(r)
    return _in_order(sequence)


def _in_order(sequence: list[_Call | _OutputSlot | _Orphan | Rendered]) -> list[Rendered]:
    """Calls where they stood; a run of calls answered, in call order, once all its outputs came (or before
    the next message, at the latest)."""
    paired: list[Rendered] = []
    pending: list[_Call] = []
    arrived: list[_Call] = []
    for entry in sequence:
        if isinstance(entry, _Call):
            paired.append(Rendered(entry.index, entry.item))
            pending.append(entry)
            continue
        if isinstance(entry, _OutputSlot):
            if entry.call in pending:  # otherwise it was answered already, moved up
                arrived.append(entry.call)
            if len(arrived) < len(pending):
                continue
        for call in pending:
            if call.outputs and call not in arrived:
                logger.info("history: input[%d] comes after other items; moved up to its call", call.outputs[0][0])
            paired.append(_answer(call))
        pending, arrived = [], []
        if isinstance(entry, _Orphan):
            logger.info("history: input[%d] answers no earlier tool call; sent as a user message", entry.index)
            paired.append(Rendered(entry.index, orphan_output_message(entry.item["call_id"], entry.item["output"])))
        elif isinstance(entry, Rendered):
            paired.append(entry)
    paired.extend(_answer(call) for call in pending)
    return paired


def _answer(call: _Call) -> Rendered:
    call_id = call.item["call_id"]
    if not call.outputs:
        logger.info("history: input[%d], tool call %r, has no output; marked interrupted", call.index, call_id)
        return Rendered(
            call.index, {"type": "function_call_output", "call_id": call_id, "output": INTERRUPTED_CALL_OUTPUT}
        )
    index, output = _chosen(call)
    for other, _ in call.outputs:
        if other != index:
            logger.info("history: input[%d] is another output for tool call %r; kept input[%d]", other, call_id, index)
    return Rendered(index, {**output, "call_id": call_id})


def _chosen(call: _Call) -> tuple[int, dict[str, Any]]:
    """The app's own output where the call's id names it; for a call the user approves, approvals.chosen_output;
    otherwise the newest."""
    if call.client_call_id.startswith(approvals.ID_PREFIX):
        return call.outputs[approvals.chosen_output([output for _, output in call.outputs])]
    for index, output in call.outputs:
        if call.client_id == output_bound_call_id(call.client_call_id, output["output"]):
            return index, output
    return call.outputs[-1]


class _FreshIds:
    """Call ids unused anywhere in the history, derived from the id they replace, so a render is stable."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = set(taken)

    def new(self, base: str) -> str:
        stem = base or "call"
        number = 2 if base else 1
        while f"{stem}_{number}" in self.taken:
            number += 1
        self.taken.add(f"{stem}_{number}")
        return f"{stem}_{number}"
