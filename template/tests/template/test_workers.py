# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""`start-app` with several worker processes: how many it runs, and one app across them (start_server.py): the
workers answer each other's approvals, the first answer to an approval is final whichever worker gets the replay
(test_approval_answers.py), and a conversation's turns run in the order they came however the workers' tries
interleave (test_ordered_turns.py). One two-worker app serves these tests (TwoWorkers): spawning a worker costs
an import of the whole app, and each test starts conversations of its own."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import loopback
import pytest
import sqlalchemy as sa
from support import DELETED, TRACED, ServerThread, StartedApp, app_env, mcp_tool_server, post_turn, reply_text

from agent_server import memory, start_server
from agent_server.memory.store import Store, StoredItem

from .test_approval_answers import DENIED, answer, declared
from .test_memory import counts
from .test_ordered_turns import in_thread, kept, until


class TwoWorkers:
    """start-app with two workers, as deployed (the console script itself), on one SQLite file and the offline
    model, tracing every request and logging JSON lines, with an MCP server in this process (which counts its runs
    in DELETED) whose delete_file asks first. running() starts it again after a test stopped it."""

    def __init__(self, tools_url: str) -> None:
        self.env = app_env(LLM_PROVIDER="offline", LOG_FORMAT="json", MCP_SERVERS=declared(tools_url), **TRACED)
        self.app: StartedApp | None = None

    def running(self) -> StartedApp:
        if self.app is None or self.app.process.poll() is not None:
            self.app = StartedApp(self.env, options=("--workers", "2"), preloaded=False)
            self.app.__enter__()
        return self.app


@pytest.fixture(scope="module")
def two_workers() -> Iterator[TwoWorkers]:
    with ServerThread(mcp_tool_server().app) as tools:
        shared = TwoWorkers(f"{tools}/mcp")
        yield shared
        if shared.app is not None:
            shared.app.stop()


