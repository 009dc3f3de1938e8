"""The chat page holds a multi-turn conversation in a real browser (headless Chromium), with memory and without.

With conversation memory on (the default) the page names its conversation, gives it an address, lists it and
sends only the new turn; with MEMORY_BACKEND=none it replays the whole history, as hosted chat UIs do.
(tests/chat_page_support.py drives the page; tests/chat_page_fixtures.py starts the browser and the apps.)
"""

from __future__ import annotations

import re

import httpx
import pytest
from chat_page_support import ChatPage, said
from playwright.sync_api import expect

pytestmark = pytest.mark.xdist_group("browser")


# --- a conversation, with memory and without ---------------------------------------------------


def test_chat_page_holds_a_conversation_with_a_tool_turn(served_app, browser_page, artifacts):
    chat = ChatPage(browser_page, served_app)
    chat.ask("Hello")
    expect(chat.replies).to_have_count(1)
    expect(chat.replies.nth(0)).to_contain_text("I saw 1 user, 0 assistant and 0 tool turns. You said: Hello")

    chat.ask("What time is it?")
    expect(chat.replies).to_have_count(2)
    # The tool call is one collapsible block: its name in the line, its arguments and output inside.
    tool = browser_page.locator("details.tool")
    expect(tool).to_have_count(1)
    expect(tool.locator("summary .tool-name")).to_have_text("get_current_time")
    expect(tool.locator(".tool-status")).to_have_text("done")
    expect(tool.locator(".tool-arguments")).to_be_hidden()
    tool.locator("summary").click()
    expect(tool.locator(".tool-arguments")).to_have_text("{}")
    expect(tool.locator(".tool-output")).to_be_visible()
    output = tool.locator(".tool-output").text_content()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", output), output
    expect(chat.replies.nth(1)).to_contain_text(f"The tool returned: {output}.")

    chat.ask("Thanks")
    expect(chat.replies).to_have_count(3)
    expect(chat.replies.nth(2)).to_contain_text("I saw 3 user, 2 assistant and 1 tool turns. You said: Thanks")

    # A thumb down on an answer is feedback on its trace (POST /feedback); a thumb up then replaces it.
    bad, good = (
        chat.replies.nth(1).get_by_role("button", name="Bad answer"),
        chat.replies.nth(1).get_by_role("button", name="Good answer"),
    )
    with browser_page.expect_response(lambda response: response.url.endswith("/feedback")) as answered:
        bad.click()
    assert answered.value.status == 200 and answered.value.json()["value"] is False, answered.value.text()
    expect(bad).to_have_attribute("aria-pressed", "true")
    with browser_page.expect_response(lambda response: response.url.endswith("/feedback")) as answered:
        good.click()
    assert answered.value.json()["replaced"] is True, answered.value.text()
    expect(good).to_have_attribute("aria-pressed", "true")
    expect(bad).to_have_attribute("aria-pressed", "false")
    expect(browser_page.locator(".error")).to_have_count(0)
    assert not chat.errors
    browser_page.screenshot(path=str(artifacts / "chat-page.png"), animations="disabled")


