"""Conversation memory on a real PostgreSQL server (tests/postgres.py: Debian's package, on loopback).

The app's own memory tests run against it; two `start-app` processes share one conversation,
in turns and at once; a Lakebase-style login takes short-lived tokens from the fake workspace
and refreshes them mid-conversation; and the database going down gives clear errors, loses
nothing, and the conversation continues once it is back.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from deploy_support import CLIENT_ID, CLIENT_SECRET, fake_workspace, workspace_log
from postgres import PostgresServer
from renders import assert_all_passed, clean_env, passed, uv
from servers import ServerProcess, app_support, free_port, http_client, reply_text

Conversation = app_support.Conversation

pytestmark = pytest.mark.xdist_group("postgres")


def counts(user: int, assistant: int, tool: int = 0) -> str:
    return f"I saw {user} user, {assistant} assistant and {tool} tool turns."


@pytest.fixture(scope="module")
def app(renders) -> Path:
    app = renders["defaults"]
    uv("sync", "--locked", "--dev", "--no-config", cwd=app)  # its tests run with pytest
    return app


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


def start_app(app: Path, log: Path, **env: str) -> ServerProcess:
    port = free_port()
    args = [str(app / ".venv" / "bin" / "start-app"), "--port", str(port)]
    values = {"LLM_PROVIDER": "offline", "MEMORY_BACKEND": "postgres", **env}
    return ServerProcess(args, clean_env(**values), f"http://127.0.0.1:{port}/health", cwd=app, log=log, timeout=300)


# The modules whose tests run on PostgreSQL too, in one process on the one database: the store's, the runs' and the
# turns' that keep state there (a run of every module's `postgres` tests in one process failed one test in two
# runs: state the earlier tests leave on the shared database). Everything else runs with the rest, on SQLite.
ON_SERVER = [f"tests/template/test_{name}.py" for name in (
    "memory", "memory_failures", "memory_limits", "memory_schema", "runs", "runs_streams", "runs_lifetime",
    "runs_keep_turns", "conversation_edits", "conversation_branches", "approval_answers", "ordered_turns",
    "long_term_memory", "long_term_memory_search", "your_data", "rate_limits", "model_choice", "conversation_search",
    "conversation_export", "share_links",
)]  # fmt: skip


def test_the_postgres_render_passes_its_whole_suite_with_its_memory_tests_on_postgres(renders, postgres):
    """The app answered memory=postgres: its whole suite, where every memory test runs on SQLite and on this server
    (MEMORY_TEST_POSTGRES_URL), as its own CI would run it against a database."""
    app = renders["databricks-postgres"]
    uv("sync", "--locked", "--dev", "--no-config", cwd=app)
    pytest = [str(app / ".venv" / "bin" / "pytest"), "-v", "-p", "no:cacheprovider"]
    env = clean_env(MEMORY_TEST_POSTGRES_URL=postgres.url)
    # The memory tests on this server in one process (they share its one database); the whole suite on every core,
    # as `uv run pytest` runs it.
    on_server = subprocess.run(
        [*pytest, "-n", "0", "-k", "postgres", *ON_SERVER], cwd=app, env=env, capture_output=True, text=True
    )
    assert_all_passed(on_server)
    on_postgres = [line for line in on_server.stdout.splitlines() if "[postgres" in line and "PASSED" in line]
    assert len(on_postgres) > 30, on_server.stdout
    rest = subprocess.run([*pytest, "-k", "not postgres"], cwd=app, env=env, capture_output=True, text=True)
    assert_all_passed(rest)
    assert passed("test_evaluation.py::test_the_starter_set_passes_offline", rest.stdout), "the whole suite ran"


@pytest.fixture(scope="module")
def two_apps(app, postgres, tmp_path_factory) -> Iterator[tuple[str, str]]:
    """Two `start-app` processes on one PostgreSQL database, with an MCP server whose slow_lookup takes 3 s."""
    logs = tmp_path_factory.mktemp("two-apps")
    tools_port = free_port()
    serve = f"import sys; sys.path.insert(0, 'tests/template'); import support; support.serve_mcp_tools({tools_port})"
    tools_args = [str(app / ".venv" / "bin" / "python"), "-c", serve]
    shared = {"MEMORY_DATABASE_URL": postgres.url}
    shared["MCP_SERVERS"] = json.dumps([{"name": "tools", "url": f"http://127.0.0.1:{tools_port}/mcp"}])
    with (
        ServerProcess(tools_args, clean_env(), f"http://127.0.0.1:{tools_port}/mcp", cwd=app),
        start_app(app, logs / "a.log", **shared) as a,
        start_app(app, logs / "b.log", **shared) as b,
    ):
        yield a.url, b.url


def test_two_app_processes_continue_one_conversation(two_apps):
    a, b = two_apps
    on_a = Conversation(http_client(a), stream=False)
    on_a.send("My name is Ada")
    on_b = Conversation(http_client(b), stream=True)
    on_b.id = on_a.id
    assert counts(2, 1) in reply_text(on_b.send("What is my name?"))
    assert counts(3, 2) in reply_text(on_a.send("And once more"))


def test_concurrent_turns_on_two_processes_run_in_the_order_they_came(two_apps):
    """A turn sent to the other process while the first runs its slow tool waits for it (memory/queue.py), then runs
    with its answer in its history: nothing interleaves, and nothing is refused."""
    a, b = two_apps
    on_a = Conversation(http_client(a), stream=False)
    on_a.send("Hello")
    slow = threading.Thread(target=on_a.send, args=("Please run slow_lookup",))  # its tool takes 3 s
    slow.start()
    time.sleep(1.5)
    on_b = Conversation(http_client(b), stream=False)
    on_b.id = on_a.id
    assert counts(3, 2, 1) in reply_text(on_b.send("Meanwhile")), "it ran once the slow turn was done"
    slow.join(timeout=120)
    kept = http_client(a).get(f"/conversations/{on_a.id}").json()["items"]
    assert [item.get("role") or item["type"] for item in kept] == [
        "user", "assistant",
        "user", "function_call", "function_call_output", "assistant",
        "user", "assistant",
    ]  # fmt: skip


def test_a_run_whose_process_died_is_resumed_by_the_other_process(app, postgres, tmp_path):
    """kill -9 of the process running a background run while its tool runs: the survivor claims it (its
    heartbeat found it orphaned) and resumes it, with the running call answered as interrupted; the tool ran
    once, counted at the MCP server, and the run's turn follows the conversation's earlier turn."""
    tools_port = free_port()
    serve = f"import sys; sys.path.insert(0, 'tests/template'); import support; support.serve_mcp_tools({tools_port})"
    tools_url = f"http://127.0.0.1:{tools_port}"
    shared = {
        "MEMORY_DATABASE_URL": postgres.url,
        "MCP_SERVERS": json.dumps([{"name": "t", "url": f"{tools_url}/mcp"}]),
        "MEMORY_LEASE_RENEW_SECONDS": "1",  # runs beat every 0.5 s: the survivor claims the run within 2 s
    }
    with (
        ServerProcess([str(app / ".venv" / "bin" / "python"), "-c", serve], clean_env(), f"{tools_url}/mcp", cwd=app),
        start_app(app, tmp_path / "a.log", **shared) as a,
        start_app(app, tmp_path / "b.log", **shared) as b,
    ):
        named = {"context": {"conversation_id": f"killed-{time.monotonic_ns()}"}}
        assert http_client(a.url).post("/responses", json={"input": "Hello", **named}).status_code == 200
        body = {"input": [{"role": "user", "content": "Please run slow_lookup"}], "background": True, **named}
        run_id = http_client(a.url).post("/responses", json=body).json()["id"]
        deadline = time.monotonic() + 20
        while http_client(tools_url).get("/calls").json() == []:
            assert time.monotonic() < deadline, "the tool never ran"
            time.sleep(0.05)
        a.process.kill()
        killed_at = time.monotonic()
        while (run := http_client(b.url).get(f"/responses/{run_id}").json())["status"] == "in_progress":
            assert time.monotonic() - killed_at < 30, "the survivor claims the run within four beats"
            time.sleep(0.2)
        assert run["status"] == "completed", run
        assert "interrupted" in reply_text(run["output"])
        assert http_client(tools_url).get("/calls").json() == ["slow_lookup"], "the tool ran once"
        kept = http_client(b.url).get(f"/conversations/{named['context']['conversation_id']}").json()["items"]
        assert [item.get("role") or item["type"] for item in kept] == [
            "user", "assistant", "user", "function_call", "function_call_output", "assistant"], kept  # fmt: skip
        assert kept[0]["content"] == "Hello"


def test_the_database_down_mid_conversation_is_a_503_and_it_continues_once_back(two_apps, postgres):
    a, _ = two_apps
    chat = Conversation(http_client(a), stream=False)
    chat.send("My name is Ada")
    postgres.stop()
    try:
        body = {"input": [{"role": "user", "content": "What is my name?"}], "context": {"conversation_id": chat.id}}
        response = http_client(a).post("/invocations", json=body)
        assert response.status_code == 503, response.text
        assert "Conversation memory is unavailable" in response.json()["error"]["message"]
    finally:
        postgres.start()
    assert counts(2, 1) in reply_text(chat.send("What is my name?"))
    kept = http_client(a).get(f"/conversations/{chat.id}").json()["items"]
    assert [item["content"] for item in kept if item["role"] == "user"] == ["My name is Ada", "What is my name?"]


def test_connections_the_server_drops_cost_a_reconnect_not_a_failed_turn(two_apps, postgres):
    """No ping before each transaction (memory/store.py): a pooled connection that the server dropped (an idle
    timeout, a fail-over) is found by the turn's first statement, and the transaction runs again on a new one."""
    a, _ = two_apps
    chat = Conversation(http_client(a), stream=False)
    chat.send("My name is Ada")
    dropped = postgres.psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    assert int(dropped) >= 1, "the apps' pooled connections"
    assert counts(2, 1) in reply_text(chat.send("What is my name?"))
    assert counts(3, 2) in reply_text(chat.send("And again?"))


