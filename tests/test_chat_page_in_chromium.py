"""The chat page at / holds a multi-turn conversation in a real browser (headless Chromium).

The page keeps history the way hosted chat UIs do, replaying assistant turns as id-less
output_text messages, so this is the second-prompt bug's own path, driven end to end:
browser -> start-app -> request guard -> MLflow -> handlers -> SDK -> offline model.
With conversation memory on (the default) the page names its conversation and sends only the
new turn; with MEMORY_BACKEND=none it replays the whole history. Both are driven here.

The offline model repeats the user's text ("You said: ..."), so a prompt is how a test makes the
model answer with markdown, or with hostile markup. A model that fails for real comes from
tests/flaky_model.py: the offline model behind a switch that makes its next answer a 503.
Screenshots of a conversation at desktop and phone width go to $TEST_ARTIFACTS (default
test-artifacts/ at the repo root).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, Request, Route, expect, sync_playwright
from renders import ROOT, clean_env, uv, uv_binary
from servers import ServerProcess, free_port

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
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}

pytestmark = pytest.mark.xdist_group("browser")


@contextmanager
def serving(command: list[str], cwd: Path, env: dict[str, str], port: int) -> Iterator[str]:
    """A server process on `port`: its URL once /health answers; stopped by its own process id after."""
    with ServerProcess(command, env, f"http://127.0.0.1:{port}/health", cwd=cwd) as server:
        yield server.url


@contextmanager
def running_app(app: Path, folder: Path, **env: str) -> Iterator[str]:
    """`start-app` in the render `app`, on the offline model unless `env` says otherwise."""
    port = free_port()
    # Not the render's ./conversations.db, which every app started from the render would share.
    settings = {"LLM_PROVIDER": "offline", "MEMORY_DATABASE_URL": str(folder / f"conversations-{port}.db"), **env}
    command = [uv_binary(), "run", "--locked", "--no-config", "start-app", "--port", str(port), "--host", "127.0.0.1"]
    with serving(command, app, clean_env(**settings), port) as url:
        yield url


@pytest.fixture
def start_app(renders, tmp_path) -> Iterator[Callable[..., Any]]:
    """Start the defaults render with `start-app` and the offline model; each app keeps its own conversations."""
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    yield lambda **env: running_app(app, tmp_path, **env)


@pytest.fixture
def served_app(start_app) -> Iterator[str]:
    with start_app() as url:
        yield url


@pytest.fixture(scope="module")
def stateless_app(renders, tmp_path_factory) -> Iterator[str]:
    """One app with memory off for the tests of how the page shows things: it keeps nothing between them."""
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    with running_app(app, tmp_path_factory.mktemp("stateless"), MEMORY_BACKEND="none") as url:
        yield url


class FlakyModel:
    """tests/flaky_model.py: the offline model over HTTP, whose next answers can be made to fail."""

    def __init__(self, url: str) -> None:
        self.url = url
        # The app's settings for it; no retries, so one failure is one failed turn.
        self.env = {
            "LLM_PROVIDER": "openai",
            "LLM_MODEL": "offline-model",
            "OPENAI_BASE_URL": f"{url}/v1",
            "OPENAI_API_KEY": "test-key",
            "LLM_MAX_RETRIES": "0",
        }

    def fail_next(self) -> None:
        httpx.post(f"{self.url}/fake/fail-next", timeout=10).raise_for_status()

    def statuses(self) -> list[int]:
        return [entry["status"] for entry in httpx.get(f"{self.url}/fake/log", timeout=10).json()]


@pytest.fixture
def flaky_model(start_app, renders) -> Iterator[FlakyModel]:
    app = renders["defaults"]  # synced by start_app: the helper runs with the app's own Python
    port = free_port()
    command = [str(app / ".venv" / "bin" / "python"), str(ROOT / "tests" / "flaky_model.py"), "--port", str(port)]
    with serving(command, app, clean_env(), port) as url:
        yield FlakyModel(url)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """One Chromium for the module: launching it costs about six times a fresh context."""
    executable = shutil.which("chromium")
    assert executable, "Chromium is not installed: run the tests through scripts/test, which installs it"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def browser(chromium) -> Iterator[Browser]:
    """The module's Chromium; each page or context a test opens is its own profile, closed after the test."""
    yield chromium
    for context in chromium.contexts:
        context.close()


@pytest.fixture
def browser_page(browser) -> Page:
    return browser.new_page()


