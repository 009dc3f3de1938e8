# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Fair steps (agent_server/scheduling/fair_steps.py): with fair shares on, the steps of a heavier identity's turns wait
while a lighter identity's turn is busy, for at most MAX_WAIT_SECONDS; steps of no turn, and of a turn that holds
a place among those starting, never wait; a waiting task cancels cleanly. Driven on asyncio's own event loop and
on uvloop's, which serves the app (uvicorn picks it)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import loopback
import pytest
import uvloop
from conftest import AppSettings
from support import ServerThread, fresh_database, reply_text, sse_events

from agent_server.scheduling import fair_steps, turn_starts
from agent_server.turn.rate_limits import SHARES, Shares

LOADS = {"heavy": 2.0, "light": 0.0}  # turns running: light goes first

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


@pytest.fixture(params=sorted(LOOPS))
def run(request: pytest.FixtureRequest) -> Callable[[Coroutine[Any, Any, Any]], Any]:
    def run(main: Coroutine[Any, Any, Any]) -> Any:
        with asyncio.Runner(loop_factory=LOOPS[request.param]) as runner:
            return runner.run(main)

    return run


async def turn(owner: str | None, steps: int, log: list[str], *, starting: bool = False) -> None:
    """`steps` steps of `owner`'s turn (None: of no turn), each logged as it runs."""
    if owner is not None:
        fair_steps.serve_as(owner)
        this = fair_steps.this_turn()
        assert this is not None
        this.starting = starting
    for _ in range(steps):
        log.append(owner or "none")
        await asyncio.sleep(0)


@pytest.fixture
def unhurried(monkeypatch: pytest.MonkeyPatch) -> None:
    """Quiet and waits measured in tenths of a second: on a busy machine the process can be paused for longer than
    the app's 5 ms between two steps, and the lead would look quiet (waiting on I/O) when it is not."""
    monkeypatch.setattr(fair_steps, "QUIET_SECONDS", 0.1)
    monkeypatch.setattr(fair_steps, "MAX_WAIT_SECONDS", 0.5)


def turn_task(owner: str, steps: int, log: list[str]) -> asyncio.Task[None]:
    return asyncio.create_task(turn(owner, steps, log))


def between_first_and_last(log: list[str], who: str, other: str) -> int:
    """How many of `other`'s steps ran while `who`'s turn ran."""
    first, last = log.index(who), len(log) - 1 - log[::-1].index(who)
    return log[first:last].count(other)


def test_a_lighter_identitys_turn_runs_while_the_heavier_ones_wait(run, unhurried):
    async def main() -> list[str]:
        fair_steps.install(LOADS.__getitem__)
        log: list[str] = []
        heavy = [asyncio.create_task(turn("heavy", 50, log)) for _ in range(2)]
        await asyncio.sleep(0)
        await turn_task("light", 20, log)
        await asyncio.gather(*heavy)
        return log

    log = run(main())
    assert log.count("heavy") == 100 and log.count("light") == 20, "every step ran"
    # Without fair steps the loop runs each ready step in turn: two heavy steps for each light one (40).
    assert between_first_and_last(log, "light", "heavy") <= 2, log


def test_a_flood_weighs_from_its_first_turns(run, unhurried):
    async def main() -> list[str]:
        shares = Shares()  # the loads fair shares install (rate_limits.share_the_loop), on their own clock
        fair_steps.install(shares.load_of)
        log: list[str] = []
        for _ in range(2):
            shares.claim("heavy", 0, 0, time.monotonic())
        heavy = [asyncio.create_task(turn("heavy", 50, log)) for _ in range(2)]
        await asyncio.sleep(0)
        shares.claim("light", 0, 0, time.monotonic())
        await turn_task("light", 20, log)
        await asyncio.gather(*heavy)
        return log

    log = run(main())
    # Had a load risen over a second, both would weigh next to nothing here, and share the loop (40 heavy steps).
    assert between_first_and_last(log, "light", "heavy") <= 2, log


def test_identities_about_as_loaded_share_the_loop_step_for_step(run):
    async def main() -> list[str]:
        fair_steps.install({"ada": 1.0, "bob": 1.2}.__getitem__)
        log: list[str] = []
        await asyncio.gather(turn_task("ada", 20, log), turn_task("bob", 20, log))
        return log

    log = run(main())
    assert between_first_and_last(log, "ada", "bob") >= 15, log


def test_steps_of_no_turn_and_of_a_starting_turn_never_wait(run):
    async def main() -> list[str]:
        fair_steps.install(LOADS.__getitem__)
        log: list[str] = []
        others = [
            asyncio.create_task(turn(None, 30, log)),
            asyncio.create_task(turn("heavy", 30, log, starting=True)),
        ]
        await asyncio.sleep(0)
        await turn_task("light", 20, log)
        await asyncio.gather(*others)
        return log

    log = run(main())
    assert between_first_and_last(log, "light", "none") >= 15, log
    assert between_first_and_last(log, "light", "heavy") >= 15, log


