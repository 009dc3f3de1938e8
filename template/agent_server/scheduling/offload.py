# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""CPU work of a request (parsing, checking and rendering its history) off the event loop, so one long history
never holds up the other requests; unless the work is smaller than the hop to a worker thread, which costs about
70 microseconds of CPU where checking and rendering a three-item history costs about 20."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

# A body or history at most this big is worked on in place: a few hundred microseconds of the loop at the most.
INLINE_BYTES = 4 * 1024
INLINE_ITEMS = 16

P = ParamSpec("P")
R = TypeVar("R")


async def cpu_work(small: bool, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`function(*args, **kwargs)`: here when the work is `small`, else in a worker thread."""
    if small:
        return function(*args, **kwargs)
    return await asyncio.to_thread(function, *args, **kwargs)
