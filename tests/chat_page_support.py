"""What the chat page tests (tests/test_chat_page_*.py) drive the page at / with, in headless Chromium.

The page keeps history the way hosted chat UIs do, replaying assistant turns as id-less output_text messages,
so those tests drive the second-prompt bug's own path end to end: browser -> start-app -> request guard ->
MLflow -> handlers -> SDK -> offline model. The offline model repeats the user's text ("You said: ..."), so a
prompt is how a test makes the model answer with markdown, or with hostile markup. Screenshots go to
$TEST_ARTIFACTS (default test-artifacts/ at the repo root). Their fixtures (the browser, the apps) are in
tests/chat_page_fixtures.py.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, Request, expect

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


class ChatPage:
    """The chat page as a user drives it, with the body of every POST /invocations it sent."""

    def __init__(self, page: Page, url: str) -> None:
        self.page = page
        self.sent: list[dict[str, Any]] = []
        self.errors: list[str] = []
        page.on("request", self._record)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        # Whatever the page's Content-Security-Policy refuses (app.py) is an error too: the page must not need it.
        page.on("console", lambda message: self._refused(message.text))
        # The page asks GET /conversations on load: wait for that answer, so that it knows whether memory is on.
        with page.expect_response(lambda response: response.url.endswith("/conversations")):
            page.goto(url)
        self.replies = page.locator(".assistant")
        self.conversations = page.locator("#conversations button.open")
        self.send = page.locator("#send")

    def _refused(self, text: str) -> None:
        if "Content Security Policy" in text:
            self.errors.append(text)

    def _record(self, request: Request) -> None:
        if request.method == "POST" and request.url.endswith("/invocations"):
            self.sent.append(request.post_data_json)

    def ask(self, text: str) -> None:
        self.page.fill("#prompt", text)
        self.send.click()
        expect(self.send).to_be_enabled(timeout=60_000)


def screenshots(page: Page, artifacts: Path, name: str) -> None:
    """The page at desktop and at phone width (NAME-desktop.png, NAME-phone.png), then at the size it had."""
    size = page.viewport_size
    for width, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        page.screenshot(path=str(artifacts / f"{name}-{width}.png"), animations="disabled")
    if size:
        page.set_viewport_size(size)


def tabbed_through(page: Page, presses: int = 40) -> list[str]:
    """The accessible names of the controls that Tab reaches, in order, from the top of the page."""
    page.locator("body").focus()
    reached = []
    for _ in range(presses):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            "(e => e.getAttribute('aria-label') || e.textContent.slice(0, 40))(document.activeElement)"
        )
        reached.append(focused)
    return reached


def said(count: str, text: str) -> str:
    return f"Offline model: I saw {count} turns. You said: {text}"


def user_texts(body: dict[str, Any]) -> list[str]:
    return [item["content"] for item in body["input"] if item.get("role") == "user"]


# A 1x1 PNG, as an owner's logo file.
LOGO = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgaPj/HwAEgwJ/0Pz5WwAAAABJRU5ErkJggg=="
)


def attach_by_button(page: Page, name: str, media: str, data: bytes) -> None:
    with page.expect_file_chooser() as chooser:
        page.click("#attach")
    chooser.value.set_files([{"name": name, "mimeType": media, "buffer": data}])


def pending_run(page: Page) -> dict[str, Any]:
    """The run the page is streaming, once the app has named it (its first event). Polled from here: the page's
    security policy refuses the string a `wait_for_function` would evaluate in it."""
    deadline = time.monotonic() + 30
    while (pending := page.evaluate("localStorage.getItem('agent-chat-run')")) is None:
        assert time.monotonic() < deadline, "the page never named its run"
        page.wait_for_timeout(20)
    return json.loads(pending)
