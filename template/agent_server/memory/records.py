# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""What the store answers with and raises (store.py, turn_transactions.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_server.errors import Unavailable
from agent_server.store.schema import ITEM_FORMAT

__all__ = ["Busy", "StoredItem", "Unavailable"]  # Unavailable: the app's one type for a store that cannot answer


class Busy(RuntimeError):
    """Another turn of this conversation is running (a 409); or, `deleted`, it was deleted while a turn ran."""

    def __init__(self, conversation_id: str, deleted: bool = False) -> None:
        super().__init__(conversation_id)
        self.deleted = deleted


@dataclass(frozen=True)
class StoredItem:
    item: dict[str, Any]
    item_id: str | None
    format: int = ITEM_FORMAT
    trace_id: str | None = None  # an answer's: the trace of the turn that made it
    model: str | None = None  # an answer's, with LLM_MODELS: the model that made it (conversation_models.py)


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    updated_at: float
