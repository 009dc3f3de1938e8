# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""While the app serves, the oldest generation is collected on a clock, not on allocation counts, and only when
CPython's own count says it is due (agent_server/garbage_collection.py)."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from agent_server import garbage_collection


class Node:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def old_garbage() -> weakref.ref[Node]:
    """A cycle that lived through the young generations' collections (as a streamed run's does), now garbage."""
    node = Node()
    gc.collect(1)  # it survives: now in the oldest generation, which only a full collection walks
    gone = weakref.ref(node)
    del node
    gc.collect(1)
    assert gone() is not None  # the young generations' collections do not free it
    return gone


@pytest.fixture
def fast_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(garbage_collection, "FULL_COLLECTION_SECONDS", 0.02)


def test_while_serving_only_the_clock_collects_the_oldest_generation_and_the_thresholds_come_back():
    before = gc.get_threshold()

    async def run() -> None:
        async with garbage_collection.serving():
            young, middle, oldest = gc.get_threshold()
            assert (young, middle) == before[:2] and oldest == garbage_collection.NEVER

    asyncio.run(run())
    assert gc.get_threshold() == before


def test_the_clock_collects_old_garbage_once_a_full_collection_is_due(fast_clock):
    due = gc.get_threshold()[2]  # CPython's own: a full collection after this many of the middle generation

    async def run() -> None:
        async with garbage_collection.serving():
            gone = old_garbage()
            while gc.get_count()[2] < due:
                gc.collect(1)
            for _ in range(250):
                if gone() is None:
                    return
                await asyncio.sleep(0.02)
            raise AssertionError("the clock did not collect the oldest generation")

    asyncio.run(run())


def test_an_idle_process_is_not_walked_for_nothing(fast_clock):
    async def run() -> None:
        async with garbage_collection.serving():
            gone = old_garbage()  # two middle collections: not yet due
            await asyncio.sleep(0.2)
            assert gone() is not None
        gc.collect()

    asyncio.run(run())
