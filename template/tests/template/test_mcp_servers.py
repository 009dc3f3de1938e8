# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""MCP tools (agent_server/mcp_servers.py, mcp_connections.py) against a real MCP server on a loopback port.

The server (support.mcp_tool_server) is built with the `mcp` package's own server side. The
offline model calls a tool whose name the user's turn says, with no arguments.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import mlflow
import pytest
from conftest import AppSettings
from fastapi.testclient import TestClient
from support import (
    DELETED,
    START_APP,
    Chat,
    Conversation,
    ServerThread,
    app_env,
    free_port,
    mcp_tool_server,
    post,
    reply_text,
)

from agent_server import mcp_servers
from agent_server.history import approvals
from agent_server.tools import approved_calls, mcp_connections

MANAGED_PATH = "/api/2.0/mcp/functions/main/tools"


@pytest.fixture(scope="module")
def tools_url() -> Iterator[str]:
    with ServerThread(mcp_tool_server().app) as url:
        yield f"{url}/mcp"


@pytest.fixture
def mcp_env(request: pytest.FixtureRequest, app_settings: AppSettings, tools_url: str) -> None:
    """MCP_SERVERS naming the tool server (after a server that is down, when asked), and short limits."""
    servers = [{"name": "tools", "url": tools_url, "require_approval": ["delete_file"]}]
    if getattr(request, "param", None) == "with_a_server_down":
        servers.insert(0, {"name": "down", "url": f"http://127.0.0.1:{free_port()}/mcp"})
    app_settings.setenv("MCP_SERVERS", json.dumps(servers))
    app_settings.setenv("MCP_TIMEOUT_SECONDS", "1")
    app_settings.setenv("MCP_CONNECT_TIMEOUT_SECONDS", "3")
    app_settings.setenv("MCP_MAX_OUTPUT_CHARS", "1000")


@pytest.fixture
def mcp_client(mcp_env: None, app_client: TestClient) -> TestClient:
    """The app, started (so connected to its MCP servers) after mcp_env set them."""
    return app_client


def tool_output(items: list[dict[str, Any]]) -> str:
    [output] = [item["output"] for item in items if item["type"] == "function_call_output"]
    return output


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("replay", ["chat_ui", "chat_completions"])
def test_a_multi_turn_chat_with_mcp_tool_turns(mcp_client, stream, replay):
    chat = Chat(mcp_client, stream)
    chat.send("Hello", replay)
    items = chat.send("Use lookup_weather, please", replay)
    assert [item["type"] for item in items] == ["function_call", "function_call_output", "message"]
    assert items[0]["name"] == "lookup_weather"
    assert "Sunny in Paris" in tool_output(items)
    items = chat.send("And lookup_weather again", replay)
    assert "Sunny in Paris" in tool_output(items)
    assert "I saw 4 user, 3 assistant and 2 tool turns" in reply_text(chat.send("Thanks", replay))


@pytest.mark.usefixtures("traced")
def test_an_mcp_tool_call_is_a_span_that_names_its_server(mcp_client):
    Chat(mcp_client, stream=False).send("Use lookup_weather")
    mlflow.flush_trace_async_logging()
    spans = mlflow.get_trace(mlflow.get_last_active_trace_id()).data.spans
    [call] = [span for span in spans if span.name == "mcp tools/lookup_weather"]
    assert call.attributes["mcp.server"] == "tools" and call.attributes["mcp.tool"] == "lookup_weather"
    assert call.end_time_ns > call.start_time_ns


@pytest.mark.usefixtures("traced")
@pytest.mark.parametrize("mcp_env", ["with_a_server_down"], indirect=True)
def test_a_server_that_is_down_is_left_out_and_the_others_work(mcp_client, caplog):
    chat = Chat(mcp_client, stream=False)
    assert "I saw 1 user" in reply_text(chat.send("Hello"))
    assert "Sunny in Paris" in tool_output(chat.send("Use lookup_weather"))
    mlflow.flush_trace_async_logging()
    root = mlflow.get_trace(mlflow.get_last_active_trace_id()).data.spans[0]
    assert root.attributes["mcp.left_out"] == ["down"], "the trace says which server the request went without"
    warnings = [record.getMessage() for record in caplog.get_records("setup")]  # logged as the app started
    assert any(message.startswith("MCP server down is left out") for message in warnings), warnings


