"""Failed turns on the chat page, in headless Chromium: shown in words, never replayed or kept, and retried.

The model fails for real (tests/flaky_model.py, a 503), the app's answer is an error status or a lost connection
(routed in the browser), the app is down, or an output guardrail blocked what was streamed.
"""

from __future__ import annotations

import json
import re

import pytest
from chat_page_support import ChatPage, said, user_texts
from playwright.sync_api import expect

pytestmark = pytest.mark.xdist_group("browser")


# --- failed turns: shown, never replayed, retried ---------------------------------------------


def test_without_memory_a_failed_turn_is_never_replayed_and_retry_sends_it_again(start_app, flaky_model, browser_page):
    with start_app(MEMORY_BACKEND="none", **flaky_model.env) as url:
        chat = ChatPage(browser_page, url)
        chat.ask("Hello")
        flaky_model.fail_next()
        chat.ask("What is 2 + 2?")
        error = browser_page.locator(".error")
        expect(error).to_contain_text("503")
        expect(error).to_contain_text("The model is overloaded")
        expect(browser_page.locator(".thinking")).to_have_count(0)
        expect(chat.replies).to_have_count(1)

        # The next turn goes on without the failed one.
        chat.ask("Thanks")
        expect(chat.replies.nth(1)).to_contain_text(said("2 user, 1 assistant and 0 tool", "Thanks"))
        assert user_texts(chat.sent[2]) == ["Hello", "Thanks"]
        assert [item.get("role") for item in chat.sent[2]["input"]] == ["user", "assistant", "user"]

        # Retry takes the failed attempt away and sends its prompt as the newest turn.
        error.get_by_role("button", name="Retry").click()
        expect(chat.replies).to_have_count(3)
        expect(chat.send).to_be_enabled()
        expect(chat.replies.nth(2)).to_contain_text(said("3 user, 2 assistant and 0 tool", "What is 2 + 2?"))
        expect(error).to_have_count(0)
        expect(browser_page.locator(".turn.user")).to_have_text(["Hello", "Thanks", "What is 2 + 2?"])
        assert user_texts(chat.sent[3]) == ["Hello", "Thanks", "What is 2 + 2?"]
        assert [item.get("role") for item in chat.sent[3]["input"]] == ["user", "assistant"] * 2 + ["user"]
        assert flaky_model.statuses() == [200, 503, 200, 200]
        assert not chat.errors


def test_with_memory_a_failed_turn_is_not_kept_and_retry_goes_on(start_app, flaky_model, browser):
    with start_app(**flaky_model.env) as url:
        chat = ChatPage(browser.new_page(), url)
        # The first turn of a new chat fails: its retry is a new chat still.
        flaky_model.fail_next()
        chat.ask("Hello")
        expect(chat.page.locator(".error")).to_contain_text("503")
        chat.page.get_by_role("button", name="Retry").click()
        expect(chat.replies.nth(0)).to_contain_text(said("1 user, 0 assistant and 0 tool", "Hello"))
        expect(chat.send).to_be_enabled()
        assert chat.sent == [{"input": [{"role": "user", "content": "Hello"}], "stream": True, "background": True}] * 2

        flaky_model.fail_next()
        chat.ask("Tell me more")
        expect(chat.page.locator(".error")).to_contain_text("503")
        chat.page.get_by_role("button", name="Retry").click()
        expect(chat.replies).to_have_count(2)
        expect(chat.send).to_be_enabled()
        # The app did not keep the failed turn: the model saw one "Tell me more", not two.
        expect(chat.replies.nth(1)).to_contain_text(said("2 user, 1 assistant and 0 tool", "Tell me more"))
        conversation = {"conversation_id": chat.sent[2]["context"]["conversation_id"]}
        assert (
            chat.sent[2:]
            == [
                {
                    "input": [{"role": "user", "content": "Tell me more"}],
                    "stream": True,
                    "background": True,
                    "context": conversation,
                }
            ]
            * 2  # fmt: skip
        )
        expect(chat.page.locator(".error")).to_have_count(0)
        expect(chat.conversations).to_have_text(["Hello"])

        reopened = ChatPage(browser.new_page(), url)
        reopened.conversations.nth(0).click()
        expect(reopened.page.locator(".turn.user")).to_have_text(["Hello", "Tell me more"])
        expect(reopened.replies).to_have_count(2)
        assert flaky_model.statuses() == [503, 200, 503, 200]


