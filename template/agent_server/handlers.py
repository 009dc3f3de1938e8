# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The @invoke and @stream endpoints: render the history, run the agent, return replayable items."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

from agents import Agent, RunConfig, Runner, TResponseInputItem
from agents.items import MessageOutputItem, ToolApprovalItem, ToolCallItem
from agents.stream_events import RawResponsesStreamEvent, RunItemStreamEvent
from mlflow.genai.agent_server import invoke, stream
from mlflow.types.responses import ResponsesAgentRequest, ResponsesAgentResponse, ResponsesAgentStreamEvent

from agent_server import agent, errors, guardrails, llm, memory
from agent_server.history import approvals, render_history
from agent_server.memory.long_term import with_memory_tools
from agent_server.middleware import request_state
from agent_server.observability import tracing
from agent_server.observability.logs import tool_failure
from agent_server.output_items import ReplayableOutput, replayable_id, to_output_item, with_unique_call_ids
from agent_server.scheduling.offload import INLINE_ITEMS, cpu_work
from agent_server.tools import approved_calls, mcp_connections
from agent_server.tools.progress import started_item


def model_input(request: ResponsesAgentRequest) -> list[dict[str, Any]]:
    """The request's history, rendered for the configured API mode, then the owner's own rules (agent.py)."""
    return customize_history(rendered_input(request))


def rendered_input(request: ResponsesAgentRequest) -> list[dict[str, Any]]:
    """The history the request guard rendered (request_state.py), each item a copy the run may change.

    Never MLflow's parse of it: MLflow's request model re-adds `"status": null` to assistant messages and
    drops their ids, which the SDK would reject. A request the guard did not see is rendered here.
    """
    state = request_state.current()
    if state is not None:
        return [dict(item) for item in state.history]
    items = [item.model_dump() for item in request.input]
    return render_history(items, api=llm.llm_settings().api)


def approval_requests(request: ResponsesAgentRequest, interruptions: list[Any]) -> dict[str, dict[str, Any]]:
    """The `mcp_approval_request` item for each tool call that waits for the user (history/approvals.py), by call id."""
    if not interruptions:
        return {}
    history = rendered_input(request)  # the ids sign the user turns as the request guard renders them
    turn = _turn()
    conversation = turn.named if turn is not None else None  # and the conversation the client named, if any
    return {
        waiting.raw_item.call_id: approvals.request_item(
            history,
            waiting.raw_item.name,
            waiting.raw_item.arguments,
            waiting.tool_origin.mcp_server_name or waiting.agent.name,  # an MCP server's, or the agent's own
            conversation,
        )
        for waiting in interruptions
    }


