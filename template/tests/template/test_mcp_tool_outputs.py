# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""An MCP tool's output is what the tool returned (agent_server/history/tool_outputs.py): its text is text, and
its text with an image stays the API's parts, in every output item, stream event, stored turn and the next turn's
model input; on /invocations and /responses, streamed and not, in both API modes. The tools are a real MCP server's
(the `mcp` package's own), started here on a loopback port."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import AppSettings
from fastapi.testclient import TestClient
from openai.types.responses import Response
from support import Conversation, ServerThread, post, reply_text, sse_events

from agent_server.history.tool_outputs import parts_in_text, tool_output_shape, tool_output_text, unrepr

CAPITAL = "capital-of-japan: Tokyo"
PNG = base64.b64decode(  # one pixel
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
CHART = [
    {"type": "input_text", "text": "A chart of Tokyo"},
    {"type": "input_image", "image_url": f"data:image/png;base64,{base64.b64encode(PNG).decode()}", "detail": "auto"},
]


@pytest.fixture(scope="module")
def parts_url() -> Iterator[str]:
    from mcp.server.mcpserver import Image, MCPServer

    tools = MCPServer("parts")

    @tools.tool()
    def capital_of_japan() -> str:
        """The capital of Japan, as one line of text."""
        return CAPITAL

    @tools.tool(structured_output=False)  # content blocks only, as most servers answer
    def tokyo_chart() -> list[Any]:
        """A caption and a chart: a text block and an image block."""
        return ["A chart of Tokyo", Image(data=PNG, format="png")]

    with ServerThread(tools.streamable_http_app(streamable_http_path="/mcp")) as url:
        yield f"{url}/mcp"


@pytest.fixture
def http(app_settings: AppSettings, parts_url: str, api_mode: str, model_log: list[Any]) -> Iterator[TestClient]:
    app_settings.setenv("MCP_SERVERS", json.dumps([{"name": "parts", "url": parts_url}]))
    from agent_server.app import app

    with TestClient(app, headers={"x-test-user": f"parts-{uuid.uuid4()}@example.com"}) as client:
        yield client


def outputs(items: list[dict[str, Any]]) -> list[Any]:
    return [item["output"] for item in items if item.get("type") in ("function_call_output", "mcp_call")]


def kept(stored: list[dict[str, Any]]) -> list[Any]:
    """The tool outputs of a stored conversation, and the images of a user message after one (chat mode's)."""
    seen = outputs(stored)
    for item in stored:
        if item.get("role") == "user" and isinstance(item["content"], list):
            seen += [part["image_url"] for part in item["content"] if part["type"] == "input_image"]
    return seen


def model_saw(model_log: list[dict[str, Any]]) -> list[Any]:
    """The tool outputs in the model's last input: Responses items, or chat messages (a tool's image follows it in
    a user message of its own, history/render.py)."""
    body = model_log[-1]["body"]
    if "input" in body:
        return [item["output"] for item in body["input"] if item.get("type") == "function_call_output"]
    seen = []
    for message in body["messages"]:
        if message["role"] == "tool":
            seen.append(message["content"])
        elif message["role"] == "user" and isinstance(message["content"], list):
            seen += [part["image_url"]["url"] for part in message["content"] if part["type"] == "image_url"]
    return seen


def seen_as(api_mode: str, output: Any) -> list[Any]:
    """What the model reads of `output` in the API mode's own shapes."""
    if isinstance(output, str):
        return [output]
    if api_mode == "responses":
        return [output]
    note = "[The tool's output holds 1 image or file part(s), in the user message that follows]"
    return [f"{output[0]['text']}\n{note}", output[1]["image_url"]]


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize(("tool", "returned"), [("capital_of_japan", CAPITAL), ("tokyo_chart", CHART)])
def test_invocations_give_the_tools_output_in_its_items_stored_turn_and_the_next_turns_input(
    http, model_log, api_mode, stream, tool, returned
):
    chat = Conversation(http, stream)
    items = chat.send(f"Use {tool}, please")
    assert outputs(items) == [returned]
    assert f"The tool returned: {returned if isinstance(returned, str) else CHART[0]['text']}." in reply_text(items)
    stored = http.get(f"/conversations/{chat.id}").json()["items"]
    assert kept(stored) == seen_as(api_mode, returned), "the stored turn (the render's items, history/render.py)"
    chat.send("Thanks")
    assert model_saw(model_log) == seen_as(api_mode, returned), "the next turn's model input, from the store"
    post(http, [*chat.history[:-2], {"role": "user", "content": "Again"}], stream)  # a client that keeps them
    assert model_saw(model_log) == seen_as(api_mode, returned), "the items replayed whole by the client"


@pytest.mark.parametrize("stream", [False, True], ids=["sync", "stream"])
@pytest.mark.parametrize(("tool", "returned"), [("capital_of_japan", CAPITAL), ("tokyo_chart", CHART)])
def test_responses_give_the_tools_output_in_its_mcp_call_events_and_the_next_turns_input(
    http, model_log, api_mode, stream, tool, returned
):
    asked = [{"role": "user", "content": f"Use {tool}, please"}]
    answer = http.post("/responses", json={"input": asked, "stream": stream})
    assert answer.status_code == 200, answer.text
    text = returned if isinstance(returned, str) else json.dumps(returned)  # an mcp_call's output is a string
    if stream:
        events = sse_events(answer.text)
        done = [event["item"] for event in events if event["type"] == "response.output_item.done"]
        assert outputs(done) == [text], "the live stream"
        response = events[-1]["response"]
    else:
        response = answer.json()
    Response.model_validate(response)
    assert outputs(response["output"]) == [text]
    conversation = response["custom_outputs"]["session_id"] if "custom_outputs" in response else None
    replayed = [*asked, *response["output"], {"role": "user", "content": "Thanks"}]
    assert http.post("/responses", json={"input": replayed}).status_code == 200
    assert model_saw(model_log) == seen_as(api_mode, returned), "the mcp_call replayed whole"
    if conversation:
        named = {"input": [{"role": "user", "content": "Go on"}], "context": {"conversation_id": conversation}}
        assert http.post("/responses", json=named).status_code == 200
        assert model_saw(model_log) == seen_as(api_mode, returned), "the stored turn"


def test_one_function_shapes_every_kind_of_tool_output():
    """Strings, the API's parts, the SDK's own parts (a dict or its pydantic model) and JSON values."""
    from agents.tool import ToolOutputText

    assert tool_output_shape(CAPITAL) == CAPITAL
    assert tool_output_shape([{"type": "input_text", "text": "a"}, {"type": "text", "text": "b"}]) == "a\nb"
    assert tool_output_shape({"type": "text", "text": CAPITAL}) == CAPITAL
    assert tool_output_shape(ToolOutputText(text=CAPITAL)) == CAPITAL
    sdk_image = {"type": "image", "image_url": CHART[1]["image_url"]}
    assert tool_output_shape(({"type": "text", "text": "A chart of Tokyo"}, sdk_image)) == CHART
    assert tool_output_shape({"answer": 42}) == '{"answer": 42}'
    assert tool_output_shape(None) == "" and tool_output_shape(7) == "7"
    assert tool_output_shape([{"type": "made_up"}]) == '[{"type": "made_up"}]', "no rule: its JSON, never a repr"
    assert parts_in_text(tool_output_text(CHART)) == CHART, "an mcp_call's parts come back as parts"
    assert parts_in_text('[{"type": "input_text", "text": "x"}]') == '[{"type": "input_text", "text": "x"}]'
    assert unrepr(str(CHART)) == CHART and unrepr(str(CHART[:1])) == "A chart of Tokyo", "what earlier versions sent"
    assert unrepr("[{'type': 'input_text', 'text': __import__('os')}]").startswith("[{"), "literals only"
    assert unrepr("[{'type': 'made_up', 'text': 'x'}]") == "[{'type': 'made_up', 'text': 'x'}]"
