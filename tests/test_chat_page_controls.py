"""What a user does to a conversation from the chat page, in headless Chromium: edit a message, regenerate an
answer, comment on a thumb, rename and delete a conversation (keyboard alone where it says so); and, with
long-term memory on, what the agent remembers: shown, forgotten, exported and deleted from the page, and marked on
the answers that wrote or used it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from chat_page_support import DESKTOP, PHONE, ChatPage, screenshots, tabbed_through, user_texts
from playwright.sync_api import expect

pytestmark = pytest.mark.xdist_group("browser")


def test_edit_regenerate_comment_rename_and_delete_from_the_page(served_app, browser, artifacts):
    """Regenerate the last answer, edit a sent message (keyboard alone), comment on a thumb (shown again after a
    reload), rename a conversation (keyboard alone) and delete it. A branch is the history before the message and
    the message, marked custom_inputs.replace_history, so the model sees it once: its reply counts what it saw."""
    chat = ChatPage(browser.new_page(), served_app)
    page = chat.page
    chat.ask("Hello")
    chat.ask("Tell me more")
    regenerate = page.get_by_role("button", name="Regenerate the answer")
    expect(regenerate).to_have_count(1)  # on the newest answer only
    regenerate.click()
    expect(chat.send).to_be_enabled(timeout=60_000)
    expect(chat.replies).to_have_count(2)
    expect(chat.replies.nth(1)).to_contain_text("I saw 2 user, 1 assistant and 0 tool turns. You said: Tell me more")
    regenerated = chat.sent[-1]
    assert regenerated["custom_inputs"] == {"replace_history": True}
    assert user_texts(regenerated) == ["Hello", "Tell me more"] and len(regenerated["input"]) == 3

    page.get_by_role("button", name="Edit message").first.focus()
    page.keyboard.press("Enter")
    editor = page.get_by_role("textbox", name="Edited message")
    expect(editor).to_be_focused()
    screenshots(page, artifacts, "chat-edit")
    page.keyboard.press("Control+A")
    page.keyboard.type("Hi there")
    page.keyboard.press("Enter")
    expect(chat.send).to_be_enabled(timeout=60_000)
    expect(page.locator(".turn.user")).to_have_text(["Hi there"])
    expect(chat.replies).to_have_count(1)
    expect(chat.replies.nth(0)).to_contain_text("I saw 1 user, 0 assistant and 0 tool turns. You said: Hi there")
    assert chat.sent[-1]["input"] == [{"role": "user", "content": "Hi there"}]
    assert chat.sent[-1]["custom_inputs"] == {"replace_history": True}

    chat.replies.nth(0).get_by_role("button", name="Bad answer").click()
    comment = chat.replies.nth(0).get_by_role("textbox", name="Comment on this answer")
    comment.fill("Too short")
    with page.expect_response(lambda response: response.url.endswith("/feedback")) as answered:
        comment.press("Enter")
    kept = answered.value.json()
    assert kept["value"] is False and kept["comment"] == "Too short" and kept["replaced"] is True, kept
    expect(chat.replies.nth(0).locator(".thanks")).to_have_text("Thanks for the comment.")

    page.get_by_role("button", name="Rename Hello").focus()  # titled from its first message, kept through edits
    page.keyboard.press("Enter")
    expect(page.get_by_role("textbox", name="New title")).to_be_focused()
    page.keyboard.type("Greetings")  # over the selected title
    page.keyboard.press("Enter")
    expect(chat.conversations).to_have_text(["Greetings"])
    screenshots(page, artifacts, "chat-controls")
    page.set_viewport_size(PHONE)

    reopened = ChatPage(browser.new_page(viewport=PHONE), served_app)  # as after a reload
    expect(reopened.conversations).to_have_text(["Greetings"])
    reopened.page.locator("#toggle-sidebar").click()
    reopened.conversations.nth(0).click()
    expect(reopened.page.locator(".turn.user")).to_have_text(["Hi there"])
    thumbs_down = reopened.replies.nth(0).get_by_role("button", name="Bad answer")
    expect(thumbs_down).to_have_attribute("aria-pressed", "true")  # as the user left it
    expect(reopened.replies.nth(0).get_by_role("button", name="Good answer")).to_have_attribute("aria-pressed", "false")
    reopened.ask("Thanks")
    expect(reopened.replies.nth(1)).to_contain_text("I saw 2 user, 1 assistant and 0 tool turns. You said: Thanks")
    reopened.page.set_viewport_size(DESKTOP)  # the list beside the chat (on a phone, a drawer the toggle opens)
    reached = tabbed_through(reopened.page)
    for control in ["New chat", "Rename Greetings", "Delete Greetings", "Edit message", "Good answer",
                    "Bad answer", "Copy reply", "Regenerate the answer", "Message", "Send"]:  # fmt: skip
        assert control in reached, f"{control!r} cannot be reached with Tab: {reached}"
    reopened.page.once("dialog", lambda dialog: dialog.accept())
    reopened.page.get_by_role("button", name="Delete Greetings").click()
    expect(reopened.conversations).to_have_count(0)
    expect(reopened.page.locator(".turn")).to_have_count(0)
    assert httpx.get(f"{served_app}/conversations").json()["conversations"] == []
    expect(page.locator(".error")).to_have_count(0)
    assert not chat.errors and not reopened.errors


def test_what_i_remember_and_your_data_from_the_page(start_app, browser):
    """With LONG_TERM_MEMORY on, a fact the agent remembers shows in the sidebar's "What I remember" after the turn;
    one is forgotten from there; "Export my data" (confirmed) downloads everything as one JSON document, and
    "Delete my data" (confirmed) deletes the conversations and the facts."""
    with start_app(LONG_TERM_MEMORY="true") as url:
        chat = ChatPage(browser.new_page(), url)
        page = chat.page
        chat.ask("My name is Ada")
        facts = page.locator("#memory-list li")
        expect(facts).to_have_text(["My name is Ada"])
        chat.ask("Remember I like green tea")
        expect(facts).to_have_text(["Remember I like green tea", "My name is Ada"])
        page.once("dialog", lambda dialog: dialog.accept())
        with page.expect_download() as downloaded:
            page.get_by_role("button", name="Export my data").click()
        exported = json.loads(Path(downloaded.value.path()).read_text())
        assert [fact["text"] for fact in exported["memories"]] == ["Remember I like green tea", "My name is Ada"]
        assert [len(conversation["items"]) for conversation in exported["conversations"]] == [8]
        page.get_by_role("button", name="Forget \u201cMy name is Ada\u201d").click()
        expect(facts).to_have_text(["Remember I like green tea"])
        page.once("dialog", lambda dialog: dialog.accept())
        expect(page).to_have_url(re.compile(r"/c/[^/]+$"))
        page.get_by_role("button", name="Delete my data").click()
        expect(chat.conversations).to_have_count(0)
        said = "Deleted 1 conversation (8 messages and tool calls), 1 memory and 2 background answers."
        expect(page.locator(".notice")).to_contain_text(said)  # what it deleted, in words
        expect(page).to_have_url(f"{url}/")  # not the address of a conversation that is gone
        expect(page.locator(".turn:not(.notice)")).to_have_count(0)
        expect(facts).to_have_text(["Nothing yet."])
        assert httpx.get(f"{url}/memories").json()["memories"] == []
        assert not chat.errors


def test_answers_that_wrote_or_recalled_memory_are_marked(start_app, browser):
    """An answer after a `remember` or `recall` call says so above its text, in the stream and when its conversation
    is reopened; a fact forgotten in "What I remember" is not recalled in a new chat."""
    with start_app(LONG_TERM_MEMORY="true") as url:
        chat = ChatPage(browser.new_page(), url)
        page = chat.page
        notes = page.locator(".assistant .memory-note")
        chat.ask("My name is Ada")
        expect(notes).to_have_text(["Remembered"])
        page.click("#new-chat")
        chat.ask("What time is it?")
        expect(chat.replies).to_have_count(1)
        expect(notes).to_have_count(0)
        chat.ask("What is my name?")
        expect(chat.replies.nth(1)).to_contain_text("Ada")
        expect(chat.replies.nth(1).locator(".memory-note")).to_have_text("Used what I remember")
        expect(notes).to_have_count(1)
        # Reopened, each conversation's answers are marked as they were.
        chat.conversations.nth(1).click()
        expect(page.locator(".user-turn")).to_have_count(1)
        expect(notes).to_have_text(["Remembered"])
        chat.conversations.nth(0).click()
        expect(chat.replies).to_have_count(2)
        expect(chat.replies.nth(0).locator(".memory-note")).to_have_count(0)
        expect(chat.replies.nth(1).locator(".memory-note")).to_have_text("Used what I remember")
        # Text, never markup: the note is a plain paragraph.
        assert page.locator(".memory-note").first.inner_html() == "Used what I remember"

        page.get_by_role("button", name="Forget \u201cMy name is Ada\u201d").click()
        expect(page.locator("#memory-list li")).to_have_text(["Nothing yet."])
        page.click("#new-chat")
        chat.ask("What is my name?")
        expect(chat.replies).to_have_count(1)
        expect(chat.replies.nth(0)).not_to_contain_text("Ada")
        assert not chat.errors
