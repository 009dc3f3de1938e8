# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""An answer that ended before it was done keeps the Responses API's own mark in the stored conversation: its
message's `status: "incomplete"`, and why, as the API's response says it (`incomplete_details`): "max_output_tokens"
for an answer the model cut at its output-token limit (model_ends.py), none for a turn the user stopped. The chat page
shows "Cut short" or "Stopped" from it when the conversation is opened again. The render drops both on the way to the
model (history/render.py makes an assistant message its role and text), in either API mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_server.history import Rendered


def marked(entry: Rendered, answer: Sequence[Mapping[str, Any]], reason: str | None) -> dict[str, Any]:
    """The stored form of an answer's item (`entry`, rendered from `answer`), with the mark if it was cut short."""
    item, source = entry.kept(), answer[entry.index]  # with its citations, if any
    if item.get("role") != "assistant" or source.get("status") != "incomplete":
        return item
    return {**item, "status": "incomplete", **({"incomplete_details": {"reason": reason}} if reason else {})}


def shown(item: dict[str, Any], stored: Mapping[str, Any]) -> dict[str, Any]:
    """The item a conversation shows for a stored one (rendered again), with the stored one's mark, if any."""
    if stored.get("status") != "incomplete" or item.get("role") != "assistant":
        return item
    return {**item, **{key: stored[key] for key in ("status", "incomplete_details") if key in stored}}
