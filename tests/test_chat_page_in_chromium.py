"""The chat page at / holds a multi-turn conversation in a real browser (headless Chromium).

The page keeps history the way hosted chat UIs do, replaying assistant turns as id-less
output_text messages, so this is the second-prompt bug's own path, driven end to end:
browser -> start-app -> request guard -> MLflow -> handlers -> SDK -> offline model.
With conversation memory on (the default) the page names its conversation and sends only the
new turn; with MEMORY_BACKEND=none it replays the whole history. Both are driven here.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Request, expect, sync_playwright
from renders import clean_env, uv, uv_binary
from servers import free_port, wait_for_health

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.xdist_group("browser")


@pytest.fixture
def start_app(renders, tmp_path) -> Iterator[Callable[..., Any]]:
    """Start the defaults render with `start-app` and the offline model; each app keeps its own conversations."""
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)

    @contextmanager
    def started(**env: str) -> Iterator[str]:
        port = free_port()
        # Not the render's ./conversations.db, which every app started from the render would share.
        database = tmp_path / f"conversations-{port}.db"
        process = subprocess.Popen(
            [uv_binary(), "run", "--locked", "--no-config", "start-app", "--port", str(port), "--host", "127.0.0.1"],
            cwd=app,
            env=clean_env(LLM_PROVIDER="offline", MEMORY_DATABASE_URL=str(database), **env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for_health(url, process)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=30)

    yield started


@pytest.fixture
def served_app(start_app) -> Iterator[str]:
    with start_app() as url:
        yield url


@pytest.fixture
def browser() -> Iterator[Browser]:
    chromium = shutil.which("chromium")
    assert chromium, "Chromium is not installed: run the tests through scripts/test, which installs it"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def browser_page(browser) -> Page:
    return browser.new_page()


class ChatPage:
    """The chat page as a user drives it, with the body of every POST /invocations it sent."""

    def __init__(self, page: Page, url: str) -> None:
        self.page = page
        self.sent: list[dict[str, Any]] = []
        page.on("request", self._record)
        # The page asks GET /conversations on load: wait for that answer, so that it knows whether memory is on.
        with page.expect_response(lambda response: response.url.endswith("/conversations")):
            page.goto(url)
        self.replies = page.locator(".assistant")
        self.conversations = page.locator("#conversations button")

    def _record(self, request: Request) -> None:
        if request.method == "POST" and request.url.endswith("/invocations"):
            self.sent.append(request.post_data_json)

    def ask(self, text: str) -> None:
        self.page.fill("#prompt", text)
        self.page.click("#send")
        expect(self.page.locator("#send")).to_be_enabled(timeout=60_000)


def test_chat_page_holds_a_conversation_with_a_tool_turn(served_app, browser_page, tmp_path):
    chat = ChatPage(browser_page, served_app)
    chat.ask("Hello")
    expect(chat.replies).to_have_count(1)
    expect(chat.replies.nth(0)).to_contain_text("I saw 1 user, 0 assistant and 0 tool turns. You said: Hello")

    chat.ask("What time is it?")
    expect(chat.replies).to_have_count(2)
    expect(browser_page.locator(".tool").nth(0)).to_contain_text("called get_current_time({})")
    expect(chat.replies.nth(1)).to_contain_text("The tool returned: ")

    chat.ask("Thanks")
    expect(chat.replies).to_have_count(3)
    expect(chat.replies.nth(2)).to_contain_text("I saw 3 user, 2 assistant and 1 tool turns. You said: Thanks")
    expect(browser_page.locator(".error")).to_have_count(0)
    browser_page.screenshot(path=str(tmp_path / "chat-page.png"))


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


def test_a_conversation_reopened_from_the_list_shows_its_items_and_goes_on(served_app, browser, tmp_path):
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
    expect(turns).to_have_count(6)
    expect(turns.nth(0)).to_have_text("Hello")
    expect(turns.nth(0)).to_have_class("turn user")
    expect(turns.nth(1)).to_contain_text("You said: Hello")
    expect(turns.nth(2)).to_have_text("What time is it?")
    expect(turns.nth(3)).to_have_text("called get_current_time({})")
    expect(turns.nth(4)).to_contain_text("tool returned ")
    expect(turns.nth(5)).to_contain_text("The tool returned: ")
    expect(reopened.conversations.nth(1)).to_have_attribute("aria-current", "true")

    reopened.ask("Thanks")
    expect(reopened.replies.nth(2)).to_contain_text("I saw 3 user, 2 assistant and 1 tool turns. You said: Thanks")
    assert reopened.sent == [
        {"input": [{"role": "user", "content": "Thanks"}], "stream": True, "context": {"conversation_id": first_id}}
    ]
    expect(reopened.conversations).to_have_text(["Hello", "Another topic"])  # the one just continued comes first
    expect(reopened.page.locator(".error")).to_have_count(0)
    reopened.page.screenshot(path=str(tmp_path / "reopened-conversation.png"))


def test_without_memory_the_page_replays_the_whole_history(start_app, browser_page):
    with start_app(MEMORY_BACKEND="none") as url:
        chat = ChatPage(browser_page, url)
        expect(browser_page.locator("#sidebar")).to_be_hidden()
        chat.ask("Hello")
        chat.ask("Thanks")
        expect(chat.replies.nth(1)).to_contain_text("I saw 2 user, 1 assistant and 0 tool turns. You said: Thanks")
        expect(browser_page.locator(".error")).to_have_count(0)

    assert all("context" not in body for body in chat.sent)
    assert [item.get("role") for item in chat.sent[1]["input"]] == ["user", "assistant", "user"]
    assert chat.sent[1]["input"][0] == {"role": "user", "content": "Hello"}
