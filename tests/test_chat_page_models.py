"""The chat page's model picker (LLM_MODELS; docs/models.md), in headless Chromium: one app for the module, whose
setting lists two models (the offline model answers under both, and says so when it answers as the second). The picker's
absence with one model is checked in test_chat_page_look.py, on the app with the default settings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chat_page_fixtures import running_app
from chat_page_support import DESKTOP, PHONE, ChatPage
from playwright.sync_api import expect
from renders import uv

pytestmark = pytest.mark.xdist_group("browser")


@pytest.fixture(scope="module")
def two_models_app(renders, tmp_path_factory) -> Iterator[str]:
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    with running_app(app, tmp_path_factory.mktemp("models"), LLM_MODELS="offline=Everyday,big=Big model") as url:
        yield url


def test_pick_a_model_in_a_new_chat_send_reload_and_reopen(two_models_app, browser):
    page = browser.new_page(viewport=PHONE)  # a phone's width: the picker stays in view (the hint does not)
    chat = ChatPage(page, two_models_app)
    picker = page.get_by_label("Model")
    expect(picker).to_be_visible()
    expect(picker.locator("option")).to_have_text(["Everyday", "Big model"])
    expect(picker).to_have_value("offline")  # a new chat starts on the default
    chat.ask("Hello on the default")
    expect(chat.replies.nth(0)).to_contain_text("Offline model: I saw 1 user")  # the default says no name
    assert chat.sent[-1]["custom_inputs"]["model"] == "offline"

    page.click("#new-chat")
    # The new chat is set up (its address, then the send button given back) before the pick: set up after it, it
    # would show the new chat's default over the pick.
    expect(page).to_have_url(f"{two_models_app}/")
    expect(chat.send).to_be_enabled()
    picker.focus()
    page.keyboard.press("ArrowDown")  # the keyboard picks, as a native select takes it
    expect(picker).to_have_value("big")
    chat.ask("Hello on big")
    expect(chat.replies.nth(0)).to_contain_text("Offline model, as big: I saw 1 user")
    assert chat.sent[-1]["custom_inputs"]["model"] == "big"
    chat.ask("And again")
    expect(chat.replies.nth(1)).to_contain_text("Offline model, as big: I saw 2 user")
    expect(page.locator(".answered-by")).to_have_text(["Answered by Big model"] * 2)  # each answer says which
    big_address = page.url

    page.reload()  # the conversation's address reopens it, on its model
    expect(chat.replies.nth(1)).to_contain_text("as big")
    expect(picker).to_have_value("big")
    expect(page.locator(".answered-by")).to_have_text(["Answered by Big model"] * 2)
    page.set_viewport_size(DESKTOP)  # the conversation list beside the chat, not in a drawer
    expect(chat.conversations).to_have_count(2)
    chat.conversations.filter(has_text="Hello on the default").click()  # reopened: its own model
    expect(chat.replies.nth(0)).to_contain_text("Offline model: I saw 1 user")
    expect(picker).to_have_value("offline")
    chat.ask("Still the default?")
    expect(chat.replies.nth(1)).to_contain_text("Offline model: I saw 2 user")
    expect(page.locator(".answered-by")).to_have_text(["Answered by Everyday"] * 2)
    page.goto(big_address)
    expect(picker).to_have_value("big")
    assert not chat.errors
