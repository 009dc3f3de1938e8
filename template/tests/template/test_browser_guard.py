# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Web pages the developer visits cannot drive the agent (agent_server/middleware/browser_guard.py, BrowserGuard).

The app in the tests' process answers to TestClient's host, `testserver`, too (conftest.py); a test about the
host names the app answers to by default unsets ALLOWED_HOSTS."""

from __future__ import annotations

import sys
from pathlib import Path

import loopback
import pytest
from fastapi.testclient import TestClient
from support import ServerProcess, app_env, free_port

HELLO = {"input": [{"role": "user", "content": "Hello"}]}
APP = Path(__file__).resolve().parents[2]
UVICORN = str(Path(sys.executable).with_name("uvicorn"))


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
    app_settings.setenv("ALLOWED_HOSTS", "agent.example.com,localhost")
    for host in ("agent.example.com", "localhost:8000", "localhost"):
        assert app_client.get("/", headers={"host": host}).status_code == 200, host
    for host in ("evil.example:8000", "127.0.0.1:8000", "testserver"):  # the loopback names are no longer implied
        rebound = app_client.post("/invocations", json=HELLO, headers={"host": host})
        assert rebound.status_code == 400, host
        assert "ALLOWED_HOSTS" in rebound.json()["error"]["message"]


def test_unset_the_app_answers_only_to_the_loopback_names(app_client, app_settings, model_log):
    """Whatever server runs it and wherever that listens: a rebound name, or any other, gets a 400 naming the
    setting, before anything runs."""
    app_settings.delenv("ALLOWED_HOSTS")
    for host in ("localhost:8000", "127.0.0.1:8000", "[::1]:8000", "localhost", "LOCALHOST"):
        assert app_client.post("/invocations", json=HELLO, headers={"host": host}).status_code == 200, host
    for host in ("evil.example", "evil.example:8000", "testserver", "10.0.0.5:8000", "localhost.evil.example"):
        rebound = app_client.post("/invocations", json=HELLO, headers={"host": host})
        assert rebound.status_code == 400, host
        assert "set ALLOWED_HOSTS" in rebound.json()["error"]["message"]
    assert len(model_log) == 5, "only the loopback names' turns reached the model"


def test_hosts_are_read_as_the_url_grammar_reads_them(app_client, app_settings):
    """Userinfo, brackets, ports and case, as a URL's authority: `127.0.0.1:P@evil.example` names evil.example."""
    app_settings.setenv("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
    for host in ("LOCALHOST:8000", "[::1]", "127.0.0.1:65535"):
        assert app_client.get("/", headers={"host": host}).status_code == 200, host
    for host in ("127.0.0.1:8000@evil.example", "evil.example#@127.0.0.1", "127.0.0.1:99999", "[::1", "127.0.0.1/x"):
        assert app_client.get("/", headers={"host": host}).status_code == 400, host


def test_on_databricks_apps_its_proxy_owns_the_host(app_client, app_settings):
    app_settings.delenv("ALLOWED_HOSTS")
    app_settings.setenv("DATABRICKS_APP_NAME", "my-agent")
    assert app_client.get("/", headers={"host": "my-agent-123.aws.databricksapps.com"}).status_code == 200
    app_settings.setenv("ALLOWED_HOSTS", "my-agent-123.aws.databricksapps.com")  # set, it holds there too
    assert app_client.get("/", headers={"host": "evil.example"}).status_code == 400


@pytest.mark.parametrize("allowed", [None, "agent.example.com"], ids=["loopback-names", "allowed-hosts"])
def test_a_health_check_is_answered_whatever_host_it_names(app_client, app_settings, allowed):
    """Load balancers and orchestrators probe an instance by its address (Host: 10.0.0.5:8000): /health answers
    them, and nothing else does."""
    if allowed is None:
        app_settings.delenv("ALLOWED_HOSTS")
    else:
        app_settings.setenv("ALLOWED_HOSTS", allowed)
    for host in ("10.0.0.5:8000", "evil.example"):
        assert app_client.get("/health", headers={"host": host}).status_code == 200, host
        assert app_client.head("/health", headers={"host": host}).status_code != 400, host
        assert app_client.get("/", headers={"host": host}).status_code == 400, host
        assert app_client.post("/health", json={}, headers={"host": host}).status_code == 400, host


@pytest.mark.waits
@pytest.mark.parametrize("allowed", [None, "evil.example"], ids=["unset", "set"])
def test_plain_uvicorn_on_all_interfaces_checks_the_host_too(allowed):
    """Served by any ASGI server, not only start-app: `uvicorn agent_server.app:app --host 0.0.0.0` answers a
    rebound name only when ALLOWED_HOSTS names it. uvicorn's own main(), in a process forked from one that has
    imported the libraries (app_fork_server.py); the app imported there, with this environment."""
    port = free_port()
    env = app_env(LLM_PROVIDER="offline", **({"ALLOWED_HOSTS": allowed} if allowed else {}))
    args = [UVICORN, "agent_server.app:app", "--host", "0.0.0.0", "--port", str(port)]
    with ServerProcess(args, env, f"http://127.0.0.1:{port}/health", cwd=APP, preloaded=True) as server:
        with loopback.Client(base_url=server.url, timeout=60) as client:
            rebound = client.post("/invocations", json=HELLO, headers={"host": "evil.example"})
            local = client.post("/invocations", json=HELLO, headers={"host": f"localhost:{port}"})
    if allowed:
        assert rebound.status_code == 200, rebound.text
        assert local.status_code == 400, "ALLOWED_HOSTS names every host the app answers to"
    else:
        assert rebound.status_code == 400 and "ALLOWED_HOSTS" in rebound.json()["error"]["message"], rebound.text
        assert local.status_code == 200, local.text


def test_the_tests_own_client_is_answered_only_because_the_tests_say_so(app_settings):
    """TestClient's `testserver` is no name the app answers to by itself (conftest.py adds it for the tests)."""
    from agent_server.app import app

    app_settings.delenv("ALLOWED_HOSTS")
    with TestClient(app) as client:
        assert client.get("/").status_code == 400
    with TestClient(app, base_url="http://localhost:8000") as client:
        assert client.get("/").status_code == 200
