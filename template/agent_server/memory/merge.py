# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""How a request's history meets a stored conversation: one rule, no guessing. Stdlib only.

Both sides are rendered items (history.render_each): what is stored, and what the client sent.
A client may send only its new turn, the whole conversation again, a window of it (a client that trims its
history to its last items), or a conversation that differs from the stored one (it edited or regenerated a turn).
No rule deletes a stored item: what a history that differs would replace is kept as an earlier branch of the
conversation (branches.py), which GET /conversations/{id}?branch=N returns. The rule, in order:

0. the client says that what it sent is the whole conversation (`custom_inputs.replace_history`:
   true, as the chat page's Edit and Regenerate do) (`replaced`): the model sees what was sent, and it
   becomes the stored conversation; the stored items from the first one that differs on are set aside as an
   earlier branch. Without the flag, an edited first message, which holds no item of the model's, would be
   taken for a new turn. (What was sent that starts with the whole stored conversation `extends` it.)
1. nothing is stored yet (`new conversation`): the model sees what was sent;
2. what was sent is the stored conversation and then more items (`extends`): the model sees
   the stored items and the new suffix;
3. what was sent starts with the stored conversation's last items, one of them the model's, and then may
   have more (`window`: a client that trims its history, or refers to the last answer by id): the model sees
   what was sent, the client's choice of context, and the new items are added after the stored ones, which
   all stay;
4. what was sent holds only items a client makes: messages from the user, system or developer,
   tool outputs and approvals (`new turn`): the model sees the stored items, then what was sent;
5. anything else (`diverged`): what was sent holds the model's own items but does not continue the
   stored conversation. The model sees what was sent. If it starts with a run of stored items (one of them the
   model's) that stops short of the stored conversation's end, it continues the conversation as it was up to
   that run's end: the stored items up to there stay, and those after it are set aside as an earlier branch.
   Otherwise the whole stored conversation is set aside, and what was sent becomes the conversation.

A background run that is resumed after a crash, or stopped by its client, does not guess: what its earlier
attempts finished (tool calls and their outputs), or what it produced before it stopped, continues the run's own
turn. The run's request is merged by the rule above, and those items follow it (`Merge.continued`), whatever
their shape: an interrupted turn is appended after the turns before it, never in their place.

After the turn, the stored conversation is what it kept (all of it, or the items before the branch point), then
what the turn adds, then the answer. So the model sees each item once, nothing the client sent is dropped, and
nothing stored is lost: what a turn replaces stays as an earlier branch. Items compare as rendered, with tool
arguments as canonical JSON, so a client that re-serialises arguments or drops item ids still
extends its conversation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent_server.history import Rendered
from agent_server.history.approvals import canonical_arguments

MergeKind = Literal["replaced", "new conversation", "extends", "window", "new turn", "diverged"]
CLIENT_ROLES = frozenset({"user", "system", "developer"})


@dataclass(frozen=True)
class Merge:
    kind: MergeKind
    history: list[Rendered]  # what the model sees, before tool calls are paired with outputs
    new: list[Rendered]  # what this turn adds to the stored conversation (the answer comes on top)

    continued: int = 0  # how many items at the end of `history` and `new` continue a run's turn (Merge.continuing)
    kept: int = 0  # replaced, diverged: how many stored items stay, at the start (the rest: an earlier branch)

    def continuing(self, items: Sequence[Rendered]) -> Merge:
        """This merge, then `items` that continue its turn: a run's finished or stopped items, never merged."""
        added = list(items)
        return Merge(self.kind, [*self.history, *added], [*self.new, *added], self.continued + len(added), self.kept)

    @property
    def replaces(self) -> bool:
        """Do stored items after the first `kept` give way to `new` (and the answer), set aside as a branch?"""
        return self.kind in ("replaced", "diverged")


def merge(stored: Sequence[Rendered], sent: Sequence[Rendered], replace: bool = False) -> Merge:
    """The history for this turn, by the rule in this module's docstring (`replace`: rule 0)."""
    if not stored:
        return Merge("new conversation", list(sent), list(sent))
    if len(sent) >= len(stored) and all(map(same_item, stored, sent)):
        return Merge("extends", [*stored, *sent[len(stored) :]], list(sent[len(stored) :]))
    if not replace and all(made_by_client(entry.item) for entry in sent):  # no window: it holds none of the model's
        return Merge("new turn", [*stored, *sent], list(sent))
    stored_keys, sent_keys = [comparable(e.item) for e in stored], [comparable(e.item) for e in sent]
    if replace:
        pairs = zip(stored_keys, sent_keys, strict=False)
        same = next((n for n, (kept, given) in enumerate(pairs) if kept != given), min(len(sent), len(stored)))
        return Merge("replaced", list(sent), list(sent[same:]), kept=same)
    start, length = _run_of_stored(stored, stored_keys, sent, sent_keys)
    if length and start + length == len(stored):
        return Merge("window", list(sent), list(sent[length:]))
    return Merge("diverged", list(sent), list(sent[length:]), kept=start + length)


def _run_of_stored(
    stored: Sequence[Rendered], stored_keys: list[str], sent: Sequence[Rendered], sent_keys: list[str]
) -> tuple[int, int]:
    """Where what was sent starts in the stored conversation: (start, length) of the longest run of stored items
    that begins it and holds an item of the model's, one that reaches the stored end first; (0, 0) if none does."""
    best = (0, 0)
    for start in (n for n, key in enumerate(stored_keys) if sent_keys and key == sent_keys[0]):
        length = 0
        while start + length < len(stored) and length < len(sent) and stored_keys[start + length] == sent_keys[length]:
            length += 1
        if not any(not made_by_client(entry.item) for entry in sent[:length]):
            continue
        reaches_end, best_reaches_end = start + length == len(stored), best[1] and sum(best) == len(stored)
        if (reaches_end, length) > (best_reaches_end, best[1]):
            best = (start, length)
    return best


def same_item(a: Rendered, b: Rendered) -> bool:
    return comparable(a.item) == comparable(b.item)


def comparable(item: Mapping[str, Any]) -> str:
    """The item as canonical JSON; a call's arguments too, however the client serialised them."""
    if item.get("type") == "function_call":
        item = {**item, "arguments": canonical_arguments(item.get("arguments"))}
    return json.dumps(item, sort_keys=True, separators=(",", ":"))


def made_by_client(item: Mapping[str, Any]) -> bool:
    """An item a client makes itself: a message that is not the model's, a tool's output, an approval."""
    return item.get("role") in CLIENT_ROLES or item.get("type") == "function_call_output"