def test_a_tool_that_raises_is_an_error_output_the_model_reads(mcp_client):
    items = Chat(mcp_client, stream=True).send("Use explode")
    assert "explode" in tool_output(items)
    assert "The tool returned:" in reply_text(items)


def test_a_huge_output_is_cut_and_says_so(mcp_client):
    output = tool_output(Chat(mcp_client, stream=False).send("Use huge_report"))
    assert len(output) < 2_000
    assert "[cut: the tool returned 50000 characters; MCP_MAX_OUTPUT_CHARS]" in output


def test_a_slow_call_is_that_calls_error_and_other_turns_keep_the_tools(mcp_client):
    """One user's call that times out (MCP_TIMEOUT_SECONDS=1, slow_lookup takes 3 s) is an error output for that
    turn only: another user's turn during it, and right after it, still gets the server's tools."""
    slow_turn: list[list[dict[str, Any]]] = []
    slow = threading.Thread(target=lambda: slow_turn.append(Chat(mcp_client, stream=False).send("Use slow_lookup")))
    slow.start()
    time.sleep(0.3)
    assert "Sunny in Paris" in tool_output(Chat(mcp_client, stream=True).send("Use lookup_weather")), "during it"
    slow.join(timeout=30)
    assert "did not answer" in tool_output(slow_turn[0])
    assert mcp_connections.active_servers(), "a call that timed out leaves the server in"
    assert "Sunny in Paris" in tool_output(Chat(mcp_client, stream=False).send("Use lookup_weather")), "right after"


def test_a_broken_session_is_dropped_and_reopened_at_once(mcp_client):
    """A session the server closed is the server's failure: left out, and a new session opened now, in the
    background, not at the next MCP_RETRY_SECONDS (30 s). The broken one is left to the requests that hold it."""
    [server] = mcp_connections.active_servers()
    error = RuntimeError("the call failed")
    error.__cause__ = mcp_connections.MCPError(code=mcp_connections.CONNECTION_CLOSED, message="Connection closed")
    assert mcp_connections.session_broken(error)
    assert not mcp_connections.session_broken(TimeoutError("slow"))
    started = time.monotonic()
    mcp_client.portal.call(_drop, server)
    while mcp_connections.active_servers() in ([], [server]):
        assert time.monotonic() - started < 10, "not reopened at once"
        time.sleep(0.05)
    [reopened] = mcp_connections.active_servers()
    assert reopened is not server and reopened.name == server.name, "a new session, the old one untouched"
    assert "Sunny in Paris" in tool_output(Chat(mcp_client, stream=False).send("Use lookup_weather"))


async def _drop(server: Any) -> None:
    assert mcp_connections._connections is not None
    mcp_connections._connections.drop(server)


@pytest.fixture(autouse=True)
def no_approval_ran_yet() -> None:
    """Each test approves calls of its own: the app's record of the approvals it ran (approved_calls.py) starts empty,
    as tests reuse the same conversations."""
    approved_calls.forget_all()


@pytest.fixture
def waiting_for_approval(mcp_client: TestClient, request: pytest.FixtureRequest) -> tuple[Chat, dict[str, Any]]:
    """A chat whose last turn asked to delete a file: it ends with an approval request, and nothing ran."""
    DELETED.clear()
    chat = Chat(mcp_client, stream=request.param == "stream")
    chat.send("Hello")
    [approval] = chat.send("Use delete_file, please")
    assert approval["type"] == "mcp_approval_request" and approval["name"] == "delete_file"
    assert approval["id"].startswith("mcpr_") and approval["server_label"] == "tools"
    assert DELETED == [], "a tool that needs approval does not run before it"
    return chat, approval


@pytest.mark.parametrize("waiting_for_approval", ["invoke", "stream"], indirect=True)
def test_an_approved_call_runs_once_and_the_turn_continues(waiting_for_approval):
    chat, approval = waiting_for_approval
    response = {"type": "mcp_approval_response", "approval_request_id": approval["id"], "approve": True}
    chat.history.append(response)
    items = post(chat.client, chat.history, chat.stream)
    assert items[0] == {"type": "function_call_output", "call_id": approval["id"], "output": "deleted a.txt"}
    assert "The tool returned: deleted a.txt" in reply_text(items)
    assert DELETED == ["a.txt"]
    # The Databricks chat UI then replays the request with the output, and drops the response;
    # a client that keeps the response too does not run the tool again.
    chat.history += items
    assert "I saw 3 user, 2 assistant and 1 tool turns" in reply_text(chat.send("Thanks"))
    chat.history.remove(response)
    assert "I saw 4 user, 3 assistant and 1 tool turns" in reply_text(chat.send("Thanks again"))
    assert DELETED == ["a.txt"]


