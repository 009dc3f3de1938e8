# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Tool progress: a tool call is streamed when it starts, as a `response.output_item.added` of its `function_call`
with status `in_progress` (turn/serve.py), and again when it ends, as today, with its output (`output_item.done`).

The started item also says when the call started, `started_at` (Unix seconds, as the API's `created_at` are): a page
that reloads mid-call and replays the run's stream counts the call's seconds from then, not from its reload.

Only the done items are the answer: what is stored and replayed is the same with progress as without. The started
item's id may differ from the finished call's (that one names its output: output_items.py); its `call_id` is the same.

A call that will wait for the user's approval is not announced: openai-agents (0.24) streams every call the model
made before it decides which ones wait, and a waiting call ends as its approval request, never as a run. So a call
is announced only when the app can tell it runs at once: the agent's own function tool that does not ask first, or
a tool of MCP servers whose approval policy does not name it. A policy the app cannot read (a function) counts as
asking first: that call goes out only with its output, as it did before there was progress.

A call the user approved is announced the same way when it starts (approved_calls.py), and only once its approval
passed every check: a call denied, not verified, expired or replayed is never announced, as it never runs.
"""

from __future__ import annotations

import time
from typing import Any

from agents import Agent
from agents.items import ToolCallItem

from agent_server.output_items import to_output_item


def started_item(call: ToolCallItem, agent: Agent) -> dict[str, Any] | None:
    """The call as it starts (status `in_progress`), or None if it is not announced (it may wait for approval)."""
    item = to_output_item(call.raw_item)
    if item is None or item["type"] != "function_call" or asks_first(call, str(item.get("name")), agent):
        return None
    return {**item, "status": "in_progress", "started_at": round(time.time(), 3)}


def approved_started(call: dict[str, Any]) -> dict[str, Any]:
    """A call the user approved (the history's `function_call`, its `call_id` the approval's id), as it starts."""
    item = to_output_item({key: call.get(key) for key in ("type", "id", "call_id", "name", "arguments")})
    return {**(item or call), "status": "in_progress", "started_at": round(time.time(), 3)}


def asks_first(call: ToolCallItem, name: str, agent: Agent) -> bool:
    """May this call wait for the user's approval? False only when the app can tell it does not."""
    own = [tool for tool in agent.tools if getattr(tool, "name", None) == name]
    if own:
        return any(getattr(tool, "needs_approval", True) is not False for tool in own)
    origin = getattr(getattr(call, "tool_origin", None), "mcp_server_name", None)
    servers = [server for server in agent.mcp_servers if origin is None or server.name == origin]
    return any(_server_asks(server, name) for server in servers)


def _server_asks(server: Any, name: str) -> bool:
    # openai-agents' `require_approval`, as its MCP servers keep it (agents/mcp/server.py, 0.24): False, True, or
    # a name -> bool map. Anything else, or none, counts as asking.
    policy = getattr(server, "_needs_approval_policy", True)
    if isinstance(policy, dict):
        return policy.get(name, False) is not False
    return policy is not False
