# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""An answer that does not stream is the turn's stream collected (serve.py): its finished items, in order."""

from __future__ import annotations

from typing import Any

from agent_server.turn import serve
from agent_server.turn_context import TurnContext


async def collected(context: TurnContext) -> list[dict[str, Any]]:
    """The turn's finished items, once it is complete (and stored, with memory on)."""
    return [event["item"] async for event in serve.events(context) if event["type"] == "response.output_item.done"]


def invocations_body(context: TurnContext, output: list[dict[str, Any]]) -> dict[str, Any]:
    """/invocations' answer, as MLflow's ResponsesAgentResponse dumps it (None fields left out): the items, what the
    answer carries beside them (`custom_outputs`), and its trace (`metadata`, asked for by x-mlflow-return-trace-id)."""
    body: dict[str, Any] = {"object": "response", "output": output}
    if context.custom_outputs:
        body["custom_outputs"] = context.custom_outputs
    if context.trace_id:
        body["metadata"] = {"trace_id": context.trace_id}
    return body
