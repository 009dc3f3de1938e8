"""The chat page at / holds a multi-turn conversation in a real browser (headless Chromium).

The page keeps history the way hosted chat UIs do, replaying assistant turns as id-less
output_text messages, so this is the second-prompt bug's own path, driven end to end:
browser -> start-app -> request guard -> MLflow -> handlers -> SDK -> offline model.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from playwright.sync_api import expect, sync_playwright
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


@pytest.fixture
def served_app(renders, tmp_path):
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    port = free_port()
    process = subprocess.Popen(
        [uv_binary(), "run", "--locked", "--no-config", "start-app", "--port", str(port), "--host", "127.0.0.1"],
        cwd=app,
        env=clean_env(LLM_PROVIDER="offline"),
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


@pytest.mark.xdist_group("browser")
def test_chat_page_holds_a_conversation_with_a_tool_turn(served_app, tmp_path):
    chromium = shutil.which("chromium")
    assert chromium, "Chromium is not installed: run the tests through scripts/test, which installs it"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page()
        page.goto(served_app)
        replies = page.locator(".assistant")

        def ask(text: str) -> None:
            page.fill("#prompt", text)
            page.click("#send")
            expect(page.locator("#send")).to_be_enabled(timeout=60_000)

        ask("Hello")
        expect(replies).to_have_count(1)
        expect(replies.nth(0)).to_contain_text("I saw 1 user, 0 assistant and 0 tool turns. You said: Hello")

        ask("What time is it?")
        expect(replies).to_have_count(2)
        expect(page.locator(".tool").nth(0)).to_contain_text("called get_current_time({})")
        expect(replies.nth(1)).to_contain_text("The tool returned: ")

        ask("Thanks")
        expect(replies).to_have_count(3)
        expect(replies.nth(2)).to_contain_text("I saw 3 user, 2 assistant and 1 tool turns. You said: Thanks")
        expect(page.locator(".error")).to_have_count(0)
        page.screenshot(path=str(tmp_path / "chat-page.png"))
        browser.close()
