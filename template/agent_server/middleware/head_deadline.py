# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""A request's head (its request line and headers) is due within BODY_TIMEOUT_SECONDS, as its body is.

uvicorn waits for a request's head for as long as the client keeps sending it, a byte at a time, and for a
connection that sends nothing at all; each such connection holds a socket and memory. HeadTimeout is
uvicorn's own HTTP protocol (httptools) with a deadline: from the connection's start, or from the first byte
of each later request on it, to the end of its headers. A client that misses it gets a 408 and the connection
is closed. start-app serves with it (HTTP_PROTOCOL); the body's deadline is the body reader's
(middleware/__init__.py's read_body).
"""

from __future__ import annotations

import asyncio
import json

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from agent_server import config
from agent_server.errors import error_body

TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: %d\r\n\r\n"
)


HTTP_PROTOCOL = "agent_server.middleware.head_deadline:HeadTimeout"  # for uvicorn, which imports it in each worker


class HeadTimeout(HttpToolsProtocol):
    _head_due: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_the_clock()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._start_the_clock()

    def on_headers_complete(self) -> None:
        self._stop_the_clock()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_the_clock()
        super().connection_lost(exc)

    def _start_the_clock(self) -> None:
        if self._head_due is None:
            self._head_due = self.loop.call_later(config.settings().limits.body_timeout_seconds, self._too_late)

    def _stop_the_clock(self) -> None:
        if self._head_due is not None:
            self._head_due.cancel()
            self._head_due = None

    def _too_late(self) -> None:
        self._head_due = None
        if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
            return  # a request is being answered: its head arrived in time
        seconds = config.settings().limits.body_timeout_seconds
        message = f"The request's headers did not arrive within {seconds:g} s (BODY_TIMEOUT_SECONDS)."
        body = json.dumps(error_body(408, message)).encode()
        self.transport.write(TIMED_OUT % len(body) + body)
        self.transport.close()
