# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""A run's writes are accepted only from its current holder (runs/store.py's fence), and DELETE /me leaves nothing
of a run that is still running. Real `start-app` processes on one SQLite database, a real MCP server whose tool
answers when the test lets it go (held_tools.py), the offline model; fencing_scenarios.py holds the scenarios,
which tests/test_runs_fencing_postgres.py in the template's repo runs on PostgreSQL too."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator

import pytest
from fencing_scenarios import BEATS, assert_deleted_run_leaves_nothing, assert_stalled_process_writes_nothing
from held_tools import CALLS, RELEASED, held_tool_server
from support import ServerThread, StartedApp, app_env


@pytest.fixture
def tools() -> Iterator[str]:
    CALLS.clear()
    RELEASED.clear()
    with ServerThread(held_tool_server()) as url:
        yield url


def count_rows(database: str, table: str, key: str) -> int:
    column = "run_id" if table == "agent_run_events" else "owner"
    with sqlite3.connect(database) as connection:
        return connection.execute(f"SELECT count(*) FROM {table} WHERE {column} = ?", (key,)).fetchone()[0]


@pytest.mark.waits
def test_a_process_stopped_past_its_hold_writes_nothing_over_the_run_another_took(tools):
    env = app_env(LLM_PROVIDER="offline", MCP_SERVERS=json.dumps([{"name": "held", "url": f"{tools}/mcp"}]))
    env |= BEATS
    with (stalled := StartedApp(env)) as stalled_url, StartedApp(env) as other_url:
        log = lambda: stalled.output  # noqa: E731
        assert_stalled_process_writes_nothing(stalled.pid, stalled_url, other_url, tools, log, "stalled")


@pytest.mark.waits
def test_delete_me_while_a_run_is_in_its_tool_leaves_nothing_of_it(tools):
    env = app_env(LLM_PROVIDER="offline", MCP_SERVERS=json.dumps([{"name": "held", "url": f"{tools}/mcp"}]))
    env |= BEATS
    database = env["MEMORY_DATABASE_URL"]
    with (app := StartedApp(env)) as url:
        counted = lambda table, key: count_rows(database, table, key)  # noqa: E731
        assert_deleted_run_leaves_nothing(url, url, tools, lambda: app.output, "deleted", counted)


@pytest.mark.waits
def test_retention_deletes_events_whose_run_is_gone():
    """Events a run wrote after its owner deleted it (before fencing, a live run went on writing) are swept."""
    env = app_env(LLM_PROVIDER="offline")
    database = env["MEMORY_DATABASE_URL"]
    with StartedApp(env) as url:
        assert url
    with sqlite3.connect(database) as connection:
        connection.execute("INSERT INTO agent_run_events (run_id, seq, data) VALUES ('resp_gone', 0, '{}')")
    assert count_rows(database, "agent_run_events", "resp_gone") == 1
    with StartedApp(env):  # retention runs at start-up, then every hour
        assert count_rows(database, "agent_run_events", "resp_gone") == 0
