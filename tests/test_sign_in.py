"""OpenID Connect sign-in against a real provider (tests/oidc_provider.py: the oidc-provider package on loopback),
with the app deployed as docs/deploy.md's recipe says (APP_ENV=production, memory and long-term memory on): who may
call, per-user privacy of conversations, memories and runs, bearer tokens good and bad, and each way a sign-in can
be abused (state replay, a tampered cookie, an open redirect, the provider's own refusal, a cross-site write).
The browser (Chromium) and two instances behind HAProxy: tests/test_sign_in_page.py."""

from __future__ import annotations

import time
import urllib.parse

import httpx
import pytest
from oidc_provider import API_AUDIENCE, CLIENT_ID, log_in, signed_in, to_provider, unsigned
from sign_in_support import signed_in_app

pytestmark = pytest.mark.xdist_group("sign-in")


@pytest.fixture(scope="module")
def app(renders, tmp_path_factory):
    with signed_in_app(renders, tmp_path_factory.mktemp("sign-in")) as served:
        yield served


def turn(client: httpx.Client, url: str, text: str, **extra) -> httpx.Response:
    body = {"input": [{"role": "user", "content": text}], **extra}
    return client.post(f"{url}/invocations", json=body, timeout=120)


def test_a_user_signs_in_and_keeps_conversations_memories_and_runs_that_no_other_user_sees(app):
    ada, bob = signed_in(app.url, "ada@example.test"), signed_in(app.url, "bob@example.test")
    said = turn(ada, app.url, "My name is Ada")
    assert said.status_code == 200, said.text
    conversation = said.json()["custom_outputs"]["session_id"]
    run = turn(ada, app.url, "Hello again", background=True, context={"conversation_id": conversation})
    assert run.status_code == 200, run.text
    assert [c["id"] for c in ada.get(f"{app.url}/conversations").json()["conversations"]] == [conversation]
    # Naming another user in the header the app names the signed-in user with changes nothing: it is dropped.
    claimed = ada.get(f"{app.url}/conversations", headers={"x-agent-signed-in-user": "bob@example.test"})
    assert claimed.status_code == 200 and [c["id"] for c in claimed.json()["conversations"]] == [conversation]
    assert ada.get(f"{app.url}/memories").json()["memories"], "the remember tool kept Ada's name"
    assert ada.get(f"{app.url}/sign-in/session").json() == {"user": "ada@example.test"}
    # Bob, signed in on the same app, sees none of it, by list or by id.
    assert bob.get(f"{app.url}/conversations").json()["conversations"] == []
    assert bob.get(f"{app.url}/memories").json()["memories"] == []
    assert bob.get(f"{app.url}/conversations/{conversation}").status_code == 404
    assert bob.get(f"{app.url}/responses/{run.json()['id']}").status_code == 404
    assert ada.get(f"{app.url}/responses/{run.json()['id']}").status_code == 200


def test_nobody_signed_in_gets_a_401_that_says_how_and_the_page_a_sign_in(app):
    anonymous = httpx.Client(timeout=60)
    refused = anonymous.get(f"{app.url}/conversations")
    assert refused.status_code == 401 and "Sign in first" in refused.json()["error"]["message"]
    # A header that names a user is no identity: only what the app checked is.
    forged = {"x-agent-signed-in-user": "ada@example.test", "x-forwarded-user": "ada@example.test"}
    assert anonymous.get(f"{app.url}/conversations", headers=forged).status_code == 401
    assert turn(anonymous, app.url, "Hello").status_code == 401
    page = anonymous.get(f"{app.url}/c/abc?x=1")
    assert page.status_code == 302 and page.headers["location"] == "/sign-in?next=/c/abc%3Fx%3D1"
    assert anonymous.get(f"{app.url}/health").status_code == 200


def test_bearer_tokens_are_accepted_only_when_the_issuer_signed_them_for_this_app_and_they_are_current(app):
    provider = app.provider

    def call(token: str) -> httpx.Response:
        return httpx.get(f"{app.url}/conversations", headers={"Authorization": f"Bearer {token}"}, timeout=60)

    access = call(provider.access_token())  # the provider's own JWT access token for the app's API audience
    assert access.status_code == 200, access.text
    id_token = call(provider.signed(email="carol@example.test"))
    assert id_token.status_code == 200, id_token.text
    now = int(time.time())
    refusals = {
        "it has expired": provider.signed(iat=now - 7200, exp=now - 3600),
        "meant for another audience": provider.signed(aud="another-app"),
        "another issuer's": provider.signed(iss="https://issuer.example.test"),
        "unsigned tokens are refused": unsigned(iss=provider.issuer, aud=CLIENT_ID, sub="mallory", exp=now + 300),
        "signed with a key the issuer does not publish": provider.signed(issuer_key=False),
        "not a token signed by the issuer": "not-a-token",
    }
    for why, token in refusals.items():
        answer = call(token)
        assert answer.status_code == 401, (why, answer.text)
        assert why in answer.json()["error"]["message"], answer.text
    assert provider.signed(aud=API_AUDIENCE) and call(provider.signed(aud=API_AUDIENCE)).status_code == 200
    # Whoever a token names owns what it makes: the access token's user is its client.
    made = httpx.post(f"{app.url}/invocations", json={"input": "Hi"}, timeout=120,
                      headers={"Authorization": f"Bearer {provider.access_token()}"})  # fmt: skip
    assert made.status_code == 200, made.text
    listed = call(provider.access_token()).json()["conversations"]
    assert [c["id"] for c in listed] == [made.json()["custom_outputs"]["session_id"]]


