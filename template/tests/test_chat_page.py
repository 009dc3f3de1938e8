# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The chat page at / is served and talks to /invocations with streaming and replayed history.

It is one file that fetches nothing from elsewhere, and it never parses text as HTML: the model's
replies become text nodes and elements the page builds itself. The template's Chromium tests drive it.
"""

from __future__ import annotations

import re

import pytest

# Ways a page turns a string into live markup or code: none of them may appear in the chat page.
HTML_SINKS = (
    "innerHTML",
    "outerHTML",
    "insertAdjacentHTML",
    "document.write",
    "createContextualFragment",
    "DOMParser",
    "srcdoc",
    "eval(",
    "new Function",
)


@pytest.fixture
def page(app_client) -> str:
    response = app_client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def test_chat_page_is_served(page):
    assert 'fetch("/invocations"' in page
    assert "stream: true" in page
    assert 'type: "output_text"' in page  # replays assistant turns the way hosted chat UIs do


def test_chat_page_loads_nothing_from_elsewhere(page):
    assert not re.search(r"(?i)\bhttps?://", page), "no CDN, font or image URL: the page works offline"
    assert not re.search(r"(?i)<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=\s*[\"'](?!data:)", page)
    assert "@import" not in page and "url(" not in page


@pytest.mark.parametrize("sink", HTML_SINKS)
def test_chat_page_never_parses_text_as_html(page, sink):
    assert sink not in page


def test_chat_page_fits_a_phone(page):
    assert '<meta name="viewport" content="width=device-width' in page
    assert "<textarea" in page  # a multi-line input


def test_chat_page_runs_only_its_own_script_and_style(app_client):
    """The Content-Security-Policy names the page's one script and one style by hash, and no other source."""
    import base64
    import hashlib

    response = app_client.get("/")
    policy = dict(part.strip().split(" ", 1) for part in response.headers["content-security-policy"].split(";"))
    for tag in ("script", "style"):
        [block] = re.findall(rf"<{tag}>(.*?)</{tag}>", response.text, re.DOTALL)
        digest = base64.b64encode(hashlib.sha256(block.encode()).digest()).decode()
        assert policy[f"{tag}-src"] == f"'sha256-{digest}'"
    assert policy["default-src"] == "'none'" and policy["connect-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
