# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Background runs outlive what cuts a request: a proxy that cuts every request after a second, a `kill -9` of
the app mid-run, and a SIGTERM. Real `start-app` processes, a real MCP server (its slow tool takes 3 s, and
counts its calls), the offline model, SQLite (tests/test_memory_postgres.py in the template's repo does the
same on PostgreSQL, across two processes)."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import loopback
import pytest
from support import TOOL_CALLS, ServerThread, StartedApp, app_env, mcp_tool_server, reply_text, sse_events

from .test_responses_api import valid_stream

SLOW = {"input": [{"role": "user", "content": "Please run slow_lookup"}]}


class CuttingProxy:
    """A TCP proxy on loopback that cuts every connection `cut_after` seconds after it opens, as the Databricks
    Apps proxy cuts a request at about 120 s."""

    def __init__(self, target_port: int, cut_after: float) -> None:
        self.target_port, self.cut_after, self.cuts = target_port, cut_after, 0
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        assert self.ready.wait(10)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._connection, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    async def _connection(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        app_reader, app_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()

        piping = [
            asyncio.ensure_future(pipe(client_reader, app_writer)),
            asyncio.ensure_future(pipe(app_reader, client_writer)),
        ]
        done, _ = await asyncio.wait(piping, timeout=self.cut_after, return_when=asyncio.FIRST_COMPLETED)
        if not done:
            self.cuts += 1
        for task in piping:
            task.cancel()
        for writer in (client_writer, app_writer):
            writer.close()


@pytest.fixture(scope="module")
def tools() -> Iterator[str]:
    with ServerThread(mcp_tool_server().app) as url:
        yield json.dumps([{"name": "tools", "url": f"{url}/mcp"}])


@pytest.fixture(scope="module")
def app_with_tools(tools) -> Iterator[str]:
    """One app for the tests that need not stop it."""
    with StartedApp(app_env(LLM_PROVIDER="offline", MCP_SERVERS=tools)) as url:
        yield url


@pytest.fixture(autouse=True)
def tool_calls() -> None:
    TOOL_CALLS.clear()  # each test counts its own


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def resumed_stream(url: str, run_id: str) -> tuple[list[dict[str, Any]], int]:
    """Follow the run's stream to its end, resuming from the last sequence number after each cut."""
    events: list[dict[str, Any]] = []
    reconnections = 0
    while True:
        cursor = events[-1]["sequence_number"] if events else -1
        try:
            following = {"stream": "true", "starting_after": cursor}
            with loopback.stream("GET", f"{url}/responses/{run_id}", params=following, timeout=30) as response:
                for line in response.iter_lines():
                    if line == "data: [DONE]":
                        return events, reconnections
                    if line.startswith("data: "):
                        events.append(json.loads(line.removeprefix("data: ")))
        except (httpx.RemoteProtocolError, httpx.ReadError):
            pass
        reconnections += 1
        assert reconnections < 50


def run_status(database: str, run_id: str) -> tuple[str, str] | None:
    with sqlite3.connect(database) as connection:
        return connection.execute("SELECT status, started_calls FROM agent_runs WHERE id = ?", (run_id,)).fetchone()


@pytest.mark.waits
def test_a_run_longer_than_the_proxy_allows_completes_and_its_stream_resumes_exactly(app_with_tools):
    url = app_with_tools
    # A turn first, so that the cut request below is not the app's first: a cold app under a loaded machine took
    # more than 1 s to reach the tool, and the request was cut before its call.
    assert loopback.post(f"{url}/invocations", json={"input": "Hello"}, timeout=30).status_code == 200
    with CuttingProxy(port_of(url), 2.0) as long_cut:  # the tool takes 3 s: cut while it runs
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            loopback.post(f"{long_cut}/invocations", json=SLOW, timeout=30)  # a synchronous request is cut
    with CuttingProxy(port_of(url), 1.0) as proxy:
        started = time.monotonic()
        run = loopback.post(f"{proxy}/responses", json={**SLOW, "background": True}, timeout=30)
        assert run.status_code == 200 and time.monotonic() - started < 1, "answered at once, the tool still running"
        events, reconnections = resumed_stream(proxy, run.json()["id"])
        assert reconnections >= 2, "the stream was cut more than once"
        assert [e["sequence_number"] for e in events] == list(range(len(events))), "every event once, in order"
        assert events[-1]["type"] == "response.completed"
        assert "The tool returned: late" in reply_text(events[-1]["response"]["output"])
        direct = loopback.get(f"{url}/responses/{run.json()['id']}", params={"stream": "true"}, timeout=30).text
        assert sse_events(direct) == events, "the resumed stream is the run's stream"
        assert TOOL_CALLS == ["slow_lookup", "slow_lookup"], "the cut request's call, and the run's: once each"


def stopped_mid_tool(app: StartedApp, database: str, stop: str, conversation: str) -> str:
    """Start a background run of `conversation` on `app`, after a turn of its own, and stop the app (`kill` -9 or
    `sigterm`) while the run's tool runs."""
    named = {"context": {"conversation_id": conversation}}
    first = loopback.post(f"{app.url}/responses", json={"input": "Hello", **named}, timeout=30)
    assert first.status_code == 200, first.text
    body = {**SLOW, **named, "background": True}
    run_id = loopback.post(f"{app.url}/responses", json=body, timeout=30).json()["id"]
    deadline = time.monotonic() + 20
    # The run recorded the call, and the MCP server runs it (the call is recorded before it reaches the server).
    while json.loads((run_status(database, run_id) or ("", "[]"))[1] or "[]") == [] or not TOOL_CALLS:
        assert time.monotonic() < deadline, "the tool call never started"
        time.sleep(0.05)
    if stop == "kill":
        app.process.kill()
    else:
        app.process.send_signal(signal.SIGTERM)
    app.process.wait(15)
    assert run_status(database, run_id)[0] == "in_progress", f"not ended by the {stop}"
    return run_id


def assert_resumed(url: str, run_id: str, stop: str, conversation: str) -> None:
    started = time.monotonic()
    events, _ = resumed_stream(url, run_id)
    assert time.monotonic() - started < 30
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events].count("response.created") == 1
    valid_stream(events)  # posted to /responses: the Responses API's events, the resumed attempt's too
    final = events[-1]["response"]
    assert final["status"] == "completed", final["error"]
    assert "interrupted" in reply_text(final["output"]), "the model was told the running call was interrupted"
    assert TOOL_CALLS == ["slow_lookup"], f"after the {stop}, the tool ran once"
    TOOL_CALLS.clear()
    kept = loopback.get(f"{url}/conversations/{conversation}", timeout=30).json()["items"]
    assert kept[0] == {"role": "user", "content": "Hello"} and kept[1]["role"] == "assistant", "the turn before"
    assert [item.get("type", "message") for item in kept[2:]] == [
        "message", "function_call", "function_call_output", "message"], kept  # fmt: skip


