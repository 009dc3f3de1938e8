# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Turn leases that know when their holder is gone.

A turn holds its conversation with a lease (store.py) that names its holder, this process on this instance
(holder()), and is good for three renewals' time: this process renews the leases of its running turns every
MEMORY_LEASE_RENEW_SECONDS (10 s), so a lease whose holder died (kill -9, an OOM, a lost machine) is free
within 30 s, on SQLite and across instances on PostgreSQL. A process that starts frees at once the leases
of its own dead predecessors: holders on this instance whose process no longer runs. MEMORY_TURN_LEASE_SECONDS
(900 s) bounds a live turn: its lease is not renewed past it, so another turn may take the conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from agent_server.store.schema import conversations

if TYPE_CHECKING:
    from agent_server.memory.store import Store

logger = logging.getLogger("agent_server.memory")

RENEWALS_PER_LEASE = 3  # a lease outlives two missed renewals (a busy database, a slow event loop)


def _instance() -> str:
    """This machine (its boot id, which a container shares with its host) and host name: where a pid means one
    process."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:8]
    except OSError:
        boot = "noboot"
    return f"{boot}.{socket.gethostname()[:16]}"


INSTANCE = _instance()


def holder() -> str:
    """This process on this instance: `instance:pid`. Read as it is asked for, not once at import: a process forked
    from one that imported the app (gunicorn --preload, a fork server) is another holder."""
    return f"{INSTANCE}:{os.getpid()}"


def new_lease() -> str:
    """A lease that names its holder: `instance:pid/random`, at most 64 characters (the column's width)."""
    return f"{holder()}/{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class Held:
    owner: str
    conversation_id: str
    taken_at: float


class Leases:
    """The leases this process holds, renewed while their turns run."""

    def __init__(self, renew_every: float, turn_limit: float) -> None:
        self.renew_every, self.turn_limit = renew_every, turn_limit
        self.held: dict[str, Held] = {}
        self._renewing: asyncio.Task[None] | None = None

    @property
    def hold_seconds(self) -> float:
        """How long a lease is good for without a renewal."""
        return self.renew_every * RENEWALS_PER_LEASE

    def hold(self, lease: str, owner: str, conversation_id: str) -> None:
        self.held[lease] = Held(owner, conversation_id, time.time())

    def let_go(self, lease: str) -> None:
        self.held.pop(lease, None)

    def start(self, store: Store) -> None:
        self._renewing = asyncio.get_running_loop().create_task(self._keep_renewed(store), name="memory-leases")

    async def stop(self) -> None:
        if self._renewing is not None:
            self._renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewing

    def to_renew(self, now: float) -> list[str]:
        """The leases of running turns younger than MEMORY_TURN_LEASE_SECONDS."""
        return [lease for lease, held in self.held.items() if now - held.taken_at < self.turn_limit]

    async def _keep_renewed(self, store: Store) -> None:
        while True:
            await asyncio.sleep(self.renew_every)
            now = time.time()
            if leases := self.to_renew(now):
                try:
                    await store.run(_renewing(leases, now + self.hold_seconds), write=True)
                except Exception as error:  # renewed next time, or the lease runs out: the turn's finish says so
                    logger.warning("memory: could not renew %d turn leases: %s", len(leases), error)


def _renewing(leases: list[str], until: float) -> Callable[[sa.Connection], None]:
    def renew(connection: sa.Connection) -> None:
        connection.execute(conversations.update().where(conversations.c.lease.in_(leases)).values(lease_until=until))

    return renew


def is_dead_predecessor(lease: str) -> bool:
    """Was `lease` taken by a process of this instance that no longer runs (or by an earlier process with this
    process's id, which holds nothing yet when it frees them)?"""
    taker = lease.split("/", 1)[0]
    instance, _, pid = taker.rpartition(":")
    if instance != INSTANCE or not pid.isdigit():
        return False
    if taker == holder():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # there, but another user's
    return False


def leases_of_this_instance(connection: sa.Connection) -> list[tuple[str, str, str]]:
    query = sa.select(conversations.c.owner, conversations.c.id, conversations.c.lease).where(
        conversations.c.lease.like(f"{INSTANCE}:%")
    )
    return [(owner, conversation_id, lease) for owner, conversation_id, lease in connection.execute(query)]
