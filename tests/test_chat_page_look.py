"""The chat page's look, in headless Chromium: the owner's title, greeting, prompts, colour and logo; a
conversation at desktop and phone width (screenshots of both go to $TEST_ARTIFACTS); and small things of its
layout.
"""

from __future__ import annotations

import pytest
from chat_page_support import DESKTOP, LOGO, PHONE, ChatPage, screenshots
from playwright.sync_api import expect

pytestmark = pytest.mark.xdist_group("browser")


def test_the_page_wears_the_owners_title_greeting_prompts_colour_and_logo(start_app, browser, artifacts, tmp_path):
    (tmp_path / "owner-logo.png").write_bytes(LOGO)
    look = {
        "CHAT_TITLE": "Support <b>bot</b>",
        "CHAT_GREETING": "Hi! Ask me about your orders.",
        "CHAT_PROMPTS": "Where is my order?|Return an item",
        "CHAT_ACCENT": "#0a7c5a",
        "CHAT_LOGO": str(tmp_path / "owner-logo.png"),
    }
    with start_app(**look) as url:
        chat = ChatPage(browser.new_page(), url)
        expect(chat.page).to_have_title("Support <b>bot</b>")
        expect(chat.page.locator("#title")).to_have_text("Support <b>bot</b>")  # as text, never as markup
        expect(chat.page.locator("header b")).to_have_count(0)
        expect(chat.page.locator("#greeting")).to_have_text("Hi! Ask me about your orders.")
        expect(chat.page.locator("#suggestions button")).to_have_text(["Where is my order?", "Return an item"])
        expect(chat.page.locator("#logo")).to_be_visible()
        assert chat.page.locator("#logo").evaluate("img => img.naturalWidth") == 1, "the logo loaded"
        assert chat.send.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(10, 124, 90)"
        screenshots(chat.page, artifacts, "owners-look")
        chat.page.locator("#suggestions button").nth(1).click()  # a suggested prompt is sent as it is
        expect(chat.replies.nth(0)).to_contain_text("You said: Return an item")
        expect(chat.page.locator("#greeting")).to_be_hidden()
        chat.page.click("#new-chat")
        expect(chat.page.locator("#greeting")).to_be_visible()
        assert not chat.errors


def test_small_things_send_looks_disabled_a_comment_is_in_view_code_in_a_table_keeps_its_words(served_app, browser):
    page = browser.new_page(viewport=PHONE)
    chat = ChatPage(page, served_app)
    opacity = lambda: float(chat.send.evaluate("b => getComputedStyle(b).opacity"))  # noqa: E731
    assert opacity() < 0.5, "nothing to send: the button looks disabled"
    page.fill("#prompt", "x")
    assert opacity() == 1
    page.fill("#prompt", "")
    chat.ask("Steps:\n\n| step | command |\n|---|---|\n| third | `uv run start-app --port 8000` |\n\n" + "More. " * 90)
    expect(page.locator("#model-row")).to_have_count(1)
    expect(page.locator("#model-row")).to_be_hidden()  # one model (no LLM_MODELS): no picker
    expect(page.locator(".answered-by")).to_have_count(0)  # and no answer says which model wrote it
    code = chat.replies.nth(0).locator("td code")
    assert code.evaluate("c => getComputedStyle(c).overflowWrap") == "normal", "a phone table scrolls instead"
    chat.replies.nth(0).get_by_role("button", name="Good answer").click()
    comment = page.get_by_role("textbox", name="Comment on this answer")
    expect(comment).to_be_focused()
    expect(comment).to_be_in_viewport()  # on a phone it opened below the screen
    assert not chat.errors


# --- the look, at desktop and phone width --------------------------------------------------------


SHOWCASE = "\n".join(
    [
        "Show me some markdown:",
        "",
        "### Steps",
        "1. Install with `uv sync`",
        "2. Run **start-app** and open the page",
        "",
        "```bash",
        "uv run start-app --port 8000 --host 127.0.0.1  # long enough to scroll inside its block at any width: .......",
        "```",
    ]
)


@pytest.mark.parametrize(("width", "viewport"), [("desktop", DESKTOP), ("phone", PHONE)])
def test_a_conversation_reads_well_at_desktop_and_phone_width(served_app, browser, artifacts, width, viewport):
    page = browser.new_page(viewport=viewport)
    chat = ChatPage(page, served_app)
    chat.ask("Hello")
    chat.ask(SHOWCASE)
    chat.ask("What time is it?")
    tool = page.locator("details.tool")
    tool.locator("summary").click()
    expect(tool.locator(".tool-output")).to_be_visible()
    page.locator("#log").evaluate("log => { log.scrollTop = log.scrollHeight; }")
    page.screenshot(path=str(artifacts / f"chat-{width}.png"), animations="disabled")

    # No sideways scrolling: everything fits the width, and a long code line scrolls inside its block.
    page_width = viewport["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= page_width
    assert page.locator("#log").evaluate("log => log.scrollWidth <= log.clientWidth")
    code = chat.replies.nth(1).locator(".code pre")
    assert code.evaluate("pre => pre.scrollWidth > pre.clientWidth")
    for box in (locator.bounding_box() for locator in page.locator(".turn").all()):
        assert box["x"] >= 0 and box["x"] + box["width"] <= page_width, box
    # The user's bubbles on the right, the assistant's on the left, the input at the bottom.
    log = page.locator("#log").bounding_box()
    user, reply = page.locator(".turn.user").first.bounding_box(), chat.replies.first.bounding_box()
    assert user["x"] + user["width"] > log["x"] + log["width"] * 0.8
    assert reply["x"] < log["x"] + log["width"] * 0.2
    ask = page.locator("#ask").bounding_box()
    assert ask["y"] + ask["height"] == pytest.approx(viewport["height"], abs=1)
    assert page.locator("meta[name=viewport]").get_attribute("content").startswith("width=device-width")

    sidebar, toggle = page.locator("#sidebar"), page.locator("#toggle-sidebar")
    if width == "desktop":
        expect(sidebar).to_be_visible()
        expect(toggle).to_be_hidden()
    else:
        # The conversations are a drawer on a phone.
        expect(sidebar).to_be_hidden()
        toggle.click()
        expect(sidebar).to_be_visible()
        expect(chat.conversations.first).to_be_visible()
        page.screenshot(path=str(artifacts / "chat-phone-conversations.png"), animations="disabled")
        page.keyboard.press("Escape")
        expect(sidebar).to_be_hidden()
        toggle.click()
        expect(sidebar).to_be_visible()
        page.mouse.click(page_width - 20, viewport["height"] / 2)  # beside the drawer
        expect(sidebar).to_be_hidden()
    assert not chat.errors
