# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The calls the user approved run here, each at most once: an MCP server's tool, or one of agent.py's own
function tools that asks first (`@function_tool(needs_approval=True)`), which runs in this process.

history/approvals.py decides which approvals are genuine and which call runs (an APPROVED output at the end of
the history), and approval_answers.py which answer stands (the first: a denial is final). This module makes sure
an approved call runs once however often its approval comes back: a client's network retry of the same request,
or two of them at once, and a regenerate that sends the same approval again. The approval's id signs the call and
the user turns before it, the conversation (when the client names one) and a stamp of its own, so it names one
call in one history:
- in this process, the outputs of the approvals run and those running are kept by that id and the caller's
  identity, for RETRY_SECONDS (the newest KEPT, at most KEPT_CHARS of output), and an approval that comes again
  gets the output, not a second run;
- with conversation memory, a stored conversation holds the call's output, and a turn that approves the call
  again gets that output (memory/turns.py), across processes and restarts.
With memory off and several processes, a retry that reaches another process may run the call again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, FunctionTool, RunConfig
from agents.mcp import MCPServer
from agents.tool_context import ToolContext

from agent_server.history import approvals
from agent_server.history.tool_outputs import ToolOutput, tool_output_shape, tool_output_text
from agent_server.observability.logs import tool_failure
from agent_server.tools import approval_answers
from agent_server.tools.mcp_connections import run_tool
from agent_server.tools.progress import approved_started
from agent_server.turn_context import TurnContext

logger = logging.getLogger(__name__)

KEPT = 10_000
KEPT_CHARS = 8 * 1024 * 1024  # of outputs, all told: a tool's output may be MCP_MAX_OUTPUT_CHARS long
RETRY_SECONDS = 600  # a retry comes within seconds; the same history from someone else, much later, runs anew
_outputs: OrderedDict[tuple[str, str], tuple[float, ToolOutput]] = OrderedDict()  # (approval, caller) -> (when, output)
_running: dict[tuple[str, str], asyncio.Future[ToolOutput]] = {}
_kept_chars = 0


async def each_run(
    history: list[dict[str, Any]], servers: list[MCPServer], context: TurnContext, owners_agent: Agent | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Run the calls the user approved at the end of `history`, each output put in its place. Yields each call as it
    starts (tools/progress.py), once its approval passed every check, and not if it ran already (its output comes at
    once), then its output item. A call goes to the owner's agent's own function tool of that name if it has one
    that asks first, else to the MCP servers."""
    local = approving_tools(owners_agent)
    await approval_answers.settle(history, context)  # the first answer to each request stands: a denied call never runs
    owner = context.turn.owner if context.turn is not None else ""
    for call in approvals.to_run(history):
        if not ran_already(call, owner):
            yield approved_started(call)
        output = await run_once(call, owner, servers, local)
        for item in history:
            if item.get("type") == "function_call_output" and item["call_id"] == call["call_id"]:
                item["output"] = output
        yield {"type": "function_call_output", "call_id": call["call_id"], "output": output}


def approving_tools(owners_agent: Agent | None) -> dict[str, FunctionTool]:
    """The agent's own function tools that ask the user first, by name (those it has of its own, not MCP's)."""
    tools = owners_agent.tools if owners_agent is not None else []
    return {tool.name: tool for tool in tools if isinstance(tool, FunctionTool) and tool.needs_approval is not False}


_LOGS_FAILURES = RunConfig(tool_error_formatter=tool_failure)


async def run_local(tool: FunctionTool, call: dict[str, Any]) -> ToolOutput:
    """Run the owner's function tool as the SDK would have; a failure is the output's text, as with any tool."""
    context = ToolContext(
        context=None,
        tool_name=tool.name,
        tool_call_id=call["call_id"],
        tool_arguments=call["arguments"],
        run_config=_LOGS_FAILURES,  # a tool that raises is logged with why, as in a run (turn/serve.py)
    )
    try:
        return tool_output_shape(await tool.on_invoke_tool(context, call["arguments"] or "{}"))
    except Exception as error:  # the model reads what went wrong
        return f"Error: the tool {tool.name} failed: {error}"


def _approval(call: dict[str, Any], owner: str) -> tuple[str, str]:
    """The key an approved call's output is kept by: its approval's id and the caller; outputs too old forgotten."""
    now = time.monotonic()
    while _outputs and now - next(iter(_outputs.values()))[0] > RETRY_SECONDS:
        forget_oldest()
    return call["call_id"], owner


def ran_already(call: dict[str, Any], owner: str) -> bool:
    """Did this approval's call run here already (a retry's: its output is given again, and nothing runs)?"""
    return _approval(call, owner) in _outputs


async def run_once(
    call: dict[str, Any], owner: str, servers: list[MCPServer], local: dict[str, FunctionTool] | None = None
) -> ToolOutput:
    approval = _approval(call, owner)
    if approval in _outputs:
        logger.info("approved call %s ran already: its output again, not a second run", approval[0])
        return _outputs[approval][1]
    if approval in _running:  # the same approval, in a request that is running it now
        return await asyncio.shield(_running[approval])
    running: asyncio.Future[ToolOutput] = asyncio.get_running_loop().create_future()
    _running[approval] = running
    try:
        tool = (local or {}).get(call["name"])
        output = await (
            run_local(tool, call) if tool is not None else run_tool(call["name"], call["arguments"], servers)
        )
        remember(approval, output)
        running.set_result(output)
        return output
    except BaseException as error:
        running.set_exception(error)
        running.exception()  # retrieved: a request that waited on it gets it, and none is left unretrieved
        raise
    finally:
        del _running[approval]


def remember(approval: tuple[str, str], output: ToolOutput) -> None:
    """Keep what an approved call returned, within KEPT outputs and KEPT_CHARS characters; the oldest go first."""
    global _kept_chars
    _outputs[approval] = (time.monotonic(), output)
    _kept_chars += len(tool_output_text(output))
    while len(_outputs) > KEPT or _kept_chars > KEPT_CHARS:
        forget_oldest()


def forget_oldest() -> None:
    global _kept_chars
    _, (_, output) = _outputs.popitem(last=False)
    _kept_chars -= len(tool_output_text(output))


def forget_all() -> None:
    """Forget every output kept (the app's tests start each test from none)."""
    global _kept_chars
    _outputs.clear()
    _kept_chars = 0