def test_an_error_status_or_a_lost_connection_can_be_retried(stateless_app, browser_page):
    chat = ChatPage(browser_page, stateless_app)
    chat.ask("Hello")
    message = "The app is restarting."
    unavailable = {"error": {"message": message, "type": "service_unavailable", "param": None}, "detail": message}
    browser_page.route("**/invocations", lambda route: route.fulfill(status=503, json=unavailable), times=1)
    chat.ask("Tell me more")
    error = browser_page.locator(".error")
    expect(error).to_contain_text(message)
    expect(browser_page.locator(".turn.user.failed")).to_have_text("Tell me more")
    error.get_by_role("button", name="Retry").click()
    expect(chat.replies.nth(1)).to_contain_text(said("2 user, 1 assistant and 0 tool", "Tell me more"))
    expect(chat.send).to_be_enabled()
    expect(error).to_have_count(0)
    assert chat.sent[2]["input"][:2] == chat.sent[1]["input"][:2]
    assert user_texts(chat.sent[2]) == ["Hello", "Tell me more"]

    browser_page.route("**/invocations", lambda route: route.abort("connectionreset"), times=1)
    chat.ask("And then?")
    expect(error).to_contain_text("Could not reach the app")
    chat.ask("Thanks")
    expect(chat.replies.nth(2)).to_contain_text(said("3 user, 2 assistant and 0 tool", "Thanks"))
    assert user_texts(chat.sent[4]) == ["Hello", "Tell me more", "Thanks"]
    assert "And then?" not in json.dumps(chat.sent[4])
    assert not chat.errors


def test_a_down_app_says_so_once_in_words_and_retry_clears_it(served_app, browser_page):
    chat = ChatPage(browser_page, served_app)
    chat.ask("Hello")
    for path in ("**/invocations", "**/conversations"):
        browser_page.route(path, lambda route: route.abort("connectionrefused"))
    chat.ask("Are you there?")
    errors = browser_page.locator(".error")
    expect(errors).to_have_count(1)  # the turn's, which says why; not a second box about the list
    expect(errors).to_contain_text("Could not reach the app")
    expect(errors).not_to_contain_text("TypeError")
    browser_page.unroute_all()
    errors.get_by_role("button", name="Retry").click()
    expect(chat.replies.nth(1)).to_contain_text("You said: Are you there?")
    expect(errors).to_have_count(0)
    assert not chat.errors


def test_text_a_guardrail_blocked_is_not_left_above_the_refusal(stateless_app, browser_page):
    """The stream the app sends when an output guardrail trips (tests/test_guardrails.py in the app): the blocked
    message's text came as deltas but never finished; the refusal did. Only the refusal is the answer."""
    events = [
        {"type": "response.output_text.delta", "item_id": "msg_blocked", "delta": "Here is the secret plan"},
        {"type": "response.output_text.delta", "item_id": "msg_refusal", "delta": "Sorry, I can't help with that."},
        {"type": "response.output_item.done", "item": {"type": "message", "id": "msg_refusal", "role": "assistant",
         "content": [{"type": "output_text", "text": "Sorry, I can't help with that."}]},
         "custom_outputs": {"guardrail": "no_secrets"}},
    ]  # fmt: skip
    body = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
    chat = ChatPage(browser_page, stateless_app)
    browser_page.route("**/invocations", lambda route: route.fulfill(body=body, content_type="text/event-stream"))
    chat.ask("Tell me the secret plan")
    expect(chat.replies).to_have_count(1)
    expect(chat.replies.nth(0)).to_have_text(re.compile("Sorry, I can't help with that."))
    expect(browser_page.get_by_text("Here is the secret plan")).to_have_count(0)
    assert not chat.errors
