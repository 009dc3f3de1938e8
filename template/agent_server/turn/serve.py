# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The turn's one streaming core: the agent run on the turn's history, as the answer's events, in MLflow's
ResponsesAgent stream format (`response.output_item.added`, `response.output_text.delta`,
`response.output_item.done`, each finished item replayable: output_items.py). A stream sends them as they come;
an answer that does not stream is these events collected (collect.py); /responses shapes them into the OpenAI
Responses API's (responses_api.py); a background run numbers and keeps them (runs/).

The turn is one trace, whose root span is named as MLflow's agent server named it (`handle_stream`, or
`handle_invoke` for an answer that does not stream), with the request as its inputs and the answer as its outputs.
The answer is stored with the conversation (memory on) before the last event, and the conversation is given back
when the events end, however they end: this module is the memory turn's one owner.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

from agents import Agent, RunConfig, Runner, TResponseInputItem
from agents.items import MessageOutputItem, ToolApprovalItem, ToolCallItem
from agents.stream_events import RawResponsesStreamEvent, RunItemStreamEvent

from agent_server import agent, errors, guardrails, memory, model_choice
from agent_server.history import approvals
from agent_server.memory.long_term import with_memory_tools
from agent_server.observability import tracing
from agent_server.observability.logs import tool_failure
from agent_server.output_items import ReplayableOutput, replayable_id, to_output_item, with_unique_call_ids
from agent_server.scheduling.offload import INLINE_ITEMS, cpu_work
from agent_server.tools import approved_calls, mcp_connections
from agent_server.tools.progress import started_item
from agent_server.turn_context import TurnContext

logger = logging.getLogger("agent_server.turn")

Event = dict[str, Any]
# The same for every run, so made once: the SDK's RunConfig() inspects its own type hints each time it is built.
# A call to a tool the agent does not have (a name the model made up) is answered to the model as an error
# output, and the turn goes on (openai-agents' tool_not_found_behavior, in 0.20 to 0.24); it used to fail the turn.
# A tool that raises is logged with why (observability/logs.py): the model is told only that an error occurred.
RUN_CONFIG = RunConfig(tool_not_found_behavior="return_error_to_model", tool_error_formatter=tool_failure)


def model_input(context: TurnContext) -> list[dict[str, Any]]:
    """The turn's rendered history, each item a copy the run may change, then the owner's own rules (agent.py)."""
    return customize_history([dict(item) for item in context.history])


