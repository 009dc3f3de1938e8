# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""A request's CPU work runs in a worker thread unless it is too small to be worth the hop (offload.py)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agent_server.scheduling.offload import cpu_work


@pytest.mark.parametrize(("small", "elsewhere"), [(True, False), (False, True)])
def test_small_work_stays_on_the_loop_and_the_rest_goes_to_a_thread(small, elsewhere):
    async def where() -> tuple[int, int]:
        return threading.get_ident(), await cpu_work(small, threading.get_ident)

    loop_thread, worked_in = asyncio.run(where())
    assert (worked_in != loop_thread) is elsewhere


def test_the_work_gets_its_arguments_and_its_errors_come_back():
    async def both() -> None:
        assert await cpu_work(True, divmod, 7, 2) == await cpu_work(False, divmod, 7, 2) == (3, 1)
        for small in (True, False):
            with pytest.raises(ZeroDivisionError):
                await cpu_work(small, divmod, 1, 0)

    asyncio.run(both())
