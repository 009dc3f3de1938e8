"""The real chat UI client: a generated app, served by `start-app`, in a conversation held by the
Databricks chat UI's own packages (`@databricks/ai-sdk-provider` 0.5.1 with the Vercel `ai` package,
pinned in tests/chat_ui_client/package-lock.json; scripts/test installs them with `npm ci`).

Three streamed turns, the second a tool turn, in both API modes: every request is a 200, the
model saw the whole conversation, and the history the client sent back has the shapes the app's
history catalogue lists as the chat UI's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from renders import clean_env, run, uv
from servers import free_port, wait_for_health

CLIENT = Path(__file__).with_name("chat_ui_client")
PROMPTS = ["Hello", "What time is it?", "Thanks"]


def keys(item: dict) -> set[str]:
    return set(item)


@pytest.mark.xdist_group("chat-ui-client")
@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_databricks_chat_ui_holds_a_multi_turn_conversation_with_a_tool_turn(renders, api):
    assert (CLIENT / "node_modules" / "@databricks" / "ai-sdk-provider").is_dir(), "run scripts/test (npm ci)"
    node = shutil.which("node")
    assert node, "Node 20 or later is needed for the chat UI client"
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)

    port = free_port()
    env = clean_env(LLM_PROVIDER="offline", LLM_API=api)
    server = subprocess.Popen(
        [str(app / ".venv" / "bin" / "start-app"), "--port", str(port)],
        cwd=app,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_health(url, server)
        result = run([node, str(CLIENT / "chat.mjs"), url, *PROMPTS], cwd=CLIENT, timeout=120)
    finally:
        server.terminate()
        server.wait(timeout=30)
    conversation = json.loads(result.stdout)
    requests, messages = conversation["requests"], conversation["messages"]

    assert [request["status"] for request in requests] == [200, 200, 200]
    assert [message["role"] for message in messages] == ["user", "assistant"] * 3
    tool_parts = [part for part in messages[3]["parts"] if part["type"] == "dynamic-tool"]
    assert [(part["toolName"], part["state"]) for part in tool_parts] == [("get_current_time", "output-available")]
    final_text = [part["text"] for part in messages[5]["parts"] if part["type"] == "text"]
    assert final_text == ["Offline model: I saw 3 user, 2 assistant and 1 tool turns. You said: Thanks"]

    # The last request's history: the shapes docs/history-shapes.md lists for the chat UI.
    history = requests[-1]["body"]["input"]
    assert [item.get("type") or item["role"] for item in history] == [
        "user",
        "assistant",
        "user",
        "function_call",
        "function_call_output",
        "assistant",
        "user",
    ]
    user, assistant, _, call, output, _, _ = history
    assert user == {"role": "user", "content": [{"type": "input_text", "text": "Hello"}]}
    assert keys(assistant) == {"role", "content"} and assistant["content"][0].keys() == {"type", "text"}
    assert keys(call) == {"type", "call_id", "name", "arguments", "id"} and call["arguments"] == "{}"
    assert keys(output) == {"type", "call_id", "output"} and output["call_id"] == call["call_id"]