def spawned_workers(parent: int) -> list[int]:
    """The worker processes uvicorn started for `parent` (multiprocessing's spawn; not its resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                command = (entry / "cmdline").read_bytes()
            except (OSError, IndexError, ValueError):
                continue
            if ppid == parent and b"spawn_main" in command:
                found.append(int(entry.name))
    return found


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime and stime


@pytest.mark.waits
def test_two_workers_honour_the_first_answer_whichever_worker_gets_the_replay(two_workers):
    """Four conversations at once, each denied, then approved in every shape, each request on a new connection:
    the workers share the store's answers, and nothing runs (at the MCP server; the starter's send_summary returns
    no output)."""
    DELETED.clear()
    url = two_workers.running().url

    def send(body: dict[str, Any]) -> list[dict[str, Any]]:
        with loopback.Client(base_url=url, timeout=120) as fresh:  # a new connection: either worker
            return post_turn(fresh, body, False)[0]

    def denied_then_approved(number: int) -> list[list[dict[str, Any]]]:
        prompt = {"role": "user", "content": "Use delete_file" if number % 2 else "Use send_summary"}
        context = {"conversation_id": f"workers-{number}-{uuid.uuid4().hex}"}
        [request] = send({"input": [prompt], "context": context})
        whole = [prompt, request, answer(request, True)]
        answers = [send({"input": [answer(request, False)], "context": context})]
        for items, custom in [([answer(request, True)], {}), (whole, {}), (whole, {"replace_history": True})] * 2:
            answers.append(send({"input": items, "context": context, "custom_inputs": custom}))
        return answers

    with ThreadPoolExecutor(4) as pool:
        answered = [items for answers in pool.map(denied_then_approved, range(4)) for items in answers]
    assert all(DENIED in reply_text(items) for items in answered)
    outputs = [item["output"] for items in answered for item in items if item["type"] == "function_call_output"]
    assert not [output for output in outputs if "An example tool" in output or "deleted" in output]
    assert DELETED == []


def stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def request_head(address: tuple[str, int], body: bytes) -> bytes:
    """A POST /invocations head that asks for 100 Continue: the app answers it once a worker reads the body."""
    head = f"POST /invocations HTTP/1.1\r\nHost: {address[0]}\r\nContent-Type: application/json\r\n"
    return f"{head}Content-Length: {len(body)}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n".encode()


def turn_taken_by(url: str, others: list[int], conversation_id: str, text: str) -> tuple[threading.Thread, list[Any]]:
    """A turn on a new connection that the worker not in `others` takes: they are stopped (SIGSTOP) until a worker
    has read the request's head and asks for its body, so the kernel can hand the connection to no other, and go on
    at once (a few milliseconds: a worker stopped in a write would hold the database). Its reply's text, or what
    it raised, lands in the list once the turn ends."""
    address = ("127.0.0.1", int(url.rsplit(":", 1)[1]))
    message = {"input": [{"role": "user", "content": text}], "context": {"conversation_id": conversation_id}}
    body = json.dumps(message).encode()
    for pid in others:
        os.kill(pid, signal.SIGSTOP)
    try:
        until(lambda: all(stopped(pid) for pid in others), "the other workers to stop")
        connection = socket.create_connection(address, timeout=120)
        connection.sendall(request_head(address, body))
        asked = b""
        while not asked.endswith(b"\r\n\r\n"):
            asked += connection.recv(100) or b"(closed)"
        assert asked.startswith(b"HTTP/1.1 100"), asked
    finally:
        for pid in others:
            os.kill(pid, signal.SIGCONT)

    def answered() -> str:
        with connection:
            connection.sendall(body)
            response = http.client.HTTPResponse(connection)
            response.begin()
            assert response.status == 200, response.read()
            return reply_text(json.loads(response.read())["output"])

    return in_thread(answered)


@pytest.mark.waits
def test_two_workers_on_one_sqlite_file_run_a_conversations_turns_in_the_order_they_came(two_workers):
    """Another process holds the conversation; four turns come, each on a new connection that the worker it is
    meant for takes, the workers in turn. When it is given back, they run in the order they came, however the
    workers' tries interleave, each seeing the ones before it."""
    app = two_workers.running()
    url, database, workers = app.url, two_workers.env["MEMORY_DATABASE_URL"], spawned_workers(app.pid)
    assert len(workers) == 2, app.output
    conversation = f"ordered-{uuid.uuid4()}"
    owner, lease = memory.LOCAL_OWNER, "elsewhere:1/the-first-turn"

    def places() -> list[str]:
        with sqlite3.connect(database) as connection:
            rows = connection.execute("SELECT lease FROM agent_turn_queue ORDER BY ticket").fetchall()
        return [lease for (lease,) in rows]

    async def in_store_at(work: Callable[[Store], Any]) -> None:
        store = Store(sa.URL.create("sqlite+pysqlite", database=database))
        try:
            await work(store)
        finally:
            await store.close()

    # The first turn, as another app process runs it: the conversation held, and its answer stored later.
    asyncio.run(in_store_at(lambda store: store.start_turn(owner, conversation, lease, 120)))
    turns, texts = [], [f"Turn {number}" for number in range(2, 6)]
    for number, text in enumerate(texts):
        worker = workers[number % 2]
        turns.append(turn_taken_by(url, [pid for pid in workers if pid != worker], conversation, text))
        until(lambda: len(places()) == len(turns), f"{text!r} to wait for its turn", seconds=120)
        assert places()[-1].split("/")[0].endswith(f":{worker}"), (worker, places())  # its waiter, by pid
    first = [
        StoredItem({"role": "user", "content": "Hello"}, None),
        StoredItem({"role": "assistant", "content": "Hi"}, None),
    ]
    asyncio.run(in_store_at(lambda store: store.finish_turn(owner, conversation, lease, first, False, "Hello", 0)))
    for thread, _ in turns:
        thread.join(60)
    for number, (_, done) in enumerate(turns, start=2):
        assert counts(number, number - 1) in done[0], (number, done)
    users = [item["content"] for item in kept(url, conversation) if item.get("role") == "user"]
    assert users == ["Hello", *texts]
    assert places() == []


@pytest.mark.waits
def test_two_workers_answer_each_others_approvals_and_continue_each_others_conversations(two_workers):
    """send_summary asks first; each approval is sent on a new connection, 8 at a time, so the two processes
    answer approvals that the other signed, in conversations the other stored. With a secret per process, about
    half of them would be refused. Each process traces its requests and logs JSON lines. SIGTERM stops both."""
    app = two_workers.running()
    url, logged_before = app.url, len(app.output.splitlines())  # what the module's other tests had it log
    workers = spawned_workers(app.pid)
    assert len(workers) == 2, app.output
    before = {pid: cpu_ticks(pid) for pid in workers}
    traced: list[str] = []

    def approved(_: int) -> str:
        with loopback.Client(base_url=url, timeout=120) as client:
            asked = client.post("/invocations", json={"input": "Use send_summary"}).json()
        [request] = [item for item in asked["output"] if item["type"] == "mcp_approval_request"]
        answer = {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}
        body = {"input": [answer], "context": {"conversation_id": asked["custom_outputs"]["session_id"]}}
        with loopback.Client(base_url=url, timeout=120) as client:
            done = client.post("/invocations", json=body)
        assert done.status_code == 200, done.text
        traced.extend(answered["custom_outputs"]["trace_id"] for answered in (asked, done.json()))
        return reply_text(done.json()["output"])

    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(approved, range(24)))
    assert all(reply.startswith("The tool returned: An example tool") for reply in replies), replies
    assert all(cpu_ticks(pid) > before[pid] for pid in workers), "both processes served"
    assert "2 worker processes" in app.output
    stopping_refuses_new_connections(app, url)
    assert app.stop() == 0, app.output
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()], "SIGTERM stopped the workers too"
    logged = [json.loads(line) for line in app.output.splitlines()[logged_before:] if line.startswith("{")]
    posts = [line for line in logged if line["logger"] == "uvicorn.access" and "POST /invocations" in line["message"]]
    assert len(posts) == 49, "each request, as JSON (the 48 approvals' and the one open as it stopped)"
    traces = Path(two_workers.env["MLFLOW_TRACKING_URI"].removeprefix("file:")).glob("*/traces/*")
    stored = {folder.name for folder in traces if folder.is_dir()}
    assert len(set(traced)) == 48 and set(traced) <= stored, "each request traced, and flushed on stop"


