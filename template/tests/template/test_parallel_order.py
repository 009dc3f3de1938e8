# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The order a parallel run hands the tests out in (conftest.ordered_for_workers): the same tests, with those
marked `waits` first in each test process's share, and those that share a module's server in one share. And what
the run's processes keep of what they compile."""

from __future__ import annotations

import os
import sys
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import ordered_for_workers


class Item:
    """What ordered_for_workers reads of a pytest.Item."""

    def __init__(self, number: int, waits: bool) -> None:
        self.number, self.waits = number, waits

    def get_closest_marker(self, name: str) -> object | None:
        return "marked" if name == "waits" and self.waits else None


class SharingItem(Item):
    """A test of `module` that waits and uses `fixtures`, each of the scope named."""

    def __init__(self, number: int, module: str, fixtures: dict[str, str]) -> None:
        super().__init__(number, waits=True)
        self.nodeid = f"{module}::test_{number}"
        defs = {name: [SimpleNamespace(scope=scope)] for name, scope in fixtures.items()}
        self._fixtureinfo = SimpleNamespace(name2fixturedefs=defs)


def first_shares(items: list[Any], workers: int) -> list[list[Any]]:
    """The shares pytest-xdist's worksteal hands out first (xdist 3.8, scheduler/worksteal.py, check_schedule):
    the tests in order, what is left split evenly among the processes left."""
    shares, left = [], list(items)
    for share in range(workers):
        size = len(left) // (workers - share)
        shares.append(left[:size])
        left = left[size:]
    return shares


@pytest.mark.parametrize("workers", [2, 3, 5])
@pytest.mark.parametrize("waiting", [1, 7, 40], ids=lambda count: f"{count}-waiting")
def test_each_share_starts_with_its_waiting_tests_and_no_test_is_lost(workers, waiting):
    # The waiting tests come last, as test_start_app.py and test_workers.py do.
    items = [Item(number, waits=number >= 100 - waiting) for number in range(100)]
    ordered = ordered_for_workers(items, workers)  # type: ignore[arg-type]
    assert Counter(id(item) for item in ordered) == Counter(id(item) for item in items), "each test once"
    shares = first_shares(ordered, workers)
    marked = [item for item in items if item.waits]
    for share, tests in enumerate(shares):
        own = marked[share::workers][: len(tests)]
        assert tests[: len(own)] == own, f"share {share} starts with its waiting tests"
    in_order = [item.number for item in ordered if not item.waits]
    assert in_order == sorted(in_order), "the other tests keep their order"


def test_no_test_is_lost_when_more_wait_than_a_share_holds():
    items = [Item(number, waits=True) for number in range(100)]  # shares of 33, 33 and 34; the first gets 34
    ordered = ordered_for_workers(items, 3)  # type: ignore[arg-type]
    assert sorted(item.number for item in ordered) == list(range(100))


def test_one_process_runs_the_tests_as_collected():
    items = [Item(number, waits=number % 3 == 0) for number in range(10)]
    assert ordered_for_workers(items, 1) == items  # type: ignore[arg-type]


def test_the_waiting_tests_of_a_module_that_share_its_server_go_to_one_share():
    """test_workers.py's two-worker app: its three tests in one share, started once; the others dealt out."""
    shared = [SharingItem(number, "test_workers.py", {"two_workers": "module", "app_settings": "function"})
              for number in (10, 11, 12)]  # fmt: skip
    alone = [SharingItem(number, "test_workers.py", {"app_settings": "function"}) for number in (13, 14)]
    other = [SharingItem(number, "test_other.py", {"two_workers": "module"}) for number in (20, 21)]
    items = [Item(number, waits=False) for number in range(10)] + shared + alone + other
    shares = first_shares(ordered_for_workers(items, 3), 3)  # type: ignore[arg-type]
    assert shares[0][:3] == shared, "together, at the start of one share"
    assert [share[0] for share in shares[1:]] == alone, "a test that shares nothing, to the share with fewest"
    assert shares[1][:3] == [alone[0], *other], "another module's server: a group of its own, to the share with fewest"
    assert Counter(id(item) for share in shares for item in share) == Counter(id(item) for item in items)


def test_the_runs_processes_keep_the_bytecode_they_compile():
    """Under PYTHONDONTWRITEBYTECODE each of the run's processes compiled the app and rewrote the tests again
    (conftest.py): this one keeps them, and so do the processes it starts."""
    assert sys.dont_write_bytecode is False
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ
