# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Server-side conversation memory: a client may send only its new turn, and the app adds the rest.

The face the rest of the app uses. The package, one job a module:
- turns.py: a turn, from its start (the caller's identity, the conversation, the merge) to its finish (stored);
- merge.py: the one rule that merges what a client sends with the stored conversation;
- settings.py: the MEMORY_* settings (declared in agent_server/config.py) and the database URL;
- database.py: the process's open store: start-up, shutdown, pruning;
- store.py: the store's transactions (SQLite or PostgreSQL, through SQLAlchemy) and the turn lease;
- leases.py: leases that name their holder, renewed while their turns run, so a dead holder's are freed;
- queue.py: a turn of a busy conversation waits, and runs after the turns that came before it;
- rate_counts.py: each identity's turns counted on PostgreSQL, so RATE_LIMIT_* hold across instances;
- schema.py: the tables and their forward-only migrations;
- lakebase.py: Lakebase logins with OAuth tokens from the workspace;
- api.py: the caller's conversations over HTTP (`/conversations`).
"""

from __future__ import annotations

from agent_server.memory.database import check_database, close_memory, open_memory, store
from agent_server.memory.settings import MemorySettings, enabled, settings
from agent_server.memory.turns import (
    CONVERSATION_ID,
    LOCAL_OWNER,
    History,
    MemoryFailure,
    Turn,
    conversation_id_of,
    keeps_own_history,
    owner_of,
    start_turn,
)

__all__ = [
    "CONVERSATION_ID",
    "LOCAL_OWNER",
    "History",
    "MemoryFailure",
    "MemorySettings",
    "Turn",
    "check_database",
    "close_memory",
    "conversation_id_of",
    "enabled",
    "keeps_own_history",
    "open_memory",
    "owner_of",
    "settings",
    "start_turn",
    "store",
]
