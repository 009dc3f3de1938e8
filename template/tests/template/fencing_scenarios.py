# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""What test_runs_fencing.py does with two `start-app` processes on SQLite, and the template's own repo does on
PostgreSQL: a process stopped (SIGSTOP) while its run's tool runs, past its hold, then let go (SIGCONT); and
DELETE /me while a run's tool runs. The tool is held_tools.py's, which answers only when the test lets it go,
so that no step depends on how fast a loaded machine is."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import loopback
from support import sse_events

# Runs beat every 2 s and are held for 6 s: a process is taken only when stopped, not when a loaded machine keeps its
# loop busy a while (at 1 s, runs went back and forth between two busy processes, as fencing lets them, safely).
BEATS = {"MEMORY_LEASE_RENEW_SECONDS": "4"}
HELD = {"input": [{"role": "user", "content": "Please run held_lookup"}], "background": True}
CountRows = Callable[[str, str], int]  # (table, run id or owner) -> rows of it, read from the database itself


def until(check: Callable[[], Any], what: str, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"waited {timeout:g} s for {what}"
        time.sleep(0.1)
    return found


def lost_line(run_id: str) -> str:
    """What a process logs as it stops the work of a run that is no longer its own (runs/live.py)."""
    return f"runs: run {run_id} is no longer this process's"


def held_run(url: str, tools: str, conversation: str) -> str:
    """A turn of `conversation` on `url`, then a background run whose held_lookup call is running: its id."""
    named = {"context": {"conversation_id": conversation}}
    assert loopback.post(f"{url}/responses", json={"input": "Hello", **named}, timeout=60).status_code == 200
    answer = loopback.post(f"{url}/responses", json={**HELD, **named}, timeout=60)
    assert answer.status_code == 200, answer.text
    until(lambda: loopback.get(f"{tools}/calls", timeout=30).json() == ["held_lookup"], "the tool call")
    return answer.json()["id"]


def status(url: str, run_id: str) -> dict[str, Any]:
    answer = loopback.get(f"{url}/responses/{run_id}", timeout=60)
    return {"http": answer.status_code, **answer.json()}


def follow(url: str, run_id: str, chunks: list[str]) -> None:
    """Follow the run's stream from its start, however long it waits, adding each chunk to `chunks` as it comes."""
    timeout = httpx.Timeout(60, read=None)
    with loopback.stream("GET", f"{url}/responses/{run_id}", params={"stream": "true"}, timeout=timeout) as answer:
        for chunk in answer.iter_text():
            chunks.append(chunk)


def stop_until_taken(pid: int, other: str, run_id: str) -> dict[str, Any]:
    """Stop the process `pid` until the process at `other` has claimed its run and ended it: the run as `other`
    answers then. A process stopped in the middle of a transaction holds the database's lock (SQLite) or the
    run's row (PostgreSQL) until it runs again: then it is let go a moment, and stopped again."""
    for _ in range(5):
        os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (run := status(other, run_id))["status"] not in ("queued", "in_progress"):
                return run
            time.sleep(0.2)
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.5)
    raise AssertionError("the other process never claimed the run of the stopped one")


def assert_stalled_process_writes_nothing(
    stalled_pid: int, stalled: str, other: str, tools: str, log: Callable[[], str], conversation: str
) -> None:
    """The process at `stalled` runs a run whose tool is running; it is stopped past its hold; the process at
    `other` claims the run and completes it (the running call answered as interrupted). Then the tool answers and
    the stalled process runs again: it finds the run taken, at its next write or heartbeat, and stops the run's
    work, writing nothing. The run, its stream and its conversation stay as `other` ended them."""
    run_id = held_run(stalled, tools, conversation)
    followed: list[str] = []  # a client that follows the run on the stalled process, from before the stop
    follower = threading.Thread(target=follow, args=(stalled, run_id, followed), daemon=True)
    follower.start()
    until(lambda: followed, "the follower's first events")
    ended = stop_until_taken(stalled_pid, other, run_id)
    assert ended["status"] == "completed" and ended["http"] == 200, ended
    stream = loopback.get(f"{other}/responses/{run_id}", params={"stream": "true"}, timeout=60).text
    kept = loopback.get(f"{other}/conversations/{conversation}", timeout=60).json()["items"]
    loopback.get(f"{tools}/release", timeout=30)  # the stalled process's call answers: its output waits for it
    os.kill(stalled_pid, signal.SIGCONT)
    until(lambda: lost_line(run_id) in log() or status(other, run_id) != ended, "the stalled process to stop")
    for url in (other, stalled):
        now = status(url, run_id)
        assert now == ended, f"{url} answers {now['http']} {now['status']} ({now.get('error')}), not as it ended"
    again = loopback.get(f"{stalled}/responses/{run_id}", params={"stream": "true"}, timeout=60).text
    assert again == stream, "no event was written after the claim"
    events = sse_events(stream)
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert [event["type"] for event in events].count("response.created") == 1
    assert events[-1]["type"] == "response.completed", [event["type"] for event in events]
    output = json.dumps(events[-1]["response"]["output"])
    assert "interrupted" in output, f"the running call, answered as interrupted: {output}\n{log()[-4000:]}"
    follower.join(60)
    assert "".join(followed) == stream, "the follower on the stalled process got the stream the new holder wrote"
    assert loopback.get(f"{other}/conversations/{conversation}", timeout=60).json()["items"] == kept, "its turn too"
    assert [item.get("type", "message") for item in kept] == [
        "message", "message", "message", "function_call", "function_call_output", "message"], kept  # fmt: skip
    assert loopback.get(f"{tools}/calls", timeout=30).json() == ["held_lookup"], "the tool ran once"


def assert_deleted_run_leaves_nothing(
    running: str, deleting: str, tools: str, log: Callable[[], str], conversation: str, count_rows: CountRows
) -> None:
    """DELETE /me, sent to `deleting`, while a run on `running` is in its tool: the run's routes are 404 at once
    on both; once the tool answers, the run's process stops it, and no event, run or turn of it is written."""
    run_id = held_run(running, tools, conversation)
    owner = loopback.get(f"{running}/me/export", timeout=60).json()["owner"]
    deleted = loopback.delete(f"{deleting}/me", timeout=60)
    assert deleted.status_code == 200 and deleted.json()["deleted"]["runs"] >= 1, deleted.text
    for url in (running, deleting):
        assert loopback.get(f"{url}/responses/{run_id}", timeout=60).status_code == 404, "at once"
        followed = loopback.get(f"{url}/responses/{run_id}", params={"stream": "true"}, timeout=60)
        assert followed.status_code == 404
        assert loopback.get(f"{url}/conversations/{conversation}", timeout=60).status_code == 404
    loopback.get(f"{tools}/release", timeout=30)  # the tool answers: the run would go on, and write its answer
    until(lambda: lost_line(run_id) in log(), "the run's process to stop it")
    assert count_rows("agent_run_events", run_id) == 0, "no event written after the delete"
    assert count_rows("agent_runs", owner) == 0
    assert count_rows("agent_conversation_items", owner) == 0 and count_rows("agent_conversations", owner) == 0
    export = loopback.get(f"{deleting}/me/export", timeout=60).json()
    assert export["conversations"] == [] and export["runs"] == [], export