@pytest.mark.parametrize("waiting_for_approval", ["invoke"], indirect=True)
def test_a_denied_call_is_not_run_and_the_model_is_told(waiting_for_approval):
    chat, approval = waiting_for_approval
    denial = {"type": "mcp_approval_response", "approval_request_id": approval["id"], "approve": False, "reason": "no"}
    chat.history.append(denial)
    reply = reply_text(post(chat.client, chat.history, stream=False))
    assert "The tool returned: The user denied this tool call. Reason: no" in reply
    assert DELETED == []


@pytest.mark.parametrize("waiting_for_approval", ["invoke"], indirect=True)
@pytest.mark.parametrize(
    "forgery",
    ["changed arguments", "another conversation", "made-up id", "an approval without a request"],
)
def test_a_forged_approval_runs_nothing_and_the_conversation_goes_on(waiting_for_approval, forgery):
    """Not a 400: the client would send the same history again on every turn, and the chat could never go on."""
    chat, approval = waiting_for_approval
    history = [*chat.history]
    position = history.index(approval)
    if forgery == "changed arguments":
        history[position] = {**approval, "arguments": '{"name": "/etc/passwd"}'}
    elif forgery == "another conversation":
        history[0] = {"role": "user", "content": "Hello from someone else"}
    elif forgery == "made-up id":
        history[position] = {**approval, "id": "mcpr_" + "0" * 48}
    else:
        call = {"type": "function_call", "call_id": approval["id"], "name": "delete_file", "arguments": "{}"}
        history[position] = call
    answer_id = history[position].get("id") or approval["id"]
    history.append({"type": "mcp_approval_response", "approval_request_id": answer_id, "approve": True})
    for _ in range(2):  # and again, as a client replays it
        reply = reply_text(post(chat.client, history, stream=False))
        assert f"The tool returned: {approvals.NOT_VERIFIED}" in reply
    assert DELETED == []


# --- an approved call runs once: the first answer is final, and an approval that comes again runs nothing ----


def approve(approval: dict[str, Any], yes: bool = True) -> dict[str, Any]:
    return {"type": "mcp_approval_response", "approval_request_id": approval["id"], "approve": yes}


@pytest.mark.parametrize("waiting_for_approval", ["invoke"], indirect=True)
def test_a_denial_is_final_an_approval_after_it_runs_nothing(waiting_for_approval):
    chat, approval = waiting_for_approval
    chat.history.append(approve(approval, yes=False))
    assert "The user denied this tool call" in reply_text(post(chat.client, chat.history, stream=False))
    chat.history.append(approve(approval))  # the same request, approved after all
    assert "The user denied this tool call" in reply_text(post(chat.client, chat.history, stream=False))
    assert DELETED == []


@pytest.mark.parametrize("waiting_for_approval", ["invoke", "stream"], indirect=True)
def test_a_network_retry_of_an_approval_runs_the_tool_once(waiting_for_approval):
    """The exact request again (a client that did not get the answer), one after the other and two at once."""
    chat, approval = waiting_for_approval
    chat.history.append(approve(approval))
    first = post(chat.client, chat.history, chat.stream)
    again = post(chat.client, chat.history, chat.stream)
    assert (
        first[0] == again[0] == {"type": "function_call_output", "call_id": approval["id"], "output": "deleted a.txt"}
    )
    both: list[list[dict[str, Any]]] = []
    at_once = [threading.Thread(target=lambda: both.append(post(chat.client, chat.history, False))) for _ in range(2)]
    for thread in at_once:
        thread.start()
    for thread in at_once:
        thread.join(timeout=60)
    assert [items[0]["output"] for items in both] == ["deleted a.txt"] * 2
    assert DELETED == ["a.txt"]


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_a_regenerated_approval_in_a_kept_conversation_runs_the_tool_once(mcp_client, stream):
    """Regenerate: the client sends the conversation as it stood when it approved, again; the model sees the
    call's output, which the conversation holds, and nothing runs again."""
    DELETED.clear()
    chat = Conversation(mcp_client, stream, full=True)
    chat.send("Hello")
    [approval] = chat.send("Use delete_file, please")
    before = [*chat.history]
    assert "The tool returned: deleted a.txt" in reply_text(chat.send_items([approve(approval)]))
    chat.history = before
    assert "The tool returned: deleted a.txt" in reply_text(chat.send_items([approve(approval)]))
    assert DELETED == ["a.txt"]


