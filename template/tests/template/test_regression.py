# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""What the render step prevents: the second-prompt failure, reproduced with the render bypassed.

This is the handler as agent apps wrote it before the render step: MLflow's
request items go straight to Runner. On openai-agents >= 0.19 in
chat-completions mode the chat UI's id-less replay of turn one then fails
with `UserError: Unhandled item type or structure` on every follow-up.
"""

from __future__ import annotations

import pytest
from support import Chat, replayed

from agent_server.turn import serve


def unrendered_input(context):
    """MLflow's request model's items, as the handlers of agent apps ran them (its `status: None` and all)."""
    from mlflow.types.responses import ResponsesAgentRequest

    return [item.model_dump() for item in ResponsesAgentRequest(input=context.body["input"]).input]


@pytest.mark.parametrize("api_mode", ["chat_completions"], indirect=True)
def test_second_prompt_fails_without_the_render_step(app_client, monkeypatch):
    chat = Chat(app_client, stream=False)
    chat.send("Hello")  # the first prompt works either way

    monkeypatch.setattr(serve, "model_input", unrendered_input)
    history = [*chat.history, {"role": "user", "content": "And again"}]
    response = app_client.post("/invocations", json={"input": history})

    assert response.status_code == 500
    assert "Unhandled item type or structure" in response.json()["detail"]


@pytest.mark.parametrize("api_mode", ["chat_completions"], indirect=True)
def test_same_history_works_with_the_render_step(app_client):
    chat = Chat(app_client, stream=False)
    first = chat.send("Hello")
    assert chat.history[1] == replayed(first, "chat_ui")[0]  # the id-less shape that broke apps
    chat.send("And again")
