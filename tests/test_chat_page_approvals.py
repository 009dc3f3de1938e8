"""Tools that ask first, answered from the chat page in headless Chromium: the starter agent's send_summary
approved, denied, answered after a reload and expired; and a real MCP server's delete_file (require_approval),
which runs once for an approval and never for a denial.
"""

from __future__ import annotations

import time

import httpx
import pytest
from chat_page_support import ChatPage, screenshots
from playwright.sync_api import Route, expect

pytestmark = pytest.mark.xdist_group("browser")


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
    chat.page.keyboard.press("Enter")  # Deny asks for a reason, which is optional (test_chat_page_answers.py)
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
    browser_page.keyboard.press("Enter")  # no reason
    expect(tools.nth(1).locator(".tool-status")).to_have_text("denied")
    expect(chat.replies.last).to_contain_text("The user denied this tool call")
    chat.ask("Thanks")
    expect(chat.replies.last).to_contain_text("You said: Thanks")
    assert deleted() == [*before, "a.txt"], "once for the approval, never for the denial or a replay"
    expect(browser_page.locator(".error")).to_have_count(0)
    assert not chat.errors
