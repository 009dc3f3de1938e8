# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Server-side conversation memory: a client may send only its new turn, and the app adds the rest.

The face the rest of the app uses. The package, one job a module:
- turns.py: a turn, from its start (the caller's identity, the conversation, the merge) to its finish (stored);
- merge.py: the one rule that merges what a client sends with the stored conversation;
- branches.py: a conversation's earlier branches, what turns that edited or left it replaced, never deleted;
- forks.py: where a conversation's branches part ways, for a client to switch between them;
- database.py: the process's open store: start-up, shutdown, pruning;
- store.py: the store's transactions (SQLite or PostgreSQL, through SQLAlchemy) and the turn lease;
- leases.py: leases that name their holder, renewed while their turns run, so a dead holder's are freed;
- queue.py: a turn of a busy conversation waits, and runs after the turns that came before it;
- rate_counts.py: each identity's turns counted on PostgreSQL, so RATE_LIMIT_* hold across instances;
- api.py: the caller's conversations over HTTP (`/conversations`);
- references.py: `item_reference` items, resolved to the stored items they name;
- conversation_models.py: the model each conversation uses, when the owner offers several (LLM_MODELS).

The database under it (its engines, tables and migrations, settings, Lakebase logins) is agent_server/store/, which
background runs share. Background runs (agent_server/runs/) reach the open store through this face: `transact` runs
their transactions.
"""

from __future__ import annotations

from agent_server.identity import LOCAL_OWNER, owner_of  # the caller's identity: agent_server/identity.py
from agent_server.memory import database, rate_counts
from agent_server.memory.conversation_models import keep_model, stored_model
from agent_server.memory.database import check_database, open_memory, store, transact
from agent_server.memory.leases import INSTANCE, holder, is_dead_predecessor
from agent_server.memory.references import has_references
from agent_server.memory.references import resolved as resolved_references
from agent_server.memory.store import Unavailable
from agent_server.memory.turns import (
    CONVERSATION_ID,
    History,
    MemoryFailure,
    Turn,
    conversation_id_of,
    holds_all,
    keeps_own_history,
    start_turn,
)
from agent_server.store.schema import conversations as conversations_table
from agent_server.store.schema import run_events as run_events_table
from agent_server.store.schema import runs as runs_table
from agent_server.store.settings import MemorySettings, enabled, memory_settings


async def close_memory() -> None:
    """Shutdown: the rate counts' renewals stop (they run on the store), then the store closes."""
    await rate_counts.stop()
    await database.close_memory()


__all__ = [
    "CONVERSATION_ID",
    "INSTANCE",
    "LOCAL_OWNER",
    "History",
    "MemoryFailure",
    "MemorySettings",
    "Turn",
    "Unavailable",
    "check_database",
    "close_memory",
    "conversation_id_of",
    "conversations_table",
    "enabled",
    "has_references",
    "holder",
    "holds_all",
    "is_dead_predecessor",
    "keep_model",
    "keeps_own_history",
    "memory_settings",
    "open_memory",
    "owner_of",
    "resolved_references",
    "run_events_table",
    "runs_table",
    "start_turn",
    "store",
    "stored_model",
    "transact",
]


def _keep_moved_modules() -> None:
    """agent_server.memory.<name> for the modules that moved to agent_server/store/ in this release, so that code
    that imported them there keeps working for one release (CHANGELOG); the same module objects, not copies."""
    import sys

    from agent_server import store

    for name in store.MOVED_FROM_MEMORY:
        moved = sys.modules.setdefault(f"{__name__}.{name}", getattr(store, name))  # `import ...memory.schema`
        globals().setdefault(name, moved)  # `agent_server.memory.schema.<name>`


_keep_moved_modules()
