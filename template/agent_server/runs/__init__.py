# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Agent runs that outlive their request: background mode, resumable streams, idempotent retries, recovery.

The face the rest of the app uses. The package, one job a module:
- requests.py: the requests that become runs (`background`, `Idempotency-Key`), handed over by routes.py;
- routes.py: GET /responses/{id} (and its stream from a cursor), POST /responses/{id}/cancel;
- execute.py: a run's attempt: its turn (turn/), served on a task of its own;
- live.py: a running run's numbered events, in memory for its followers and written to the database in batches;
- events.py: the stream's first and last events and the response object, in the Responses API's names;
- recovery.py: heartbeats, claiming a dead process's runs, shutdown's hand-over, retention;
- store.py: the runs' transactions, in the app's database (tables: agent_server/store/schema.py).
"""

from __future__ import annotations

from agent_server.runs.recovery import close_runs, open_runs

__all__ = ["close_runs", "open_runs"]
