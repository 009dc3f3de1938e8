"""Sign-in as people meet it: the chat page in Chromium against a real OpenID Connect provider
(tests/oidc_provider.py), and two instances behind HAProxy (the app's own template/deploy/haproxy.cfg) on one
PostgreSQL, where a session made through one instance works on the other. The API and the abuses:
tests/test_sign_in.py."""

from __future__ import annotations

import concurrent.futures

import chat_page_support as chat_page
import httpx
import pytest
from load_balancer_cluster import HAPROXY, Instance, haproxy_config, wait_healthy
from oidc_provider import OidcProvider, signed_in
from playwright.sync_api import Page, expect
from postgres import PostgresServer
from renders import clean_env, uv
from servers import ServerProcess, free_port
from sign_in_support import DEPLOYED, signed_in_app


def log_in_at_the_provider(page: Page, app: str, user: str) -> None:
    """The provider's login form, filled in as `user`; then the browser is back on the app's page."""
    page.wait_for_selector('input[name="login"]')
    page.fill('input[name="login"]', user)
    page.fill('input[name="password"]', "any password")
    page.click('button[type="submit"]')
    page.wait_for_url(f"{app}/**")


@pytest.mark.xdist_group("browser")
def test_sign_in_chat_reload_sign_out_and_the_next_user_sees_nothing_of_the_first(renders, tmp_path, browser):
    with signed_in_app(renders, tmp_path) as app:
        page = browser.new_page()
        page.goto(app.url)  # nobody signed in: the provider's sign-in, not an error
        assert page.url.startswith(app.provider.issuer)
        log_in_at_the_provider(page, app.url, "ada@example.test")
        chat = chat_page.ChatPage(page, app.url)
        expect(page.locator("#sign-out")).to_be_visible()
        chat.ask("My name is Ada")
        expect(chat.replies.last).to_contain_text("Remembered: My name is Ada")
        chat.ask("Hello")
        expect(chat.replies.last).to_contain_text("You said: Hello")
        with page.expect_response(lambda response: response.url.endswith("/conversations")):
            page.reload()
        expect(chat.conversations).to_have_count(1)
        chat.conversations.first.click()
        expect(chat.replies).to_have_count(2)  # the stored conversation, after a reload
        ada_address = page.url
        assert "/c/" in ada_address
        page.click("#sign-out")
        page.wait_for_url(f"{app.url}/sign-in/signed-out")
        expect(page.locator("#message")).to_have_text("You are signed out.")
        page.click("#sign-in")  # asks the provider for a login: another user may sign in
        log_in_at_the_provider(page, app.url, "bob@example.test")
        bob = chat_page.ChatPage(page, app.url)
        expect(bob.conversations).to_have_count(0)
        memories = page.evaluate("fetch('/memories').then(r => r.json())")
        assert memories["memories"] == [], "Bob recalls nothing of Ada's"
        runs = page.evaluate("fetch('/me/export').then(r => r.json())")
        assert "Ada" not in str(runs) and "Hello" not in str(runs), "nothing of Ada's in Bob's data"
        page.goto(ada_address)  # Ada's conversation's address: a new chat for Bob, with no word of hers
        expect(page.locator("#prompt")).to_be_visible()
        expect(bob.replies).to_have_count(0)
        assert not chat.errors and not bob.errors


@pytest.mark.xdist_group("load_balancer")
def test_a_session_made_through_one_instance_works_on_the_other_behind_haproxy(renders, tmp_path):
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    instances = [Instance(app, {}, tmp_path, name) for name in ("a", "b")]  # two workers each
    listen = free_port()
    balanced = f"http://127.0.0.1:{listen}"
    config = tmp_path / "haproxy.cfg"
    config.write_text(haproxy_config(listen, [each.port for each in instances]))
    with PostgresServer() as postgres, OidcProvider(balanced, instances[0].url) as provider:
        for each in instances:
            each.env = clean_env(**DEPLOYED, **provider.app_env(), LLM_PROVIDER="offline", MEMORY_BACKEND="postgres",
                                 MEMORY_DATABASE_URL=postgres.url)  # fmt: skip
        try:
            with concurrent.futures.ThreadPoolExecutor(2) as starting:
                list(starting.map(Instance.start, instances))
            with ServerProcess([HAPROXY, "-db", "-f", str(config)], clean_env(), f"{balanced}/health"):
                wait_healthy(balanced)
                ada = signed_in(instances[0].url, "ada@example.test")  # signed in on instance a alone
                made = ada.post(f"{instances[0].url}/invocations", json={"input": "Hello"}, timeout=120)
                assert made.status_code == 200, made.text
                conversation = made.json()["custom_outputs"]["session_id"]
                bob = signed_in(balanced, "bob@example.test")  # through HAProxy: either instance
                for url in [each.url for each in instances] * 3 + [balanced] * 3:  # every worker of each
                    listed = ada.get(f"{url}/conversations")
                    assert listed.status_code == 200, listed.text
                    assert [c["id"] for c in listed.json()["conversations"]] == [conversation]
                    assert bob.get(f"{url}/conversations").json()["conversations"] == []
                assert httpx.get(f"{balanced}/conversations", timeout=30).status_code == 401
        finally:
            for each in instances:
                if each.server is not None:
                    each.server.stop()