def finished(output: ReplayableOutput, waiting: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The held items, with each call that waits for approval replaced by its approval request."""
    held = output.finish()
    return [waiting.get(item["call_id"], item) if item["type"] == "function_call" else item for item in held]


def customize_history(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The owner's `customize_history(items)` applied to the rendered history, if agent.py defines one.

    agent.py is rendered once and `copier update` never touches it again, so an app generated
    before a hook existed has no such function: every hook is optional, and a missing one
    keeps the template's behaviour.
    """
    hook = getattr(agent, "customize_history", None)
    return items if hook is None else hook(items)


# The same for every run, so made once: the SDK's RunConfig() inspects its own type hints each time it is built.
# A call to a tool the agent does not have (a name the model made up) is answered to the model as an error
# output, and the turn goes on (openai-agents' tool_not_found_behavior, in 0.20 to 0.24); it used to fail the turn.
# A tool that raises is logged with why (observability/logs.py): the model is told only that an error occurred.
RUN_CONFIG = RunConfig(tool_not_found_behavior="return_error_to_model", tool_error_formatter=tool_failure)


def sdk_input(history: list[dict[str, Any]]) -> list[TResponseInputItem]:
    """The rendered history as the SDK's input type: the render's items are those TypedDicts (agent_server/history/)."""
    return cast("list[TResponseInputItem]", history)


def stream_event(type: str, **fields: Any) -> ResponsesAgentStreamEvent:
    """MLflow's stream event. Its fields but `type` are extras (extra="allow"), which a type checker cannot see."""
    return ResponsesAgentStreamEvent(type=type, **fields)


def for_this_request(owners_agent: Agent, servers: list[Any]) -> Agent:
    """The owner's agent with this request's MCP servers, long-term memory's tools (with LONG_TERM_MEMORY on), and
    tool call ids made unique."""
    owners_agent = with_memory_tools(owners_agent)
    if servers:
        owners_agent = owners_agent.clone(mcp_servers=[*owners_agent.mcp_servers, *servers])
    return with_unique_call_ids(owners_agent)


@invoke()
async def handle_invoke(request: ResponsesAgentRequest) -> ResponsesAgentResponse:
    turn = _turn()
    extra = _custom_outputs(turn)
    history = await cpu_work(len(request.input) <= INLINE_ITEMS, model_input, request)
    async with mcp_connections.servers_for_request() as servers:
        owners_agent = for_this_request(agent.create_agent(), servers)
        ran = await approved_calls.run_approved(history, servers, owners_agent)
        request_state.record_input(history, has_instructions=owners_agent.instructions is not None)
        refused = None
        try:
            result = await Runner.run(owners_agent, sdk_input(history), run_config=RUN_CONFIG)
            new_items, interruptions = result.new_items, result.interruptions
        except errors.model_failures() as error:
            request_state.record_failure(error)  # UpstreamErrors answers with the status that says why, not a 500
            raise
        except guardrails.tripwires() as tripped:  # an answer that says no, not a 500 (guardrails.py)
            refused, new_items, interruptions = guardrails.refusal(tripped), guardrails.kept_items(tripped), []
    output = ReplayableOutput()
    # A call waiting for approval is in new_items twice: as the call, and as the approval it waits for.
    run_items = [run_item for run_item in new_items if not isinstance(run_item, ToolApprovalItem)]
    items = [item for run_item in run_items for item in output.add(run_item.raw_item)]
    waiting = await cpu_work(not interruptions, approval_requests, request, interruptions)
    answer = [*ran, *items, *finished(output, waiting)]
    if refused is not None:
        answer.append(refused.item)
        extra = guardrails.marked(extra, refused)
    await _stored(turn, answer)
    return ResponsesAgentResponse.model_validate({"output": answer, "custom_outputs": extra})


def _custom_outputs(turn: memory.Turn | None) -> dict[str, str] | None:
    """What every answer carries beside its items: the conversation's id (`session_id`, with memory on) and the
    trace's (`trace_id`, unless tracing sampled this request out), for feedback on it (observability/feedback.py)."""
    state = request_state.current()
    trace_id = tracing.tag_trace(state.owner if state else None, turn.conversation_id if turn else None)
    if turn is not None:
        turn.trace_id = trace_id  # kept with the answer: the chat page rates it again after a reload
    extra = {**(turn.custom_outputs() if turn else {}), **({"trace_id": trace_id} if trace_id else {})}
    return extra or None


def _turn() -> memory.Turn | None:
    """This request's memory turn, which the request guard started (None with memory off)."""
    state = request_state.current()
    return state.turn if state is not None else None


async def _stored(turn: memory.Turn | None, answer: list[dict[str, Any]]) -> None:
    """With memory on, the turn and its answer are stored before the answer is given (agent_server/memory/)."""
    if turn is not None:
        try:
            await turn.finish(answer)
        except memory.MemoryFailure as error:
            request_state.record_failure(error)  # a 503 (or 409) that says the turn was not kept, not a 500
            raise


@stream()
async def handle_stream(request: ResponsesAgentRequest) -> AsyncIterator[ResponsesAgentStreamEvent]:
    turn = _turn()
    extra = _custom_outputs(turn)
    answer: list[dict[str, Any]] = []
    history = await cpu_work(len(request.input) <= INLINE_ITEMS, model_input, request)
    async with mcp_connections.servers_for_request() as servers:
        owners_agent = for_this_request(agent.create_agent(), servers)
        async for item in approved_calls.each_run(history, servers, owners_agent):
            if item["type"] == "function_call":  # an approved call as it starts: progress, before it runs
                yield stream_event("response.output_item.added", item=item)
                continue
            answer.append(item)
            yield stream_event("response.output_item.done", item=item, custom_outputs=extra)
        refused = None
        try:
            async for event in _streamed_run(request, history, owners_agent, done=answer):
                if event.type == "response.output_item.done":
                    event.custom_outputs = extra
                yield event
        except errors.model_failures() as error:
            request_state.record_failure(error)  # a background run's error says the status it stands for
            raise
        except guardrails.tripwires() as tripped:  # an answer that says no, not an error event (guardrails.py)
            refused = guardrails.refusal(tripped)
        if refused is not None:
            answer.append(refused.item)
            yield stream_event("response.output_text.delta", item_id=refused.item["id"], delta=refused.text)
            marked = guardrails.marked(extra, refused)
            yield stream_event("response.output_item.done", item=refused.item, custom_outputs=marked)
    # Stored once the turn is complete, before the stream ends: a stream cut short stores nothing.
    await _stored(turn, answer)


async def _streamed_run(
    request: ResponsesAgentRequest, history: list[dict[str, Any]], owners_agent: Agent, done: list[dict[str, Any]]
) -> AsyncIterator[ResponsesAgentStreamEvent]:
    """The run's events as MLflow streams them; each finished item is also appended to `done`."""
    result = Runner.run_streamed(owners_agent, input=sdk_input(history), run_config=RUN_CONFIG)
    output = ReplayableOutput()
    message_id = replayable_id("message", None)
    # The message the run may end on goes out with the run's next event, or at its end: until then an output
    # guardrail may still block it (guardrails.py), and a blocked answer must not reach a client as finished.
    held: list[dict[str, Any]] = []
    async for event in result.stream_events():
        for item in held:
            done.append(item)
            yield stream_event("response.output_item.done", item=item)
        held = []
        if isinstance(event, RawResponsesStreamEvent):
            data = event.data
            if data.type == "response.output_item.added" and getattr(data.item, "type", None) == "message":
                # One id per message, shared by its deltas and its final item.
                message_id = replayable_id("message", data.item.id)
            elif data.type == "response.output_text.delta":
                yield stream_event("response.output_text.delta", item_id=message_id, delta=data.delta)
        elif isinstance(event, RunItemStreamEvent):
            if isinstance(event.item, ToolCallItem) and (told := request_state.tool_call_hook()) is not None:
                if (started := to_output_item(event.item.raw_item)) is not None:  # only for a background run
                    await told(started)
            if isinstance(event.item, ToolCallItem) and (running := started_item(event.item, owners_agent)):
                yield stream_event("response.output_item.added", item=running)  # before the tool runs: progress
            own_id = message_id if isinstance(event.item, MessageOutputItem) else None
            for item in output.add(event.item.raw_item, message_id=own_id):
                if item["type"] == "message":
                    held.append(item)  # the last of what add() gives (output_items.py)
                    continue
                done.append(item)
                yield stream_event("response.output_item.done", item=item)
    # openai-agents 0.24 (agents/sandbox/runtime.py): the result keeps its sandbox clean-up, a closure that keeps the
    # result, so every streamed run (its history and items) waited for a full garbage collection. The stream ran
    # the clean-up before it ended (agents/result.py); without it, the result goes as soon as this generator does.
    if getattr(result, "_sandbox_cleanup", None) is not None:
        result._sandbox_cleanup = None
    waiting = await cpu_work(not result.interruptions, approval_requests, request, result.interruptions)
    for item in [*held, *finished(output, waiting)]:
        done.append(item)
        yield stream_event("response.output_item.done", item=item)
