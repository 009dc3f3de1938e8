# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""While the app serves, the oldest generation is collected by CPython's rule while its collections are short,
and on a clock once one has paused the event loop for long (agent_server/scheduling/garbage_collection.py)."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from agent_server.scheduling import garbage_collection
from agent_server.scheduling.garbage_collection import NEVER


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


def pauses(long: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every full collection count as a long pause, or none."""
    monkeypatch.setattr(garbage_collection, "LONG_PAUSE_SECONDS", 0.0 if long else 600.0)


@pytest.fixture
def fast_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(garbage_collection, "FULL_COLLECTION_SECONDS", 0.02)


def test_a_long_full_collection_puts_the_next_off_to_the_clock_and_a_short_one_hands_it_back(monkeypatch):
    before = gc.get_threshold()

    async def run() -> None:
        async with garbage_collection.serving() as collections:
            assert gc.get_threshold() == before and not collections.on_the_clock  # CPython's rule, to start
            pauses(True, monkeypatch)
            gc.collect()
            assert collections.on_the_clock and gc.get_threshold() == (*before[:2], NEVER)
            pauses(False, monkeypatch)
            gc.collect()
            assert gc.get_threshold() == before

    asyncio.run(run())
    assert gc.get_threshold() == before and not any(
        isinstance(callback, garbage_collection.FullCollections) for callback in gc.callbacks
    )


def test_on_the_clock_old_garbage_is_collected_once_a_full_collection_is_due(monkeypatch, fast_clock):
    due = gc.get_threshold()[2]  # CPython's own: a full collection after this many of the middle generation

    async def run() -> None:
        async with garbage_collection.serving() as collections:
            pauses(True, monkeypatch)
            gc.collect()
            gone = old_garbage()
            while gc.get_count()[2] < due:
                gc.collect(1)
            assert collections.on_the_clock
            for _ in range(250):
                if gone() is None:
                    return
                await asyncio.sleep(0.02)
            raise AssertionError("the clock did not collect the oldest generation")

    asyncio.run(run())


def test_on_the_clock_an_idle_process_is_not_walked_for_nothing(monkeypatch, fast_clock):
    async def run() -> None:
        async with garbage_collection.serving():
            pauses(True, monkeypatch)
            gc.collect()
            gone = old_garbage()  # two middle collections: not yet due
            await asyncio.sleep(0.2)
            assert gone() is not None
        gc.collect()

    asyncio.run(run())


def test_a_streamed_runs_result_goes_with_its_stream_not_with_a_full_collection(app_client):
    """openai-agents 0.24 keeps a streamed run's result in a reference cycle (its sandbox clean-up); the stream
    handler breaks it once the stream has ended, so the result, its history and its items are freed at once."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds stays in gc.garbage, to be looked at
    try:
        body = {"input": [{"role": "user", "content": "What time is it?"}], "stream": True}
        response = app_client.post("/invocations", json=body)
        assert response.status_code == 200 and "response.output_item.done" in response.text
        gc.collect()
        in_cycles = [type(found).__name__ for found in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert "RunResultStreaming" not in in_cycles