@pytest.fixture
def artifacts() -> Path:
    """Where screenshots are kept after the run: $TEST_ARTIFACTS, by default test-artifacts/ at the repo root."""
    folder = Path(os.environ.get("TEST_ARTIFACTS") or ROOT / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


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


# A 1x1 PNG, as an owner's logo file.
LOGO = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgaPj/HwAEgwJ/0Pz5WwAAAABJRU5ErkJggg=="
)


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
        expect(bob.page).to_have_url(f"{url}/")  # a new chat: nothing of Ada's, and no word of it
        expect(bob.page.locator(".turn")).to_have_count(0)
        expect(bob.page.locator("#greeting")).to_be_visible()
        expect(bob.page.locator(".error")).to_have_count(0)
        expect(bob.conversations).to_have_count(0)
        assert not bob.errors


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


# --- attachments (the app's agent_server/attachments.py) -----------------------------------------------

PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
# Drops the files `files` ([name, type, base64]) on the page, as a drag from the desktop does.
DROP = """files => {
  const dropped = new DataTransfer();
  for (const [name, type, data] of files) {
    dropped.items.add(new File([Uint8Array.from(atob(data), c => c.charCodeAt(0))], name, { type }));
  }
  for (const kind of ["dragover", "drop"]) {
    const event = new DragEvent(kind, { dataTransfer: dropped, bubbles: true, cancelable: true });
    document.querySelector("#log").dispatchEvent(event);
  }
}"""


# Pastes them into the message box, as a paste of copied files does.
PASTE = """files => {
  const pasted = new DataTransfer();
  for (const [name, type, data] of files) {
    pasted.items.add(new File([Uint8Array.from(atob(data), c => c.charCodeAt(0))], name, { type }));
  }
  const event = new ClipboardEvent("paste", { clipboardData: pasted, bubbles: true, cancelable: true });
  document.querySelector("#prompt").dispatchEvent(event);
}"""


def drop(page: Page, name: str, media: str, data: bytes, script: str = DROP) -> None:
    page.evaluate(script, [[name, media, base64.b64encode(data).decode()]])


def attach_by_button(page: Page, name: str, media: str, data: bytes) -> None:
    with page.expect_file_chooser() as chooser:
        page.click("#attach")
    chooser.value.set_files([{"name": name, "mimeType": media, "buffer": data}])