def test_a_heavier_turn_waits_before_it_takes_a_place_among_the_turns_starting(run, unhurried):
    async def start(log: list[str]) -> None:
        fair_steps.serve_as("heavy")
        place = await turn_starts.take_place()  # once it has a place, its steps never wait
        log.append("heavy started")
        place.give_back()

    async def main() -> list[str]:
        fair_steps.install(LOADS.__getitem__)
        log: list[str] = []
        light = turn_task("light", 20, log)
        for _ in range(2):
            await asyncio.sleep(0)  # the light turn has stepped: it leads
        await asyncio.gather(asyncio.create_task(start(log)), light)
        return log

    log = run(main())
    assert log == ["light"] * 20 + ["heavy started"]


def test_a_waiting_step_runs_after_max_wait_seconds(run, monkeypatch):
    monkeypatch.setattr(fair_steps, "MAX_WAIT_SECONDS", 0.02)

    async def busy(log: list[str], stop: asyncio.Event) -> None:
        fair_steps.serve_as("light")
        while not stop.is_set():
            log.append("light")
            await asyncio.sleep(0)  # never quiet: only MAX_WAIT_SECONDS lets the heavy turn on

    async def main() -> list[str]:
        fair_steps.install(LOADS.__getitem__)
        log: list[str] = []
        stop = asyncio.Event()
        light = asyncio.create_task(busy(log, stop))
        await asyncio.sleep(0)
        heavy = asyncio.create_task(turn("heavy", 4, log))
        await asyncio.wait_for(heavy, 30)
        stop.set()
        await light
        return log

    log = run(main())
    assert log.count("heavy") == 4 and log[-1] == "light", "the heavy turn ended while the light one ran"


def test_a_waiting_task_is_cancelled_where_it_stood(run, unhurried):
    async def held(log: list[str], cancelled: list[bool]) -> None:
        try:
            await turn("heavy", 50, log)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main() -> tuple[list[str], asyncio.Task[None], list[bool]]:
        fair_steps.install(LOADS.__getitem__)
        log: list[str] = []
        cancelled: list[bool] = []
        light = asyncio.create_task(turn("light", 200, log))
        await asyncio.sleep(0)
        heavy = asyncio.create_task(held(log, cancelled))
        while log.count("light") < 20:
            await asyncio.sleep(0)
        heavy.cancel()  # it waits: the light turn is busy
        await asyncio.gather(heavy, return_exceptions=True)
        await light
        return log, heavy, cancelled

    log, heavy, cancelled = run(main())
    assert heavy.cancelled() and cancelled == [True]
    assert log.count("light") == 200 and log.count("heavy") <= 2


@pytest.fixture
def served_fairly(app_settings: AppSettings, api_mode: str, tmp_path):
    app_settings.setenv("RATE_LIMIT_CONCURRENT_TURNS", "10")  # before the app starts: fair steps on
    app_settings.setenv("MEMORY_BACKEND", "sqlite")
    app_settings.setenv("MEMORY_DATABASE_URL", fresh_database(tmp_path / "conversations.db"))
    app_settings.setenv("MEMORY_USER_HEADER", "x-test-user")
    from agent_server.app import app

    with ServerThread(app) as url:
        yield url


def test_with_fair_shares_on_the_app_serves_every_kind_of_turn_at_once(served_fairly):
    ada, bob = {"x-test-user": "ada@example.com"}, {"x-test-user": "bob@example.com"}
    answers: dict[str, str] = {}

    def streamed() -> None:
        body = {"input": "Hello", "stream": True}
        response = loopback.post(f"{served_fairly}/invocations", json=body, headers=ada, timeout=60)
        done = [e["item"] for e in sse_events(response.text) if e.get("type") == "response.output_item.done"]
        answers["streamed"] = reply_text(done)

    def answered() -> None:
        response = loopback.post(f"{served_fairly}/invocations", json={"input": "Hello"}, headers=bob, timeout=60)
        answers["answered"] = reply_text(response.json()["output"])

    def background() -> None:
        with loopback.Client(base_url=served_fairly, headers=ada, timeout=60) as client:
            run_id = client.post("/responses", json={"input": "Hello", "background": True}).json()["id"]
            replay = client.get(f"/responses/{run_id}", params={"stream": "true", "starting_after": "-1"}).text
        done = [e["item"] for e in sse_events(replay) if e.get("type") == "response.output_item.done"]
        answers["background"] = reply_text(done)

    threads = [threading.Thread(target=each) for each in (streamed, answered, background) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(answers) == ["answered", "background", "streamed"], answers
    assert all("You said: Hello" in answer for answer in answers.values()), answers
    leads = list(fair_steps.LEADS.values())
    assert any(lead.owner in ("ada@example.com", "bob@example.com") for lead in leads), "the turns' steps were led"
    assert SHARES.running.get("ada@example.com", 0) == 0 and SHARES.running.get("bob@example.com", 0) == 0
