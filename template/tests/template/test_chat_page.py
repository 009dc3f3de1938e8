# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The chat page at / is served and talks to /invocations with streaming and replayed history.

It is one file that fetches nothing from elsewhere, and it never parses text as HTML: the model's
replies become text nodes and elements the page builds itself. The template's Chromium tests drive it.
"""

from __future__ import annotations

import base64
import json
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


def look_of(page: str) -> dict:
    [block] = re.findall(r'<script type="application/json" id="look">(.*?)</script>', page, re.DOTALL)
    return json.loads(block)


def test_the_page_has_the_template_look_until_the_owner_sets_one(page):
    assert look_of(page) == {
        "title": "Agent chat", "greeting": "Ask anything. Try \u201cWhat time is it?\u201d", "prompts": [],
        "accent": "", "logo": "",
        "attachments": {"max_files": 4, "max_file_bytes": 2 * 1024 * 1024, "max_turn_bytes": 5 * 1024 * 1024 // 2},
    }  # fmt: skip


def test_the_owners_title_greeting_prompts_colour_and_logo_reach_the_page_as_data(app_client, app_settings, tmp_path):
    logo = tmp_path / "logo.png"
    logo.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    app_settings.setenv("CHAT_TITLE", "Support </script><b>bot</b> & co")
    app_settings.setenv("CHAT_GREETING", "Hi! Ask me about your orders.")
    app_settings.setenv("CHAT_PROMPTS", "Where is my order? | Return an item")
    app_settings.setenv("CHAT_ACCENT", "#0A7C5A")
    app_settings.setenv("CHAT_LOGO", str(logo))
    app_settings.setenv("ATTACHMENTS_MAX_FILES", "2")  # the page checks a turn against the app's limits
    page = app_client.get("/").text
    assert "</script><b>" not in page and "<b>bot" not in page, "the owner's text never ends the data block"
    assert look_of(page) == {
        "title": "Support </script><b>bot</b> & co", "greeting": "Hi! Ask me about your orders.",
        "prompts": ["Where is my order?", "Return an item"], "accent": "#0a7c5a",
        "logo": "data:image/png;base64," + base64.b64encode(logo.read_bytes()).decode(),
        "attachments": {"max_files": 2, "max_file_bytes": 2 * 1024 * 1024, "max_turn_bytes": 5 * 1024 * 1024 // 2},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("CHAT_TITLE", "x" * 61, "at most 60"),
        ("CHAT_GREETING", "Hello\u202eolleh", "direction overrides"),
        ("CHAT_PROMPTS", "a|b|c|d|e", "at most 4"),
        ("CHAT_ACCENT", "red", "#rgb or #rrggbb"),
        ("CHAT_LOGO", "logo.bmp", "must be a"),
        ("CHAT_LOGO", "missing.png", "cannot be read"),
    ],
)
def test_a_bad_look_setting_stops_the_app_naming_it(app_settings, variable, value, says):
    from agent_server import config

    app_settings.setenv(variable, value)
    with pytest.raises(config.ConfigurationError, match=says) as refused:
        config.settings().check()
    assert variable in str(refused.value)
