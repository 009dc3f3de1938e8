"""Benchmark: what fair steps (scheduling/fair_steps.py) cost a step of a task, on uvloop as the app serves.

Run with `scripts/benchmark step-cost` (in the rendered app's environment). Ten tasks of 20,000 steps each
(`await asyncio.sleep(0)`), CPU time a step: with no task factory, with fair steps installed for tasks of no turn,
and for tasks of a turn (each of whose steps asks its Lead). Three rounds; the lowest of each.
"""

from __future__ import annotations

import asyncio
import time

import uvloop
from agent_server.scheduling import fair_steps

TASKS, STEPS = 10, 20_000


async def steps(owner: str | None) -> None:
    if owner is not None:
        fair_steps.serve_as(owner)
    for _ in range(STEPS):
        await asyncio.sleep(0)


async def cost(installed: bool, owner: str | None) -> float:
    if installed:
        fair_steps.install(lambda owner: 1.0)
    started = time.process_time()
    await asyncio.gather(*(asyncio.create_task(steps(owner)) for _ in range(TASKS)))
    return (time.process_time() - started) / (TASKS * STEPS) * 1e6


def main() -> None:
    cells = {"no task factory": (False, None), "fair steps, no turn": (True, None), "fair steps, a turn": (True, "a")}
    lowest: dict[str, float] = {}
    for _ in range(3):
        for name, (installed, owner) in cells.items():
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                each = runner.run(cost(installed, owner))
            lowest[name] = min(lowest.get(name, each), each)
    for name, micros in lowest.items():
        print(f"{name}: {micros:.2f} µs a step")


if __name__ == "__main__":
    main()
