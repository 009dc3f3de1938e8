# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The offline model as its clients meet it: the real openai-agents SDK with both model clients (tool turns,
reasoning), `python -m agent_server.offline` over HTTP, and the in-process client answering byte for byte as the
ASGI app does."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, RunConfig, Runner, function_tool
from support import PortTaken, ServerProcess, clean_env, free_port

from agent_server.history import API_MODES
from agent_server.offline import create_offline_app, offline_client

from .test_offline_model import CHAT, RESPONSES, TIME_TOOL_RESPONSES, post, reply

# --------------------------------------------------------------------------------------------
# The real openai-agents SDK, both model clients
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
@pytest.mark.parametrize("api", API_MODES)
def test_agents_sdk_calls_the_tool_and_answers_with_its_output(api: str, streamed: bool) -> None:
    calls: list[str] = []

    @function_tool
    def get_current_time() -> str:
        """The current time."""
        calls.append("get_current_time")
        return "12:00"

    app = create_offline_app()
    model_type = OpenAIChatCompletionsModel if api == "chat_completions" else OpenAIResponsesModel
    agent = Agent(
        name="clock",
        instructions="Answer briefly.",
        model=model_type(model="offline", openai_client=offline_client(app)),
        tools=[get_current_time],
    )

    async def run() -> Any:
        config = RunConfig(tracing_disabled=True)
        if not streamed:
            return (await Runner.run(agent, "what time is it?", run_config=config)).final_output
        result = Runner.run_streamed(agent, "what time is it?", run_config=config)
        async for _ in result.stream_events():
            pass
        return result.final_output

    final_output = asyncio.run(run())
    log = app.state.request_log
    assert calls == ["get_current_time"]
    assert [entry["status"] for entry in log] == [200, 200], log
    second_request = json.dumps(log[1]["body"])
    assert '"12:00"' in second_request  # the tool output went back to the model
    assert final_output == "The tool returned: 12:00. " + reply(1, 0, 1, "what time is it?")


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", API_MODES)
def test_asked_to_think_it_reasons_first_and_the_sdk_reads_a_reasoning_item(api: str, streamed: bool) -> None:
    """A summary of its reasoning before the answer: `reasoning_content` in chat completions (as DeepSeek-style
    servers send it, which openai-agents 0.24's chatcmpl_converter reads), a reasoning item in Responses."""
    model_type = OpenAIChatCompletionsModel if api == "chat_completions" else OpenAIResponsesModel
    model = model_type(model="offline", openai_client=offline_client(create_offline_app()))
    agent = Agent(name="thinker", instructions="Answer.", model=model)
    config = RunConfig(tracing_disabled=True)

    async def run() -> list[Any]:
        if streamed:
            result = Runner.run_streamed(agent, "Please think about it", run_config=config)
            async for _ in result.stream_events():
                pass
            return result.new_items
        return (await Runner.run(agent, "Please think about it", run_config=config)).new_items

    items = [item.raw_item for item in asyncio.run(run())]
    assert [item.type for item in items] == ["reasoning", "message"]
    assert items[0].summary[0].text.startswith("The user asks me to think."), items[0]
    assert "You said: Please think about it" in items[1].content[0].text


# --------------------------------------------------------------------------------------------
# Over HTTP, as `python -m agent_server.offline --port N`
# --------------------------------------------------------------------------------------------


def test_main_serves_the_model_over_http() -> None:
    port = free_port()
    command = [sys.executable, "-m", "agent_server.offline", "--port", str(port)]
    with ServerProcess(command, clean_env(), f"http://127.0.0.1:{port}/v1", cwd=Path(__file__).resolve().parents[2]):
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="offline", max_retries=0)
        completion = client.chat.completions.create(model="offline", messages=[{"role": "user", "content": "hello"}])
        assert completion.choices[0].message.content == reply(1, 0, 0, "hello")
        # A server that has not bound its port yet is not ready because another answers there (port_owners.py): on
        # a loaded machine another process can take the port the test picked while the server loads.
        loading = [sys.executable, "-c", "import time; time.sleep(60)"]
        with pytest.raises(PortTaken, match="answered by another process"):
            ServerProcess(loading, clean_env(), f"http://127.0.0.1:{port}/v1").__enter__()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CHAT, {"model": "offline", "messages": [{"role": "user", "content": "hello"}]}),
        (CHAT, {"model": "offline", "messages": [{"role": "user", "content": "hello"}], "stream": True}),
        (RESPONSES, {"model": "offline", "input": "What time is it?", "tools": [TIME_TOOL_RESPONSES]}),
        (RESPONSES, {"model": "offline", "input": "hello", "stream": True}),
        (CHAT, {"model": "offline", "messages": [{"role": "user", "content": None}]}),
        (RESPONSES, b"{not json"),
    ],
    ids=["chat", "chat-stream", "responses-tool", "responses-stream", "chat-400", "not-json"],
)
def test_in_process_and_asgi_answer_byte_for_byte_alike(path, body):
    """offline_client skips the ASGI app (InProcess): what it gets must be exactly what a server would send."""
    from agent_server.offline.server import InProcess

    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    over_asgi = post(path, content)

    async def in_process() -> httpx.Response:
        async with httpx.AsyncClient(
            transport=InProcess(create_offline_app()), base_url="http://offline-model"
        ) as http:
            return await http.post(path, content=content, headers={"content-type": "application/json"})

    def timeless(answer: httpx.Response) -> tuple[int, bytes]:  # the two may straddle a second
        return answer.status_code, re.sub(rb'"(created|created_at|completed_at)": ?\d+', rb'"\1":0', answer.content)

    direct = asyncio.run(in_process())
    assert timeless(direct) == timeless(over_asgi)
    assert direct.headers["content-type"].split(";")[0] == over_asgi.headers["content-type"].split(";")[0]
