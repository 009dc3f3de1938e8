# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""This process's turns that wait for a busy conversation (queue.py), woken when a turn here gives it back (store.py).

Apart from both, so that the store, which gives conversations back, and the queue, which waits on the store, import
neither each other nor the database that opens the store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

_waiting: dict[tuple[str, str], set[asyncio.Event]] = {}  # this process's waiters, by conversation


@contextlib.contextmanager
def waiting(owner: str, conversation_id: str) -> Iterator[asyncio.Event]:
    """A waiter of the conversation, for as long as it waits: the event is set when the conversation is given back."""
    stirred = asyncio.Event()
    _waiting.setdefault((owner, conversation_id), set()).add(stirred)
    try:
        yield stirred
    finally:
        waiters = _waiting.get((owner, conversation_id), set())
        waiters.discard(stirred)
        if not waiters:
            _waiting.pop((owner, conversation_id), None)


def given_back(owner: str, conversation_id: str) -> None:
    """A turn of this process gave the conversation back (or a waiter left): its waiters here try at once."""
    for stirred in _waiting.get((owner, conversation_id), ()):
        stirred.set()
