# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""One conversation exported (agent_server/memory/export.py): Markdown and JSON of a conversation with an attachment,
a tool turn and an approval, its owner's only. Through the real app, SDK and offline model, in both API modes; on
SQLite, and on PostgreSQL too when MEMORY_TEST_POSTGRES_URL names one (test_memory.py's `backend`)."""

# ruff: noqa: F811  (the fixtures imported below are the tests' arguments)
from __future__ import annotations

import uuid

import pytest
from support import Conversation, post_turn, reply_text

from agent_server import agent
from agent_server.memory import export

from .test_local_tool_approvals import SENT, asking_agent
from .test_long_term_memory import as_user
from .test_memory import backend, client  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)

NOTES = {"type": "input_file", "filename": "notes.txt", "file_data": "data:text/plain;base64,aGVsbG8gd29ybGQ="}


def test_a_conversation_exports_as_markdown_and_json_for_its_owner_only(client, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(agent, "create_agent", asking_agent)
    SENT.clear()
    ada, bob = (f"{name}-{uuid.uuid4()}@example.com" for name in ("ada", "bob"))
    chat = Conversation(client, stream=False, user=ada)
    chat.send_items([{"role": "user", "content": [{"type": "input_text", "text": "Read my ```notes```"}, NOTES]}])
    [approval] = chat.send("Use send_email, please")
    assert approval["type"] == "mcp_approval_request"
    answered = chat.send_items(
        [{"type": "mcp_approval_response", "approval_request_id": approval["id"], "approve": True}]
    )
    assert "sent to ada@example.com" in reply_text(answered) and SENT == ["ada@example.com"]
    url = f"/conversations/{chat.id}/export"

    markdown = client.get(url, headers=as_user(ada))
    assert markdown.status_code == 200 and markdown.headers["content-type"].startswith("text/markdown")
    assert markdown.headers["content-disposition"] == 'attachment; filename="Read-my-notes.md"'
    text = markdown.text
    assert (
        text.startswith("# Read my ```notes```\n") and "## You\n\nRead my ```notes```\n\n- Attached: notes.txt" in text
    )
    assert "## Assistant\n\nOffline model: I saw 1 user" in text
    assert "**Approval requested to run** `send_email`\n\n```json\n" in text
    assert "**Approval answer** for `send_email`: Approved" in text
    assert "**Tool output** of `send_email`\n\n```\nsent to ada@example.com\n```" in text
    assert text.index("Approval requested") < text.index("Approval answer") < text.index("The tool returned")

    as_json = client.get(url, params={"format": "json"}, headers=as_user(ada))
    assert as_json.status_code == 200 and as_json.headers["content-disposition"].endswith('.json"')
    found = as_json.json()
    assert (found["id"], found["title"], found["branch"]) == (chat.id, "Read my ```notes```", None)
    kinds = [item.get("role") or item["type"] for item in found["items"]]
    assert kinds[:2] == ["user", "assistant"] and "function_call" in kinds and "function_call_output" in kinds
    assert found["items"][0]["content"][1]["filename"] == "notes.txt"

    for asked, status in [(("bob", {}), 404), (("ada", {"format": "pdf"}), 400), (("ada", {"branch": "7"}), 404),
                          (("ada", {"branch": "x"}), 400)]:  # fmt: skip
        who, params = asked
        answer = client.get(url, params=params, headers=as_user(bob if who == "bob" else ada))
        assert answer.status_code == status, answer.text
    assert "notes" not in client.get(url, headers=as_user(bob)).text, "nothing of what was there"


def test_the_export_is_the_current_branch_unless_it_names_an_earlier_one(client):
    ada = f"ada-{uuid.uuid4()}@example.com"
    chat = Conversation(client, stream=False, user=ada)
    chat.send("Hello")
    chat.send("Tell me more")
    first = client.get(f"/conversations/{chat.id}", headers=as_user(ada)).json()["items"]
    edit = {"input": [*first[:2], {"role": "user", "content": "Tell me less"}], "context": {"conversation_id": chat.id}}
    post_turn(client, {**edit, "custom_inputs": {"replace_history": True}}, False, as_user(ada))
    url = f"/conversations/{chat.id}/export"
    current = client.get(url, headers=as_user(ada)).text
    assert "Tell me less" in current and "Tell me more" not in current and "_Earlier branch" not in current
    earlier = client.get(url, params={"branch": "1"}, headers=as_user(ada)).text
    assert "_Earlier branch 1._" in earlier and "Tell me more" in earlier and "Tell me less" not in earlier
    assert client.get(url, params={"branch": "1", "format": "json"}, headers=as_user(ada)).json()["branch"] == 1


def test_a_fence_is_longer_than_any_backticks_in_what_it_holds():
    assert export.fenced("a ```` b", "json") == ["`````json", "a ```` b", "`````"]