# A turn's finish on PostgreSQL is one statement that commits by itself (memory/turn_transactions.py). The store runs
# it again when the connection drops while it runs; if the server had carried it out, running it again must not
# fail the turn. Here it is run twice with the same `now`, as that retry does.
FINISH_RUN_AGAIN = """
import asyncio, functools, json, time, uuid
from agent_server import memory
from agent_server.memory import turn_transactions as turn
from agent_server.memory.store import Busy, Store, StoredItem

async def main():
    store = Store(memory.memory_settings().url)
    await store.open()
    conversation, lease, now = f"conv_{uuid.uuid4().hex}", "the-turn", time.time()
    await store.start_turn("ada", conversation, lease, hold_seconds=60)
    user, assistant = {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hey"}
    items = [StoredItem(user, None), StoredItem(assistant, "msg_1")]
    finish = functools.partial(turn.finish_turn_in_one_statement, "ada", conversation, lease, items, "Hi")
    held = [await store.run(functools.partial(finish, now), write=True) for _ in range(2)]
    try:
        await store.run(functools.partial(finish, now + 1), write=True)
        later = "finished"
    except Busy:
        later = "busy"
    stored = [stored.item["content"] for stored in await store.items("ada", conversation)]
    [title] = [found.title for found in await store.conversations("ada") if found.id == conversation]
    await store.close()
    print(json.dumps({"held": held, "later": later, "stored": stored, "title": title}))

asyncio.run(main())
"""


