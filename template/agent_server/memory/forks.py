# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Where a conversation forks: the items at which its branches part ways, so that a client can offer each way (the
chat page's "‹ 2/3 ›" on a message). Stdlib only.

A conversation's branches are its own items (None) and each earlier branch (1, 2, ...: branches.py), each a whole
conversation as it stood. Items are compared as GET /conversations/{id} shows them, with their ids and traces, so
that two answers to one message are two ways even when their words are the same. A branch that another holds whole
(it is the start of a newer one, or the same) is not a way of its own. At each item of the branch shown, the ways
that share everything before it and go on are grouped by that item: two groups or more make a fork,
{"index": the item's place in `items`, "branches": one branch to show for each way, oldest way first (each way's
newest branch; the shown branch for its own way), "at": the shown way's place among them}.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Branch = int | None  # None: the conversation's own items, the newest branch


def _age(branch: Branch) -> float:
    return float("inf") if branch is None else float(branch)


def forks(paths: Mapping[Branch, Sequence[str]], shown: Branch) -> list[dict[str, Any]]:
    """The forks along branch `shown`, of `paths` (each branch's items, as comparable keys)."""
    kept: list[Branch] = [shown]
    for branch in sorted((b for b in paths if b != shown), key=_age, reverse=True):  # newest first
        mine = paths[branch]
        if not any(len(paths[other]) >= len(mine) and paths[other][: len(mine)] == mine for other in kept):
            kept.append(branch)
    found = []
    alive = [branch for branch in kept if branch != shown]
    for index, key in enumerate(paths[shown]):
        ways: dict[str, list[Branch]] = {key: [shown]}
        for branch in alive:
            if len(paths[branch]) > index:
                ways.setdefault(paths[branch][index], []).append(branch)
        if len(ways) > 1:
            order = sorted(ways, key=lambda way: min(_age(b) for b in ways[way]))
            chosen = [shown if way == key else max(ways[way], key=_age) for way in order]
            found.append({"index": index, "branches": chosen, "at": order.index(key)})
        alive = [branch for branch in ways[key] if branch != shown]
    return found