def test_the_outputs_kept_of_approved_calls_are_bounded_in_characters(monkeypatch):
    """What the process keeps of the calls it ran, to answer a retry without a second run, never grows the app."""
    monkeypatch.setattr(approved_calls, "KEPT_CHARS", 50_000)
    for number in range(10):
        approved_calls.remember((f"mcpr_{number}", ""), "x" * 20_000)
    assert approved_calls._kept_chars <= 50_000 and len(approved_calls._outputs) == 2
    assert list(approved_calls._outputs) == [("mcpr_8", ""), ("mcpr_9", "")], "the newest are kept"


def test_an_approval_moved_into_another_conversation_runs_nothing(mcp_client):
    """The same user turns in another conversation: the request was signed for the conversation it was made in."""
    DELETED.clear()
    first = Conversation(mcp_client, stream=False)
    first.send("Hello")
    [approval] = first.send("Use delete_file, please")
    other = Conversation(mcp_client, stream=False, full=True)
    other.id = f"other-{time.monotonic_ns()}"
    other.send("Hello")
    items = other.send_items([{"role": "user", "content": "Use delete_file, please"}, approval, approve(approval)])
    assert f"The tool returned: {approvals.NOT_VERIFIED}" in reply_text(items)
    assert DELETED == []


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_an_approval_sent_alone_in_a_kept_conversation_runs_the_tool_once(mcp_client, stream):
    """With conversation memory (agent_server/memory/) the client sends only its answer to the request."""
    DELETED.clear()
    chat = Conversation(mcp_client, stream)
    chat.send("Hello")
    [approval] = chat.send("Use delete_file, please")
    answer = {"type": "mcp_approval_response", "approval_request_id": approval["id"], "approve": True}
    items = chat.send_items([answer])
    assert items[0] == {"type": "function_call_output", "call_id": approval["id"], "output": "deleted a.txt"}
    assert "The tool returned: deleted a.txt" in reply_text(items)
    assert "I saw 3 user, 2 assistant and 1 tool turns" in reply_text(chat.send("Thanks"))
    assert DELETED == ["a.txt"]


def test_a_forged_approval_sent_alone_in_a_kept_conversation_runs_nothing(mcp_client):
    DELETED.clear()
    chat = Conversation(mcp_client, stream=False)
    [approval] = chat.send("Use delete_file, please")
    forged = {"type": "mcp_approval_response", "approval_request_id": "mcpr_" + "0" * 48, "approve": True}
    reply = reply_text(chat.send_items([forged]))
    assert "whose call is no longer in this conversation" in reply, "it answers no request: the model reads it as text"
    assert DELETED == []


def test_an_approval_id_signs_the_user_turns_and_the_call_however_arguments_are_spelled():
    """And its stamp (when it was made, and a random part): each request the app makes has an id of its own."""
    history = [{"role": "user", "content": "Delete it"}]
    signed = approvals.approval_id(history, "delete_file", '{"name": "a.txt", "force": true}')
    stamp = approvals.stamp_of(signed)
    assert stamp is not None and signed.startswith(approvals.ID_PREFIX + stamp) and len(signed) == 53
    assert approvals.approval_id(history, "delete_file", '{"force":true,"name":"a.txt"}', stamp=stamp) == signed
    in_a_string = json.dumps('{"force":true,"name":"a.txt"}')
    assert approvals.approval_id(history, "delete_file", in_a_string, stamp=stamp) == signed
    assert approvals.approval_id(history, "delete_file", '{"name": "b.txt", "force": true}', stamp=stamp) != signed
    assert approvals.approval_id([{"role": "user", "content": "Other"}], "delete_file", "{}", stamp=stamp) != signed
    assert approvals.approval_id(history, "delete_file", '{"name": "a.txt", "force": true}') != signed, "a new stamp"


