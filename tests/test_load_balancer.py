"""Several instances behind a real load balancer on one PostgreSQL: HAProxy from Debian's package (scripts/test
installs it), with the app's own template/deploy/haproxy.cfg (its addresses replaced), in front of three `start-app`
instances of two workers each, all started here on loopback and stopped by their process ids.

One cluster serves every test of this file, in this order:
- a rolling restart under load (chats at c=16 through HAProxy, each turn with an Idempotency-Key, sent again with it
  if a stopping instance cut it; each instance SIGTERMed and started again in turn) loses nothing: every turn and
  background run answered and stored, no tool run twice, no conversation left locked;
- one user's turns a minute hold across the three instances (RATE_LIMIT_TURNS_PER_MINUTE, counted in the store);
- a follower on instance B of a run on instance A sees every event once, in order, across a reconnect to C;
- kill -9 of an instance mid-run: its run finishes on another within four heartbeats (the cluster is left with two
  instances);
- the chat page's resume through HAProxy, the instance running its turn stopped mid-turn (last: one is left).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import socket
import threading
import time
import uuid
from typing import Any

import chat_page_support as chat_page
import httpx
import pytest
from load_balancer_cluster import LIMIT, RENEW, Load, ended_run
from playwright.sync_api import expect
from servers import reply_text

pytestmark = pytest.mark.xdist_group("load_balancer")


def test_a_rolling_restart_under_load_loses_no_turn_and_runs_no_tool_twice(cluster, record_property):
    tools_before = cluster.tool_runs()
    began, restarts = time.monotonic(), []
    load = Load(cluster.url)
    loading = threading.Thread(target=load.run)
    loading.start()
    try:
        for instance in cluster.instances:  # one at a time, as a deploy does
            load.going.set()
            time.sleep(2)
            before, stopping = load.turns, time.monotonic()
            assert instance.stop() == 0, f"{instance.name} stopped cleanly within its grace period"
            stopped = time.monotonic()
            time.sleep(1)  # the load goes on through the others
            assert load.turns > before, "turns went on through the others while it stopped"
            # Its next start, with the load held between turns: two cores cannot import the app's two workers
            # while serving 16 clients (90 s, against 10), and the start is not what this test is about.
            load.going.clear()
            instance.start()
            restarts.append(
                f"{instance.name} stopped in {stopped - stopping:.1f} s, up in {time.monotonic() - stopped:.1f} s"
            )
        load.going.set()
        time.sleep(1)
    finally:
        load.stop.set()
        load.going.set()
        loading.join(180)
    assert not load.failures, f"{len(load.failures)} failed; {restarts}\n" + "\n".join(load.failures[:10])
    assert load.turns > 50 and load.runs, (load.turns, len(load.runs))
    for user, run_id in load.runs:
        run = ended_run(cluster.url, user, run_id)
        assert run["status"] == "completed", run
        assert "You said: Thanks" in reply_text(run["output"])
    for user, conversation_id, stored in load.chats:  # each turn stored, in its conversation, and resumable
        kept = httpx.get(f"{cluster.url}/conversations/{conversation_id}", headers={"x-test-user": user}, timeout=30)
        assert kept.status_code == 200 and len(kept.json()["items"]) == stored, (user, kept.text[:300])
    assert cluster.tool_runs() - tools_before == load.tool_turns, "each tool turn ran its tool once"
    locked = cluster.postgres.psql("SELECT count(*) FROM agent_conversations WHERE lease IS NOT NULL")
    assert locked == "0", "no conversation is left locked"
    took = time.monotonic() - began
    record_property(
        "figures",
        f"rolling restart: {load.turns} turns and {len(load.runs)} background runs in "
        f"{took:.0f} s ({'; '.join(restarts)}), {load.retries} sent again with their key, 0 lost, no tool twice",
    )


def test_one_users_turns_a_minute_hold_whichever_instance_serves_them(cluster):
    user = {"x-test-user": f"limited-{uuid.uuid4().hex[:8]}@example.com"}
    urls = [each.url for each in cluster.instances] + [cluster.url]
    started = time.monotonic()
    codes = [
        httpx.post(f"{urls[n % 4]}/invocations", json={"input": "Hello"}, headers=user, timeout=60).status_code
        for n in range(3 * LIMIT)
    ]
    refill = int((time.monotonic() - started) * LIMIT / 60) + 1  # the bucket refills as the burst goes on
    assert set(codes) == {200, 429}, codes
    assert LIMIT <= codes.count(200) <= LIMIT + refill, codes


def test_a_follower_on_another_instance_sees_every_event_once_in_order_across_a_reconnect(cluster):
    a, b, c = cluster.instances
    user = {"x-test-user": f"follower-{uuid.uuid4().hex[:8]}@example.com"}
    body = {"input": [{"role": "user", "content": "Please run slow_lookup"}], "background": True}
    run_id = httpx.post(f"{a.url}/invocations", json=body, headers=user, timeout=30).json()["id"]
    seen: list[dict[str, Any]] = []
    with httpx.stream("GET", f"{b.url}/responses/{run_id}", params={"stream": "true"}, headers=user, timeout=60) as s:
        for line in s.iter_lines():
            if line.startswith("data: {"):
                seen.append(json.loads(line[6:]))
                if len(seen) == 3:
                    break  # the client goes away mid-run
    cursor = seen[-1]["sequence_number"]
    again = httpx.get(
        f"{c.url}/responses/{run_id}", params={"stream": "true", "starting_after": cursor}, headers=user, timeout=60
    )
    seen += [json.loads(line[6:]) for line in again.text.splitlines() if line.startswith("data: {")]
    whole = httpx.get(f"{a.url}/responses/{run_id}", params={"stream": "true"}, headers=user, timeout=60).text
    stored = [json.loads(line[6:]) for line in whole.splitlines() if line.startswith("data: {")]
    assert [event["sequence_number"] for event in seen] == list(range(len(stored))), "each once, in order"
    assert seen == stored and seen[-1]["type"] == "response.completed"


def test_kill_9_of_an_instance_mid_run_and_its_run_finishes_on_another(cluster, record_property):
    a = cluster.instances[0]
    user = {"x-test-user": f"killed-{uuid.uuid4().hex[:8]}@example.com"}
    body = {"input": [{"role": "user", "content": "Please run slow_lookup"}], "background": True}
    run = httpx.post(f"{a.url}/invocations", json=body, headers=user, timeout=30).json()
    time.sleep(1)  # the tool is running (3 s)
    a.kill()  # the file's last test: the cluster goes on with two instances, and stops
    killed = time.monotonic()
    done = ended_run(cluster.url, user["x-test-user"], run["id"], seconds=45)
    took = time.monotonic() - killed
    assert done["status"] == "completed", done
    # Claimed within four heartbeats (RENEW / 2 each) of its last, then its conversation's lease is free within
    # three renewals: the resumed turn waits in the queue for it.
    assert took < 4 * RENEW / 2 + 3 * RENEW + 5, took
    assert "interrupted" in json.dumps(done["output"]), "the call it was running is answered as interrupted"
    record_property("figures", f"kill -9: the run finished on another instance {took:.1f} s later")


def test_the_pages_resume_works_whichever_instance_the_load_balancer_picks(cluster, browser, record_property):
    """The chat page, through HAProxy, asks for a 5 s tool (a background run); the instance running it is stopped
    (SIGTERM) mid-turn and the page reloaded once that instance refuses connections: the reload reaches another
    instance, which follows the run from the store, and the page shows the whole answer, once."""
    began = time.monotonic()
    user = f"page-{uuid.uuid4().hex[:8]}@example.com"
    page = browser.new_page(extra_http_headers={"x-test-user": user})
    chat = chat_page.ChatPage(page, cluster.url)
    page.fill("#prompt", "Please run five_second_job")
    chat.send.click()
    run_id = chat_page.pending_run(page)["runId"]
    holder = cluster.postgres.psql(f"SELECT holder FROM agent_runs WHERE id = '{run_id}'")  # instance:pid/lease
    pid = int(holder.split("/")[0].rsplit(":", 1)[1])
    running = [each for each in cluster.instances if each.server and each.server.process.pid == os.getpgid(pid)]
    assert len(running) == 1, (holder, [each.name for each in cluster.instances])
    with concurrent.futures.ThreadPoolExecutor(1) as stopping:
        stopped = stopping.submit(running[0].stop)
        deadline = time.monotonic() + 10
        while True:  # until it refuses new connections: HAProxy sends the reload elsewhere
            try:
                socket.create_connection(("127.0.0.1", running[0].port), timeout=1).close()
            except ConnectionRefusedError:
                break
            assert time.monotonic() < deadline, "the stopping instance still takes connections"
            time.sleep(0.05)
        run = httpx.get(f"{cluster.url}/responses/{run_id}", headers={"x-test-user": user}, timeout=30).json()
        assert run["status"] == "in_progress", "refused mid-turn (uvicorn's workers: once it exited)"
        page.reload()
        expect(chat.replies).to_have_count(1, timeout=30_000)
        expect(chat.replies.nth(0)).to_contain_text("The tool returned: finished after five seconds")
        assert chat.replies.nth(0).inner_text().count("The tool returned") == 1, "the answer's text once"
        expect(page.locator("details.tool")).to_have_count(1)
        assert stopped.result(timeout=60) == 0, "it stopped cleanly"
    expect(page.locator(".error")).to_have_count(0)
    assert not chat.errors
    took = time.monotonic() - began
    record_property("figures", f"the page's resume through HAProxy, its instance stopped: {took:.1f} s")
