# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Images and documents attached to a turn (agent_server/attachments.py): they reach the model in both API modes,
are kept with the conversation, and what the app does not take is a 415 or 413 that stores nothing."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import AppSettings
from fastapi.testclient import TestClient
from support import Conversation, fresh_database, reply_text

ADA = "ada@example.com"
PNG = (  # one pixel
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PDF_BYTES = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def pdf(name: str = "report.pdf", data: bytes = PDF_BYTES, media: str = "application/pdf") -> dict[str, Any]:
    encoded = base64.b64encode(data).decode()
    return {"type": "input_file", "file_data": f"data:{media};base64,{encoded}", "filename": name}


def chat_file(name: str, media: str = "application/pdf") -> dict[str, Any]:
    return {key: value for key, value in pdf(name, media=media).items() if key != "type"}


def image(url: str = PNG) -> dict[str, Any]:
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def user(*parts: dict[str, Any], text: str = "What are these?") -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "input_text", "text": text}, *parts]}


@pytest.fixture
def client(app_settings: AppSettings, api_mode: str, model_log, tmp_path) -> Iterator[TestClient]:
    app_settings.setenv("MEMORY_BACKEND", "sqlite")
    app_settings.setenv("MEMORY_DATABASE_URL", fresh_database(tmp_path / "conversations.db"))
    app_settings.setenv("MEMORY_USER_HEADER", "x-test-user")
    from agent_server.app import app

    with TestClient(app, headers={"x-test-user": ADA}) as test_client:
        yield test_client


