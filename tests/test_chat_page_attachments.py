"""Attachments on the chat page, in headless Chromium (the app's agent_server/attachments.py): an image and a PDF
attached by the button, by a drop and by a paste, sent, shown again when the conversation is reopened, and files
the app refuses, with its words.
"""

from __future__ import annotations

import base64
import re

import pytest
from chat_page_support import LOGO, ChatPage, attach_by_button, screenshots
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.xdist_group("browser")


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
        expect(errors.nth(1)).to_contain_text("'setup.exe' is a .exe file, which this app does not take")
        expect(errors.nth(1).get_by_role("button", name="Retry")).to_have_count(0)  # it could only fail again
        expect(reopened.page.locator("#attached .attachment")).to_have_text(["EXEsetup.exe"])
        reopened.page.get_by_role("button", name="Remove setup.exe").click()
        drop(reopened.page, "invoice\u202efdp.txt", "text/plain", b"due")  # reads as invoicetxt.pdf if kept
        expect(reopened.page.locator("#attached .attachment")).to_have_text(["TXTinvoicefdp.txt"])
        screenshots(reopened.page, artifacts, f"attachments-refused-{api}")

        # An answer the model cut at its output-token limit (the offline model, asked to) keeps its text and says
        # "Cut short" in Responses mode, live and when the conversation is opened again, from the stored message's
        # `status: "incomplete"` (memory/cut_short.py); chat-completions mode cannot tell (docs/failure-modes.md).
        reopened.page.get_by_role("button", name="Remove invoicefdp.txt").click()
        reopened.ask("Please cut it short")
        expect(reopened.replies.last).to_contain_text("Offline model: I saw")
        marks = reopened.page.locator(".stopped")
        expect(marks).to_have_text(["Cut short"] if api == "responses" else [])
        reopened.page.reload()
        expect(reopened.replies.last).to_contain_text("Offline model: I saw")
        expect(marks).to_have_text(["Cut short"] if api == "responses" else [])
        # A message stopped mid-text is stored with the same status and no reason (test_runs_keep_turns.py): "Stopped".
        assert reopened.page.evaluate("storedEnd({status: 'incomplete'}).textContent") == "Stopped"
        assert not chat.errors and not reopened.errors