def test_every_conversation_has_an_address_that_reload_back_forward_and_only_its_owner_open(start_app, browser):
    with start_app(MEMORY_USER_HEADER="x-test-user") as url:
        ada = browser.new_context(extra_http_headers={"x-test-user": "ada@example.com"})
        chat = ChatPage(ada.new_page(), url)
        chat.ask("Hello")
        expect(chat.page).to_have_url(re.compile(r"/c/[^/]+$"))  # a new chat's address comes with its first answer
        first = chat.page.url
        chat.ask("And then?")
        expect(chat.page).to_have_url(first)
        chat.page.click("#new-chat")
        expect(chat.page).to_have_url(f"{url}/")
        chat.ask("Another topic")
        expect(chat.page).to_have_url(re.compile(r"/c/[^/]+$"))
        second = chat.page.url
        assert second != first

        turns = chat.page.locator(".turn.user")
        chat.page.go_back()
        expect(chat.page).to_have_url(first)
        expect(turns).to_have_text(["Hello", "And then?"])
        chat.page.go_forward()
        expect(chat.page).to_have_url(second)
        expect(turns).to_have_text(["Another topic"])
        chat.page.reload()
        expect(turns).to_have_text(["Another topic"])
        chat.page.goto(first)  # a bookmark
        expect(turns).to_have_text(["Hello", "And then?"])
        chat.ask("Still here")
        expect(chat.replies.last).to_contain_text("I saw 3 user, 2 assistant and 0 tool turns")
        assert not chat.errors

        bob = ChatPage(browser.new_context(extra_http_headers={"x-test-user": "bob@example.com"}).new_page(), first)
        expect(bob.page).to_have_url(f"{url}/")  # a new chat: nothing of Ada's, and that it was not found
        expect(bob.page.locator(".notice")).to_have_text(re.compile("^That conversation was not found"))
        expect(bob.page.locator(".turn:not(.notice)")).to_have_count(0)
        expect(bob.page.locator("#greeting")).to_be_visible()
        expect(bob.page.locator(".error")).to_have_count(0)
        expect(bob.conversations).to_have_count(0)
        assert not bob.errors


def back(page) -> None:
    """The user comes back to this tab. Headless Chromium keeps every tab visible and focused (bring_to_front fires
    no event), so the tab is told as a browser tells it: `visibilitychange`, then `focus` on its window."""
    page.bring_to_front()
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    page.evaluate("window.dispatchEvent(new FocusEvent('focus'))")


def test_a_second_tab_shows_the_turns_the_other_tab_added_when_it_comes_back(served_app, browser):
    """Two tabs on one conversation: the one brought back to the front shows what the other added since, as the
    conversation is stored, and goes on from it; one whose conversation the other deleted says it was not found."""
    context = browser.new_context()
    first = ChatPage(context.new_page(), served_app)
    first.ask("Hello from the first tab")
    expect(first.page).to_have_url(re.compile(r"/c/[^/]+$"))
    second = ChatPage(context.new_page(), first.page.url)
    expect(second.page.locator(".turn.user")).to_have_text(["Hello from the first tab"])
    first.ask("More from the first tab")
    back(second.page)
    expect(second.page.locator(".turn.user")).to_have_text(["Hello from the first tab", "More from the first tab"])
    expect(second.replies).to_have_count(2)
    second.ask("Now the second")
    expect(second.replies.last).to_contain_text("I saw 3 user, 2 assistant and 0 tool turns")
    conversation = first.page.url.rsplit("/", 1)[1]
    assert httpx.delete(f"{served_app}/conversations/{conversation}").status_code == 204  # from another device
    back(first.page)
    expect(first.page.locator(".notice")).to_have_text(re.compile("^That conversation was not found"))
    expect(first.page).to_have_url(f"{served_app}/")
    expect(first.page.locator(".turn.user")).to_have_count(0)
    assert not first.errors and not second.errors
    context.close()


def test_with_memory_the_page_sends_only_the_new_turn_of_its_conversation(served_app, browser_page):
    chat = ChatPage(browser_page, served_app)
    expect(browser_page.locator("#sidebar")).to_be_visible()
    chat.ask("Hello")
    chat.ask("Tell me more")
    # The model saw the first turn, which the app added from its store.
    expect(chat.replies.nth(1)).to_contain_text("I saw 2 user, 1 assistant and 0 tool turns. You said: Tell me more")

    first, second = chat.sent
    assert "context" not in first, "a new chat has no id until its first answer names one"
    assert second["context"]["conversation_id"]
    assert second["input"] == [{"role": "user", "content": "Tell me more"}]
    # The list, refreshed after the turn, names this conversation by its first message.
    expect(chat.conversations).to_have_text(["Hello"])
    expect(chat.conversations.nth(0)).to_have_attribute("aria-current", "true")
    expect(browser_page.locator(".error")).to_have_count(0)


