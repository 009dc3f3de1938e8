"""Long-running turns on the chat page, in headless Chromium: each turn is a background run, resumed after a
reload with nothing lost or twice, and stopped with the conversation kept; a tool call is shown when it starts,
running with its seconds, then done, or interrupted by Stop.
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest
from chat_page_support import LOGO, ChatPage, attach_by_button, pending_run, screenshots
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.xdist_group("browser")


# --- long-running turns: a background run, resumed after a reload, stopped ------------------------


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
    expect(reopened.page.locator(".stopped")).to_have_text("Stopped")  # the stored turn ends on the stopped call
    reopened.ask("Never mind")
    expect(reopened.replies.last).to_contain_text("I saw 3 user, 1 assistant and 1 tool turns. You said: Never mind")
    assert not chat.errors and not reopened.errors


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


# The first "running… N s" the page shows, recorded from the page's start (a reload's too).
FIRST_RUNNING = """new MutationObserver((_, observer) => {
  const status = document.querySelector("details.tool .tool-status");
  if (!status || !/^running… \\d+ s$/.test(status.textContent)) return;
  window.firstRunning = status.textContent;
  observer.disconnect();
}).observe(document, { subtree: true, childList: true, characterData: true });"""


def test_a_reload_during_a_running_tool_shows_it_running_then_done(slow_tools_app, browser_page):
    """After a reload the running call's seconds count from when it started (the app streams `started_at`)."""
    chat = ChatPage(browser_page, slow_tools_app["url"])
    _tool, called = started_job(slow_tools_app, browser_page)
    pending_run(browser_page)
    browser_page.add_init_script(FIRST_RUNNING)
    browser_page.wait_for_timeout(max(0, 2000 - (time.monotonic() - called) * 1000))  # 2 s into the 5 s job
    browser_page.reload()
    tool = browser_page.locator("details.tool")
    expect(tool.locator(".tool-status")).to_have_text(RUNNING, timeout=5000)  # the resumed stream: still running
    first = browser_page.evaluate("window.firstRunning")
    assert int(first.split()[1]) >= 2, f"counted from the reload, not from the call's start: {first}"
    expect(tool.locator(".tool-name")).to_have_text("five_second_job")
    expect(tool.locator(".tool-status")).to_have_text("done", timeout=15_000)
    expect(tool).to_have_count(1)
    expect(chat.replies.last).to_contain_text("The tool returned: finished after five seconds.")
    assert not chat.errors
