# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The @invoke and @stream endpoints: render the history, run the agent, return replayable items."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Runner
from agents.items import MessageOutputItem
from agents.stream_events import RawResponsesStreamEvent, RunItemStreamEvent
from mlflow.genai.agent_server import invoke, stream
from mlflow.types.responses import ResponsesAgentRequest, ResponsesAgentResponse, ResponsesAgentStreamEvent

from agent_server import agent, errors, llm, mcp_servers
from agent_server.history import render_history
from agent_server.output_items import ReplayableOutput, replayable_id, with_unique_call_ids


def model_input(request: ResponsesAgentRequest) -> list[dict[str, Any]]:
    """The request's history, rendered for the configured API mode, then the owner's own rules (agent.py).

    Rendered again, after the request guard did: MLflow's request model re-adds `"status": null`
    to assistant messages and drops their ids, which the SDK would reject.
    """
    items = [item.model_dump() for item in request.input]
    return customize_history(render_history(items, api=llm.settings().api))


def customize_history(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The owner's `customize_history(items)` applied to the rendered history, if agent.py defines one.

    agent.py is rendered once and `copier update` never touches it again, so an app generated
    before a hook existed has no such function: every hook is optional, and a missing one
    keeps the template's behaviour.
    """
    hook = getattr(agent, "customize_history", None)
    return items if hook is None else hook(items)


def for_this_request(owners_agent: Agent) -> Agent:
    """The owner's agent with the MCP servers that are up now, and tool call ids made unique."""
    if servers := mcp_servers.active_servers():
        owners_agent = owners_agent.clone(mcp_servers=[*owners_agent.mcp_servers, *servers])
    return with_unique_call_ids(owners_agent)


@invoke()
async def handle_invoke(request: ResponsesAgentRequest) -> ResponsesAgentResponse:
    history = await asyncio.to_thread(model_input, request)  # CPU work, off the event loop
    owners_agent = for_this_request(agent.create_agent())
    errors.record_input(history, has_instructions=owners_agent.instructions is not None)
    try:
        result = await Runner.run(owners_agent, history)
    except errors.MODEL_FAILURES as error:
        errors.record(error)  # errors.UpstreamErrors answers with the status that says why, not a 500
        raise
    output = ReplayableOutput()
    items = [item for run_item in result.new_items for item in output.add(run_item.raw_item)]
    return ResponsesAgentResponse(output=[*items, *output.finish()])


@stream()
async def handle_stream(request: ResponsesAgentRequest) -> AsyncIterator[ResponsesAgentStreamEvent]:
    history = await asyncio.to_thread(model_input, request)  # CPU work, off the event loop
    result = Runner.run_streamed(for_this_request(agent.create_agent()), input=history)
    output = ReplayableOutput()
    message_id = replayable_id("message", None)
    async for event in result.stream_events():
        if isinstance(event, RawResponsesStreamEvent):
            data = event.data
            if data.type == "response.output_item.added" and getattr(data.item, "type", None) == "message":
                # One id per message, shared by its deltas and its final item.
                message_id = replayable_id("message", data.item.id)
            elif data.type == "response.output_text.delta":
                yield ResponsesAgentStreamEvent(type="response.output_text.delta", item_id=message_id, delta=data.delta)
        elif isinstance(event, RunItemStreamEvent):
            own_id = message_id if isinstance(event.item, MessageOutputItem) else None
            for item in output.add(event.item.raw_item, message_id=own_id):
                yield ResponsesAgentStreamEvent(type="response.output_item.done", item=item)
    for item in output.finish():
        yield ResponsesAgentStreamEvent(type="response.output_item.done", item=item)
