# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""New turns start a few at a time, so that the streams already running go first.

The event loop runs every ready step in turn. A turn's start (checking and rendering its history, memory, the
agent and the SDK's set-up, up to its model call) is some milliseconds of CPU in a few steps. When hundreds of
turns arrive at once, all their steps queue with the deltas of the streams already open, and every delta waits
behind them: 600 streams opened at once on one worker delayed deltas by 0.7 s at p99. With at most
STARTING_AT_ONCE turns starting, a pass of the loop carries at most that many start-up steps, a delta waits
milliseconds, and the new turns start as fast as the core has room for them: a burst takes as long as before
to start, and no stream stutters for it.

A turn starts once its body is read (a slow client holds no place) and has started when its model call begins
(output_items.UniqueCallIds calls `model_called`), when it waits for its conversation (memory/queue.py calls
`waiting`), when its request ends, or after MAX_START_SECONDS, whichever is first: a start that waits on I/O (an
MCP server connecting, a tool the user approved) lets the next turn start after that long, and never blocks the
others for longer.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref

from agent_server.scheduling import fair_steps

STARTING_AT_ONCE = 2
MAX_START_SECONDS = 0.25


class Place:
    """One turn's place among those starting: given back once, however many of its ends come."""

    def __init__(self, gate: asyncio.Semaphore) -> None:
        self._gate: asyncio.Semaphore | None = gate
        self._timer = asyncio.get_running_loop().call_later(MAX_START_SECONDS, self.give_back)
        self._turn = fair_steps.this_turn()
        if self._turn is not None:
            self._turn.starting = True  # its steps never wait while it holds a place (fair_steps.py)

    def give_back(self) -> None:
        if self._gate is not None:
            self._gate.release()
            self._gate = None
            self._timer.cancel()
            if self._turn is not None:
                self._turn.starting = False


_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()
_place: contextvars.ContextVar[Place | None] = contextvars.ContextVar("agent_server.turn_start", default=None)


async def take_place() -> Place:
    """Wait for a place among the turns starting, and hold it for this request (and the tasks it starts)."""
    if fair_steps.this_turn() is not None:
        await asyncio.sleep(0)  # a step that fair_steps checks: a heavier identity's turn waits before it starts
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:  # one per event loop: a test's client may run the app on loops of its own
        gate = _gates[loop] = asyncio.Semaphore(STARTING_AT_ONCE)
    await gate.acquire()
    place = Place(gate)
    _place.set(place)
    return place


def model_called() -> None:
    """This request's turn has started: its model call begins."""
    place = _place.get()
    if place is not None:
        place.give_back()


def waiting() -> None:
    """This request's turn waits for its conversation, answering another request: the next turn starts meanwhile."""
    model_called()
