# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""No run is left in progress when its process dies, and none is lost when the app stops.

- Every heartbeat (half MEMORY_LEASE_RENEW_SECONDS: 5 s) a process marks its runs as its own for three beats
  (15 s) more, and picks up its clients' cancels (made through another process).
- In the same beat it claims runs whose holder stopped beating, on any instance that shares the database: a
  run whose process died is claimed within four beats (20 s) of its last one, and at once
  by a process that starts on the same instance (its holder's process no longer runs, as for turn leases).
- Fencing: a run's writes (its events, its tool calls, its end) are accepted only from its holder and start
  (store.holds, checked in the write's own statement), and its turn only under the conversation's lease, which the
  claim takes from the old holder. A process that stalled past its hold (a blocked loop, a lost database, a paused
  machine) learns it lost the run at its next write or heartbeat, and stops the run's work there at once, writing
  nothing (live.LiveRun.lose); so does the process of a run its owner deleted (DELETE /me).
- A claimed run is resumed from its finished items (execute.py), up to MAX_ATTEMPTS starts; or fails, saying
  that the server stopped, when it calls the model as the user (LLM_ON_BEHALF_OF_USER), whose token is gone.
- On SIGTERM the app lets its runs finish for RUNS_SHUTDOWN_GRACE_SECONDS (half while uvicorn drains the
  connections, half after), then hands the rest over: another process (or this app's next start) resumes them.
- Runs ended (or abandoned) more than RUNS_MAX_AGE_HOURS ago are deleted with their events (and no read finds
  one meanwhile: store.oldest_kept); so are events whose run is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

from agent_server import config, llm, memory
from agent_server.memory import INSTANCE, Unavailable, holder, is_dead_predecessor
from agent_server.runs import execute, store
from agent_server.runs.store import Run

logger = logging.getLogger("agent_server.runs")

T = TypeVar("T")
BEATS_PER_HOLD = 3  # as for turn leases: a hold outlives two missed beats


def heartbeat_seconds() -> float:
    """Twice as often as turn leases are renewed: a dead process's run is resumed before its turn's lease is free."""
    return memory.memory_settings().lease_renew_seconds / 2


def run_hold_seconds() -> float:
    """How long a run is held by its process between heartbeats (another process resumes it after)."""
    return heartbeat_seconds() * BEATS_PER_HOLD


PRUNE_EVERY_SECONDS = 3600.0

_beating: asyncio.Task[None] | None = None


async def open_runs() -> None:
    """At start-up (with memory on): resume what this instance's dead processes left, then keep beating."""
    global _beating
    await prune()
    mine: list[Run] = await _safely(store.held_by_instance(INSTANCE), [])
    await _claim([run for run in mine if is_dead_predecessor(f"{run.holder}/")])
    _beating = asyncio.get_running_loop().create_task(_keep_beating(), name="runs-heartbeat")


async def close_runs() -> None:
    """At shutdown: the runs still going get the rest of the grace period, then go to another process."""
    global _beating
    if _beating is not None:
        _beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await _beating
        _beating = None
    live = list(execute.RUNNING.values())
    if not live:
        return
    grace = config.settings().runs.grace_seconds / 2
    waiting = [asyncio.ensure_future(run.ended.wait()) for run in live]
    await asyncio.wait(waiting, timeout=grace)  # 0: handed over at once
    for waiter in waiting:
        waiter.cancel()
    for run in execute.RUNNING.values():
        run.handing_over = True
        if run.task is not None:
            run.task.cancel()
    for run in live:
        if run.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await run.task
    if live:
        logger.info("runs: %d runs finished or handed over at shutdown", len(live))


async def _keep_beating() -> None:
    last_prune = time.time()
    while True:
        await asyncio.sleep(heartbeat_seconds())
        await beat()
        if time.time() - last_prune > PRUNE_EVERY_SECONDS:
            last_prune = time.time()
            await prune()


async def beat() -> None:
    """One heartbeat: this process's runs kept, their cancels picked up, orphans claimed."""
    now = time.time()
    if execute.RUNNING:
        starts = {run_id: live.run.attempts for run_id, live in execute.RUNNING.items()}
        beating = store.heartbeat(holder(), starts, now + run_hold_seconds())
        nothing: tuple[list[str], list[str]] = ([], [])
        cancelled, lost = await _safely(beating, nothing)
        for run_id in lost:  # another process claimed it, or it was deleted: its work here stops (live.lose)
            if (live := execute.RUNNING.get(run_id)) is not None and live.run.attempts == starts[run_id]:
                live.lose()
        for run_id in cancelled:
            live = execute.RUNNING.get(run_id)
            if live is not None and live.task is not None and not live.cancel_requested and not live.lost:
                live.cancel_requested = True
                live.task.cancel()
    await _claim(await _safely(store.orphans(now), []))


async def _claim(orphans: list[Run]) -> None:
    for run in orphans:
        if run.id in execute.RUNNING:
            continue
        if not await _safely(store.claim(run, holder(), time.time() + run_hold_seconds()), False):
            continue  # another process took it first
        earlier = [data for _seq, data in await _all_events(run.id)]
        run.attempts, run.holder = run.attempts + 1, holder()  # the run's fence, as the claim wrote it (store.holds)
        if run.attempts > execute.MAX_ATTEMPTS:
            await execute.fail_stopped(run, earlier, f"it was started {execute.MAX_ATTEMPTS} times.")
        elif llm.needs_user_token():
            await execute.fail_stopped(run, earlier, "it calls the model as the user, whose token is gone.")
        else:
            logger.info("runs: resuming run %s (start %d) after %d events", run.id, run.attempts, len(earlier))
            run.status = "in_progress"
            execute.start(run, execute.identity_headers(run.owner), earlier)


async def _all_events(run_id: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    none: list[tuple[int, str]] = []
    while batch := await _safely(store.events_after(run_id, found[-1][0] if found else -1), none):
        found.extend(batch)
    return found


async def prune() -> None:
    """Delete the runs that ended (or were abandoned) more than RUNS_MAX_AGE_HOURS ago, with their events."""
    hours = config.settings().runs.max_age_hours
    gone = await _safely(store.delete_older_than(store.oldest_kept()), 0)
    if gone:
        logger.info("runs: deleted %d runs older than %g hours", gone, hours)


async def _safely(transaction: Callable[[sa.Connection], T], fallback: T) -> T:
    """One transaction; with the database down, `fallback` (the next beat tries again)."""
    try:
        return await memory.transact(transaction, write=True)
    except Unavailable as error:
        logger.warning("runs: %s", error)
        return fallback
