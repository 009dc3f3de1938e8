"""Fencing on PostgreSQL, across two `start-app` processes: the app's own scenarios (tests/template/
fencing_scenarios.py in the render), with PostgreSQL from Debian's package (tests/postgres.py) and the held tool's
MCP server as a process of its own.

- The process running a background run is stopped (SIGSTOP) in the run's tool, past its hold; the other claims the
  run and completes it; let go (SIGCONT), the stopped one writes nothing over it.
- DELETE /me, sent to the other process, while the run is in its tool: nothing of the run is left, and its
  routes are 404 at once on both.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from postgres import PostgresServer
from renders import uv
from servers import PortTaken, ServerProcess, clean_env, free_ports

pytestmark = pytest.mark.xdist_group("postgres")


@pytest.fixture(scope="module")
def app(renders) -> Path:
    app = renders["defaults"]
    uv("sync", "--locked", "--dev", "--no-config", cwd=app)
    sys.path.insert(0, str(app / "tests" / "template"))  # the scenarios, as the app ships them
    return app


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture
def cluster(app, postgres, tmp_path) -> Iterator[tuple[ServerProcess, ServerProcess, str]]:
    """Two apps on the database, and the held tool's server (a process: it runs in the app's environment). A port
    another process took meanwhile (app_servers.PortTaken) is given up, with the others, for three new ones."""
    for attempt in range(3):
        started = contextlib.ExitStack()
        try:
            a, b, tools = _started(app, postgres, tmp_path, started)
        except PortTaken:
            started.close()
            if attempt == 2:
                raise
            continue
        with started:
            yield a, b, tools
        return


def _started(app: Path, postgres: PostgresServer, folder: Path, stack: contextlib.ExitStack) -> tuple[Any, Any, str]:
    from fencing_scenarios import BEATS

    tools_port, *app_ports = free_ports(3)
    serve = "import sys; sys.path.insert(0, 'tests/template'); import held_tools; "
    serve += f"held_tools.serve_held_tools({tools_port})"
    tools = f"http://127.0.0.1:{tools_port}"
    shared = {
        "LLM_PROVIDER": "offline", "MEMORY_BACKEND": "postgres", "MEMORY_DATABASE_URL": postgres.url,
        "MCP_SERVERS": json.dumps([{"name": "held", "url": f"{tools}/mcp"}]), **BEATS,
    }  # fmt: skip
    python = str(app / ".venv" / "bin" / "python")
    stack.enter_context(ServerProcess([python, "-c", serve], clean_env(), f"{tools}/calls", cwd=app))
    apps = []
    for name, port in zip("ab", app_ports, strict=True):
        args = [str(app / ".venv" / "bin" / "start-app"), "--port", str(port)]
        ready = f"http://127.0.0.1:{port}/health"
        log = folder / f"{name}-{port}.log"
        apps.append(stack.enter_context(ServerProcess(args, clean_env(**shared), ready, cwd=app, log=log, timeout=300)))
    return apps[0], apps[1], tools


def test_a_process_stopped_past_its_hold_writes_nothing_over_the_run_the_other_took(cluster):
    from fencing_scenarios import assert_stalled_process_writes_nothing

    a, b, tools = cluster
    conversation = f"stalled-{time.monotonic_ns()}"
    assert_stalled_process_writes_nothing(a.pid, a.url, b.url, tools, lambda: a.output, conversation)


def test_delete_me_on_the_other_process_leaves_nothing_of_a_running_run(cluster, postgres):
    from fencing_scenarios import assert_deleted_run_leaves_nothing

    a, b, tools = cluster

    def count_rows(table: str, key: str) -> int:
        column = "run_id" if table == "agent_run_events" else "owner"
        return int(postgres.psql(f"SELECT count(*) FROM {table} WHERE {column} = '{key}'"))

    conversation = f"deleted-{time.monotonic_ns()}"
    assert_deleted_run_leaves_nothing(a.url, b.url, tools, lambda: a.output, conversation, count_rows)
