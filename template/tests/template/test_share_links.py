# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Share links (agent_server/memory/shares.py, shares_api.py): off by default; on, a conversation's owner shares a
read-only snapshot that another identity views and continues in a chat of its own, while no route that changes a
conversation works with the token; revoked, deleted or after DELETE /me, a link is a 404 that says nothing; tokens
never reach the access log. Through the real app, SDK and offline model, in both API modes; on SQLite, and on
PostgreSQL too when MEMORY_TEST_POSTGRES_URL names one (test_memory.py's `backend`)."""

# ruff: noqa: F811  (the fixtures imported below are the tests' arguments)
from __future__ import annotations

import logging
import uuid

from support import Conversation, post_turn, reply_text

from agent_server import config
from agent_server.observability.logs import NoSignInCodes

from .test_long_term_memory import as_user
from .test_memory import backend, client  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)


def test_share_links_are_off_by_default(client):
    assert config.settings().memory.share_links is False
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    assert client.post(f"/conversations/{chat.id}/shares", json={"shown_name": "Ada"}).status_code == 404
    assert client.get("/shares").status_code == 404
    assert client.get("/shared/anything").status_code == 404


def test_a_shared_snapshot_is_read_only_continued_apart_and_gone_when_revoked_or_deleted(client, app_settings):
    app_settings.setenv("SHARE_LINKS", "true")
    ada, bob = (f"{name}-{uuid.uuid4()}@example.com" for name in ("ada", "bob"))
    chat = Conversation(client, stream=False, user=ada)
    chat.send("My secret plan is tea")
    chat.send("What time is it?")
    made = client.post(f"/conversations/{chat.id}/shares", json={"shown_name": " Ada L. "}, headers=as_user(ada))
    assert made.status_code == 201, made.text
    link = made.json()
    token = link["token"]
    assert link["url"] == f"/s/{token}" and link["shown_name"] == "Ada L." and len(token) >= 40
    bad = client.post(f"/conversations/{chat.id}/shares", json={"shown_name": "\x1b[31m"}, headers=as_user(ada))
    assert bad.status_code == 400
    assert (
        client.post(f"/conversations/{chat.id}/shares", json={"shown_name": "B"}, headers=as_user(bob)).status_code
        == 404
    )

    chat.send("A later turn")  # not in the snapshot
    seen = client.get(f"/shared/{token}", headers=as_user(bob))
    assert seen.status_code == 200 and seen.headers["cache-control"] == "no-store"
    shown = seen.json()
    assert set(shown) == {"title", "shown_name", "created_at", "items"} and shown["shown_name"] == "Ada L."
    roles = [item.get("role") or item["type"] for item in shown["items"]]
    assert roles == ["user", "assistant", "user", "function_call", "function_call_output", "assistant"]
    assert ada not in seen.text and "later turn" not in seen.text and chat.id not in seen.text

    # No route that changes a conversation takes the token: each acts on the caller's own, or is a 404.
    for method, path, body in [("PATCH", f"/conversations/{token}", {"title": "x"}),
                               ("DELETE", f"/conversations/{token}", None), ("GET", f"/conversations/{token}", None),
                               ("DELETE", f"/shares/{link['id']}", None), ("PUT", f"/shared/{token}", None),
                               ("POST", f"/conversations/{token}/shares", {"shown_name": "x"})]:  # fmt: skip
        answer = client.request(method, path, headers=as_user(bob), json=body)
        assert answer.status_code in (404, 405), (method, path, answer.text)
    named = token.lstrip("-_")  # as a conversation id, which starts with a letter or digit (a token may not)
    items, outputs = post_turn(client, {"input": [{"role": "user", "content": "Hi"}],
                                        "context": {"conversation_id": named}}, False, as_user(bob))  # fmt: skip
    assert "I saw 1 user, 0 assistant" in reply_text(items), "the token names no conversation of the owner's"
    assert len(client.get(f"/conversations/{chat.id}", headers=as_user(ada)).json()["items"]) == 8

    copied = client.post(f"/shared/{token}/continue", json={}, headers=as_user(bob))
    assert copied.status_code == 201
    mine = Conversation(client, stream=True, user=bob)
    mine.id = copied.json()["id"]
    assert "I saw 3 user, 2 assistant and 1 tool turns" in reply_text(mine.send("And then?")), "the snapshot, then mine"
    assert [c["id"] for c in client.get("/conversations", params={"q": "secret"}, headers=as_user(bob)).json()[
        "conversations"]] == [mine.id]  # fmt: skip
    assert client.get(f"/conversations/{mine.id}", headers=as_user(ada)).status_code == 404

    listed = client.get("/shares", headers=as_user(ada)).json()["shares"]
    assert [(s["id"], s["conversation_id"], "token" in s) for s in listed] == [(link["id"], chat.id, False)]
    assert client.get("/shares", headers=as_user(bob)).json()["shares"] == []
    exported = client.get("/me/export", headers=as_user(ada))
    assert [s["id"] for s in exported.json()["shares"]] == [link["id"]] and token not in exported.text

    assert client.delete(f"/shares/{link['id']}", headers=as_user(ada)).status_code == 204
    gone = client.get(f"/shared/{token}", headers=as_user(bob))
    assert gone.status_code == 404 and "secret" not in gone.text and "Ada" not in gone.text
    assert client.post(f"/shared/{token}/continue", json={}, headers=as_user(bob)).status_code == 404

    second = client.post(f"/conversations/{chat.id}/shares", json={"shown_name": "A"}, headers=as_user(ada)).json()
    client.delete(f"/conversations/{chat.id}", headers=as_user(ada))
    assert client.get(f"/shared/{second['token']}", headers=as_user(bob)).status_code == 404, "deleted with it"
    other = Conversation(client, stream=False, user=ada)
    other.send("Another")
    third = client.post(f"/conversations/{other.id}/shares", json={"shown_name": "A"}, headers=as_user(ada)).json()
    assert client.delete("/me", headers=as_user(ada)).json()["deleted"]["shares"] == 1
    assert client.get(f"/shared/{third['token']}", headers=as_user(bob)).status_code == 404
    assert client.get(f"/shared/{token}x", headers=as_user(bob)).status_code == 404


def test_the_access_log_never_holds_a_share_token():
    for path, shown in [("/s/TOKEN", "/s/(not logged)"), ("/shared/TOKEN", "/shared/(not logged)"),
                        ("/shared/TOKEN/continue", "/shared/(not logged)/continue")]:  # fmt: skip
        record = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, "%s %s %s", ("a", "GET", path), None)
        assert NoSignInCodes().filter(record) and record.getMessage() == f"a GET {shown}"
