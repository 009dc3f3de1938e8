# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Two worker processes of one `start-app` on one SQLite file: the first answer to an approval is final whichever
worker gets the replay (test_approval_answers.py), and a conversation's turns run in the order they came however the
workers' tries interleave (test_ordered_turns.py). One app serves this module's tests: each starts conversations of
its own, and spawning two workers costs each an import of the whole app."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from support import DELETED, ServerThread, StartedApp, app_env, mcp_tool_server, post_turn, reply_text

from agent_server import memory
from agent_server.memory.store import Store, StoredItem

from .test_approval_answers import DENIED, answer, declared
from .test_memory import counts
from .test_ordered_turns import in_thread, kept, send, until


@pytest.fixture(scope="module")
def two_workers() -> Iterator[StartedApp]:
    """start-app with two workers on one SQLite file, on the offline model, with an MCP server (in this process,
    which counts its runs in DELETED) whose delete_file asks first."""
    with ServerThread(mcp_tool_server().app) as tools:
        env = app_env(LLM_PROVIDER="offline", MCP_SERVERS=declared(f"{tools}/mcp"))
        with (app := StartedApp(env, options=("--workers", "2"))):
            yield app


@pytest.mark.waits
def test_two_workers_honour_the_first_answer_whichever_worker_gets_the_replay(two_workers):
    """Four conversations at once, each denied, then approved in every shape, each request on a new connection:
    the workers share the store's answers, and nothing runs (at the MCP server; the starter's send_summary returns
    no output)."""
    DELETED.clear()
    url = two_workers.url

    def send(body: dict[str, Any]) -> list[dict[str, Any]]:
        with httpx.Client(base_url=url, timeout=120) as fresh:  # a new connection: either worker
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


@pytest.mark.waits
def test_two_workers_on_one_sqlite_file_run_a_conversations_turns_in_the_order_they_came(two_workers):
    """Another process holds the conversation; turns come one after another, each on a new connection, until both
    worker processes have turns waiting. When it is given back, they run in the order they came, however the
    workers' tries interleave, each seeing the ones before it."""
    url, database = two_workers.url, two_workers.env["MEMORY_DATABASE_URL"]
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
    turns, texts = [], []
    while len({lease.split("/")[0] for lease in places()}) < 2:  # a waiter on each worker (its pid)
        assert len(texts) < 30, f"the connections all went to one worker: {places()}"
        # The kernel tends to hand one idle worker every new connection in turn: a burst of health checks at
        # once keeps both busy for a moment, so the next turn may reach either.
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: httpx.get(f"{url}/health", timeout=30), range(8)))
        texts.append(f"Turn {len(texts) + 2}")
        turns.append(in_thread(functools.partial(send, url, conversation, texts[-1])))
        until(lambda: len(places()) == len(texts), f"{texts[-1]!r} to wait for its turn")
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
