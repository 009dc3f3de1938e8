# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""FairSteps: while a lighter identity's turn is busy, the steps of heavier identities' turns wait.

An event loop cannot pause a step that runs: it runs each ready step in turn, whoever's it is. So when turns are
all CPU (a model that answers at once), another identity's one turn shared the core step for step with a flood's
turns: twice as long at the median with the flood held to two turns at once (RATE_LIMIT_CONCURRENT_TURNS=2).
With fair shares on (either RATE_LIMIT_* set, app.py), each step of a turn asks `Lead` first. An identity's load
is its turns running; as they end, it falls to them over about a second (rate_limits.Shares), so a flood weighs
from its first turns, and a client's gap between its turns does not make it light. The lead is the identity
with the least load that has stepped last; a step of an identity whose load is more than HEAVIER_BY above the
lead's waits while the lead has stepped in the last QUIET_SECONDS. So the lighter turn runs as if alone, and the
heavier ones take the gaps: when the lighter one waits on I/O (a model that takes time: most of a turn), or has
ended. No step waits longer than MAX_WAIT_SECONDS, so no turn starves. Steps that belong to no turn (a 429, the
health check) and those of a turn holding a place among the turns starting (turn_starts.py: every new turn waits for
those places) never wait; a heavier identity's turn waits before it takes one.

How: the loop's task factory (`install`) wraps each task's coroutine in `Stepped`. A step that must wait yields
a future to its task, as `await future` does, and the task runs that step once the future is done. Cancelling a
waiting task cancels the future, and the task's coroutine gets the CancelledError where it stood.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import math
import time
import weakref
from collections.abc import Callable, Coroutine, Generator
from typing import Any

QUIET_SECONDS = 0.005  # a turn that has not stepped for this long waits on I/O: the others may run
MAX_WAIT_SECONDS = 0.1
HEAVIER_BY = 0.5  # turns running: identities about as loaded as the lead share the loop as before


class Turn:
    """Whose turn a task's steps are, shared by the tasks the turn starts."""

    __slots__ = ("owner", "starting")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.starting = False  # it holds a place among the turns starting (turn_starts.Place)


_turn: contextvars.ContextVar[Turn | None] = contextvars.ContextVar("agent_server.fair_steps.turn", default=None)


def serve_as(owner: str) -> None:
    """This task's steps from now on, and those of the tasks it starts, are a turn of `owner`'s."""
    _turn.set(Turn(owner))


def this_turn() -> Turn | None:
    return _turn.get()


class Lead:
    """Who goes first on one event loop: the least loaded identity that stepped last (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, load_of: Callable[[str], float]) -> None:
        self.loop = loop
        self.load_of = load_of
        self.owner: str | None = None
        self.load = 0.0
        self.at = -math.inf
        self.waiting: collections.deque[tuple[float, asyncio.Future[None]]] = collections.deque()
        self.timer: asyncio.TimerHandle | None = None

    def wait(self, owner: str) -> asyncio.Future[None] | None:
        """None: `owner`'s step runs now. Or a future to wait for first."""
        now = time.monotonic()
        load = self.load_of(owner)
        quiet = now - self.at > QUIET_SECONDS
        if owner != self.owner and not quiet and load > self.load + HEAVIER_BY:
            future = self.loop.create_future()
            self.waiting.append((now, future))
            if self.timer is None:
                self._arm(now)
            return future
        if owner == self.owner or quiet or load < self.load:
            self.owner, self.load, self.at = owner, load, now
        return None

    def _arm(self, now: float) -> None:
        when = min(self.at + QUIET_SECONDS, self.waiting[0][0] + MAX_WAIT_SECONDS)
        self.timer = self.loop.call_later(max(0.0, when - now) + 0.0005, self._release)

    def _release(self) -> None:
        self.timer = None
        now = time.monotonic()
        everyone = now - self.at > QUIET_SECONDS  # the lead went quiet: it waits on I/O, or its turn ended
        while self.waiting and (everyone or now - self.waiting[0][0] >= MAX_WAIT_SECONDS):
            future = self.waiting.popleft()[1]
            if not future.done():  # done: its task was cancelled
                future.set_result(None)
        if self.waiting:
            self._arm(now)


class Stepped(Coroutine[Any, Any, Any]):
    """A task's coroutine, each step of a turn let through by `lead` first."""

    __slots__ = ("_coroutine", "_lead", "_waited")

    def __init__(self, coroutine: Coroutine[Any, Any, Any], lead: Lead) -> None:
        self._coroutine = coroutine
        self._lead = lead
        self._waited = False

    def send(self, value: Any) -> Any:
        turn = _turn.get()
        if turn is not None and not turn.starting and not self._waited:
            future = self._lead.wait(turn.owner)
            if future is not None:
                self._waited = True  # the step after the wait runs without asking again
                future._asyncio_future_blocking = True  # what `await future` yields to its task
                return future
        self._waited = False
        return self._coroutine.send(value)

    def throw(self, *error: Any) -> Any:
        self._waited = False
        return self._coroutine.throw(*error)

    def close(self) -> None:
        self._coroutine.close()

    def __await__(self) -> Generator[Any, None, Any]:
        return self._coroutine.__await__()

    def __getattr__(self, name: str) -> Any:  # cr_frame, cr_running, ...: what tools that inspect a task read
        return getattr(self._coroutine, name)


LEADS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Lead] = weakref.WeakKeyDictionary()


def install(load_of: Callable[[str], float]) -> None:
    """From now on, each task the running event loop starts steps through its Lead."""
    loop = asyncio.get_running_loop()
    lead = LEADS[loop] = Lead(loop, load_of)

    def stepped_task(loop: asyncio.AbstractEventLoop, coroutine: Any, **options: Any) -> asyncio.Task[Any]:
        return asyncio.Task(Stepped(coroutine, lead), loop=loop, **options)

    loop.set_task_factory(stepped_task)
