"""How the chat page shows a reply, in headless Chromium: rendered markdown, the model's reasoning folded above
its answer, hostile markup shown as text and never run (and the page's security policy behind that), the
thinking indicator, the input that grows, and the copy buttons.
"""

from __future__ import annotations

import re

import pytest
from chat_page_support import ChatPage, said, screenshots
from playwright.sync_api import Route, expect

pytestmark = pytest.mark.xdist_group("browser")


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
