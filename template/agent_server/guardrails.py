# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""A tripped guardrail is an answer, never a 5xx.

The owner's agent may carry openai-agents guardrails (agent.py: `input_guardrails`, `output_guardrails`, and a
function tool's `tool_input_guardrails` and `tool_output_guardrails`). The SDK stops a run whose guardrail trips
by raising its tripwire exception, which would otherwise fail the turn (a 500; in a stream, an error event). The
handlers end such a turn with an answer instead (turn/serve.py), in every mode (invoke, stream, background run):

- an assistant message that says the request was refused: agent.GUARDRAIL_MESSAGE if the owner sets it, else the
  guardrail's `output_info` when that is text, else DEFAULT_MESSAGE;
- `custom_outputs.guardrail`: the tripped guardrail's name, for clients to read;
- before it, what the run had finished (a tool that ran stays, with its output, so it is not run again), but not
  the message the guardrail blocked: the one the run ended on;
- kept with memory on as any turn is, so the conversation goes on, and the trace tagged `guardrail`.

In a stream, the text the model streamed before an output guardrail tripped has reached the client as deltas; its
message never gets its `response.output_item.done`, so no client keeps it, and the refusal is a message of its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from agents import exceptions
from agents.items import MessageOutputItem, RunItem

from agent_server import agent
from agent_server.observability import tracing
from agent_server.output_items import to_output_item

logger = logging.getLogger(__name__)

DEFAULT_MESSAGE = "Sorry, I can't help with that request."
# The SDK's tripwires: an agent's input and output guardrails, and a function tool's (those the installed
# openai-agents has).
TRIPWIRES = (
    "InputGuardrailTripwireTriggered",
    "OutputGuardrailTripwireTriggered",
    "ToolInputGuardrailTripwireTriggered",
    "ToolOutputGuardrailTripwireTriggered",
)


def tripwires() -> tuple[type[BaseException], ...]:
    """The exceptions the SDK raises when a guardrail trips: a handler answers them with a refusal."""
    return tuple(getattr(exceptions, name) for name in TRIPWIRES if hasattr(exceptions, name))


@dataclass(frozen=True)
class Refusal:
    guardrail: str  # the tripped guardrail's name: custom_outputs.guardrail
    text: str
    item: dict[str, Any]  # the assistant message that answers the turn, with that text


def refusal(tripped: BaseException) -> Refusal:
    """The answer to a turn whose guardrail tripped; the trace is tagged with the guardrail's name."""
    found: Any = getattr(tripped, "guardrail_result", None) or tripped  # an agent's guardrail's result; a tool's
    guardrail, output = found.guardrail, found.output
    name = guardrail.get_name()
    logger.info("guardrail %s tripped: the turn is answered with a refusal", name)
    tracing.tag_guardrail(name)
    text = message(output.output_info)
    content = [{"type": "output_text", "text": text, "annotations": []}]
    item = to_output_item({"type": "message", "role": "assistant", "status": "completed", "content": content})
    assert item is not None
    return Refusal(name, text, item)


def message(output_info: Any) -> str:
    """The refusal's text: the owner's GUARDRAIL_MESSAGE (optional: an agent.py from before it has none), else the
    guardrail's own output_info when it is text, else DEFAULT_MESSAGE."""
    for text in (getattr(agent, "GUARDRAIL_MESSAGE", None), output_info):
        if isinstance(text, str) and text.strip():
            return text
    return DEFAULT_MESSAGE


def kept_items(tripped: BaseException) -> list[RunItem]:
    """What the run had finished when the guardrail tripped (the SDK's run_data), without the message it ended on:
    the answer an output guardrail blocked. The stream handler holds that message back until it knows."""
    run_data = getattr(tripped, "run_data", None)
    items = list(run_data.new_items) if run_data is not None else []
    return items[:-1] if items and isinstance(items[-1], MessageOutputItem) else items


def marked(custom_outputs: dict[str, str] | None, refused: Refusal) -> dict[str, str]:
    """The answer's custom_outputs, with the guardrail that refused it."""
    return {**(custom_outputs or {}), "guardrail": refused.guardrail}
