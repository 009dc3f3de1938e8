# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Fair shares: each identity's turns, at a rate (RATE_LIMIT_TURNS_PER_MINUTE) and at once
(RATE_LIMIT_CONCURRENT_TURNS); a turn over either gets a 429 with Retry-After. Both are off (0) unless set.

A turn is a POST to /invocations or /responses while it runs: a request, or a background run's attempt (each
takes its share with `turn_share`, routes.py and runs/execute.py: a run counts once however often it is read, and
a retry that a kept run answers counts nothing). The identity is conversation memory's (identity.owner_of): the user
Databricks Apps forwards, or MEMORY_USER_HEADER's. A turn whose identity cannot be read (no header, the header twice,
one too long) gets the 401 or 400 memory gives it, with memory off too: it would be counted against no one.

With either limit set, an identity's turns also share the event loop fairly (fair_steps.py): while the turn of an
identity with fewer turns running is busy, the steps of those with more wait.

With memory on PostgreSQL, the counts are the store's (memory/rate_counts.py), so the limits hold across every
worker and instance on the database: a turn with a limit set pays a transaction for it (one more statement as it
ends, with RATE_LIMIT_CONCURRENT_TURNS), and one with none pays nothing. With SQLite or no store they are kept per
process, in memory: with W worker processes (or instances) an identity may have up to W times the numbers.
The fair shares of the event loop are each process's own either way.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from agent_server import config, identity
from agent_server.errors import HttpError
from agent_server.memory import Unavailable, rate_counts
from agent_server.scheduling import fair_steps

logger = logging.getLogger("agent_server.rate_limits")

MAX_IDENTITIES = 10_000  # buckets and loads kept, each: the least recently used go first (a full bucket is a new one)
LOAD_SECONDS = 1.0  # how long an identity's load (its turns running) takes to fall as they end, about


@dataclass
class Bucket:
    tokens: float
    at: float


@dataclass
class Load:
    held: float  # turns running, or falling toward them over about LOAD_SECONDS, as of `at`
    at: float


class Shares:
    """Each identity's token bucket (its turns a minute), its turns running now, and its load (those turns, held
    for about a second as they end; fair_steps.py reads it), in this process."""

    def __init__(self) -> None:
        self.buckets: OrderedDict[str, Bucket] = OrderedDict()
        self.running: dict[str, int] = {}
        self.loads: OrderedDict[str, Load] = OrderedDict()

    def claim(self, owner: str, per_minute: int, at_once: int, now: float) -> tuple[str, int] | None:
        """Take a turn for `owner`; or (why not, seconds until it may try again)."""
        if at_once and self.running.get(owner, 0) >= at_once:
            return f"at most {at_once} turns at once (RATE_LIMIT_CONCURRENT_TURNS)", 1
        if per_minute:
            bucket = self.buckets.pop(owner, None) or Bucket(float(per_minute), now)
            bucket.tokens = min(per_minute, bucket.tokens + (now - bucket.at) * per_minute / 60)
            bucket.at = now
            self.buckets[owner] = bucket  # the most recently used, last
            while len(self.buckets) > MAX_IDENTITIES:
                self.buckets.popitem(last=False)
            if bucket.tokens < 1:
                wait = math.ceil((1 - bucket.tokens) * 60 / per_minute)
                return f"at most {per_minute} turns a minute (RATE_LIMIT_TURNS_PER_MINUTE)", wait
            bucket.tokens -= 1
        self._count(owner, +1, now)
        return None

    def release(self, owner: str, now: float | None = None) -> None:
        self._count(owner, -1, time.monotonic() if now is None else now)

    def load_of(self, owner: str, now: float | None = None) -> float:
        load = self.loads.get(owner)
        return 0.0 if load is None else self._held(owner, load, time.monotonic() if now is None else now)

    def _held(self, owner: str, load: Load, now: float) -> float:
        """Up at once to the turns running now; down toward them exponentially. So a flood weighs from its first
        turns (a load that rose over a second let it go first for that second), and a client's gap between turns
        does not make it lighter."""
        turns = self.running.get(owner, 0)
        if load.held <= turns:
            return float(turns)
        return turns + (load.held - turns) * math.exp(min(0.0, load.at - now) / LOAD_SECONDS)

    def _count(self, owner: str, change: int, now: float) -> None:
        load = self.loads.pop(owner, None) or Load(0.0, now)
        load.held, load.at = self._held(owner, load, now), now
        self.loads[owner] = load  # the most recently changed, last
        while len(self.loads) > MAX_IDENTITIES:
            self.loads.popitem(last=False)
        left = self.running.get(owner, 0) + change
        if left > 0:
            self.running[owner] = left
        else:
            self.running.pop(owner, None)


SHARES = Shares()


def share_the_loop() -> None:
    """With either limit set, the steps of heavier identities' turns wait (fair_steps.py). Once the loop runs."""
    limits = config.settings().limits
    if limits.turns_per_minute or limits.turns_at_once:
        fair_steps.install(SHARES.load_of)


class RateLimited(HttpError, status=429):
    """A turn over its identity's share (the module docstring), with how long to wait."""

    def __init__(self, message: str, wait: int) -> None:
        super().__init__(message)
        self.headers = {"Retry-After": str(wait)}


@contextlib.asynccontextmanager
async def turn_share(headers: Mapping[str, str]) -> AsyncIterator[None]:
    """A turn's share of its identity's limits, held while it runs: RateLimited if it is over either, the 401 or 400
    of an identity that cannot be read (uncounted, it would go past the limits). Nothing with neither limit set."""
    limits = config.settings().limits
    if not (limits.turns_per_minute or limits.turns_at_once):
        yield
        return
    try:
        owner = identity.owner_of(headers)
    except HttpError as error:
        error.args = (f"{error} Each user's turns are limited (RATE_LIMIT_*), so a turn must name its user.",)
        raise
    refused, counted = await _claim(owner, limits.turns_per_minute, limits.turns_at_once)
    if refused is not None:
        why, wait = refused
        raise RateLimited(f"Too many turns: this app gives each user {why}. Try again in {wait} s.", wait)
    fair_steps.serve_as(owner)
    try:
        yield
    finally:
        SHARES.release(owner)
        if counted is not None:
            await rate_counts.release(counted)


async def _claim(owner: str, per_minute: int, at_once: int) -> tuple[tuple[str, int] | None, str | None]:
    """(why not, None), or (None, the store's row of the turn, if it keeps one): the store's counts with memory on
    PostgreSQL, else this process's. Either way the turn counts in this process's loads (fair_steps.py)."""
    if rate_counts.shared():
        try:
            refused, counted = await rate_counts.claim(owner, per_minute, at_once)
        except Unavailable as error:  # counted here: the turn itself will say what the store does
            logger.warning("rate limits: counted in this process, the store failed: %s", error)
        else:
            if refused is None:
                SHARES.claim(owner, 0, 0, time.monotonic())
            return refused, counted
    return SHARES.claim(owner, per_minute, at_once, time.monotonic()), None
