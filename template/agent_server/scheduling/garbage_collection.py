# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""When the cyclic garbage collector runs in a serving process: what start-up made is frozen, and a full
collection that pauses the event loop for long is put off to a clock.

A full collection walks every object that streams still open hold (a few hundred each) and pauses the event
loop meanwhile. By CPython's own rule (3.11: the oldest generation once it has grown by a quarter) a burst of new
streams set off one full collection after another, each longer than the last: with 600 streams opened at once
on one worker, six in ten seconds, the last 131 ms, and every delta that came in meanwhile waited.

So the oldest generation is collected by CPython's rule while its collections are short, as they are with a few
dozen turns open: what requests leave in cycles goes as soon as CPython would free it. Once a full collection
pauses the loop for more than LONG_PAUSE_SECONDS, the next waits for the clock: at most one every
FULL_COLLECTION_SECONDS, so a pause of that length holds up a few deltas in a thousand, and meanwhile what is
left in cycles waits for it (some 24 objects a request: the stream handler breaks the cycle that would keep a
streamed run's whole result, turn/serve.py). A short one hands the oldest generation back to CPython's rule.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator
from typing import Any

FULL_COLLECTION_SECONDS = 30.0
LONG_PAUSE_SECONDS = 0.025
NEVER = 2**31 - 1  # a threshold the oldest generation's counter never reaches


class FullCollections:
    """Watches each full collection's pause, and sets who starts the next: CPython's rule, or the clock."""

    def __init__(self) -> None:
        young, middle, oldest = gc.get_threshold()
        self.cpython = (young, middle, 10 if oldest == NEVER else oldest)  # CPython's, even if an app served before
        self.started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:  # gc.callbacks
        if info["generation"] != 2:
            return
        if phase == "start":
            self.started = time.perf_counter()
            return
        young, middle, oldest = self.cpython
        long = time.perf_counter() - self.started > LONG_PAUSE_SECONDS
        gc.set_threshold(young, middle, NEVER if long else oldest)

    @property
    def on_the_clock(self) -> bool:
        return gc.get_threshold()[2] == NEVER

    async def clock(self) -> None:
        """While on the clock, a full collection each FULL_COLLECTION_SECONDS, if the middle generation was
        collected as often since the last as CPython waits for (an idle process is not walked for nothing)."""
        while True:
            await asyncio.sleep(FULL_COLLECTION_SECONDS)
            if self.on_the_clock and gc.get_count()[2] >= self.cpython[2]:
                gc.collect()


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[FullCollections]:
    """For as long as the app serves: start-up's objects frozen, long full collections put off to the clock."""
    gc.collect()
    # What start-up made lives as long as the app: in the permanent generation, full collections no longer
    # walk it (about 280k objects, a pause of 150 ms or more in the middle of some request).
    gc.freeze()
    collections = FullCollections()
    gc.callbacks.append(collections)
    clock = asyncio.create_task(collections.clock())
    try:
        yield collections
    finally:
        clock.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await clock
        gc.callbacks.remove(collections)
        gc.set_threshold(*collections.cpython)