def customize_history(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The owner's `customize_history(items)` applied to the rendered history, if agent.py defines one.

    agent.py is rendered once and `copier update` never touches it again, so an app generated before a hook existed
    has no such function: every hook is optional, and a missing one keeps the template's behaviour.
    """
    hook = getattr(agent, "customize_history", None)
    return items if hook is None else hook(items)


def for_this_request(owners_agent: Agent, servers: list[Any]) -> Agent:
    """The owner's agent with this request's MCP servers, long-term memory's tools (with LONG_TERM_MEMORY on), and
    tool call ids made unique."""
    owners_agent = with_memory_tools(owners_agent)
    if servers:
        owners_agent = owners_agent.clone(mcp_servers=[*owners_agent.mcp_servers, *servers])
    return with_unique_call_ids(owners_agent)


def approval_requests(context: TurnContext, interruptions: list[Any]) -> dict[str, dict[str, Any]]:
    """The `mcp_approval_request` item for each tool call that waits for the user (history/approvals.py), by call id."""
    conversation = context.turn.named if context.turn is not None else None  # the conversation the client named
    return {
        waiting.raw_item.call_id: approvals.request_item(
            context.history,  # the ids sign the user turns as the turn rendered them
            waiting.raw_item.name,
            waiting.raw_item.arguments,
            waiting.tool_origin.mcp_server_name or waiting.agent.name,  # an MCP server's, or the agent's own
            conversation,
        )
        for waiting in interruptions
    }


def done(item: dict[str, Any], custom_outputs: dict[str, str] | None = None) -> Event:
    """A finished item's event; `custom_outputs`, what the answer carries beside its items, if any."""
    event: Event = {"type": "response.output_item.done", "item": item}
    if custom_outputs is not None:
        event["custom_outputs"] = custom_outputs
    return event


async def events(context: TurnContext) -> AsyncIterator[Event]:
    """The turn's answer, event by event; the turn stored (memory on) once it is complete, before its last event.
    A model's failure, a guardrail's refusal or memory's failure to store is raised (errors.py says its status),
    after the events already given."""
    try:
        with _root_span(context) as span:
            answer: list[dict[str, Any]] = []
            async for event in _answer(context, answer):
                yield event
            # Stored once the turn is complete, before the stream ends: a stream cut short stores nothing.
            if context.turn is not None:
                await context.turn.finish(answer)
            if span is not None:
                span.set_outputs({"output": answer, **_outputs_beside(context)})
    finally:
        await _end(context)


def _outputs_beside(context: TurnContext) -> dict[str, Any]:
    return {"custom_outputs": context.custom_outputs} if context.custom_outputs else {}


async def _end(context: TurnContext) -> None:
    """The memory turn given back; a background run its client cancelled keeps what it had produced as its turn."""
    turn = context.turn
    if turn is None:
        return
    if context.run is not None and not turn.done and (produced := context.run.stopped_output()) is not None:
        try:
            await turn.finish(produced)
        except memory.MemoryFailure as error:
            logger.warning("the stopped turn of conversation %s was not kept: %s", turn.conversation_id, error)
    await turn.end()


@contextlib.contextmanager
def _root_span(context: TurnContext) -> Iterator[Any]:
    """The turn's trace, named as MLflow's agent server named it; the answer's `custom_outputs` (its conversation, and
    its trace, for feedback: observability/feedback.py) are made inside it."""
    import mlflow
    from mlflow.tracing.constant import SpanAttributeKey

    with mlflow.start_span(name="handle_stream" if context.stream else "handle_invoke") as span:
        span.set_inputs(context.body)
        span.set_attribute(SpanAttributeKey.MESSAGE_FORMAT, "openai")
        trace_id = tracing.tag_trace(context.owner, context.turn.conversation_id if context.turn else None)
        if context.turn is not None:
            context.turn.trace_id = trace_id  # kept with the answer: the chat page rates it again after a reload
        kept = context.turn.custom_outputs() if context.turn else {}
        kept = {**kept, **model_choice.custom_outputs(context.model_name)}  # with several models, the one answering
        context.custom_outputs = {**kept, **({"trace_id": trace_id} if trace_id else {})} or None
        context.trace_id = trace_id if context.return_trace_id else None
        yield span if trace_id else None


async def _answer(context: TurnContext, answer: list[dict[str, Any]]) -> AsyncIterator[Event]:
    extra = context.custom_outputs
    history = await cpu_work(len(context.history) <= INLINE_ITEMS, model_input, context)
    async with mcp_connections.servers_for_request() as servers:
        owners_agent = for_this_request(agent.create_agent(), servers)
        async for item in approved_calls.each_run(history, servers, context, owners_agent):
            if item["type"] == "function_call":  # an approved call as it starts: progress, before it runs
                yield {"type": "response.output_item.added", "item": item}
                continue
            answer.append(item)
            yield done(item, extra)
        context.model.model_input, context.model.system_messages = history, int(owners_agent.instructions is not None)
        refused = None
        try:
            async for event in _streamed_run(context, history, owners_agent, answer):
                if event["type"] == "response.output_item.done" and extra is not None:
                    event["custom_outputs"] = extra
                yield event
        except guardrails.tripwires() as tripped:  # an answer that says no, not an error (guardrails.py)
            refused = guardrails.refusal(tripped)
        if refused is not None:
            answer.append(refused.item)
            yield {"type": "response.output_text.delta", "item_id": refused.item["id"], "delta": refused.text}
            context.custom_outputs = guardrails.marked(extra, refused)
            yield done(refused.item, context.custom_outputs)


async def _streamed_run(
    context: TurnContext, history: list[dict[str, Any]], owners_agent: Agent, answer: list[dict[str, Any]]
) -> AsyncIterator[Event]:
    """The run's events; each finished item is also appended to `answer`."""
    output = ReplayableOutput()
    message_id = replayable_id("message", None)
    # The message the run may end on goes out with the run's next event, or at its end: until then an output
    # guardrail may still block it (guardrails.py), and a blocked answer must not reach a client as finished.
    held: list[dict[str, Any]] = []
    interruptions: list[Any] = []  # the run's tool calls that wait for approval, once it ends
    async for event in _sdk_run(context, history, owners_agent, interruptions):
        for item in held:
            answer.append(item)
            yield done(item)
        held = []
        if isinstance(event, RawResponsesStreamEvent):
            data = event.data
            if data.type == "response.output_item.added" and getattr(data.item, "type", None) == "message":
                message_id = replayable_id("message", data.item.id)  # one id per message: its deltas' and its own
            elif data.type == "response.output_text.delta":
                yield {"type": "response.output_text.delta", "item_id": message_id, "delta": data.delta}
        elif isinstance(event, RunItemStreamEvent):
            if isinstance(event.item, ToolCallItem):
                if context.run is not None and (started := to_output_item(event.item.raw_item)) is not None:
                    await context.run.on_tool_call(started)  # a background run keeps it before the tool runs
                if running := started_item(event.item, owners_agent):
                    yield {"type": "response.output_item.added", "item": running}  # before the tool runs: progress
            own_id = message_id if isinstance(event.item, MessageOutputItem) else None
            for item in output.add(event.item.raw_item, message_id=own_id):
                if item["type"] == "message":
                    held.append(item)  # the last of what add() gives (output_items.py)
                    continue
                answer.append(item)
                yield done(item)
    waiting = await cpu_work(not interruptions, approval_requests, context, interruptions) if interruptions else {}
    finished = output.finish()
    finished = [waiting.get(item["call_id"], item) if item["type"] == "function_call" else item for item in finished]
    for item in [*held, *finished]:
        answer.append(item)
        yield done(item)


async def _sdk_run(
    context: TurnContext, history: list[dict[str, Any]], owners_agent: Agent, interruptions: list[Any]
) -> AsyncIterator[Any]:
    """The SDK's run as stream events. A stream runs streamed; an answer that does not stream calls the model without
    streaming (Runner.run: one JSON answer a model call, a third less CPU a turn than the stream collected), and its
    items become the events a stream gives for them (RunItemStreamEvent), so the rest of the turn is the same. The
    calls that wait for approval are added to `interruptions` as the run ends."""
    sdk_input = cast("list[TResponseInputItem]", history)  # the render's items are those TypedDicts (history/)
    run_config = model_choice.run_config(RUN_CONFIG, context.model_name)  # the turn's model (LLM_MODELS)
    if context.stream:
        result = Runner.run_streamed(owners_agent, input=sdk_input, run_config=run_config, context=context)
        async for event in result.stream_events():
            yield event
        # openai-agents 0.24 (agents/sandbox/runtime.py): the result keeps its sandbox clean-up, a closure that keeps
        # the result, so every streamed run waited for a full garbage collection. The stream ran the clean-up
        # before it ended (agents/result.py); without it, the result goes as soon as this generator does.
        if getattr(result, "_sandbox_cleanup", None) is not None:
            result._sandbox_cleanup = None
        interruptions.extend(result.interruptions)
        return
    try:
        ran = await Runner.run(owners_agent, sdk_input, run_config=run_config, context=context)
    except guardrails.tripwires() as tripped:  # what the run had finished goes out before the refusal
        for kept in guardrails.kept_items(tripped):
            yield RunItemStreamEvent(name="run_item", item=kept)  # type: ignore[arg-type]
        raise
    # A call waiting for approval is in new_items twice: as the call, and as the approval it waits for.
    for item in ran.new_items:
        if not isinstance(item, ToolApprovalItem):
            yield RunItemStreamEvent(name="run_item", item=item)  # type: ignore[arg-type]
    interruptions.extend(ran.interruptions)


__all__ = ["RUN_CONFIG", "customize_history", "errors", "events", "for_this_request", "model_input"]