@pytest.mark.waits
def test_a_run_whose_process_stopped_is_resumed_and_no_tool_runs_twice(tools):
    """kill -9 while the tool runs, then SIGTERM (with a grace period shorter than the tool) while it runs again:
    each time, the app started again on the same database resumes the run at once, the call that was running is
    answered as interrupted, and the model goes on. Each run's tool ran once."""
    env = app_env(LLM_PROVIDER="offline", MCP_SERVERS=tools, RUNS_SHUTDOWN_GRACE_SECONDS="1")
    database = env["MEMORY_DATABASE_URL"]
    with (first := StartedApp(env)):
        killed = stopped_mid_tool(first, database, "kill", "killed")
    with (second := StartedApp(env)) as url:
        assert_resumed(url, killed, "kill", "killed")
        terminated = stopped_mid_tool(second, database, "sigterm", "terminated")
    with StartedApp(env) as url:
        assert_resumed(url, terminated, "sigterm", "terminated")


@pytest.mark.waits
def test_the_same_idempotency_key_at_once_and_after_runs_the_mcp_tool_once(app_with_tools):
    """Two identical keyed requests at once, and one after the first ended: one run, one call of the real MCP
    server's tool (tests/template/test_runs.py counts the model's calls too)."""
    url = app_with_tools
    key = {"Idempotency-Key": "retry-1"}
    answers: list[httpx.Response] = []
    at_once = [threading.Thread(target=lambda: answers.append(loopback.post(f"{url}/invocations", json=SLOW,
               headers=key, timeout=60))) for _ in range(2)]  # fmt: skip
    for thread in at_once:
        thread.start()
    for thread in at_once:
        thread.join(60)
    answers.append(loopback.post(f"{url}/invocations", json=SLOW, headers=key, timeout=60))
    assert [answer.status_code for answer in answers] == [200, 200, 200]
    assert len({answer.json()["id"] for answer in answers}) == 1
    assert "The tool returned: late" in reply_text(answers[-1].json()["output"])
    assert TOOL_CALLS == ["slow_lookup"]


