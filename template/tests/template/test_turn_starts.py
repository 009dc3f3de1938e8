# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""New turns start a few at a time, and each gives its place back once its model call begins, its request ends,
or its start has taken MAX_START_SECONDS (agent_server/scheduling/turn_starts.py)."""

from __future__ import annotations

import asyncio

import pytest
from agents import Agent, RunConfig, Runner

from agent_server import llm
from agent_server.output_items import with_unique_call_ids
from agent_server.scheduling import turn_starts
from agent_server.scheduling.turn_starts import MAX_START_SECONDS, STARTING_AT_ONCE


async def starting(count: int) -> list[asyncio.Task[turn_starts.Place]]:
    """`count` turns asking for a place, each in a task of its own (as requests are), after a pass of the loop."""
    tasks = [asyncio.create_task(turn_starts.take_place()) for _ in range(count)]
    await asyncio.sleep(0)
    return tasks


async def passes(count: int = 3) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


@pytest.fixture
def no_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Places are given back only by their turns: a slow machine's clock gives none back during the test."""
    monkeypatch.setattr(turn_starts, "MAX_START_SECONDS", 600.0)


def test_at_most_a_few_turns_start_at_once_and_the_next_starts_when_one_has_given_its_place_back(no_clock):
    async def run() -> None:
        first, *others, next_one = await starting(STARTING_AT_ONCE + 1)
        assert all(task.done() for task in [first, *others]) and not next_one.done()
        await passes()
        assert not next_one.done()
        first.result().give_back()
        await passes()
        assert next_one.done()
        for task in [*others, next_one]:
            task.result().give_back()

    asyncio.run(run())


def test_a_place_is_given_back_once_however_many_of_its_ends_come(no_clock):
    async def run() -> None:
        places = [task.result() for task in await starting(STARTING_AT_ONCE)]
        places[0].give_back()
        places[0].give_back()  # the request ends after its model call began: no second place for it
        again, waiting = await starting(2)
        assert again.done() and not waiting.done()
        for place in [*places[1:], again.result()]:
            place.give_back()
        await passes()
        waiting.result().give_back()

    asyncio.run(run())


def test_a_start_that_waits_on_io_lets_the_next_turn_start_after_max_start_seconds():
    async def run() -> None:
        *held, next_one = await starting(STARTING_AT_ONCE + 1)  # none of the first gives its place back
        await asyncio.sleep(MAX_START_SECONDS / 5)
        assert not next_one.done()
        (await asyncio.wait_for(next_one, 5 + MAX_START_SECONDS)).give_back()

    asyncio.run(run())


def test_a_turn_has_started_once_the_sdk_calls_its_model(api_mode, no_clock):
    """The SDK runs the agent on a task of its own; its model call, through the app's model wrapper, gives back
    the place the request took, before the first delta (openai-agents 0.24, both API modes)."""

    async def run() -> None:
        place = await turn_starts.take_place()
        agent = with_unique_call_ids(Agent(name="assistant", instructions="Answer briefly.", model=llm.model()))
        result = Runner.run_streamed(agent, "Hello", run_config=RunConfig(tracing_disabled=True))
        async for event in result.stream_events():
            if getattr(event, "type", None) == "raw_response_event":
                break
        # The place is free: every place can be taken at once, with no wait.
        others = await starting(STARTING_AT_ONCE)
        assert all(task.done() for task in others)
        for task in others:
            task.result().give_back()
        place.give_back()
        async for _ in result.stream_events():
            pass

    asyncio.run(run())
