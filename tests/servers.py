"""The generated app's own client and server helpers (template/tests/support.py), for the repo's tests.

One Chat client with one replay rule, one free_port and one wait for a server, for both test trees.
It is loaded by path: it is the template's file, and no rendered app needs to exist for it.
"""

from __future__ import annotations

from typing import Any

from renders import TEMPLATE, load_module

app_support = load_module("app_support", TEMPLATE / "tests" / "support.py")

Chat = app_support.Chat
free_port = app_support.free_port
post = app_support.post
replayed = app_support.replayed
reply_text = app_support.reply_text
wait_for_health = app_support.wait_for_health
wait_until_answering = app_support.wait_until_answering


def chat_with(url: str, stream: bool, headers: dict[str, str] | None = None) -> Chat:
    """A Chat with a real server at `url` (model calls can take a while on a loaded machine)."""
    return Chat(http_client(url, headers), stream)


def http_client(url: str, headers: dict[str, str] | None = None) -> Any:
    return app_support.httpx.Client(base_url=url, headers=headers, timeout=120)