def test_a_conversation_reopened_from_the_list_shows_its_items_and_goes_on(served_app, browser, artifacts):
    chat = ChatPage(browser.new_page(), served_app)
    chat.ask("Hello")
    chat.ask("What time is it?")
    expect(chat.replies).to_have_count(2)
    first_id = chat.sent[1]["context"]["conversation_id"]

    chat.page.click("#new-chat")
    expect(chat.page.locator(".turn")).to_have_count(0)
    chat.ask("Another topic")
    expect(chat.replies.nth(0)).to_contain_text("I saw 1 user, 0 assistant and 0 tool turns. You said: Another topic")
    assert "context" not in chat.sent[2], "New chat starts a conversation of its own"
    expect(chat.conversations).to_have_text(["Another topic", "Hello"])  # newest first

    # A fresh page, as after a reload: the list is all it knows of the first conversation.
    reopened = ChatPage(browser.new_page(), served_app)
    expect(reopened.conversations).to_have_text(["Another topic", "Hello"])
    reopened.conversations.nth(1).click()
    turns = reopened.page.locator(".turn")
    expect(turns).to_have_count(5)
    expect(turns.nth(0)).to_have_text("Hello")
    expect(turns.nth(0)).to_have_class("turn user")
    expect(turns.nth(1)).to_contain_text("You said: Hello")
    expect(turns.nth(1)).to_have_class("turn assistant")
    expect(turns.nth(2)).to_have_text("What time is it?")
    expect(turns.nth(3)).to_have_class("turn tool")
    expect(turns.nth(3).locator(".tool-name")).to_have_text("get_current_time")
    expect(turns.nth(3).locator(".tool-arguments")).to_have_text("{}")
    expect(turns.nth(3).locator(".tool-output")).to_have_text(re.compile(r"^\d{4}-\d\d-\d\dT"))
    expect(turns.nth(4)).to_contain_text("The tool returned: ")
    expect(reopened.conversations.nth(1)).to_have_attribute("aria-current", "true")

    reopened.ask("Thanks")
    expect(reopened.replies.nth(2)).to_contain_text("I saw 3 user, 2 assistant and 1 tool turns. You said: Thanks")
    assert reopened.sent == [
        {
            "input": [{"role": "user", "content": "Thanks"}],
            "stream": True,
            "background": True,  # with memory on, every turn is a background run (README, "Long-running turns")
            "context": {"conversation_id": first_id},
        }
    ]
    expect(reopened.conversations).to_have_text(["Hello", "Another topic"])  # the one just continued comes first
    expect(reopened.page.locator(".error")).to_have_count(0)
    reopened.page.screenshot(path=str(artifacts / "reopened-conversation.png"), animations="disabled")


def test_without_memory_the_page_replays_the_whole_history_and_starts_new_chats(start_app, browser_page):
    with start_app(MEMORY_BACKEND="none") as url:
        chat = ChatPage(browser_page, url)
        expect(browser_page.locator("#sidebar")).to_be_hidden()
        chat.ask("What time is it?")
        chat.ask("Thanks")
        expect(chat.replies.nth(1)).to_contain_text("I saw 2 user, 1 assistant and 1 tool turns. You said: Thanks")

        # New chat is there with memory off too, and forgets the history.
        browser_page.click("#new-chat")
        expect(browser_page.locator(".turn")).to_have_count(0)
        chat.ask("Hello again")
        expect(chat.replies.nth(0)).to_contain_text(said("1 user, 0 assistant and 0 tool", "Hello again"))
        expect(browser_page.locator(".error")).to_have_count(0)

    assert all("context" not in body for body in chat.sent)
    replayed = chat.sent[1]["input"]
    assert [item.get("role") or item["type"] for item in replayed] == [
        "user",
        "function_call",
        "function_call_output",
        "assistant",
        "user",
    ]
    assert replayed[0] == {"role": "user", "content": "What time is it?"}
    # Assistant turns go back as id-less output_text messages, the shape hosted chat UIs send.
    assistant = replayed[3]
    assert set(assistant) == {"type", "role", "content"}
    assert assistant["content"][0]["text"].startswith("The tool returned: ")
    assert assistant["content"] == [{"type": "output_text", "text": assistant["content"][0]["text"]}]
    assert chat.sent[2]["input"] == [{"role": "user", "content": "Hello again"}]
