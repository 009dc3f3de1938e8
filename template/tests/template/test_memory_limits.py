# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Conversation memory's limits and checks: retention (MEMORY_MAX_ITEMS), the turn size cap, conversation ids,
identities checked whole and sent once, and 404s that quote short. On SQLite, and on PostgreSQL too when
MEMORY_TEST_POSTGRES_URL names one (test_memory.py's `backend`)."""

# ruff: noqa: F811  (test_memory.py's fixtures, imported below, are the tests' arguments)
from __future__ import annotations

import uuid

from support import Conversation, post_turn

from .test_memory import ADA, backend, client, stored  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)


def test_retention_keeps_the_newest_whole_turns(client, app_settings):
    app_settings.setenv("MEMORY_MAX_ITEMS", "5")
    chat = Conversation(client, stream=False)
    for text in ("One", "Two", "Three"):
        chat.send(text)
    kept = stored(client, chat.id).json()["items"]
    assert [item["content"] for item in kept if item["role"] == "user"] == ["Two", "Three"]


def test_a_turn_over_the_size_cap_is_a_413_and_stores_nothing(client, app_settings):
    app_settings.setenv("MEMORY_MAX_TURN_BYTES", "1000")
    app_settings.setenv("ATTACHMENTS_MAX_FILES", "0")  # none taken, so their limits need not fit in 1000 bytes
    big = f"big-{uuid.uuid4()}"
    body = {"input": [{"role": "user", "content": "x" * 2000}], "context": {"conversation_id": big}}
    response = client.post("/invocations", json=body)
    assert response.status_code == 413 and "MEMORY_MAX_TURN_BYTES=1000" in response.json()["error"]["message"]
    assert stored(client, big).status_code == 404, "a conversation whose first turn failed is not kept"


def test_a_bad_conversation_id_is_a_400_that_names_it(client):
    body = {"input": "Hi", "context": {"conversation_id": "../../etc/passwd"}}
    response = client.post("/invocations", json=body)
    assert response.status_code == 400 and response.json()["error"]["param"] == "context.conversation_id"
    both = {"input": "Hi", "context": {"conversation_id": "a"}, "custom_inputs": {"session_id": "b"}}
    assert client.post("/invocations", json=both).status_code == 400


# --- identities, files and messages: checked, private, short ----------------------------------------


def test_an_identity_is_checked_whole_never_cut(client):
    """Two identities that share their first 320 characters were one owner when cut; now the longer is a 400."""
    shared = "a" * 320
    assert post_turn(client, {"input": "Hi"}, stream=False, headers={"x-test-user": shared})[1]
    response = client.post("/invocations", json={"input": "Hi"}, headers={"x-test-user": shared + "-bob"})
    assert response.status_code == 400 and "at most 320" in response.json()["error"]["message"]
    assert client.get("/conversations", headers={"x-test-user": shared + "-bob"}).status_code == 400


def test_an_identity_header_sent_twice_is_a_400(client):
    """Behind a proxy that adds its own header beside the client's, the client must not pick its identity."""
    twice = [("x-test-user", "mallory@example.com"), ("x-test-user", ADA)]
    response = client.post("/invocations", json={"input": "Hi"}, headers=twice)
    assert response.status_code == 400 and "replace the client's identity header" in response.json()["error"]["message"]
    assert client.get("/conversations", headers=twice).status_code == 400


def test_an_unknown_conversation_is_quoted_short_in_its_404(client):
    response = stored(client, "x" * 10_000)
    message = response.json()["error"]["message"]
    assert response.status_code == 404 and len(message) < 300 and "9800 more characters" in message