@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_an_image_and_a_pdf_are_attached_sent_and_shown_again_and_refused_files_say_why(
    start_app, browser, artifacts, api
):
    limits = {"ATTACHMENTS_MAX_FILE_BYTES": "2000", "ATTACHMENTS_MAX_TURN_BYTES": "4000", "MAX_BODY_BYTES": "300000"}
    with start_app(LLM_API=api, **limits) as url:
        chat = ChatPage(browser.new_page(), url)
        attach_by_button(chat.page, "dot.png", "image/png", LOGO)
        drop(chat.page, "report.pdf", "application/pdf", PDF)
        tray = chat.page.locator("#attached .attachment")
        expect(tray).to_have_count(2)
        expect(tray.nth(0).locator("img")).to_have_attribute("src", re.compile("^data:image/png;base64,"))
        expect(tray.nth(1)).to_have_text("PDFreport.pdf")
        chat.ask("What are these?")
        answer = "You said: What are these? I saw 1 image (png) and 1 file (report.pdf)."
        expect(chat.replies.nth(0)).to_contain_text(answer)
        image, pdf = (base64.b64encode(data).decode() for data in (LOGO, PDF))
        assert chat.sent[0]["input"][0]["content"] == [
            {"type": "input_text", "text": "What are these?"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{image}", "detail": "auto"},
            {"type": "input_file", "file_data": f"data:application/pdf;base64,{pdf}", "filename": "report.pdf"},
        ]
        expect(chat.page.locator("#attached")).to_be_hidden()
        shown = chat.page.locator(".user-turn .attachment")
        expect(shown).to_have_count(2)
        screenshots(chat.page, artifacts, f"attachments-{api}")

        chat.page.reload()  # the conversation's address opens it again, with its thumbnails
        expect(shown).to_have_count(2)
        expect(shown.nth(0).locator("img")).to_be_visible()
        expect(shown.nth(1)).to_have_text("PDFreport.pdf")
        reopened = ChatPage(browser.new_page(), url)  # and from the list
        reopened.conversations.nth(0).click()
        expect(reopened.page.locator(".user-turn .attachment")).to_have_count(2)
        expect(reopened.page.locator(".user-turn .attachment img")).to_be_visible()

        # The page checks the app's limits before sending: a file over the body's limit too (the app would answer
        # its body-size 413) is named by the attachment limit, and nothing is sent; the file stays in the tray.
        drop(reopened.page, "big.txt", "text/plain", b"x" * 400_000)
        reopened.ask("Too big?")
        errors = reopened.page.locator(".error")
        said = "'big.txt' is 0.4 MiB: the limit is ATTACHMENTS_MAX_FILE_BYTES=2000 (2,000 bytes)."  # the app's words
        expect(errors).to_contain_text(said)
        expect(reopened.page.locator("#attached .attachment")).to_have_text(["TXTbig.txt"])
        assert reopened.sent == [] and reopened.page.input_value("#prompt") == "Too big?"
        reopened.page.get_by_role("button", name="Remove big.txt").click()
        # The app judges what it takes: its messages are the page's, and the refused file comes back to the tray.
        drop(reopened.page, "setup.exe", "application/octet-stream", b"MZ", script=PASTE)
        reopened.ask("And this?")
        expect(errors.nth(1)).to_contain_text("'setup.exe' is application/octet-stream, which this app does not take")
        screenshots(reopened.page, artifacts, f"attachments-refused-{api}")
        assert not chat.errors and not reopened.errors


def test_a_tool_that_asks_first_is_approved_and_denied_from_the_page(served_app, browser, artifacts):
    """The starter agent's send_summary asks first (needs_approval): Approve runs it and the answer goes on, Deny
    runs nothing and the model is told; an answered request has no buttons after a reload, and one left unanswered
    asks again. Each answer is an `mcp_approval_response`, as the Databricks chat UI sends it."""
    chat = ChatPage(browser.new_page(), served_app)
    chat.ask("Use send_summary, please")
    tools = chat.page.locator("details.tool")
    first = tools.nth(0)
    expect(first.locator(".tool-status")).to_have_text("waits for your approval")
    expect(first.locator(".approval")).to_contain_text("send_summary (my-agent) asks to run.")
    screenshots(chat.page, artifacts, "chat-approval")
    first.get_by_role("button", name="Approve send_summary").click()
    expect(first.locator(".tool-output")).to_have_text("An example tool: nothing was sent to me. " + SUMMARY_TAIL)
    expect(first.locator(".approval")).to_have_count(0)
    expect(chat.replies.last).to_contain_text("The tool returned: An example tool: nothing was sent to me.")
    approval = chat.sent[-1]["input"]
    assert [item["type"] for item in approval] == ["mcp_approval_response"] and approval[0]["approve"] is True

    chat.ask("Use send_summary once more")
    second = tools.nth(1)
    deny = second.get_by_role("button", name="Deny send_summary")
    deny.focus()
    chat.page.keyboard.press("Enter")  # every control works from the keyboard
    expect(second.locator(".tool-status")).to_have_text("denied")
    expect(chat.replies.last).to_contain_text("The tool returned: The user denied this tool call.")
    chat.ask("Use send_summary at last")
    expect(tools.nth(2).locator(".approval")).to_have_count(1)

    reopened = ChatPage(browser.new_page(), served_app)  # as after a reload
    # Opening a conversation ends with listing the conversations again; the list's answer waits here, so the page
    # is still busy opening when the user answers. The click waits for it and is not dropped.
    listing: list[Route] = []
    reopened.page.route(lambda url: url.endswith("/conversations"), lambda route: listing.append(route), times=1)
    reopened.conversations.nth(0).click()
    blocks = reopened.page.locator("details.tool")
    expect(blocks).to_have_count(3)
    expect(blocks.nth(0).locator(".approval")).to_have_count(0)  # answered: no buttons
    expect(blocks.nth(1).locator(".approval")).to_have_count(0)
    expect(blocks.nth(1).locator(".tool-status")).to_have_text("denied")  # as it was, not "done"
    approve = blocks.nth(2).get_by_role("button", name="Approve send_summary")  # left unanswered: asks again
    approve.click()
    approve.click()  # a second click on an answer that waits sends nothing more
    expect(reopened.send).to_be_disabled()
    assert len(listing) == 1 and reopened.sent == [], "the page is still opening the conversation"
    listing[0].continue_()
    expect(blocks.nth(2).locator(".tool-output")).to_contain_text("An example tool: nothing was sent to me.")
    assert [[item["type"] for item in body["input"]] for body in reopened.sent] == [["mcp_approval_response"]]
    expect(reopened.page.locator(".error")).to_have_count(0)
    assert not chat.errors and not reopened.errors


SUMMARY_TAIL = "Connect send_summary in agent.py to your own system."


def test_a_request_that_expired_says_so_and_offers_no_approve(start_app, browser):
    """Reopened once its request is older than MCP_APPROVAL_MAX_AGE_HOURS (here 0.72 s), a conversation that waits
    for an approval says on the request that it expired (GET /conversations/{id} names it), with no buttons."""
    with start_app(MCP_APPROVAL_MAX_AGE_HOURS="0.0002") as url:
        chat = ChatPage(browser.new_page(), url)
        chat.ask("Use send_summary, please")
        expect(chat.page.get_by_role("button", name="Approve send_summary")).to_be_visible()
        time.sleep(2)
        reopened = ChatPage(browser.new_page(), url)
        reopened.conversations.nth(0).click()
        block = reopened.page.locator("details.tool")
        expect(block.locator(".approval")).to_have_text("This request expired: ask again.")
        expect(block.locator(".tool-status")).to_have_text("expired")
        expect(block.get_by_role("button")).to_have_count(0)
        assert not chat.errors and not reopened.errors


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
        page.get_by_role("button", name="Delete my data").click()
        expect(chat.conversations).to_have_count(0)
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


# --- how the page shows a reply -----------------------------------------------------------------

MARKDOWN = "\n".join(
    [
        "Some **bold**, *italic*, `inline code` and a [link](https://example.com/docs).",
        "A second line of the same paragraph.",
        "",
        "## A heading",
        "",
        "- apples",
        "- pears",
        "  - nested",
        "",
        "1. first",
        "2. second",
        "",
        "```python",
        "print('<b>not bold</b>')",
        "```",
        "See https://example.org/page. And [a script link](javascript:alert(1)).",
    ]
)


def test_replies_are_rendered_markdown(stateless_app, browser_page):
    chat = ChatPage(browser_page, stateless_app)
    chat.ask(MARKDOWN)
    reply = chat.replies.last.locator(".content")
    paragraph = reply.locator("p").first
    expect(paragraph).to_contain_text(said("1 user, 0 assistant and 0 tool", "Some bold, italic, inline code"))
    expect(paragraph.locator("strong")).to_have_text("bold")
    expect(paragraph.locator("em")).to_have_text("italic")
    expect(paragraph.locator("code")).to_have_text("inline code")
    expect(paragraph.locator("br")).to_have_count(1)  # the line break is kept
    link = paragraph.get_by_role("link", name="link")
    expect(link).to_have_attribute("href", "https://example.com/docs")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(reply.locator("h2")).to_have_text("A heading")
    expect(reply.locator(":scope > ul > li")).to_have_count(2)
    expect(reply.locator("ul ul > li")).to_have_text(["nested"])
    expect(reply.locator("ol > li")).to_have_text(["first", "second"])
    expect(reply.locator(".code .code-bar")).to_contain_text("python")
    expect(reply.locator("pre code")).to_have_text("print('<b>not bold</b>')")
    expect(reply.locator("b")).to_have_count(0)
    # A bare URL becomes a link without the full stop after it; a javascript: link stays text.
    expect(reply.locator("a")).to_have_count(2)
    expect(reply.get_by_role("link", name="https://example.org/page")).to_have_attribute(
        "href", "https://example.org/page"
    )
    expect(reply.get_by_text("a script link")).to_be_visible()
    expect(reply.locator("a[href^='javascript']")).to_have_count(0)

    # What is replayed is the model's own text, not the rendering.
    chat.ask("Thanks")
    expect(chat.replies.nth(1)).to_contain_text(said("2 user, 1 assistant and 0 tool", "Thanks"))
    replayed = chat.sent[1]["input"][1]["content"][0]["text"]
    assert replayed == said("1 user, 0 assistant and 0 tool", MARKDOWN)
    assert not chat.errors


HOSTILE = "\n".join(
    [
        'Look: <img src="/hostile-image" onerror="window.hostile = \'img\'">',
        "<script>window.hostile = 'script'</script>",
        '**<svg onload="window.hostile = \'svg\'"></svg>** and <iframe srcdoc="<script>parent.hostile = 1</script>">',
        "[click me](javascript:window.hostile='link') <a href=\"javascript:window.hostile='a'\">or me</a>",
        "```html",
        '<img src="/hostile-image" onerror="window.hostile = \'code\'">',
        "```",
    ]
)


def test_the_models_reasoning_is_shown_folded_above_its_answer(stateless_app, browser_page, artifacts):
    """The offline model reasons first when asked to think, as reasoning models do (a summary the SDK reads as a
    reasoning item); the page folds it above the answer, opens it from the keyboard, and replays it (the render
    drops it before the model: history-shapes.md)."""
    chat = ChatPage(browser_page, stateless_app)
    chat.ask("Please think about it")
    reasoning = browser_page.locator("details.reasoning")
    expect(reasoning).to_have_count(1)
    expect(reasoning.locator("summary")).to_have_text("Reasoning")
    expect(reasoning.locator(".reasoning-text")).to_be_hidden()  # folded
    assert reasoning.bounding_box()["y"] < chat.replies.nth(0).bounding_box()["y"], "above its answer"
    reasoning.locator("summary").focus()
    browser_page.keyboard.press("Enter")
    expect(reasoning.locator(".reasoning-text")).to_have_text(re.compile(r"^The user asks me to think\."))
    screenshots(browser_page, artifacts, "chat-reasoning")
    chat.ask("Thanks")
    assert [item.get("type") for item in chat.sent[1]["input"]] == [None, "reasoning", "message", None]
    expect(chat.replies.nth(1)).to_contain_text("I saw 2 user, 1 assistant and 0 tool turns. You said: Thanks")
    expect(browser_page.locator(".error")).to_have_count(0)
    assert not chat.errors


def test_a_reopened_conversation_shows_its_reasoning_as_the_live_answer_did(served_app, browser_page):
    chat = ChatPage(browser_page, served_app)
    chat.ask("Please think about it")
    expect(browser_page.locator("details.reasoning")).to_have_count(1)
    with browser_page.expect_response(lambda response: "/conversations/" in response.url):
        browser_page.reload()  # the address names the conversation: reopened from the app's memory
    reasoning = browser_page.locator("details.reasoning")
    expect(reasoning).to_have_count(1)
    expect(chat.replies).to_have_count(1)
    assert reasoning.bounding_box()["y"] < chat.replies.nth(0).bounding_box()["y"], "above its answer"
    reasoning.locator("summary").click()
    expect(reasoning.locator(".reasoning-text")).to_have_text(re.compile(r"^The user asks me to think\."))
    chat.ask("Thanks")
    expect(chat.replies.nth(1)).to_contain_text("I saw 2 user, 1 assistant and 0 tool turns. You said: Thanks")
    assert not chat.errors


def test_markup_in_a_reply_is_shown_as_text_and_never_runs(stateless_app, browser_page):
    fetched: list[str] = []
    browser_page.on("request", lambda request: fetched.append(request.url))
    chat = ChatPage(browser_page, stateless_app)
    chat.ask(HOSTILE)
    reply = chat.replies.last
    expect(reply).to_contain_text('Look: <img src="/hostile-image" onerror="window.hostile = \'img\'">')
    expect(reply).to_contain_text("<script>window.hostile = 'script'</script>")
    expect(reply.locator("strong")).to_have_text("<svg onload=\"window.hostile = 'svg'\"></svg>")
    expect(reply.locator("pre code")).to_have_text('<img src="/hostile-image" onerror="window.hostile = \'code\'">')
    # No element was made of the markup, in the reply or in the user's own bubble (the page's own icons are its).
    made = "#log img, #log script, #log svg:not([data-icon]), #log iframe, #log a"
    expect(browser_page.locator(made)).to_have_count(0)
    expect(browser_page.locator("#log svg[data-icon]")).to_have_count(2)  # the thumbs, cloned from the page
    assert browser_page.evaluate("document.scripts.length") == 2  # the page's own, and its data block (the look)
    assert browser_page.evaluate("document.querySelectorAll('script:not([type=\"application/json\"])').length") == 1
    reply.get_by_text("click me").click()
    reply.get_by_text("or me").click()
    assert browser_page.evaluate("window.hostile") is None
    assert not [url for url in fetched if "hostile" in url]
    assert not chat.errors


def test_the_pages_security_policy_runs_no_script_that_gets_in(stateless_app, browser_page):
    """Should markup ever reach the page, the browser runs none of it: only the page's own script has its hash."""
    chat = ChatPage(browser_page, stateless_app)
    chat.ask("Hello")
    injected = browser_page.evaluate(
        """() => {
            const script = document.createElement("script");
            script.textContent = "window.injected = true";
            document.body.append(script);
            return window.injected === true;
        }"""
    )
    assert injected is False
    assert any("Content Security Policy" in error for error in chat.errors), chat.errors


def test_the_reply_shows_it_is_thinking_until_the_first_token(stateless_app, browser_page):
    chat = ChatPage(browser_page, stateless_app)
    held: list[Route] = []
    # The request waits here until the test lets it go.
    browser_page.route("**/invocations", lambda route: held.append(route))
    browser_page.fill("#prompt", "Hello")
    chat.send.click()
    thinking = browser_page.locator(".thinking")
    expect(thinking).to_be_visible()
    expect(thinking).to_have_attribute("aria-label", "Thinking")
    expect(chat.send).to_be_disabled()
    expect(chat.replies).to_have_count(0)
    assert len(held) == 1
    held[0].continue_()
    expect(chat.replies.nth(0)).to_contain_text(said("1 user, 0 assistant and 0 tool", "Hello"))
    expect(thinking).to_have_count(0)
    expect(chat.send).to_be_enabled()


def test_the_input_takes_several_lines_and_grows_up_to_a_limit(stateless_app, browser_page):
    chat = ChatPage(browser_page, stateless_app)
    prompt = browser_page.locator("#prompt")
    expect(prompt).to_have_js_property("tagName", "TEXTAREA")
    one_line = prompt.bounding_box()["height"]
    prompt.click()
    browser_page.keyboard.type("first line")
    browser_page.keyboard.press("Shift+Enter")
    browser_page.keyboard.type("second line")
    expect(prompt).to_have_value("first line\nsecond line")
    assert chat.sent == [], "Shift+Enter is a new line, not a send"
    two_lines = prompt.bounding_box()["height"]
    assert two_lines > one_line + 10

    for n in range(20):
        browser_page.keyboard.press("Shift+Enter")
        browser_page.keyboard.type(f"line {n}")
    tall = prompt.bounding_box()["height"]
    assert two_lines < tall <= 201, "it grows to a limit, then scrolls"
    assert prompt.evaluate("area => area.scrollHeight > area.clientHeight")
    assert browser_page.locator("#ask").bounding_box()["y"] + tall < browser_page.viewport_size["height"]

    browser_page.keyboard.press("Enter")
    expect(chat.replies).to_have_count(1)
    expect(chat.send).to_be_enabled()
    text = "\n".join(["first line", "second line", *(f"line {n}" for n in range(20))])
    assert chat.sent[0]["input"] == [{"role": "user", "content": text}]
    assert browser_page.locator(".turn.user").inner_text() == text
    expect(prompt).to_have_value("")
    assert abs(prompt.bounding_box()["height"] - one_line) < 1


def test_copy_buttons_copy_the_text_with_or_without_the_clipboard_api(stateless_app, browser):
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    chat = ChatPage(context.new_page(), stateless_app)
    chat.ask("Copy **this**\n```\ncode line\n```")
    copy = chat.replies.last.locator(".actions .copy")
    copy.click()
    expect(copy).to_have_text("Copied")
    clipboard = "navigator.clipboard.readText()"
    assert chat.page.evaluate(clipboard) == said("1 user, 0 assistant and 0 tool", "Copy **this**\n```\ncode line\n```")
    chat.replies.last.locator(".code .copy").click()
    expect(chat.replies.last.locator(".code .copy")).to_have_text("Copied")
    assert chat.page.evaluate(clipboard) == "code line"

    # A page served over plain HTTP from another host has no navigator.clipboard: the older copy command serves.
    without = context.new_page()
    without.add_init_script("Object.defineProperty(Navigator.prototype, 'clipboard', { get: () => undefined })")
    bare = ChatPage(without, stateless_app)
    assert bare.page.evaluate("navigator.clipboard") is None
    bare.ask("Hello")
    bare_copy = bare.replies.last.locator(".actions .copy")
    bare_copy.click()
    expect(bare_copy).to_have_text("Copied")
    chat.page.bring_to_front()
    assert chat.page.evaluate(clipboard) == said("1 user, 0 assistant and 0 tool", "Hello")
    context.close()


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


def test_small_things_send_looks_disabled_a_comment_is_in_view_code_in_a_table_keeps_its_words(served_app, browser):
    page = browser.new_page(viewport=PHONE)
    chat = ChatPage(page, served_app)
    opacity = lambda: float(chat.send.evaluate("b => getComputedStyle(b).opacity"))  # noqa: E731
    assert opacity() < 0.5, "nothing to send: the button looks disabled"
    page.fill("#prompt", "x")
    assert opacity() == 1
    page.fill("#prompt", "")
    chat.ask("Steps:\n\n| step | command |\n|---|---|\n| third | `uv run start-app --port 8000` |\n\n" + "More. " * 90)
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


# --- long-running turns: a background run, resumed after a reload, stopped ------------------------


@pytest.fixture(scope="module")
def slow_tools_app(renders, tmp_path_factory) -> Iterator[dict[str, str]]:
    """An app whose MCP server's slow_lookup takes 3 s, and whose delete_file asks first; the server counts their
    calls at GET /calls and GET /deleted (since its start: the tests here read the calls they add)."""
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    port = free_port()
    serve = f"import sys; sys.path.insert(0, 'tests/template'); import support; support.serve_mcp_tools({port})"
    tools = f"http://127.0.0.1:{port}"
    declared = json.dumps([{"name": "tools", "url": f"{tools}/mcp", "require_approval": ["delete_file"]}])
    with (
        ServerProcess([str(app / ".venv" / "bin" / "python"), "-c", serve], clean_env(), f"{tools}/mcp", cwd=app),
        running_app(app, tmp_path_factory.mktemp("slow-tools"), MCP_SERVERS=declared) as url,
    ):
        yield {"url": url, "tools": tools}


def pending_run(page: Page) -> dict[str, Any]:
    """The run the page is streaming, once the app has named it (its first event). Polled from here: the page's
    security policy refuses the string a `wait_for_function` would evaluate in it."""
    deadline = time.monotonic() + 30
    while (pending := page.evaluate("localStorage.getItem('agent-chat-run')")) is None:
        assert time.monotonic() < deadline, "the page never named its run"
        page.wait_for_timeout(20)
    return json.loads(pending)


def test_a_reload_mid_answer_resumes_the_run_with_nothing_lost_or_twice(slow_tools_app, browser_page):
    calls_before = httpx.get(f"{slow_tools_app['tools']}/calls").json()
    chat = ChatPage(browser_page, slow_tools_app["url"])
    attach_by_button(browser_page, "dot.png", "image/png", LOGO)
    browser_page.fill("#prompt", "Please run slow_lookup")
    chat.send.click()
    run = pending_run(browser_page)
    assert chat.sent[0]["background"] is True and chat.sent[0]["stream"] is True
    browser_page.reload()  # inside the tool's 3 s
    shown = browser_page.locator(".user-turn .attachment img")
    expect(shown).to_have_count(1)  # the resumed turn's thumbnail (the page showed none until it was reopened)
    expect(chat.replies).to_have_count(1, timeout=30_000)
    expect(chat.replies.nth(0)).to_contain_text("The tool returned: late.")
    expect(browser_page.locator(".turn.user")).to_have_text(["Please run slow_lookup"])
    expect(shown).to_have_attribute("src", re.compile("^data:image/png;base64,"))
    reply = chat.replies.nth(0).inner_text()
    assert reply.count("The tool returned") == 1, "the answer's text once"
    expect(browser_page.locator("details.tool")).to_have_count(1)
    assert httpx.get(f"{slow_tools_app['tools']}/calls").json() == calls_before + ["slow_lookup"], "the tool ran once"
    assert httpx.get(f"{slow_tools_app['url']}/responses/{run['runId']}").json()["status"] == "completed"
    expect(chat.send).to_be_enabled()
    chat.ask("Thanks")  # the conversation goes on
    expect(chat.replies.nth(1)).to_contain_text("I saw 2 user, 1 assistant and 1 tool turns")
    expect(browser_page.locator(".error")).to_have_count(0)
    assert not chat.errors


def test_stop_during_a_tool_keeps_the_conversation_and_its_stopped_turn(slow_tools_app, browser, artifacts):
    """A turn, then a slow tool stopped while it runs: the conversation keeps the first turn and the stopped one,
    reopened from the list on a fresh page, and the model's next answer sees them all."""
    calls_before = len(httpx.get(f"{slow_tools_app['tools']}/calls").json())
    chat = ChatPage(browser.new_page(), slow_tools_app["url"])
    chat.ask("Hello")
    chat.page.fill("#prompt", "Please run slow_lookup")
    chat.send.click()
    run = pending_run(chat.page)
    for _ in range(1500):  # Stop while the tool runs
        if len(httpx.get(f"{slow_tools_app['tools']}/calls").json()) > calls_before:
            break
        chat.page.wait_for_timeout(20)
    stop = chat.page.get_by_role("button", name="Stop the answer")
    expect(stop).to_be_visible()
    screenshots(chat.page, artifacts, "chat-stop")
    stop.focus()
    chat.page.keyboard.press("Enter")  # keyboard alone
    expect(chat.page.locator(".stopped")).to_have_text("Stopped")
    expect(stop).to_be_hidden()
    assert httpx.get(f"{slow_tools_app['url']}/responses/{run['runId']}").json()["status"] == "cancelled"
    kept = httpx.get(f"{slow_tools_app['url']}/conversations/{run['conversationId']}").json()["items"]
    assert [item.get("role") or item["type"] for item in kept] == [
        "user", "assistant", "user", "function_call", "function_call_output"], kept  # fmt: skip
    assert kept[0]["content"] == "Hello" and kept[2]["content"] == "Please run slow_lookup"
    assert "interrupted" in kept[-1]["output"]

    reopened = ChatPage(browser.new_page(), slow_tools_app["url"])
    reopened.conversations.filter(has_text="Hello").first.click()
    turns = reopened.page.locator(".turn")
    expect(turns.nth(0)).to_have_text("Hello")
    expect(turns.nth(2)).to_have_text("Please run slow_lookup")
    expect(turns).to_have_count(4)  # Hello, its answer, the prompt, and the stopped call
    expect(turns.nth(3).locator(".tool-status")).to_have_text("interrupted")
    reopened.ask("Never mind")
    expect(reopened.replies.last).to_contain_text("I saw 3 user, 1 assistant and 1 tool turns. You said: Never mind")
    assert not chat.errors and not reopened.errors


def test_an_mcp_tool_that_asks_first_runs_once_approved_and_never_denied(slow_tools_app, browser_page):
    """A real MCP server's delete_file (require_approval), approved and denied from the page: counted at the
    server, it runs once for the approval, never for the denial, and never again for the replays after them."""
    deleted = lambda: httpx.get(f"{slow_tools_app['tools']}/deleted").json()  # noqa: E731
    before = deleted()
    chat = ChatPage(browser_page, slow_tools_app["url"])
    tools = browser_page.locator("details.tool")
    chat.ask("Use delete_file")
    expect(tools.nth(0).locator(".approval")).to_contain_text("delete_file (tools) asks to run.")
    assert deleted() == before, "nothing runs before the user answers"
    tools.nth(0).get_by_role("button", name="Approve delete_file").click()
    expect(tools.nth(0).locator(".tool-output")).to_have_text("deleted a.txt")
    expect(chat.send).to_be_enabled()
    chat.ask("Use delete_file again")
    tools.nth(1).get_by_role("button", name="Deny delete_file").focus()
    browser_page.keyboard.press("Enter")
    expect(tools.nth(1).locator(".tool-status")).to_have_text("denied")
    expect(chat.replies.last).to_contain_text("The user denied this tool call")
    chat.ask("Thanks")
    expect(chat.replies.last).to_contain_text("You said: Thanks")
    assert deleted() == [*before, "a.txt"], "once for the approval, never for the denial or a replay"
    expect(browser_page.locator(".error")).to_have_count(0)
    assert not chat.errors


# --- tool progress: a call is shown when it starts, running, then done, interrupted by Stop ------------------------

RUNNING = re.compile(r"^running… \d+ s$")


def started_job(slow_tools_app: dict[str, str], page: Page) -> tuple[Any, float]:
    """Ask for the MCP server's five_second_job; its block, and when the server started the call."""
    before = len(httpx.get(f"{slow_tools_app['tools']}/calls").json())
    page.fill("#prompt", "Please run five_second_job")
    page.locator("#send").click()
    for _ in range(1500):
        if len(httpx.get(f"{slow_tools_app['tools']}/calls").json()) > before:
            break
        page.wait_for_timeout(20)
    called = time.monotonic()
    tool = page.locator("details.tool")
    expect(tool.locator(".tool-status")).to_have_text(RUNNING, timeout=1000)  # within a second of the call
    return tool, called


def test_a_running_tool_shows_at_once_with_its_seconds_then_done(slow_tools_app, browser_page, artifacts):
    chat = ChatPage(browser_page, slow_tools_app["url"])
    tool, called = started_job(slow_tools_app, browser_page)
    expect(tool).to_have_count(1)
    expect(tool.locator(".tool-name")).to_have_text("five_second_job")
    expect(tool.locator(".tool-arguments")).to_be_visible()  # open while it runs: its arguments at once
    expect(tool.locator(".tool-arguments")).to_have_text("{}")
    expect(tool.locator(".tool-status")).to_have_text("running… 2 s", timeout=4000)  # the seconds tick
    screenshots(browser_page, artifacts, "chat-tool-running")
    expect(tool.locator(".tool-status")).to_have_text("done", timeout=15_000)
    assert time.monotonic() - called > 4, "done only once the tool returned"
    expect(tool.locator(".tool-output")).to_contain_text("finished after five seconds")
    expect(tool.locator(".tool-arguments")).to_be_hidden()  # folded once done, as any finished call
    expect(chat.replies.last).to_contain_text("The tool returned: finished after five seconds.")
    expect(tool).to_have_count(1)
    screenshots(browser_page, artifacts, "chat-tool-done")
    assert not chat.errors


def test_stop_during_a_running_tool_shows_it_interrupted(slow_tools_app, browser_page, artifacts):
    chat = ChatPage(browser_page, slow_tools_app["url"])
    tool, _called = started_job(slow_tools_app, browser_page)
    browser_page.get_by_role("button", name="Stop the answer").click()
    expect(browser_page.locator(".stopped")).to_have_text("Stopped")
    expect(tool.locator(".tool-status")).to_have_text("interrupted")
    screenshots(browser_page, artifacts, "chat-tool-interrupted")
    browser_page.wait_for_timeout(1200)
    expect(tool.locator(".tool-status")).to_have_text("interrupted")  # no longer ticking
    expect(chat.send).to_be_enabled()
    assert not chat.errors


def test_a_reload_during_a_running_tool_shows_it_running_then_done(slow_tools_app, browser_page):
    chat = ChatPage(browser_page, slow_tools_app["url"])
    started_job(slow_tools_app, browser_page)
    pending_run(browser_page)
    browser_page.reload()
    tool = browser_page.locator("details.tool")
    expect(tool.locator(".tool-status")).to_have_text(RUNNING, timeout=5000)  # the resumed stream: still running
    expect(tool.locator(".tool-name")).to_have_text("five_second_job")
    expect(tool.locator(".tool-status")).to_have_text("done", timeout=15_000)
    expect(tool).to_have_count(1)
    expect(chat.replies.last).to_contain_text("The tool returned: finished after five seconds.")
    assert not chat.errors