def counting_model(words: int, every: float) -> Any:
    """A chat-completions model server that streams its answer a word at a time: 'w1 ', 'w2 ', ... 'w{words} ',
    one every `every` seconds, to any request."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        data = {"id": "chatcmpl-count", "object": "chat.completion.chunk", "created": 1, "model": "counting",
                "choices": [choice]}  # fmt: skip
        return f"data: {json.dumps(data)}\n\n".encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        pieces = [chunk({"role": "assistant", "content": ""})]
        pieces += [chunk({"content": f"w{n} "}) for n in range(1, words + 1)]
        for piece in [*pieces, chunk({}, "stop"), b"data: [DONE]\n\n"]:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            await asyncio.sleep(every)
        await send({"type": "http.response.body", "body": b""})

    return app


def events_of(url: str, run_id: str, cursor: int) -> list[dict[str, Any]]:
    answer = loopback.get(f"{url}/responses/{run_id}", params={"stream": "true", "starting_after": cursor}, timeout=30)
    assert answer.text.endswith("data: [DONE]\n\n")
    return sse_events(answer.text)


@pytest.mark.waits
def test_a_followers_cursor_stays_true_across_a_kill():
    """A client follows a run whose text streams, the app is killed (-9) mid-text, and started again: the stream
    the client saw is the run's stored stream up to its cursor, and the resumed run's events go on from there.
    (The client was sent text deltas the app had not stored yet; the resumed run gave their numbers to others.)"""
    with ServerThread(counting_model(words=150, every=0.005)) as model:
        env = app_env(LLM_PROVIDER="openai", LLM_API="chat_completions", LLM_MODEL="counting", OPENAI_API_KEY="x",
                      OPENAI_BASE_URL=f"{model}/v1")  # fmt: skip
        seen: list[dict[str, Any]] = []
        with (first := StartedApp(env)) as url:
            body = {"input": "Count", "background": True, "stream": True}
            with loopback.stream("POST", f"{url}/responses", json=body, timeout=30) as response:
                for line in response.iter_lines():
                    if line.startswith("data: {"):
                        seen.append(json.loads(line.removeprefix("data: ")))
                    if sum(event["type"] == "response.output_text.delta" for event in seen) >= 20:
                        first.process.kill()  # the client has seen text, and follows on
                        break
            first.process.wait(15)
        run_id, cursor = seen[0]["response"]["id"], seen[-1]["sequence_number"]
        assert [event["sequence_number"] for event in seen] == list(range(len(seen)))
        with StartedApp(env) as url:
            after = events_of(url, run_id, cursor)  # the client, back with its cursor
            whole = events_of(url, run_id, -1)
    assert whole[: len(seen)] == seen, "what the client saw is the run's stream"
    assert whole[len(seen) :] == after and after[0]["sequence_number"] == cursor + 1, "and it goes on from there"
    assert whole[-1]["type"] == "response.completed"
    assert "w150" in reply_text(whole[-1]["response"]["output"]), "the resumed run's answer"