def stopping_refuses_new_connections(app: StartedApp, url: str) -> None:
    """SIGTERM while a request is open (a worker waits for its body): new connections are refused while that request
    keeps the app running (a load balancer sends them to another instance meanwhile), and the request, its body sent
    once they are, is answered. No clock of the test's own: the open request's share of the grace period (5 s) is
    the bound, and a refusal that came only as the app stopped would leave the request unanswered."""
    address = ("127.0.0.1", int(url.rsplit(":", 1)[1]))
    body = json.dumps({"input": "Hello"}).ljust(100).encode()  # JSON may end in blanks
    with socket.create_connection(address, timeout=30) as held:
        held.sendall(request_head(address, body))
        assert held.recv(100).startswith(b"HTTP/1.1 100"), "a worker reads the request's body"
        app.process.send_signal(signal.SIGTERM)
        while True:
            try:
                socket.create_connection(address, timeout=1).close()
            except ConnectionRefusedError:
                break
            assert app.process.poll() is None, "the app stopped and never refused a connection"
            time.sleep(0.05)
        held.sendall(body)
        assert held.recv(100).startswith(b"HTTP/1.1 200"), "refused while it still served the open request"


@pytest.mark.parametrize(
    ("env", "argv", "workers"),
    [
        ({}, [], 1),
        ({"APP_ENV": "production"}, [], "granted"),
        ({"DATABRICKS_APP_NAME": "my-agent"}, [], "granted"),
        ({"WEB_CONCURRENCY": "3"}, [], 3),
        ({"APP_ENV": "production", "WEB_CONCURRENCY": "1"}, [], 1),
        ({"WEB_CONCURRENCY": "auto"}, [], "granted"),
        ({"WEB_CONCURRENCY": "3"}, ["--workers", "2"], 2),
        ({}, ["--workers", "auto"], "granted"),
    ],
    ids=["local", "docker", "databricks-apps", "WEB_CONCURRENCY", "one-deployed", "auto", "--workers", "--auto"],
)
def test_one_worker_locally_and_one_per_granted_cpu_deployed(app_settings, env, argv, workers):
    for name in ("APP_ENV", "DATABRICKS_APP_NAME", "WEB_CONCURRENCY"):
        app_settings.delenv(name)
    for name, value in env.items():
        app_settings.setenv(name, value)
    expected = start_server.cpus_granted() if workers == "granted" else workers
    assert start_server.parse_args(argv).workers == expected


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_a_bad_worker_count_is_a_one_line_error(app_settings, value, capsys):
    app_settings.setenv("WEB_CONCURRENCY", value)
    with pytest.raises(SystemExit) as stopped:
        start_server.parse_args([])
    says = f"{value!r} is not auto or a number of processes (1 or more)"
    assert str(stopped.value) == f"start-app: WEB_CONCURRENCY: {says}"
    with pytest.raises(SystemExit):
        start_server.parse_args(["--workers", value])
    assert "is not auto or a number of processes" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("files", "granted"),
    [
        ({"cpu.max": "150000 100000\n"}, 2),  # a quota of 1.5 CPUs: two processes
        ({"cpu.max": "50000 100000\n"}, 1),
        ({"cpu.max": "max 100000\n"}, None),  # no quota: the affinity
        ({"app.slice/cpu.max": "100000 100000\n", "cpu.max": "max 100000\n"}, 1),  # this process's own cgroup
        ({"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 2),  # cgroup v1
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
    ids=["v2-1.5", "v2-half", "v2-none", "v2-nested", "v1", "v1-none", "no-cgroup"],
)
def test_the_cpus_granted_are_the_affinity_bounded_by_the_cgroup_quota(tmp_path, files, granted):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    own = tmp_path / "self-cgroup"
    own.write_text("0::/app.slice\n")
    affinity = len(os.sched_getaffinity(0))
    assert start_server.cpus_granted(tmp_path, own) == (affinity if granted is None else min(granted, affinity))
