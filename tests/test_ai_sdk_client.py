"""A Responses API client nobody on this project wrote: the Vercel AI SDK (`ai` 6 with `@ai-sdk/openai` 3,
`openai.responses(...)` with its baseURL at the app, pinned in tests/ai_sdk_client/package-lock.json; scripts/test
installs them with `npm ci`), against a generated app's /responses served by `start-app`.

Three turns, the second a tool turn, with `generateText` and with `streamText`, in both API modes; the history is
the model messages the SDK returns, replayed as the SDK replays them. Every turn must answer, the tool the app ran
must reach the SDK as a tool call with its result, and the offline model must have refused nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from renders import API_MODES, clean_env, uv
from servers import ServerProcess, free_port, node_client

CLIENT = Path(__file__).parent / "ai_sdk_client"
PROMPTS = ["Hello", "What time is it?", "Thanks"]
REPLIES = [
    "Offline model: I saw 1 user, 0 assistant and 0 tool turns. You said: Hello",
    "Offline model: I saw 2 user, 1 assistant and 1 tool turns. You said: What time is it?",
    # The SDK replays no result of a tool the server ran when `store` is false (it would send an item_reference
    # with store true): the model sees the turn's answer, which says what the tool returned.
    "Offline model: I saw 3 user, 2 assistant and 0 tool turns. You said: Thanks",
]

pytestmark = pytest.mark.xdist_group("ai-sdk-client")


@pytest.fixture(scope="module", params=API_MODES)
def served_app(request, renders) -> Iterator[tuple[str, Path]]:
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    port, log = free_port(), app / f"start-app-ai-sdk-{request.param}.log"
    args = [str(app / ".venv" / "bin" / "start-app"), "--port", str(port)]
    env = clean_env(LLM_PROVIDER="offline", LLM_API=request.param)
    with ServerProcess(args, env, f"http://127.0.0.1:{port}/health", cwd=app, log=log) as server:
        yield server.url, log


def converse(url: str, mode: str) -> dict:
    return node_client(CLIENT, "@ai-sdk/openai", url, mode, *PROMPTS)


@pytest.mark.parametrize("mode", ["generate", "stream"])
def test_the_ai_sdk_holds_a_conversation_with_a_tool_turn(served_app, mode):
    url, log = served_app
    conversation = converse(url, mode)

    assert [request["status"] for request in conversation["requests"]] == [200] * 3
    assert [request["body"].get("stream", False) for request in conversation["requests"]] == [mode == "stream"] * 3
    for reply, expected in zip(conversation["replies"], REPLIES, strict=True):
        assert reply.endswith(expected), conversation["replies"]
    call, result, _text = conversation["content"][1]
    assert call["type"] == "tool-call" and call["toolName"] == "mcp.get_current_time" and call["providerExecuted"]
    assert result["type"] == "tool-result" and result["toolCallId"] == call["toolCallId"]
    assert result["output"]["output"] in conversation["replies"][1], "the tool's output, as the answer quotes it"
    replayed = conversation["requests"][2]["body"]["input"]
    assert [item["role"] for item in replayed] == ["user", "assistant", "user", "assistant", "user"]
    assert "offline model: 4" not in log.read_text(), "the offline model refused a request"
