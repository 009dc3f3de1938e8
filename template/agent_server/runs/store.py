# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Background runs in the app's database (agent_server/store/): each function here is one transaction (memory/store.py's
`Store.run`), on SQLite and on PostgreSQL alike. The tables are in agent_server/store/schema.py."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from agent_server import config
from agent_server.store.schema import conversations, run_events, runs

ACTIVE = ("queued", "in_progress")
FINAL = ("completed", "failed", "cancelled", "incomplete")
MAX_SEQUENCE_NUMBER = 2**31 - 1  # agent_run_events.seq is an INTEGER: 32 bits on PostgreSQL


@dataclass
class Run:
    id: str
    owner: str
    conversation_id: str
    idempotency_key: str | None
    body_hash: str
    body: dict[str, Any]
    background: bool
    status: str = "queued"
    holder: str | None = None
    heartbeat_until: float = 0.0
    cancel_requested: bool = False
    attempts: int = 1
    events_bytes: int = 0
    trace_id: str | None = None
    error: dict[str, Any] | None = None  # {"status": the HTTP status, "body": the app's error shape}
    started_calls: list[dict[str, Any]] = field(default_factory=list)  # tool calls started, answered or not
    created_at: float = 0.0

    def row(self) -> dict[str, Any]:
        values = dict(vars(self))
        values["body"] = json.dumps(self.body)
        values["error"] = json.dumps(self.error) if self.error is not None else None
        values["started_calls"] = json.dumps(self.started_calls)
        return {**values, "updated_at": time.time()}


def _run_of(row: Any) -> Run:
    values = dict(row._mapping)
    values.pop("updated_at", None)
    values["body"] = json.loads(values["body"])
    values["error"] = json.loads(values["error"]) if values["error"] else None
    values["started_calls"] = json.loads(values["started_calls"] or "[]")
    return Run(**values)


def oldest_kept() -> float:
    """Runs that last changed (an event, a status, a heartbeat) before this are past RUNS_MAX_AGE_HOURS: gone for
    every read at once, whenever the prune deletes them (recovery.py)."""
    return time.time() - config.settings().runs.max_age_hours * 3600


def create(run: Run) -> Callable[[sa.Connection], Run]:
    """Insert `run`; with an idempotency key another request took already, the run that request made (unless that
    run is past its age: then it is gone, and the key is free)."""
    kept_since = oldest_kept()

    def transaction(connection: sa.Connection) -> Run:
        for _ in range(2):  # once more after deleting the key's aged run
            try:
                with connection.begin_nested():  # two requests with one key at once: the second reads the first's
                    connection.execute(runs.insert().values(run.row()))
                return run
            except sa.exc.IntegrityError:
                if run.idempotency_key is None:
                    raise
            key = sa.and_(runs.c.owner == run.owner, runs.c.idempotency_key == run.idempotency_key)
            found = connection.execute(sa.select(runs).where(key)).one()
            if found.updated_at >= kept_since:
                break
            _delete(connection, [found.id])
        return _run_of(found)

    return transaction


def get(owner: str, run_id: str) -> Callable[[sa.Connection], Run | None]:
    """The owner's run, unless it is past its age."""
    kept_since = oldest_kept()

    def transaction(connection: sa.Connection) -> Run | None:
        query = sa.select(runs).where(runs.c.id == run_id, runs.c.owner == owner, runs.c.updated_at >= kept_since)
        found = connection.execute(query).first()
        return None if found is None else _run_of(found)

    return transaction


def delete(run_id: str) -> Callable[[sa.Connection], None]:
    """A run the app refused before it began (a 4xx): nothing of it is kept."""

    def transaction(connection: sa.Connection) -> None:
        _delete(connection, [run_id])

    return transaction


def holds(run: Run) -> sa.ColumnElement[bool]:
    """The fence on a run's writes: its row still names the holder and the start (`attempts`) writing. A process
    whose heartbeats stopped past its hold lost the run to the process that claimed it (which changed both), and a
    deleted run has no row: the write, checked in its own statement, is refused."""
    return sa.and_(runs.c.id == run.id, runs.c.holder == run.holder, runs.c.attempts == run.attempts)


def append(run: Run, first: int, events: Sequence[str], status: str | None) -> Callable[[sa.Connection], bool]:
    """Store events `first`, `first` + 1, ... of a run (and its status, when it changed); False, writing nothing,
    if the run is no longer this attempt's (`holds`)."""

    def transaction(connection: sa.Connection) -> bool:
        values: dict[str, Any] = {
            "updated_at": time.time(),
            "events_bytes": runs.c.events_bytes + sum(len(data) for data in events),
        }
        if status is not None:
            values["status"] = status
        # The run's row first: on PostgreSQL it stays locked until the events are in, so a claim or a delete of the
        # run waits for them (and a delete then deletes them), or goes first and this writes nothing.
        if connection.execute(runs.update().where(holds(run)).values(**values)).rowcount == 0:
            return False
        if events:
            rows = [{"run_id": run.id, "seq": first + n, "data": data} for n, data in enumerate(events)]
            connection.execute(run_events.insert(), rows)
        return True

    return transaction


def started_calls(run: Run) -> Callable[[sa.Connection], bool]:
    """The tool calls the run started: a call still running when its process died is not run again unasked. False:
    the run is no longer this attempt's."""

    def transaction(connection: sa.Connection) -> bool:
        calls = json.dumps(run.started_calls)
        return connection.execute(runs.update().where(holds(run)).values(started_calls=calls)).rowcount > 0

    return transaction


