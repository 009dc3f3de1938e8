# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The offline model's images and files (agent_server/offline/media.py): the reply names those it saw, in either
API, and inline data is checked as the APIs check it."""

from __future__ import annotations

import pytest

from .test_offline_model import CHAT, RESPONSES, assert_rejected, chat_messages, post, reply, responses_input

# --- images and files (offline/media.py) ---------------------------------------------------------------------

PNG_URL = (  # one pixel
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
JPEG_URL = "data:image/jpeg;base64,/9j/wAARCAABAAEDAREA"  # a JPEG's start and its frame header: 1 by 1 pixel
PDF_DATA = "data:application/pdf;base64,JVBERi0xLjQK"


def test_the_reply_names_the_images_and_files_it_saw_in_either_api() -> None:
    parts = [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
        {"type": "input_file", "file_data": PDF_DATA, "filename": "report.pdf"},
    ]
    response = post(RESPONSES, responses_input({"role": "user", "content": parts}))
    said = response.json()["output"][0]["content"][0]["text"]
    assert said == reply(1, 0, 0, "look") + " I saw 1 image (png) and 1 file (report.pdf)."
    parts = [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": JPEG_URL}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.gif"}},
        {"type": "file", "file": {"file_data": PDF_DATA, "filename": "a.pdf"}},
    ]
    completion = post(CHAT, chat_messages({"role": "user", "content": parts})).json()
    expected = reply(1, 0, 0, "look") + " I saw 2 images (jpeg, url) and 1 file (a.pdf)."
    assert completion["choices"][0]["message"]["content"] == expected


NOT_AN_IMAGE = (
    "The image data you provided does not represent a valid image. Please check your input and try again with one "
    "of the supported image formats: ['image/jpeg', 'image/png', 'image/gif', 'image/webp']."
)


@pytest.mark.parametrize(
    ("part", "param", "message"),
    [
        (
            {"type": "input_image", "image_url": "data:image/svg+xml;base64,PHN2Zy8+", "detail": "auto"},
            "input[0].content[0].image_url",
            "Expected a base64-encoded data URL with an image MIME type (e.g. "
            "'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got unsupported MIME type 'image/svg+xml'.",
        ),
        (
            {"type": "input_image", "image_url": "data:image/png;base64,not base64!", "detail": "auto"},
            "input[0].content[0].image_url",
            "Expected base64-encoded data.",
        ),
        (
            {"type": "input_file", "file_data": "data:application/pdf;base64,%%%", "filename": "a.pdf"},
            "input[0].content[0].file_data",
            "Expected base64-encoded data.",
        ),
        (
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
            "input[0].content[0].image_url",
            NOT_AN_IMAGE,
        ),
        (
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"},
            "input[0].content[0].image_url",
            NOT_AN_IMAGE,
        ),
    ],
    ids=["image-type", "image-base64", "file-base64", "not-an-image", "png-signature-only"],
)
def test_inline_images_and_files_are_checked_as_the_api_checks_them(part, param, message) -> None:
    response = post(RESPONSES, responses_input({"role": "user", "content": [part]}))
    assert_rejected(response, param, f"Invalid '{param}'. {message}")


def test_a_chat_image_and_file_are_checked_too() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:text/plain;base64,aGk="}}
    response = post(CHAT, chat_messages({"role": "user", "content": [image]}))
    assert response.status_code == 400 and response.json()["error"]["param"] == "messages.[0].content.[0].image_url.url"
    file = {"type": "file", "file": {"file_data": "data:application/pdf;base64,%", "filename": "a.pdf"}}
    response = post(CHAT, chat_messages({"role": "user", "content": [file]}))
    assert response.json()["error"]["param"] == "messages.[0].content.[0].file.file_data"
    image = {"type": "image_url", "image_url": {"url": "data:image/gif;base64,R0lGODlh"}}  # a GIF's start, no size
    response = post(CHAT, chat_messages({"role": "user", "content": [image]}))
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_image"
