# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""LLM_PROVIDER=openai against an OpenAI-compatible server over real HTTP.

The server is the strict offline model on a loopback port: every request the app
sends must be valid for it, in both API modes, streaming and not, with tool turns.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from support import Chat, ServerThread, reply_text

from agent_server.history import API_MODES
from agent_server.offline import create_offline_app


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("api", API_MODES)
def test_multi_turn_chat_with_a_tool_turn(app_settings, api, stream):
    server_app = create_offline_app()
    with ServerThread(server_app) as url:
        app_settings.setenv("LLM_PROVIDER", "openai")
        app_settings.setenv("LLM_MODEL", "any-model")
        app_settings.setenv("LLM_API", api)
        app_settings.setenv("OPENAI_BASE_URL", f"{url}/v1")
        app_settings.setenv("OPENAI_API_KEY", "test-key")
        from agent_server.app import app

        with TestClient(app) as client:
            chat = Chat(client, stream)
            chat.send("Hello")
            items = chat.send("What time is it?")
            assert [item["type"] for item in items] == ["function_call", "function_call_output", "message"]
            assert "I saw 3 user, 2 assistant and 1 tool turns" in reply_text(chat.send("Thanks"))

    log = server_app.state.request_log
    assert [entry["status"] for entry in log] == [200] * 4
    expected_path = "/v1/chat/completions" if api == "chat_completions" else "/v1/responses"
    assert {entry["path"] for entry in log} == {expected_path}
    assert all(entry["body"]["model"] == "any-model" for entry in log)
