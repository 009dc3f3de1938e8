# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""A run this process is running: its numbered events, kept in memory for those who follow it here and written
to the database in small batches for everyone else (and for the process that resumes it after a crash).

A finished item (and the run's first and last event) is written at once, before the stream goes on: after a
crash, no tool output the client saw is lost. Text deltas are written in batches: every FOLLOWED_FLUSH_SECONDS
while a client here follows the run, else every FLUSH_SECONDS. A follower is sent only what is written, so its
cursor stays true across a crash: the attempt that resumes the run numbers its events on from the written ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import AsyncIterator
from typing import Any

from agent_server import config, memory
from agent_server.errors import HttpError
from agent_server.memory import Unavailable
from agent_server.runs import events, store
from agent_server.runs.store import Run

logger = logging.getLogger("agent_server.runs")

FLUSH_SECONDS = 0.2  # no one follows the run here: other processes' followers poll every POLL_SECONDS anyway
FOLLOWED_FLUSH_SECONDS = 0.05  # a follower's deltas wait this long at most (plus the write): one write per batch
WRITTEN_AT_ONCE = frozenset({"response.created", "response.output_item.done", *events.TERMINAL_EVENTS.values()})
POLL_SECONDS = 0.25  # how often a client that follows a run another process runs reads its new events


class StreamTooLong(RuntimeError):
    """The run's events passed RUNS_MAX_EVENT_BYTES: it stops, failed."""


class LiveRun:
    def __init__(self, run: Run, earlier: list[str]) -> None:
        self.run = run
        self.events = list(earlier)  # every event of the run, earlier attempts' too: index == sequence_number
        self.stored = len(earlier)  # how many of them are in the database: all that followers are sent
        self.followers = 0  # clients that follow the run in this process
        self.task: asyncio.Task[None] | None = None
        self.started: asyncio.Future[HttpError | None] = asyncio.get_running_loop().create_future()
        self.ended = asyncio.Event()
        self.cancel_requested = False  # the client's cancel: the partial turn is kept
        self.handing_over = False  # the app is stopping: another process resumes the run
        self.lost = False  # no longer this process's (lose): it writes nothing more
        self.ending = False  # its last event is being written (push_last): its end is under way
        self._changed = asyncio.Event()
        self._flush_lock = asyncio.Lock()
        self._flusher: asyncio.Task[None] | None = None
        self._status_written = run.status

    async def push(self, event: dict[str, Any]) -> None:
        """Add the run's next event, encoded once with its number."""
        data = events.numbered(event, len(self.events))
        limit = config.settings().runs.max_event_bytes
        if self.run.events_bytes + len(data) > limit:
            raise StreamTooLong(f"The run's stream passed RUNS_MAX_EVENT_BYTES={limit} bytes; it was stopped.")
        self._add(data)
        if event.get("type") in WRITTEN_AT_ONCE:
            await self.flush()
        elif self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_soon())

    async def push_last(self, output: list[dict[str, Any]]) -> None:
        """The run's last event (response.completed, .failed, ...), always written: with the run's output if that
        fits in RUNS_MAX_EVENT_BYTES, else with none (the items before it in the stream hold the output, and GET's
        answer has it). Without it, the event is small: a run's bytes pass the limit by that much at most."""
        self.ending = True
        data = events.numbered(events.terminal(self.run, output), len(self.events))
        if self.run.events_bytes + len(data) > config.settings().runs.max_event_bytes:
            none = copy.copy(output)  # the same kind of list, and what it says beside its items
            none.clear()
            data = events.numbered(events.terminal(self.run, none), len(self.events))
        self._add(data)
        await self.flush()

    def _add(self, data: str) -> None:
        self.run.events_bytes += len(data)
        self.events.append(data)

    async def tool_call_started(self, item: dict[str, Any]) -> None:
        """Written at once: after a crash, a call that was running is known, and not made again unasked."""
        self.run.started_calls.append(item)
        if self.lost:
            return
        try:
            if not await memory.transact(store.started_calls(self.run), write=True):
                self.lose()  # the call is not made: the run's task is cancelled before it starts
        except Unavailable as error:
            logger.warning("runs: could not store a tool call of run %s: %s", self.run.id, error)

    def lose(self) -> None:
        """The run is no longer this process's: another process claimed it (this one's heartbeats stopped past its
        hold: a blocked loop, a lost database, a paused machine), or its owner deleted it. Its work here stops at
        once: its task is cancelled as at a hand-over, which writes no event, no status and no turn (store.holds
        refuses them anyway, and the claim took the conversation's lease)."""
        if self.lost or self.ending or self.handing_over or self.ended.is_set():
            return  # its own end, or a hand-over, is under way: what it writes is fenced all the same
        self.lost = self.handing_over = True
        logger.warning("runs: run %s is no longer this process's (another process took it, or it was deleted): "
                       "its work here stops", self.run.id)  # fmt: skip
        if self.task is not None:
            self.task.cancel()

    def close(self) -> None:
        """The run ended here (or went to another process): its followers here are told."""
        self.ended.set()
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def output(self) -> list[dict[str, Any]]:
        return events.output_items(self.events)

    async def flush(self) -> bool:
        """Write the events not yet written (and the run's status, if it changed); False if the database failed.

        A cancel of the caller (the client's cancel, the run's end stopping its flusher) does not stop a write
        under way: the write ends, and counts itself in `stored`. Stopped halfway, a write that landed was not
        counted, and the next one, from the same sequence number, was refused (UNIQUE(run_id, seq)): every later
        event of the run, its last among them, was lost."""
        return await asyncio.shield(self._write())

    async def _write(self) -> bool:
        async with self._flush_lock:
            pending, first = self.events[self.stored :], self.stored
            status = self.run.status if self.run.status != self._status_written else None
            if self.lost:
                return False
            if not pending and status is None:
                return True
            try:
                written = await memory.transact(store.append(self.run, first, pending, status), write=True)
            except Unavailable as error:  # kept in memory, and written with the next batch
                logger.warning("runs: could not store %d events of run %s: %s", len(pending), self.run.id, error)
                return False
            if not written:
                self.lose()
                return False
            self.stored = first + len(pending)
            self._status_written = status or self._status_written
            self._wake()
            return True

    async def flush_all(self) -> None:
        """The batch waiting for its time, written now: the run ends, or goes to another process."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await self.flush()

    async def _flush_soon(self) -> None:
        """Batches of deltas, until none waits (or the database fails: the next event tries again)."""
        try:
            while len(self.events) > self.stored:
                await asyncio.sleep(FOLLOWED_FLUSH_SECONDS if self.followers else FLUSH_SECONDS)
                if not await self.flush():
                    return
        finally:
            self._flusher = None

    async def follow(self, cursor: int) -> AsyncIterator[bytes]:
        """Every written event after `cursor`, then each batch as it is written, until the run ends."""
        self.followers += 1
        try:
            while True:
                changed = self._changed
                if cursor + 1 < self.stored:
                    written, cursor = self.events[cursor + 1 : self.stored], self.stored - 1
                    yield b"".join(events.framed(data) for data in written)
                    continue  # more may have been written meanwhile, the last event among them
                if self.ended.is_set():
                    break
                await changed.wait()
            if self.lost:  # it goes on where its holder writes it (or, deleted, ends)
                async for framed in follow_stored(self.run.id, self.run.owner, cursor, {}):
                    yield framed
        finally:
            self.followers -= 1


async def follow_stored(run_id: str, owner: str, cursor: int, running: dict[str, LiveRun]) -> AsyncIterator[bytes]:
    """A run that another process runs (or ran): its events from the database, polled until it ends."""
    while True:
        live = running.get(run_id)
        if live is not None:  # claimed by this process meanwhile
            async for framed in live.follow(cursor):
                yield framed
            return
        current = await memory.transact(store.get(owner, run_id))
        found = await memory.transact(store.events_after(run_id, cursor))
        for seq, data in found:
            cursor = seq
            yield events.framed(data)
        if current is None or (current.status in store.FINAL and not found):
            return
        if not found:
            await asyncio.sleep(POLL_SECONDS)


def error_event(status: int, body: dict[str, Any]) -> dict[str, Any]:
    """The stream's error event: the app's one error shape, and the status the synchronous path answers."""
    return {"type": "error", "status": status, "error": body["error"]}