def finish(run: Run) -> Callable[[sa.Connection], None]:
    """The run's end: its final status, error and trace id; it is no longer anyone's to run. Written only by the
    run's holder (`holds`): a process that lost the run writes nothing over the end its new holder wrote."""

    def transaction(connection: sa.Connection) -> None:
        connection.execute(
            runs.update()
            .where(holds(run))
            .values(
                status=run.status,
                error=json.dumps(run.error) if run.error is not None else None,
                trace_id=run.trace_id,
                holder=None,
                updated_at=time.time(),
            )
        )

    return transaction


def events_after(run_id: str, cursor: int, limit: int = 500) -> Callable[[sa.Connection], list[tuple[int, str]]]:
    def transaction(connection: sa.Connection) -> list[tuple[int, str]]:
        query = (
            sa.select(run_events.c.seq, run_events.c.data)
            .where(run_events.c.run_id == run_id, run_events.c.seq > cursor)
            .order_by(run_events.c.seq)
            .limit(limit)
        )
        return [(seq, data) for seq, data in connection.execute(query)]

    return transaction


def heartbeat(
    holder: str, attempts: Mapping[str, int], until: float
) -> Callable[[sa.Connection], tuple[list[str], list[str]]]:
    """Keep this process's runs (their ids, each with the start it runs) its own for a while longer; returns those
    a client asked to cancel meanwhile, and those that are no longer this process's (another claimed them, or
    their owner deleted them)."""

    def transaction(connection: sa.Connection) -> tuple[list[str], list[str]]:
        mine = sa.and_(runs.c.id.in_(list(attempts)), runs.c.holder == holder)
        # A run that is running is not old, however long since its last event (a tool that runs for a day).
        connection.execute(runs.update().where(mine).values(heartbeat_until=until, updated_at=time.time()))
        found = {row.id: row for row in connection.execute(sa.select(runs.c.id, runs.c.attempts,
                                                                     runs.c.cancel_requested).where(mine))}  # fmt: skip
        lost = [run_id for run_id, start in attempts.items() if run_id not in found or found[run_id].attempts != start]
        cancelled = [run_id for run_id, row in found.items() if row.cancel_requested and run_id not in lost]
        return cancelled, lost

    return transaction


def orphans(now: float, limit: int = 20) -> Callable[[sa.Connection], list[Run]]:
    """Runs not ended whose holder stopped beating (or handed them over): each is for some process to claim."""

    def transaction(connection: sa.Connection) -> list[Run]:
        query = sa.select(runs).where(runs.c.status.in_(ACTIVE), runs.c.heartbeat_until < now).limit(limit)
        return [_run_of(row) for row in connection.execute(query)]

    return transaction


def held_by_instance(instance: str) -> Callable[[sa.Connection], list[Run]]:
    def transaction(connection: sa.Connection) -> list[Run]:
        query = sa.select(runs).where(runs.c.status.in_(ACTIVE), runs.c.holder.like(f"{instance}:%"))
        return [_run_of(row) for row in connection.execute(query)]

    return transaction


def claim(run: Run, holder: str, until: float) -> Callable[[sa.Connection], bool]:
    """Take an orphaned run, if no other process took it first; its dead holder's hold on the conversation goes."""

    def transaction(connection: sa.Connection) -> bool:
        taken = connection.execute(
            runs.update()
            .where(runs.c.id == run.id, runs.c.status.in_(ACTIVE), _same_holder(run.holder))
            .where(runs.c.heartbeat_until == run.heartbeat_until)
            .values(holder=holder, heartbeat_until=until, attempts=runs.c.attempts + 1, updated_at=time.time())
        )
        if taken.rowcount == 0:
            return False
        if run.holder is not None:
            connection.execute(
                conversations.update()
                .where(conversations.c.owner == run.owner, conversations.c.id == run.conversation_id)
                .where(conversations.c.lease.like(f"{run.holder}/%"))
                .values(lease=None, lease_until=None)
            )
        return True

    return transaction


def hand_over(holder: str, run_ids: Sequence[str]) -> Callable[[sa.Connection], None]:
    """At shutdown: runs this process will not finish are free for another to claim at once."""

    def transaction(connection: sa.Connection) -> None:
        connection.execute(
            runs.update().where(runs.c.id.in_(run_ids), runs.c.holder == holder).values(heartbeat_until=0.0)
        )

    return transaction


def request_cancel(owner: str, run_id: str) -> Callable[[sa.Connection], None]:
    def transaction(connection: sa.Connection) -> None:
        connection.execute(
            runs.update().where(runs.c.id == run_id, runs.c.owner == owner).values(cancel_requested=True)
        )

    return transaction


def delete_older_than(cutoff: float) -> Callable[[sa.Connection], int]:
    """Runs ended (or abandoned) before `cutoff`, and their events; and any events whose run is gone (a release
    before fencing let a run that its owner deleted go on writing them)."""

    def transaction(connection: sa.Connection) -> int:
        old = list(connection.scalars(sa.select(runs.c.id).where(runs.c.updated_at < cutoff)))
        for start in range(0, len(old), 500):
            _delete(connection, old[start : start + 500])
        kept = sa.select(runs.c.id).where(runs.c.id == run_events.c.run_id)
        connection.execute(run_events.delete().where(~kept.exists()))
        return len(old)

    return transaction


def _delete(connection: sa.Connection, run_ids: Sequence[str]) -> None:
    # The rows first: an append under way holds its run's row until its events are in, and they are deleted after.
    connection.execute(runs.delete().where(runs.c.id.in_(run_ids)))
    connection.execute(run_events.delete().where(run_events.c.run_id.in_(run_ids)))


def _same_holder(holder: str | None) -> sa.ColumnElement[bool]:
    return runs.c.holder.is_(None) if holder is None else runs.c.holder == holder