def model_parts(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The image and file parts of every message the model was sent, in its API's own shapes."""
    body = entry["body"]
    messages = body.get("messages") or body.get("input")
    parts = [part for message in messages if isinstance(message.get("content"), list) for part in message["content"]]
    return [part for part in parts if part["type"] not in ("input_text", "text")]


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_an_image_and_a_pdf_reach_the_model_are_kept_and_come_back_on_reopen(client, api_mode, stream, model_log):
    chat = Conversation(client, stream)
    said = reply_text(chat.send_items([user(image(), pdf())]))
    assert "You said: What are these? I saw 1 image (png) and 1 file (report.pdf)." in said
    sent = model_parts(model_log[-1])
    if api_mode == "chat_completions":  # the SDK's converter (openai-agents 0.24) makes the chat API's own parts
        assert sent == [
            {"type": "image_url", "image_url": {"url": PNG, "detail": "auto"}},
            {"type": "file", "file": {"file_data": pdf()["file_data"], "filename": "report.pdf"}},
        ]
    else:
        assert sent == [image(), pdf()]

    kept = client.get(f"/conversations/{chat.id}").json()["items"]
    assert kept[0] == {"role": "user", "content": [{"type": "input_text", "text": "What are these?"}, image(), pdf()]}
    assert "I saw 1 image (png) and 1 file (report.pdf)." in reply_text(chat.send("And now?")), "replayed from memory"
    assert client.get(f"/conversations/{chat.id}", headers={"x-test-user": "bob@example.com"}).status_code == 404


def test_chat_completions_shaped_parts_are_judged_the_same(client):
    parts = [{"type": "image_url", "image_url": {"url": PNG}}, {"type": "file", "file": chat_file("a.pdf")}]
    said = reply_text(Conversation(client, stream=False).send_items([user(*parts)]))
    assert "I saw 1 image (png) and 1 file (a.pdf)." in said
    parts = [{"type": "file", "file": chat_file("a.zip", media="application/zip")}]
    assert client.post("/invocations", json={"input": [user(*parts)]}).status_code == 415


def refused_and_not_stored(client: TestClient, turn: dict[str, Any], status: int, message: str) -> None:
    """The turn is refused with `status` and `message`, both as a new conversation and in an existing one, which
    keeps what it had."""
    new = f"refused-{uuid.uuid4()}"
    response = client.post("/invocations", json={"input": [turn], "context": {"conversation_id": new}})
    assert response.status_code == status, response.text
    assert message in response.json()["error"]["message"]
    assert response.json()["error"]["param"] == "input[0]"
    assert client.get(f"/conversations/{new}").status_code == 404, "a refused first turn keeps no conversation"
    chat = Conversation(client, stream=False)
    chat.send("Hello")
    before = client.get(f"/conversations/{chat.id}").json()["items"]
    body = {"input": [turn], "context": {"conversation_id": chat.id}, "stream": True}
    assert client.post("/invocations", json=body).status_code == status
    assert client.get(f"/conversations/{chat.id}").json()["items"] == before


@pytest.mark.parametrize(
    ("settings", "parts", "message"),
    [
        ({"ATTACHMENTS_MAX_FILES": "1"}, [image(), pdf()], "the limit is ATTACHMENTS_MAX_FILES=1"),
        ({"ATTACHMENTS_MAX_FILES": "0"}, [image()], "the limit is ATTACHMENTS_MAX_FILES=0"),
        (
            {"ATTACHMENTS_MAX_FILE_BYTES": "40"},
            [pdf()],
            f"'report.pdf' is {len(PDF_BYTES)} bytes: the limit is ATTACHMENTS_MAX_FILE_BYTES=40",
        ),
        (
            {"ATTACHMENTS_MAX_FILE_BYTES": "60", "ATTACHMENTS_MAX_TURN_BYTES": "80"},
            [pdf("a.pdf"), pdf("b.pdf")],
            "the limit is ATTACHMENTS_MAX_TURN_BYTES=80",
        ),
    ],
    ids=["count", "none-allowed", "file-bytes", "turn-bytes"],
)
def test_a_turn_over_a_limit_is_a_413_that_names_the_setting_and_stores_nothing(
    client, app_settings, settings, parts, message
):
    for name, value in settings.items():
        app_settings.setenv(name, value)
    refused_and_not_stored(client, user(*parts), 413, message)


@pytest.mark.parametrize(
    ("part", "message"),
    [
        (image("data:image/svg+xml;base64,PHN2Zy8+"), "The image is image/svg+xml, which this app does not take"),
        (pdf("notes.zip", media="application/zip"), "'notes.zip' is a .zip file, which this app does not take"),
        (pdf("setup.exe", media="text/plain"), "'setup.exe' is a .exe file, which this app does not take"),
        (pdf("report.docx"), "'report.docx' is a .docx file, which this app does not take"),
        (pdf("README"), "'README' is a file with no extension, which this app does not take"),
        (pdf("x.pdf", media="application/zip"), "'x.pdf' is named .pdf but holds application/zip: its name and its"),
        (pdf("report.txt"), "'report.txt' is named .txt but holds application/pdf: its name and its data must say"),
    ],
    ids=["svg-image", "zip-file", "exe-named-text", "docx-named-pdf", "no-extension", "zip-named-pdf", "pdf-named-txt"],
)
def test_a_type_the_app_does_not_take_is_a_415_and_stores_nothing(client, part, message):
    refused_and_not_stored(client, user(part), 415, message)
    said = client.post("/invocations", json={"input": [user(part)]}).json()["error"]["message"]
    assert "images (PNG, JPEG, WebP, GIF), PDF and plain text" in said


def test_earlier_turns_count_toward_the_type_but_not_the_limits(client, app_settings):
    app_settings.setenv("ATTACHMENTS_MAX_FILES", "1")
    earlier = [user(image(), pdf()), {"role": "assistant", "content": "Two things."}]
    response = client.post("/invocations", json={"input": [*earlier, user(pdf(), text="And this?")]})
    assert response.status_code == 200, response.text
    wrong = [user(pdf("x.bin", media="application/octet-stream")), *earlier[1:], user(text="Hi")]
    response = client.post("/invocations", json={"input": wrong})
    assert response.status_code == 415 and response.json()["error"]["param"] == "input[0]"


def test_a_responses_client_sends_them_too(client):
    response = client.post("/responses", json={"input": [user(image(), pdf())]})
    assert response.status_code == 200, response.text
    assert "I saw 1 image (png) and 1 file (report.pdf)." in response.json()["output"][0]["content"][0]["text"]
    refused = client.post("/responses", json={"input": [user(pdf("a.zip", media="application/zip"))]})
    assert refused.status_code == 415 and "which this app does not take" in refused.json()["error"]["message"]


@pytest.mark.parametrize("name", ["invoice\u202efdp.txt", "invoice\x00fdp.txt", "invoice\r\nfdp.txt"])
def test_a_file_name_loses_its_control_and_direction_characters(client, name, model_log):
    chat = Conversation(client, stream=False)
    said = reply_text(chat.send_items([user(pdf(name, b"hello", "text/plain"))]))
    assert "I saw 1 file (invoicefdp.txt)." in said, "the model gets the name as the page shows it"
    kept = client.get(f"/conversations/{chat.id}").json()["items"][0]["content"][1]
    assert kept["filename"] == "invoicefdp.txt"


def test_a_data_url_is_checked_and_sent_with_its_ends_trimmed(client, app_settings, model_log):
    spaced = {**pdf("a.pdf"), "file_data": f" {pdf()['file_data']}\n"}
    said = reply_text(Conversation(client, stream=False).send_items([user(image(f"  {PNG}\n"), spaced)]))
    assert "I saw 1 image (png) and 1 file (a.pdf)." in said
    image_part, file_part = model_parts(model_log[-1])
    assert image_part["image_url"] in (PNG, {"url": PNG, "detail": "auto"}), "the model gets the data URL trimmed"
    assert (file_part.get("file") or file_part)["file_data"] == pdf()["file_data"]
    refused_and_not_stored(client, user(image(" data:image/svg+xml;base64,PHN2Zy8+")), 415, "The image is image/svg")
    app_settings.setenv("ATTACHMENTS_MAX_FILE_BYTES", "40")
    spaced = {**pdf(), "file_data": " " + pdf()["file_data"]}
    refused_and_not_stored(client, user(spaced), 413, "the limit is ATTACHMENTS_MAX_FILE_BYTES=40")


@pytest.mark.parametrize(
    ("part", "message"),
    [
        (image("data:image/png;base64,not base64!"), "An image does not hold valid base64 data."),
        (pdf() | {"file_data": "data:application/pdf;base64,%%%"}, "'report.pdf' does not hold valid base64 data."),
        (pdf() | {"file_data": "JVBERi0xLjQ"}, "'report.pdf' does not hold valid base64 data."),
    ],
    ids=["image", "file-data-url", "bare-file"],
)
def test_data_that_is_not_base64_is_the_apps_400_naming_the_item(client, part, message, model_log):
    refused_and_not_stored(client, user(part), 400, message)  # model_log: the model never answered a 400


def test_an_image_the_model_cannot_decode_is_the_models_400(client, model_log):
    response = client.post("/invocations", json={"input": [user(image("data:image/png;base64,AAAA"))]})
    assert response.status_code == 400, response.text
    assert "does not represent a valid image" in response.json()["error"]["message"]
    assert response.json()["error"]["param"].startswith("input[0]")
    assert [entry["status"] for entry in model_log] == [400]
    model_log.clear()  # the 400 was the point of this test


@pytest.mark.parametrize("path", ["/invocations", "/responses"])
def test_a_file_over_the_limit_names_the_attachment_limit_though_the_body_is_over_max_input_chars(client, path):
    big = pdf(data=b"%PDF-1.4\n" + bytes(3 * 1024 * 1024))  # 3 MiB: its base64 is over MAX_INPUT_CHARS too
    assert len(big["file_data"]) > 4_000_000
    response = client.post(path, json={"input": [user(big)]})
    assert response.status_code == 413, response.text
    said = response.json()["error"]["message"]
    assert "'report.pdf' is 3.0 MiB: the limit is ATTACHMENTS_MAX_FILE_BYTES=2097152" in said
    assert response.json()["error"]["param"] == "input[0]"
