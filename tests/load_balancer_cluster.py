"""The load balancer tests' cluster: HAProxy with the app's own template/deploy/haproxy.cfg (its addresses
replaced) in front of three `start-app` instances of two workers each on one PostgreSQL, all on loopback and stopped
by their process ids; and the load of chats a test puts through it. A module-scoped fixture (`cluster`), loaded by
tests/conftest.py, so that one cluster serves every test of tests/test_load_balancer.py, in its order."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from postgres import PostgresServer
from renders import ROOT, clean_env, uv
from servers import ServerProcess, app_support, free_port, reply_text

CONFIG = ROOT / "template" / "deploy" / "haproxy.cfg"
HAPROXY = "/usr/sbin/haproxy"
LIMIT = 8  # RATE_LIMIT_TURNS_PER_MINUTE of every instance: more than any chat of the load sends
# At 2, on two cores at a load of 20, a live process's beats came three beats late, and another claimed its runs.
RENEW = 4.0  # MEMORY_LEASE_RENEW_SECONDS: runs beat every 2 s, and a dead process's run is claimed within 8 s
CONCURRENCY = 16
PAUSE = 0.3  # each client's think time between turns: the load leaves the 2 cores room to start instances


def haproxy_config(listen: int, ports: list[int]) -> str:
    """The app's example configuration, listening on `listen`, in front of the instances on `ports`."""
    text = CONFIG.read_text()
    assert "bind 127.0.0.1:8080" in text
    text = text.replace("bind 127.0.0.1:8080", f"bind 127.0.0.1:{listen}")
    servers = "".join(f"    server app{n} 127.0.0.1:{port}\n" for n, port in enumerate(ports, 1))
    text, replaced = re.subn(r"(    server app\d 127\.0\.0\.1:\d+\n)+", servers, text)
    assert replaced == 1
    # Each request's log line on HAProxy's output (its log file here), for a failure to name where it failed.
    return text.replace("global\n", "global\n    log stdout format raw local0\n", 1).replace(
        "defaults\n", "defaults\n    log global\n    option httplog\n", 1
    )


class Instance:
    """One `start-app` with two workers, in a process group of its own (kill -9 reaches its workers too)."""

    def __init__(self, app: Path, env: dict[str, str], logs: Path, name: str) -> None:
        self.app, self.env, self.logs, self.name = app, env, logs, name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.starts = 0
        self.server: ServerProcess | None = None

    def start(self) -> None:
        self.starts += 1
        args = [str(self.app / ".venv" / "bin" / "start-app"), "--port", str(self.port), "--workers", "2"]
        log = self.logs / f"{self.name}-{self.starts}.log"
        self.server = ServerProcess(
            args, self.env, f"{self.url}/health", cwd=self.app, log=log, timeout=300, group=True
        )
        self.server.__enter__()
        wait_healthy(self.url)

    def stop(self) -> int:
        """SIGTERM to start-app (uvicorn's supervisor, which stops its workers), and wait for it to exit."""
        assert self.server is not None
        self.server.process.send_signal(signal.SIGTERM)
        code = self.server.process.wait(timeout=60)
        self.server.stop()  # what is left of its group, if anything
        return code

    def kill(self) -> None:
        assert self.server is not None
        os.killpg(self.server.process.pid, signal.SIGKILL)
        self.server.process.wait(timeout=30)


