"""The real chat UI client: a generated app, served by `start-app`, in conversations held by the
Databricks chat UI's own packages (`@databricks/ai-sdk-provider` 0.5.1 with the Vercel `ai` package,
pinned in tests/chat_ui_client/package-lock.json; scripts/test installs them with `npm ci`).

Four turns, two of them tool turns, in both API modes and in each way the UI answers a turn:
`streamText`, `generateText` (a client that keeps the model messages it returns), and the UI's
fallback from a failed stream to `generateText`. Every turn must answer, the model must have seen
the whole conversation (each tool output once), and the offline model must have refused nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import servers
from renders import API_MODES, served_offline
from servers import ServerProcess

PROMPTS = ["Hello", "What time is it?", "Thanks", "What time is it now?"]
REPLIES = [
    "Offline model: I saw 1 user, 0 assistant and 0 tool turns. You said: Hello",
    "Offline model: I saw 2 user, 1 assistant and 1 tool turns. You said: What time is it?",
    "Offline model: I saw 3 user, 2 assistant and 1 tool turns. You said: Thanks",
    "Offline model: I saw 4 user, 3 assistant and 2 tool turns. You said: What time is it now?",
]
AI_SDK_TOOL_ERROR = "Model tried to call unavailable tool 'get_current_time'. No tools are available."

pytestmark = pytest.mark.xdist_group("chat-ui-client")


@pytest.fixture(scope="module", params=API_MODES)
def served_app(request, renders) -> Iterator[tuple[str, ServerProcess, Path]]:
    """`start-app` on a loopback port; its output goes to a file the test reads afterwards."""
    with served_offline(renders["defaults"], request.param, "chat-ui") as (server, log):
        yield server.url, server, log


def converse(url: str, mode: str) -> dict:
    return servers.converse(url, mode, *PROMPTS)


@pytest.mark.parametrize("mode", ["stream", "generate", "fallback"])
def test_the_chat_ui_packages_hold_a_conversation_with_two_tool_turns(served_app, mode):
    url, _, log = served_app
    conversation = converse(url, mode)
    answered = [request for request in conversation["requests"] if request["status"] is not None]

    assert [request["status"] for request in answered] == [200] * 4
    assert [request["body"]["stream"] for request in answered] == [mode == "stream"] * 4
    for reply, expected in zip(conversation["replies"], REPLIES, strict=True):
        assert reply.endswith(expected), conversation["replies"]
    assert "offline model: 4" not in log.read_text(), "the offline model refused a request"
    if mode == "fallback":  # every turn was first tried as a stream, which the client dropped
        assert [request["body"]["stream"] for request in conversation["requests"]] == [True, False] * 4


def test_generate_text_replays_its_own_error_output_beside_the_apps(served_app):
    """What makes the duplicate-output repair necessary: the real client sends two outputs for one call."""
    url, _, _ = served_app
    history = converse(url, "generate")["requests"][2]["body"]["input"]
    outputs = [item for item in history if item.get("type") == "function_call_output"]
    call = next(item for item in history if item.get("type") == "function_call")
    assert [item["call_id"] for item in outputs] == [call["call_id"]] * 2
    assert outputs[0]["output"] == AI_SDK_TOOL_ERROR
    assert "id" in call, "the call's item id is replayed: it names the app's output"


def test_the_streamed_history_has_the_chat_ui_shapes(served_app):
    """The last request's history: the shapes docs/history-shapes.md lists for the chat UI."""
    url, _, _ = served_app
    history = converse(url, "stream")["requests"][-1]["body"]["input"]
    assert [item.get("type") or item["role"] for item in history[:7]] == [
        "user",
        "assistant",
        "user",
        "function_call",
        "function_call_output",
        "assistant",
        "user",
    ]
    user, assistant, _, call, output, _, _ = history[:7]
    assert user == {"role": "user", "content": [{"type": "input_text", "text": "Hello"}]}
    assert set(assistant) == {"role", "content"} and assistant["content"][0].keys() == {"type", "text"}
    assert set(call) == {"type", "call_id", "name", "arguments", "id"} and call["arguments"] == "{}"
    assert set(output) == {"type", "call_id", "output"} and output["call_id"] == call["call_id"]