def test_a_replayed_sign_in_answer_is_refused(app):
    browser = httpx.Client(timeout=60)
    callback = log_in(browser, to_provider(browser, app.url).headers["location"], "dan@example.test")
    pending = browser.cookies.get("agent_sign_in")
    assert browser.get(callback).status_code == 302  # signed in, the sign-in in progress is over
    again = browser.get(callback)
    assert again.status_code == 400 and "No sign-in is in progress" in again.text
    # With the sign-in's cookie kept by an attacker, the code was used already: the provider refuses it.
    thief = httpx.Client(timeout=60, cookies={"agent_sign_in": pending})
    stolen = thief.get(callback)
    assert stolen.status_code == 400 and "did not accept this sign-in" in stolen.text
    assert "agent_session" not in thief.cookies
    # A state that is not this browser's own sign-in's.
    other = httpx.Client(timeout=60)
    to_provider(other, app.url)
    forged = other.get(callback)
    assert forged.status_code == 400 and "not the one this browser asked for" in forged.text


def test_a_tampered_session_cookie_is_no_session(app):
    ada = signed_in(app.url, "ada@example.test")
    sealed = ada.cookies.get("agent_session")
    assert "ada" not in sealed  # sealed: the browser can read nothing of it
    middle = len(sealed) // 2
    tampered = sealed[:middle] + ("A" if sealed[middle] != "A" else "B") + sealed[middle + 1 :]
    client = httpx.Client(timeout=60, cookies={"agent_session": tampered})
    refused = client.get(f"{app.url}/conversations")
    assert refused.status_code == 401 and "not valid: sign in again" in refused.json()["error"]["message"]
    assert client.get(f"{app.url}/").headers["location"] == "/sign-in?next=/"


@pytest.mark.parametrize("target", ["https://evil.example/x", "//evil.example/x", "/\\evil.example", "javascript:1"])
def test_the_return_path_is_a_path_on_this_app_only(app, target):
    browser = httpx.Client(timeout=60)
    callback = log_in(browser, to_provider(browser, app.url, target).headers["location"], "eve@example.test")
    back = browser.get(callback)
    assert back.status_code == 302 and back.headers["location"] == "/"
    assert signed_in(app.url, "eve@example.test", "/c/abc").cookies.get("agent_session")  # a path of its own goes


def test_the_providers_refusal_is_a_page_that_offers_to_sign_in_again(app):
    browser = httpx.Client(timeout=60)
    authorize = to_provider(browser, app.url).headers["location"]
    interaction = browser.get(authorize).headers["location"]  # the provider's login
    callback = urllib.parse.urljoin(authorize, interaction.rstrip("/") + "/abort")  # the user says no
    while "/sign-in/callback" not in callback:  # the provider's redirects, back to the app
        callback = urllib.parse.urljoin(callback, browser.get(callback).headers["location"])
    assert "error=access_denied" in callback
    refused = browser.get(callback)
    assert refused.status_code == 400 and "did not sign you in" in refused.text and "/sign-in" in refused.text
    assert "agent_session" not in browser.cookies


def test_sign_out_ends_the_session_and_no_other_site_can_write(app):
    ada = signed_in(app.url, "ada@example.test")
    cross_site = {"Origin": "https://evil.example"}
    assert turn(ada, app.url, "Hi").status_code == 200
    assert ada.post(f"{app.url}/invocations", json={"input": "Hi"}, headers=cross_site).status_code == 403
    assert ada.post(f"{app.url}/sign-out", json={}, headers=cross_site).status_code == 403
    assert ada.post(f"{app.url}/sign-out", content="{}").status_code == 415  # a form cannot sign anyone out
    assert ada.get(f"{app.url}/conversations").status_code == 200
    out = ada.post(f"{app.url}/sign-out", json={})
    assert out.status_code == 200 and "Max-Age=0" in out.headers["set-cookie"]
    assert ada.get(f"{app.url}/conversations").status_code == 401


def test_cookies_are_http_only_lax_and_no_token_or_code_is_logged_or_traced(app):
    browser = httpx.Client(timeout=60)
    started = to_provider(browser, app.url)
    assert "HttpOnly" in started.headers["set-cookie"] and "SameSite=Lax" in started.headers["set-cookie"]
    callback = log_in(browser, started.headers["location"], "fay@example.test")
    done = browser.get(callback)
    session = done.headers.get_list("set-cookie")[0]
    assert session.startswith("agent_session=") and "HttpOnly" in session and "SameSite=Lax" in session
    assert "Secure" not in session  # on loopback only (plain http); elsewhere Secure
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(callback).query)["code"][0]
    token = app.provider.access_token()
    assert turn(browser, app.url, "Hello").status_code == 200
    assert httpx.post(f"{app.url}/invocations", json={"input": "Hi"}, timeout=120,
                      headers={"Authorization": f"Bearer {token}"}).status_code == 200  # fmt: skip
    written = app.written()
    assert "fay@example.test" in written or "Hello" in written  # the traces are there to be read
    for secret in (code, token, browser.cookies.get("agent_session"), "tests-only-client-secret"):
        assert secret not in written