def test_a_finish_run_again_after_it_was_carried_out_does_not_fail_the_turn(app, postgres):
    result = subprocess.run(
        [str(app / ".venv" / "bin" / "python"), "-c", FINISH_RUN_AGAIN],
        cwd=app,
        env=clean_env(MEMORY_BACKEND="postgres", MEMORY_DATABASE_URL=postgres.url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    # The first run stores the turn (2 items now); the second finds it carried out (count not known); a finish at
    # another moment is another turn's, without the lease.
    assert outcome == {"held": [2, None], "later": "busy", "stored": ["Hi", "Hey"], "title": "Hi"}, outcome


def test_a_lakebase_login_refreshes_its_token_mid_conversation(app, postgres, tmp_path):
    """The app's role logs in with workspace tokens only: each new one is its password (fake_workspace.py)."""
    postgres.psql("CREATE ROLE app_principal LOGIN")
    postgres.psql("CREATE DATABASE lakebase OWNER app_principal")
    workspace_server = fake_workspace(app, free_port(), tmp_path / "workspace.log")
    workspace_server.args += ["--postgres-admin-url", postgres.url, "--lakebase-role", "app_principal"]
    workspace_server.args += ["--database-token-seconds", "303"]  # the app refreshes 300 s before expiry
    with workspace_server:
        workspace = workspace_server.url.removesuffix("/.well-known/databricks-config")
        lakebase = {
            "PGHOST": "127.0.0.1", "PGPORT": str(postgres.port), "PGDATABASE": "lakebase",
            "PGUSER": "app_principal", "MEMORY_LAKEBASE_INSTANCE": "agent-memory",
            "DATABRICKS_HOST": workspace, "DATABRICKS_CLIENT_ID": CLIENT_ID, "DATABRICKS_CLIENT_SECRET": CLIENT_SECRET,
        }  # fmt: skip
        with start_app(app, tmp_path / "app.log", **lakebase) as served:
            chat = Conversation(http_client(served.url), stream=False)
            chat.send("My name is Ada")
            time.sleep(4)  # past the first token's refresh time
            # Force new connections: PostgreSQL checks a password only when one is made.
            postgres.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'app_principal'")
            assert counts(2, 1) in reply_text(chat.send("What is my name?"))
        credentials = [e for e in workspace_log(workspace) if e["path"] == "/api/2.0/database/credentials"]
        assert len(credentials) >= 3, credentials  # start-app's check, the app's start, the refresh
        assert all(entry["instances"] == ["agent-memory"] for entry in credentials)


def test_the_database_down_at_start_up_stops_the_app_with_the_reason(app, tmp_path):
    nowhere = f"postgresql://agent:secret@127.0.0.1:{free_port()}/agent"
    served = start_app(app, tmp_path / "app.log", MEMORY_DATABASE_URL=nowhere)
    assert served.run_to_exit() != 0
    last = served.output.strip().splitlines()[-1]
    assert last.startswith("start-app: conversation memory (postgres, postgresql+asyncpg://agent:***@127.0.0.1"), last
    assert "secret" not in served.output
