"""A Responses API client nobody on this project wrote: the Vercel AI SDK (`ai` 6 with `@ai-sdk/openai` 3,
`openai.responses(...)` with its baseURL at the app, pinned in tests/ai_sdk_client/package-lock.json; scripts/test
installs them with `npm ci`), against a generated app's /responses served by `start-app`.

Three turns, the second a tool turn, with `generateText` and with `streamText`, in both API modes; the history is
the model messages the SDK returns, replayed as the SDK replays them: by default (`store: true`) the model's items
by id (`item_reference`, which the app's memory resolves), with `store: false` whole. Every turn must answer, the
tool the app ran must reach the SDK as a tool call with its result, and the offline model must have refused nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from renders import API_MODES, served_offline
from servers import node_client

CLIENT = Path(__file__).parent / "ai_sdk_client"
PROMPTS = ["Hello", "What time is it?", "Thanks"]
REPLIES = [
    "Offline model: I saw 1 user, 0 assistant and 0 tool turns. You said: Hello",
    "Offline model: I saw 2 user, 1 assistant and 1 tool turns. You said: What time is it?",
    "Offline model: I saw 3 user, 2 assistant and 1 tool turns. You said: Thanks",
]
# With `store: false` the SDK replays no result of a tool the server ran: the model sees the turn's answer, which
# says what the tool returned.
REPLIES_UNSTORED = [*REPLIES[:2], "Offline model: I saw 3 user, 2 assistant and 0 tool turns. You said: Thanks"]

pytestmark = pytest.mark.xdist_group("ai-sdk-client")


@pytest.fixture(scope="module", params=API_MODES)
def served_app(request, renders) -> Iterator[tuple[str, Path]]:
    with served_offline(renders["defaults"], request.param, "ai-sdk") as (server, log):
        yield server.url, log


def converse(url: str, mode: str, store: str) -> dict:
    return node_client(CLIENT, "@ai-sdk/openai", url, mode, store, *PROMPTS)


@pytest.mark.parametrize(("mode", "store"), [("generate", "default"), ("stream", "default"), ("generate", "false")])
def test_the_ai_sdk_holds_a_conversation_with_a_tool_turn(served_app, mode, store):
    url, log = served_app
    conversation = converse(url, mode, store)

    assert [request["status"] for request in conversation["requests"]] == [200] * 3
    assert [request["body"].get("stream", False) for request in conversation["requests"]] == [mode == "stream"] * 3
    expected = REPLIES if store == "default" else REPLIES_UNSTORED
    for reply, wanted in zip(conversation["replies"], expected, strict=True):
        assert reply.endswith(wanted), conversation["replies"]
    call, result, _text = conversation["content"][1]
    assert call["type"] == "tool-call" and call["toolName"] == "mcp.get_current_time" and call["providerExecuted"]
    assert result["type"] == "tool-result" and result["toolCallId"] == call["toolCallId"]
    assert result["output"]["output"] in conversation["replies"][1], "the tool's output, as the answer quotes it"
    replayed = [item.get("role") or item["type"] for item in conversation["requests"][2]["body"]["input"]]
    if store == "default":  # the answers and the tool's call and result, by id
        assert replayed == ["user", "item_reference", "user", "item_reference", "item_reference", "user"], replayed
    else:
        assert replayed == ["user", "assistant", "user", "assistant", "user"], replayed
    assert "offline model: 4" not in log.read_text(), "the offline model refused a request"
