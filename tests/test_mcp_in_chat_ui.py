"""MCP tools through the Databricks chat UI's own packages (tests/chat_ui_client/chat.mjs).

An app generated with the defaults, plus one MCP server in the variable MCP_SERVERS, served by
`start-app`. The MCP server is the app's own test server (support.serve_mcp_tools: the `mcp`
package's server side), run as a process of its own, so that it can go down mid-conversation.
Its `delete_file` tool needs the user's approval.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import servers
from renders import clean_env, uv
from servers import ServerProcess, free_ports

pytestmark = pytest.mark.xdist_group("chat-ui-client")


@pytest.fixture(scope="module")
def served(renders, tmp_path_factory) -> Iterator[dict]:
    app = renders["defaults"]
    # Its conversations, traces and log outside the render, which other tests read file by file as it was made.
    folder = tmp_path_factory.mktemp("mcp-in-chat-ui")
    uv("sync", "--locked", "--no-config", cwd=app)
    python = str(app / ".venv" / "bin" / "python")
    tools_port, app_port = free_ports(2)
    serve = (
        "import sys; sys.path.insert(0, 'tests/template'); "
        f"from support import serve_mcp_tools; serve_mcp_tools({tools_port})"
    )
    declared = [{"name": "tools", "url": f"http://127.0.0.1:{tools_port}/mcp", "require_approval": ["delete_file"]}]
    agent_args = [str(app / ".venv" / "bin" / "start-app"), "--port", str(app_port)]
    agent_env = clean_env(
        LLM_PROVIDER="offline", MCP_SERVERS=json.dumps(declared), MEMORY_DATABASE_URL=str(folder / "conversations.db"),
        MLFLOW_TRACKING_URI=f"file:{folder / 'mlruns'}",
    )  # fmt: skip
    log = folder / "start-app-mcp.log"
    with (
        ServerProcess([python, "-c", serve], clean_env(), f"http://127.0.0.1:{tools_port}/mcp", cwd=app) as tools,
        ServerProcess(agent_args, agent_env, f"http://127.0.0.1:{app_port}/health", cwd=app, log=log) as agent,
    ):
        yield {"url": agent.url, "tools": tools, "log": log}


def converse(url: str, mode: str, *prompts: str) -> dict:
    conversation = servers.converse(url, mode, *prompts)
    assert [request["status"] for request in conversation["requests"]] == [200] * len(prompts)
    return conversation


@pytest.mark.parametrize("mode", ["stream", "generate"])
def test_a_four_turn_conversation_with_mcp_tool_turns(served, mode):
    prompts = ["Hello", "Use lookup_weather, please", "Thanks", "And lookup_weather once more"]
    replies = converse(served["url"], mode, *prompts)["replies"]
    assert replies[0].endswith("I saw 1 user, 0 assistant and 0 tool turns. You said: Hello")
    assert replies[1].startswith("The tool returned: Sunny in Paris.")
    assert replies[2].endswith("I saw 3 user, 2 assistant and 1 tool turns. You said: Thanks")
    assert replies[3].startswith("The tool returned: Sunny in Paris.")
    assert "2 tool turns" in replies[3]


def test_an_approval_round_trip(served):
    conversation = converse(served["url"], "stream", "Hello", "Use delete_file", "APPROVE", "Thanks")
    waiting = conversation["requests"][1]
    approving = conversation["requests"][2]["body"]["input"]
    assert conversation["replies"][1] == "", "the turn waits for the user's approval"
    assert [item.get("type") for item in approving[-2:]] == ["mcp_approval_request", "mcp_approval_response"]
    assert approving[-1]["approve"] is True and waiting["status"] == 200
    assert conversation["replies"][2].startswith("The tool returned: deleted a.txt.")
    later = conversation["requests"][3]["body"]["input"]
    assert [item.get("type") for item in later[3:7]] == [
        "mcp_approval_request",
        "mcp_approval_response",
        "function_call",
        "function_call_output",
    ], "the UI replays the approved call with the app's output: docs/history-shapes.md"
    # The model sees the call once, with its output; the replayed approval runs nothing again.
    assert conversation["replies"][3].endswith("I saw 3 user, 2 assistant and 1 tool turns. You said: Thanks")


def test_the_chat_ui_approves_a_call_of_the_agents_own_tool(served):
    """agent.py's send_summary asks first (needs_approval): the UI shows the same request, with the app's name
    as its server, and its approval runs the tool in the app."""
    conversation = converse(served["url"], "stream", "Use send_summary", "APPROVE", "Thanks")
    [request] = [
        item for item in conversation["requests"][1]["body"]["input"] if item.get("type") == "mcp_approval_request"
    ]
    assert (request["name"], request["server_label"]) == ("send_summary", "my-agent")
    assert conversation["replies"][1].startswith("The tool returned: An example tool: nothing was sent to me.")
    assert conversation["replies"][2].endswith("I saw 2 user, 1 assistant and 1 tool turns. You said: Thanks")


def test_a_denial_round_trip(served):
    replies = converse(served["url"], "stream", "Use delete_file", "DENY", "Thanks")["replies"]
    assert replies[1].startswith("The tool returned: The user denied this tool call. Reason: not now.")
    assert replies[2].endswith("You said: Thanks")


def test_turns_that_need_no_tool_still_answer_when_the_server_goes_down(served):
    """Last in this module: it stops the MCP server."""
    served["tools"].stop()
    replies = converse(served["url"], "stream", "Hello", "Use lookup_weather", "Thanks", "Hello again")["replies"]
    assert replies[0].endswith("You said: Hello")
    assert "did not answer" in replies[1] or "You said: Use lookup_weather" in replies[1]
    assert replies[3].endswith("You said: Hello again")
    assert "left out until it reconnects" in served["log"].read_text()