def wait_healthy(url: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while httpx.get(f"{url}/health", timeout=5).status_code != 200:
        assert time.monotonic() < deadline, f"{url} never became healthy"
        time.sleep(0.2)


@dataclass
class Cluster:
    postgres: PostgresServer
    instances: list[Instance]
    url: str  # HAProxy's
    tools: str  # the MCP server's

    def tool_runs(self) -> int:
        return len(httpx.get(f"{self.tools}/deleted", timeout=10).json())


@pytest.fixture(scope="module")
def cluster(renders, tmp_path_factory) -> Iterator[Cluster]:
    app = renders["defaults"]
    uv("sync", "--locked", "--dev", "--no-config", cwd=app)  # the MCP server below runs the app's tests' support
    logs = tmp_path_factory.mktemp("load-balancer")
    tools_port = free_port()
    serve = f"import sys; sys.path.insert(0, 'tests/template'); import support; support.serve_mcp_tools({tools_port})"
    tools = f"http://127.0.0.1:{tools_port}"
    with (
        PostgresServer() as postgres,
        ServerProcess([str(app / ".venv" / "bin" / "python"), "-c", serve], clean_env(), f"{tools}/mcp", cwd=app),
    ):
        env = clean_env(
            LLM_PROVIDER="offline", MEMORY_BACKEND="postgres", MEMORY_DATABASE_URL=postgres.url,
            MEMORY_USER_HEADER="x-test-user", RATE_LIMIT_TURNS_PER_MINUTE=str(LIMIT),
            MEMORY_LEASE_RENEW_SECONDS=str(RENEW),
            MCP_SERVERS=json.dumps([{"name": "tools", "url": f"{tools}/mcp"}]),
        )  # fmt: skip
        instances = [Instance(app, env, logs, name) for name in ("a", "b", "c")]
        listen = free_port()
        config = logs / "haproxy.cfg"
        config.write_text(haproxy_config(listen, [each.port for each in instances]))
        try:
            with concurrent.futures.ThreadPoolExecutor(3) as starting:  # the first migrates, the others wait for it
                list(starting.map(Instance.start, instances))
            ready = f"http://127.0.0.1:{listen}/health"
            with ServerProcess([HAPROXY, "-db", "-f", str(config)], clean_env(), ready, log=logs / "haproxy.log"):
                wait_healthy(f"http://127.0.0.1:{listen}")
                yield Cluster(postgres, instances, f"http://127.0.0.1:{listen}", tools)
        finally:
            for each in instances:
                if each.server is not None:
                    each.server.stop()


@dataclass
class Load:
    """Chats at CONCURRENCY through HAProxy until told to stop: each a new user, three turns (the second runs a tool
    that the MCP server counts), every third one's last turn a background run."""

    url: str
    stop: threading.Event = field(default_factory=threading.Event)
    going: threading.Event = field(default_factory=threading.Event)  # cleared: each client waits before its next turn
    turns: int = 0
    tool_turns: int = 0
    retries: int = 0  # turns sent again with their Idempotency-Key
    runs: list[tuple[str, str]] = field(default_factory=list)  # (user, run id)
    chats: list[tuple[str, str, int]] = field(default_factory=list)  # (user, conversation id, items stored)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as chats:
            list(chats.map(self.chats_until_stopped, range(CONCURRENCY)))

    def chats_until_stopped(self, worker: int) -> None:
        with httpx.Client(base_url=self.url, timeout=120) as client:
            number = 0
            while not self.stop.is_set():
                number += 1
                try:
                    self.one_chat(client, worker, number)
                except Exception as error:  # noqa: BLE001 (each failure is reported with its chat)
                    with self.lock:
                        self.failures.append(f"chat {worker}.{number}: {type(error).__name__}: {error}")

    def pause(self) -> None:
        time.sleep(PAUSE)
        self.going.wait()

    def one_chat(self, client: httpx.Client, worker: int, number: int) -> None:
        user = f"load-{worker}-{number}-{uuid.uuid4().hex[:8]}@example.com"
        stream = number % 2 == 0
        self.going.wait()
        items, conversation = self.turn(client, user, None, "Hello", stream)
        assert "You said: Hello" in reply_text(items)
        self.pause()
        items, _ = self.turn(client, user, conversation, "Please run delete_file", stream)
        assert "The tool returned: deleted" in reply_text(items)
        with self.lock:
            self.turns, self.tool_turns = self.turns + 2, self.tool_turns + 1
        self.pause()
        if number % 3:
            assert "You said: Thanks" in reply_text(self.turn(client, user, conversation, "Thanks", stream)[0])
        else:
            body = {"input": [{"role": "user", "content": "Thanks"}], "background": True}
            body["context"] = {"conversation_id": conversation}
            answer = self.posted(client, body, {"x-test-user": user, "idempotency-key": uuid.uuid4().hex})
            assert answer.status_code == 200, answer.text
            with self.lock:
                self.runs.append((user, answer.json()["id"]))
        with self.lock:
            self.turns += 1
            self.chats.append((user, conversation, 8))  # 2 items a turn, and the tool's call and output
        self.pause()

    def turn(
        self, client: httpx.Client, user: str, conversation: str | None, text: str, stream: bool
    ) -> tuple[list[dict[str, Any]], str]:
        """One turn, with an Idempotency-Key: a turn that an instance stopping cut before its answer (a connection it
        closed, HAProxy's 502) is sent again with the same key, and is the same run (its answer, or its run resumed
        elsewhere), never a second turn. Its items and its conversation's id."""
        body: dict[str, Any] = {"input": [{"role": "user", "content": text}], "stream": stream}
        if conversation:
            body["context"] = {"conversation_id": conversation}
        response = self.posted(client, body, {"x-test-user": user, "idempotency-key": uuid.uuid4().hex})
        assert response.status_code == 200, f"{response.status_code}: {response.text[:300]}"
        if not stream:
            return response.json()["output"], response.json()["custom_outputs"]["session_id"]
        events = app_support.sse_events(response.text)
        assert not [event for event in events if "error" in event], events
        done = [event for event in events if event.get("type") == "response.output_item.done"]
        return [event["item"] for event in done], done[-1]["custom_outputs"]["session_id"]

    def posted(self, client: httpx.Client, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
        """POST /invocations, sent again with the same Idempotency-Key while an instance stopping cuts it (a
        connection it closed, HAProxy's 502 or 503): the same turn or run each time, never a second one."""
        for attempt in range(4):
            try:
                response = client.post("/invocations", json=body, headers=headers)
                if response.status_code not in (502, 503) or attempt == 3:
                    return response
            except httpx.TransportError:
                if attempt == 3:
                    raise
            with self.lock:
                self.retries += 1
            time.sleep(0.5)
        raise AssertionError("unreachable")


def ended_run(url: str, user: str, run_id: str, seconds: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        run = httpx.get(f"{url}/responses/{run_id}", headers={"x-test-user": user}, timeout=30).json()
        if run["status"] not in ("queued", "in_progress") or time.monotonic() > deadline:
            return run
        time.sleep(0.2)