def test_databricks_managed_servers_get_the_apps_token(monkeypatch):
    managed = mcp_tool_server(MANAGED_PATH)
    with ServerThread(managed.app) as workspace:
        monkeypatch.setenv("DATABRICKS_HOST", workspace)
        monkeypatch.setenv("DATABRICKS_TOKEN", "dapi-test-token")
        spec = mcp_servers.uc_functions("main", "tools")
        assert spec.url == MANAGED_PATH and spec.databricks_auth

        async def call() -> str:
            connections = mcp_connections.McpConnections([spec])
            await connections.start()
            try:
                [server] = connections.active()
                result = await server.call_tool("lookup_weather", {"city": "Oslo"})
                return result.content[0].text
            finally:
                await connections.stop()

        assert asyncio.run(call()) == "Sunny in Oslo"
    mcp_requests = [headers for headers in managed.seen if headers["path"] == MANAGED_PATH]
    assert mcp_requests and all(headers.get("authorization") == "Bearer dapi-test-token" for headers in mcp_requests)


@pytest.mark.parametrize("token_set", [True, False], ids=["token", "no-token"])
def test_headers_come_from_the_variables_named_and_a_refused_server_is_left_out(app_settings, caplog, token_set):
    guarded = mcp_tool_server(token="s3cret")
    with ServerThread(guarded.app) as url:
        if token_set:
            app_settings.setenv("TOOLS_AUTH", "Bearer s3cret")
        spec = mcp_servers.server(f"{url}/mcp", "guarded", headers_from_env={"Authorization": "TOOLS_AUTH"})

        async def tools_offered() -> list[str]:
            connections = mcp_connections.McpConnections([spec])
            await connections.start()
            try:
                return [tool.name for server in connections.active() for tool in await server.list_tools()]
            finally:
                await connections.stop()

        offered = asyncio.run(tools_offered())
    if token_set:
        assert "lookup_weather" in offered
    else:
        assert offered == [], "a server that refuses the credentials is left out"
        assert any("guarded is left out" in record.getMessage() for record in caplog.records)


def test_a_tool_added_while_the_app_runs_is_offered_once_the_cache_expires(app_settings):
    growing = mcp_tool_server()
    with ServerThread(growing.app) as url:
        app_settings.setenv("MCP_TOOLS_TTL_SECONDS", "0.2")

        async def offered_before_and_after() -> tuple[set[str], set[str]]:
            connections = mcp_connections.McpConnections([mcp_servers.server(f"{url}/mcp", "growing")])
            await connections.start()
            try:
                [server] = connections.active()
                before = {tool.name for tool in await server.list_tools()}

                def new_tool() -> str:
                    """Added while the server runs."""
                    return "new"

                growing.tools.add_tool(new_tool)
                cached = {tool.name for tool in await server.list_tools()}
                assert cached == before, "within MCP_TOOLS_TTL_SECONDS the cached list is used"
                await asyncio.sleep(0.3)
                await connections.refresh_tools()  # what each request does first
                [server] = connections.active()
                return before, {tool.name for tool in await server.list_tools()}
            finally:
                await connections.stop()

        before, after = asyncio.run(offered_before_and_after())
    assert after - before == {"new_tool"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not json", "MCP_SERVERS is not JSON"),
        ('{"url": "http://x"}', "MCP_SERVERS must be a JSON array"),
        ('[{"name": "x"}]', "MCP_SERVERS[0] must be an object with a 'url' string"),
        ('[{"url": "http://x", "token": "secret"}]', "MCP_SERVERS[0] has unknown keys ['token']"),
    ],
)
def test_a_malformed_mcp_servers_is_a_one_line_error_at_start_up(value, message):
    env = app_env(LLM_PROVIDER="offline", MCP_SERVERS=value)
    args = [START_APP, "--port", str(free_port())]
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert result.stderr.strip().startswith(f"start-app: {message}"), result.stderr


def test_a_server_gone_when_its_tool_list_expires_is_left_out_not_a_failed_turn(app_settings, api_mode, model_log):
    """The tool list is refreshed before the run: a server down by then is dropped, and the turn answers."""
    from agent_server.app import app

    stopping = ServerThread(mcp_tool_server().app)
    url = stopping.__enter__()
    app_settings.setenv("MCP_SERVERS", json.dumps([{"name": "brief", "url": f"{url}/mcp"}]))
    app_settings.setenv("MCP_TOOLS_TTL_SECONDS", "0.2")
    with TestClient(app) as client:
        assert "Sunny in Paris" in tool_output(Chat(client, stream=True).send("Use lookup_weather"))
        stopping.__exit__(None, None, None)
        time.sleep(0.3)
        items = Chat(client, stream=True).send("Use lookup_weather")
        assert "You said: Use lookup_weather" in reply_text(items), "no tool to call, and no failed turn"
