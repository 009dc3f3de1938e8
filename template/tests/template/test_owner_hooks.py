# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The owner's hooks in agent_server/agent.py: used when defined, and optional, since update never adds them."""

from __future__ import annotations

import pytest
from support import Chat, message_text, reply_text

from agent_server import agent

pytestmark = pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])


def last_item_only(items):
    return items[-1:]


def test_customize_history_sees_the_rendered_history(app_client, stream, monkeypatch):
    seen = []
    hook = lambda items: seen.append(items) or last_item_only(items)  # noqa: E731
    # raising=False: an app generated before the hook existed has none in its agent.py.
    monkeypatch.setattr(agent, "customize_history", hook, raising=False)
    chat = Chat(app_client, stream)
    chat.send("Hello")
    reply = reply_text(chat.send("And again"))
    assert "I saw 1 user, 0 assistant and 0 tool turns. You said: And again" in reply
    # The chat UI's replay reached the hook already rendered: plain text, no null status, no id.
    assert seen[-1][1] == {"role": "assistant", "content": message_text(chat.history[1])}


def test_an_app_without_the_hook_keeps_the_template_behaviour(app_client, stream, monkeypatch):
    # Apps generated before the hook existed: their agent.py has no customize_history.
    monkeypatch.delattr(agent, "customize_history", raising=False)
    chat = Chat(app_client, stream)
    chat.send("Hello")
    assert "I saw 2 user, 1 assistant and 0 tool turns." in reply_text(chat.send("And again"))
