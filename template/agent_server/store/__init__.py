# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The app's database, which conversation memory (agent_server/memory/) and background runs (agent_server/runs/)
both keep their tables in. One job a module:
- settings.py: the MEMORY_* settings (declared in agent_server/config/) and the database URL;
- engines.py: how the app connects to SQLite and to PostgreSQL;
- lakebase.py: Lakebase logins with OAuth tokens from the workspace;
- schema.py: every table and the forward-only migrations, numbered by schema version;
- search_schema.py, share_schema.py: the migrations of conversation search (10) and share links (11).
"""

from __future__ import annotations

from agent_server.store import engines, lakebase, schema, search_schema, settings, share_schema

# Until the next release, also importable as agent_server.memory.<name> (memory/__init__.py).
MOVED_FROM_MEMORY = ("engines", "lakebase", "schema", "search_schema", "settings", "share_schema")

__all__ = ["MOVED_FROM_MEMORY", "engines", "lakebase", "schema", "search_schema", "settings", "share_schema"]
