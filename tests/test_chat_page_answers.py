"""Answers the chat page lets a user look into and steer, in headless Chromium at desktop and phone width, on one
app (memory on) that the module's tests share: Deny with a reason, an answer's citations as numbered links, and
the branches that Edit and Regenerate keep ("‹ 2/3 ›"). Each test works in a conversation of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chat_page_fixtures import running_app
from chat_page_support import DESKTOP, PHONE, ChatPage
from playwright.sync_api import expect
from renders import uv

pytestmark = pytest.mark.xdist_group("browser")


@pytest.fixture(scope="module")
def app(renders, tmp_path_factory) -> Iterator[str]:
    """The starter app on the offline model, memory on (SQLite): one process for the whole module."""
    uv("sync", "--locked", "--no-config", cwd=renders["defaults"])
    with running_app(renders["defaults"], tmp_path_factory.mktemp("answers")) as url:
        yield url


def opened(browser, app: str, viewport: dict[str, int], address: str = "/") -> ChatPage:
    """The page at `address`, in a browser profile of its own, at desktop or phone size."""
    return ChatPage(browser.new_page(viewport=viewport), app.rstrip("/") + address)


def address_of(chat: ChatPage) -> str:
    return chat.page.evaluate("location.pathname")


# --- Deny with a reason ------------------------------------------------------------------------


def test_deny_opens_an_optional_reason_that_reaches_the_model_and_shows_on_reopen(app, browser):
    """At desktop width: Deny, Cancel, Escape, a reason and none; reopened at phone width: the reason shown, and a
    denial with a reason made there too."""
    chat = opened(browser, app, DESKTOP)
    tools = chat.page.locator("details.tool")
    chat.ask("Use send_summary, please")
    first = tools.nth(0)
    first.get_by_role("button", name="Deny send_summary").click()
    reason = first.get_by_role("textbox", name="Reason for denying send_summary (optional)")
    expect(reason).to_be_focused()
    expect(first.get_by_role("button", name="Approve send_summary")).to_have_count(0)
    first.get_by_role("button", name="Cancel").click()  # back to Approve and Deny, nothing sent
    expect(first.get_by_role("button", name="Deny send_summary")).to_be_focused()
    chat.page.keyboard.press("Enter")
    chat.page.keyboard.press("Escape")  # so does Escape
    expect(first.get_by_role("button", name="Approve send_summary")).to_be_visible()
    assert len(chat.sent) == 1
    first.get_by_role("button", name="Deny send_summary").click()
    reason.fill("Not to the whole team")
    reason.press("Enter")
    expect(first.locator(".tool-status")).to_have_text("denied")
    expect(first.locator(".tool-reason")).to_have_text("\u201cNot to the whole team\u201d")
    expect(chat.replies.last).to_contain_text(
        "The tool returned: The user denied this tool call. Reason: Not to the whole team"
    )
    [denial] = chat.sent[-1]["input"]
    assert denial["type"] == "mcp_approval_response" and denial["approve"] is False
    assert denial["reason"] == "Not to the whole team"

    chat.ask("Use send_summary once more")
    second = tools.nth(1)
    second.get_by_role("button", name="Deny send_summary").click()
    second.get_by_role("button", name="Send the denial of send_summary").click()  # no reason: a plain denial
    expect(second.locator(".tool-status")).to_have_text("denied")
    expect(chat.replies.last).to_contain_text("The tool returned: The user denied this tool call.. Offline model")
    assert "reason" not in chat.sent[-1]["input"][0]
    expect(second.locator(".tool-reason")).to_have_count(0)

    reopened = opened(browser, app, PHONE, address_of(chat))  # the conversation's address, as after a reload
    blocks = reopened.page.locator("details.tool")
    expect(blocks).to_have_count(2)
    expect(blocks.nth(0).locator(".tool-status")).to_have_text("denied")
    expect(blocks.nth(0).locator(".tool-reason")).to_have_text("\u201cNot to the whole team\u201d")
    expect(blocks.nth(0).locator(".tool-reason")).to_be_visible()
    expect(blocks.nth(1).locator(".tool-reason")).to_have_count(0)
    reopened.ask("Use send_summary from the phone")
    blocks.nth(2).get_by_role("button", name="Deny send_summary").click()
    reason = blocks.nth(2).get_by_role("textbox", name="Reason for denying send_summary (optional)")
    expect(reason).to_be_in_viewport()
    reason.fill("Wrong list")
    blocks.nth(2).get_by_role("button", name="Send the denial of send_summary").click()
    expect(blocks.nth(2).locator(".tool-reason")).to_have_text("\u201cWrong list\u201d")
    expect(reopened.replies.last).to_contain_text("The user denied this tool call. Reason: Wrong list")
    expect(reopened.page.locator(".error")).to_have_count(0)
    assert not chat.errors and not reopened.errors


# --- Citations ---------------------------------------------------------------------------------

SOURCE = "https://example.com/offline-model"  # the offline model's own (offline/replies.py), cited when asked


def test_an_answers_sources_are_numbered_links_after_it_only_http_ones_and_kept_on_reopen(app, browser):
    """Asked at desktop width, reopened at phone width."""
    chat = opened(browser, app, DESKTOP)
    chat.ask("Please cite a source")
    chat.ask("Now cite javascript:alert(document.cookie)")
    chat.ask("And cite data:text/html,<b>x</b> too")

    def check(page: ChatPage) -> None:
        replies = page.replies
        expect(replies).to_have_count(3)
        expect(replies.nth(0).locator(".content")).to_contain_text("You said: Please cite a source [1]")
        sources = replies.nth(0).get_by_role("list", name="Sources")
        expect(sources.get_by_role("listitem")).to_have_count(1)
        link = sources.get_by_role("link", name=f"The source the offline model cites: {SOURCE}")
        expect(link).to_have_attribute("href", SOURCE)
        expect(link).to_have_attribute("rel", "noopener noreferrer")
        expect(link).to_have_attribute("target", "_blank")
        expect(link).to_be_visible()
        for number, address in ((1, "javascript:alert(document.cookie)"), (2, "data:text/html,<b>x</b>")):
            listed = replies.nth(number).get_by_role("list", name="Sources")
            expect(listed.get_by_role("listitem")).to_have_text(f"The source the offline model cites: {address}")
            expect(listed.get_by_role("link")).to_have_count(0)  # named, never a link
        expect(page.page.locator("a[href^='javascript'], a[href^='data']")).to_have_count(0)
        expect(page.page.locator(".citations b")).to_have_count(0)  # a title is text, never markup

    check(chat)
    reopened = opened(browser, app, PHONE, address_of(chat))
    check(reopened)
    assert not chat.errors and not reopened.errors


# --- Branches ----------------------------------------------------------------------------------


def edit_first_message(chat: ChatPage, text: str) -> None:
    chat.page.get_by_role("button", name="Edit message").first.click()
    editor = chat.page.get_by_role("textbox", name="Edited message")
    editor.fill(text)
    editor.press("Enter")
    expect(chat.send).to_be_enabled(timeout=60_000)
    expect(chat.page.locator(".turn.user").first).to_have_text(text)


def test_edits_and_a_regenerate_are_branches_to_switch_between_kept_on_reload_and_reopen_and_continued(app, browser):
    """Edited, regenerated, switched and reloaded at desktop width; reopened from the list, continued and switched
    again at phone width (the list in its drawer)."""
    tabs = browser.new_context(viewport=DESKTOP)  # one profile: its tabs share what the page keeps (localStorage)
    chat = ChatPage(tabs.new_page(), app)
    chat.ask("Hello")
    edit_first_message(chat, "Hi")
    edit_first_message(chat, "Hey")
    chat.page.get_by_role("button", name="Regenerate the answer").click()
    expect(chat.send).to_be_enabled(timeout=60_000)
    user, answer = chat.page.locator(".user-turn").first, chat.replies.first
    expect(user.get_by_role("group", name="Version 3 of 3")).to_be_visible()
    expect(answer.get_by_role("group", name="Version 2 of 2")).to_be_visible()
    expect(user.get_by_role("button", name="Next version")).to_be_disabled()
    conversation = address_of(chat)

    answer.get_by_role("button", name="Previous version").click()  # the answer before the regenerate
    expect(chat.replies.first.get_by_role("group", name="Version 1 of 2")).to_be_visible()
    chat.page.locator(".user-turn").first.get_by_role("button", name="Previous version").click()
    expect(chat.page.locator(".turn.user")).to_have_text(["Hi"])
    expect(chat.page.locator(".user-turn").first.get_by_role("group", name="Version 2 of 3")).to_be_visible()
    assert chat.page.evaluate("location.search") == "?branch=2"
    chat.page.reload()
    expect(chat.page.locator(".turn.user")).to_have_text(["Hi"])
    expect(chat.page.get_by_role("group", name="Version 2 of 3")).to_be_visible()

    reopened = ChatPage(tabs.new_page(), app)  # another tab, reopening the conversation from the list
    reopened.page.set_viewport_size(PHONE)
    reopened.page.get_by_role("button", name="Conversations").click()
    reopened.conversations.first.click()
    expect(reopened.page.locator(".turn.user")).to_have_text(["Hi"])
    expect(reopened.page.get_by_role("group", name="Version 2 of 3")).to_be_visible()

    reopened.ask("Go on")  # continues the branch shown, which the model sees alone
    assert reopened.sent[-1]["custom_inputs"] == {"branch": 2}
    expect(reopened.replies.last).to_contain_text("I saw 2 user, 1 assistant and 0 tool turns. You said: Go on")
    expect(reopened.page.locator(".turn.user")).to_have_text(["Hi", "Go on"])
    expect(reopened.page.locator(".user-turn").first.get_by_role("group", name="Version 3 of 3")).to_be_visible()
    assert address_of(reopened) == conversation and reopened.page.evaluate("location.search") == ""
    reopened.page.locator(".user-turn").first.get_by_role("button", name="Previous version").click()
    expect(reopened.page.locator(".turn.user")).to_have_text(["Hey"])  # the way left, kept whole: both its answers
    expect(reopened.replies.first.get_by_role("group", name="Version 2 of 2")).to_be_visible()
    assert not chat.errors and not reopened.errors
