# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Web pages the developer visits cannot drive the agent (agent_server/request_guard.py, BrowserGuard)."""

from __future__ import annotations

import pytest

HELLO = {"input": [{"role": "user", "content": "Hello"}]}


def test_the_apps_own_page_may_post(app_client):
    response = app_client.post("/invocations", json=HELLO, headers={"origin": "http://testserver"})
    assert response.status_code == 200, response.text


def test_another_sites_page_may_not(app_client, model_log):
    response = app_client.post("/invocations", json=HELLO, headers={"origin": "http://evil.example"})
    assert response.status_code == 403
    assert "ALLOWED_ORIGINS" in response.json()["error"]["message"]
    assert not model_log


def test_allowed_origins_lets_a_named_site_in(app_client, app_settings):
    app_settings.setenv("ALLOWED_ORIGINS", "https://chat.example, http://localhost:3000/")
    for origin in ("https://chat.example", "http://localhost:3000"):
        assert app_client.post("/invocations", json=HELLO, headers={"origin": origin}).status_code == 200
    assert app_client.post("/invocations", json=HELLO, headers={"origin": "https://other.example"}).status_code == 403


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_post_a_page_could_send_without_asking_is_a_415(app_client, content_type):
    """The content types a page may send cross-site with no preflight."""
    response = app_client.post("/invocations", content=b'{"input": "Hello"}', headers={"content-type": content_type})
    assert response.status_code == 415


def test_with_allowed_hosts_any_other_host_is_refused(app_client, app_settings):
    """DNS rebinding: a page on evil.example, its name pointed at 127.0.0.1, sends its own Host."""
    app_settings.setenv("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
    for host in ("localhost:8000", "127.0.0.1:8000", "[::1]:8000", "localhost"):
        assert app_client.get("/health", headers={"host": host}).status_code == 200, host
    rebound = app_client.post("/invocations", json=HELLO, headers={"host": "evil.example:8000"})
    assert rebound.status_code == 400
    assert "ALLOWED_HOSTS" in rebound.json()["error"]["message"]


def test_hosts_are_read_as_the_url_grammar_reads_them(app_client, app_settings):
    """Userinfo, brackets, ports and case, as a URL's authority: `127.0.0.1:P@evil.example` names evil.example."""
    app_settings.setenv("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
    for host in ("LOCALHOST:8000", "[::1]", "127.0.0.1:65535"):
        assert app_client.get("/health", headers={"host": host}).status_code == 200, host
    for host in ("127.0.0.1:8000@evil.example", "evil.example#@127.0.0.1", "127.0.0.1:99999", "[::1", "127.0.0.1/x"):
        assert app_client.get("/health", headers={"host": host}).status_code == 400, host
