# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""When the cyclic garbage collector runs in a serving process: what start-up made is frozen, and the oldest
generation is collected on a clock, not on allocation counts.

A full collection walks every object that streams still open hold (a few hundred each) and pauses the event
loop meanwhile. By CPython's own rule (3.11: the oldest generation once it has grown by a quarter) a burst of new
streams set off one full collection after another, each longer than the last: with 600 streams opened at once
on one worker, six in ten seconds, the last 131 ms, and every delta that came in meanwhile waited. Here it runs
once every FULL_COLLECTION_SECONDS at most, so a pause of the same length holds up a few deltas in a thousand.

The young generations are collected as CPython collects them, and they take the cycles a short request leaves.
What a streamed run leaves in cycles (openai-agents 0.24 keeps its run result in one) has lived through them,
and waits for the next full collection: at most FULL_COLLECTION_SECONDS of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator

FULL_COLLECTION_SECONDS = 30.0
NEVER = 2**31 - 1  # a threshold the oldest generation's counter never reaches


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[None]:
    """For as long as the app serves: start-up's objects frozen, full collections on a clock."""
    gc.collect()
    # What start-up made lives as long as the app: in the permanent generation, full collections no longer
    # walk it (about 280k objects, a pause of 150 ms or more in the middle of some request).
    gc.freeze()
    young, middle, oldest = gc.get_threshold()
    gc.set_threshold(young, middle, NEVER)
    clock = asyncio.create_task(_collect_every(FULL_COLLECTION_SECONDS, due_after=oldest))
    try:
        yield
    finally:
        clock.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await clock
        gc.set_threshold(young, middle, oldest)


async def _collect_every(seconds: float, due_after: int) -> None:
    """A full collection each `seconds`, if the middle generation was collected `due_after` times since the last
    (CPython's own count; an idle process is not walked for nothing)."""
    while True:
        await asyncio.sleep(seconds)
        if gc.get_count()[2] >= due_after:
            gc.collect()
