# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The chat page at / is served and talks to /invocations with streaming and replayed history."""

from __future__ import annotations


def test_chat_page_is_served(app_client):
    response = app_client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert 'fetch("/invocations"' in page
    assert "stream: true" in page
    assert 'type: "output_text"' in page  # replays assistant turns the way hosted chat UIs do
