"""The chat page finds, exports and shares conversations in a real browser (headless Chromium), at desktop and phone
widths: the search box filters as the user types and opens a result at its match; a conversation's menu downloads
it as Markdown and JSON; with SHARE_LINKS on, a link is made, viewed read-only by another user, continued in their
own chat, listed and revoked (docs/find-and-share.md). One app for the module, each test its own users (the app
takes the user from a header that each browser context sends).
(tests/chat_page_support.py drives the page; tests/chat_page_fixtures.py starts the browser and the apps.)
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_page_fixtures import running_app
from chat_page_support import DESKTOP, PHONE, ChatPage, screenshots
from playwright.sync_api import Browser, Page, expect
from renders import uv

pytestmark = pytest.mark.xdist_group("browser")
WIDTHS = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]


@pytest.fixture(scope="module")
def sharing_app(renders, tmp_path_factory) -> Iterator[str]:
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    with running_app(app, tmp_path_factory.mktemp("find"), SHARE_LINKS="true", MEMORY_USER_HEADER="x-test-user") as url:
        yield url


def as_someone(browser: Browser, url: str, viewport: dict[str, int], name: str) -> ChatPage:
    context = browser.new_context(
        viewport=viewport,
        extra_http_headers={"x-test-user": f"{name}-{uuid.uuid4()}"},
        permissions=["clipboard-read", "clipboard-write"],
    )
    context.set_default_timeout(30_000)
    return ChatPage(context.new_page(), url)


def sidebar(page: Page, viewport: dict[str, int]) -> None:
    """The conversations, shown: beside the chat on a desktop, a drawer the toggle opens on a phone."""
    if viewport is PHONE and "drawer-open" not in (page.locator("body").get_attribute("class") or ""):
        page.locator("#toggle-sidebar").click()


@pytest.mark.parametrize("viewport", WIDTHS)
def test_the_search_box_filters_as_you_type_and_opens_a_result_at_its_match(sharing_app, browser, viewport, artifacts):
    chat = as_someone(browser, sharing_app, viewport, "ada")
    page = chat.page
    for text in ["Plans for Kyoto", *(f"Filler {n} " + "words " * 40 for n in range(3)), "The quokka question"]:
        chat.ask(text)
    page.locator("#new-chat").click()
    chat.ask("Trains in Zürich")
    sidebar(page, viewport)
    expect(chat.conversations).to_have_count(2)
    search = page.get_by_role("searchbox", name="Search conversations")
    search.press_sequentially("quok", delay=30)  # as typed: each key searches, the newest answer shows
    results = page.locator("#search-results button.open")
    expect(results).to_have_count(1)
    expect(results.locator(".found-title")).to_have_text("Plans for Kyoto")
    expect(results.locator(".snippet")).to_contain_text("quokka question")
    expect(page.locator("#conversations")).to_be_hidden()
    screenshots(page, artifacts, f"chat-search-{'phone' if viewport is PHONE else 'desktop'}")
    results.click()
    match = page.locator(".search-match")
    expect(match).to_have_count(1)
    expect(match).to_contain_text("The quokka question")
    expect(match).to_be_in_viewport()
    expect(page.locator(".turn.user").first).to_have_text("Plans for Kyoto")

    sidebar(page, viewport)
    search.fill("'\" OR * NEAR( \\")  # any text is a query: answered, never an error
    expect(page.locator("#search-results")).to_have_text("No conversation matches.")
    search.fill("zür")
    expect(results.locator(".found-title")).to_have_text(["Trains in Zürich"])
    search.press("Escape")
    expect(search).to_have_value("")
    expect(chat.conversations).to_have_count(2)
    expect(page.locator("#search-results")).to_be_hidden()
    assert not chat.errors


@pytest.mark.parametrize("viewport", WIDTHS)
def test_a_conversations_menu_downloads_it_as_markdown_and_json(sharing_app, browser, viewport, tmp_path: Path):
    chat = as_someone(browser, sharing_app, viewport, "ada")
    page = chat.page
    chat.ask("Export me")
    chat.ask("What time is it?")
    sidebar(page, viewport)
    more = page.get_by_role("button", name="More for Export me")
    more.click()
    expect(more).to_have_attribute("aria-expanded", "true")
    menu = page.get_by_role("menu", name="More for Export me")
    expect(menu.get_by_role("menuitem")).to_have_text(["Export as Markdown", "Export as JSON", "Share a link\u2026"])
    with page.expect_download() as markdown:
        menu.get_by_role("menuitem", name="Export as Markdown").click()
    assert markdown.value.suggested_filename == "Export-me.md"
    text = Path(markdown.value.path()).read_text()
    assert (
        text.startswith("# Export me\n")
        and "## You\n\nExport me" in text
        and "**Tool call** `get_current_time`" in text
    )
    expect(menu).to_have_count(0)
    sidebar(page, viewport)
    more.click()
    with page.expect_download() as as_json:
        page.get_by_role("menuitem", name="Export as JSON").click()
    exported = json.loads(Path(as_json.value.path()).read_text())
    assert exported["title"] == "Export me" and exported["items"][0]["role"] == "user"
    sidebar(page, viewport)
    more.click()
    page.keyboard.press("Escape")  # closes the menu, back on its button
    expect(page.get_by_role("menu")).to_have_count(0)
    expect(more).to_be_focused()
    assert not chat.errors


@pytest.mark.parametrize("viewport", WIDTHS)
def test_a_share_link_is_made_viewed_read_only_continued_and_revoked(sharing_app, browser, viewport, artifacts):
    ada = as_someone(browser, sharing_app, viewport, "ada")
    ada.ask("Our secret plan")
    sidebar(ada.page, viewport)
    ada.page.get_by_role("button", name="More for Our secret plan").click()
    ada.page.once("dialog", lambda dialog: dialog.accept("Ada L."))
    ada.page.get_by_role("menuitem", name="Share a link\u2026").click()
    address = ada.page.get_by_role("textbox", name="Share link")
    expect(address).to_have_value(re.compile("/s/"))
    link = address.input_value()
    assert link.startswith(f"{sharing_app}/s/") and len(link.rsplit("/", 1)[-1]) >= 40
    copy = ada.page.locator(".share-made button")
    expect(copy).to_have_text("Copy link")
    copy.click()
    expect(copy).to_have_text("Copied")
    assert ada.page.evaluate("navigator.clipboard.readText()") == link
    ada.ask("A later turn")  # not in the snapshot

    bob = as_someone(browser, sharing_app, viewport, "bob")
    bob.page.goto(link)
    banner = bob.page.locator(".shared-banner")
    expect(banner).to_contain_text("Our secret plan")
    expect(banner).to_contain_text("shared by Ada L.")
    expect(bob.page.locator(".turn.user")).to_have_text(["Our secret plan"])
    expect(bob.replies).to_have_count(1)
    expect(bob.page.locator("#ask")).to_be_hidden()  # read only
    expect(bob.page.locator(".edit, .regenerate")).to_have_count(0)
    assert "ada-" not in bob.page.content()
    screenshots(bob.page, artifacts, f"chat-shared-{'phone' if viewport is PHONE else 'desktop'}")
    bob.page.get_by_role("button", name="Continue in a new chat").click()
    expect(bob.page).to_have_url(re.compile("/c/"))
    expect(bob.page.locator(".turn.user")).to_have_text(["Our secret plan"])
    expect(bob.page.locator("#ask")).to_be_visible()
    bob.ask("And then?")
    expect(bob.replies.nth(1)).to_contain_text("I saw 2 user, 1 assistant and 0 tool turns. You said: And then?")
    bob.page.goto(link)  # the shared view again: its "New chat" leaves it for an empty chat of bob's own
    expect(banner).to_be_visible()
    bob.page.get_by_role("button", name="New chat", exact=True).click()
    expect(bob.page).to_have_url(f"{sharing_app}/")
    expect(bob.page.locator(".shared-banner")).to_have_count(0)
    expect(bob.page.locator(".turn")).to_have_count(0)
    expect(bob.page.locator("#ask")).to_be_visible()

    sidebar(ada.page, viewport)
    shared = ada.page.locator("#share-list li")
    expect(shared).to_have_text(["Our secret plan (as Ada L.)Revoke"])
    ada.page.once("dialog", lambda dialog: dialog.accept())
    ada.page.get_by_role("button", name="Revoke the link to Our secret plan").click()
    expect(shared).to_have_text(["None yet."])
    bob.page.goto(link)
    expect(bob.page.locator(".notice")).to_have_text("Nothing is shared at this link.")
    expect(bob.page.locator(".turn.user")).to_have_count(0)
    assert not ada.errors and not bob.errors
