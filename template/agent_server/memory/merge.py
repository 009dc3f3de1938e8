# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""How a request's history meets a stored conversation: one rule, no guessing. Stdlib only.

Both sides are rendered items (history.render_each): what is stored, and what the client sent.
A client may send only its new turn, the whole conversation again, or a conversation that
differs from the stored one (it edited or regenerated a turn). The rule, in order:

0. the client says that what it sent is the whole conversation (`custom_inputs.replace_history`:
   true, as the chat page's Edit and Regenerate do) (`replaced`): the model sees what was sent,
   and it replaces the stored conversation. Without it, an edited first message, which holds
   no item of the model's, would be taken for a new turn;
1. nothing is stored yet (`new conversation`): the model sees what was sent;
2. what was sent is the stored conversation and then more items (`extends`): the model sees
   the stored items and the new suffix;
3. what was sent holds only items a client makes: messages from the user, system or developer,
   tool outputs and approvals (`new turn`): the model sees the stored items, then what was sent;
4. anything else (`diverged`): what was sent holds the model's own items (answers, tool calls)
   but does not continue the stored conversation. The model sees what was sent, and it replaces
   the stored conversation: the client's version of its own conversation wins.

A background run that is resumed after a crash, or stopped by its client, does not guess: what its earlier
attempts finished (tool calls and their outputs), or what it produced before it stopped, continues the run's own
turn. The run's request is merged by the rule above, and those items follow it (`Merge.continued`), whatever
their shape: an interrupted turn is appended after the turns before it, never in their place.

In every case what the model saw, then its answer, is what is stored after the turn.
So the model sees each item once, and nothing the client sent is dropped: what it sent is
either appended, or (replaced, diverged) becomes the conversation. Items compare as rendered, with tool
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

MergeKind = Literal["replaced", "new conversation", "extends", "new turn", "diverged"]
CLIENT_ROLES = frozenset({"user", "system", "developer"})


@dataclass(frozen=True)
class Merge:
    kind: MergeKind
    history: list[Rendered]  # what the model sees, before tool calls are paired with outputs
    new: list[Rendered]  # what this turn adds to the stored conversation (the answer comes on top)

    continued: int = 0  # how many items at the end of `history` and `new` continue a run's turn (Merge.continuing)

    def continuing(self, items: Sequence[Rendered]) -> Merge:
        """This merge, then `items` that continue its turn: a run's finished or stopped items, never merged."""
        added = list(items)
        return Merge(self.kind, [*self.history, *added], [*self.new, *added], self.continued + len(added))

    @property
    def replaces(self) -> bool:
        """Does the stored conversation give way to `new` (and the answer)?"""
        return self.kind in ("replaced", "diverged")


def merge(stored: Sequence[Rendered], sent: Sequence[Rendered], replace: bool = False) -> Merge:
    """The history for this turn, by the rule in this module's docstring (`replace`: rule 0)."""
    if replace and stored:
        return Merge("replaced", list(sent), list(sent))
    if not stored:
        return Merge("new conversation", list(sent), list(sent))
    if len(sent) >= len(stored) and all(map(same_item, stored, sent)):
        suffix = list(sent[len(stored) :])
        return Merge("extends", [*stored, *suffix], suffix)
    if all(made_by_client(entry.item) for entry in sent):
        return Merge("new turn", [*stored, *sent], list(sent))
    return Merge("diverged", list(sent), list(sent))


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
