# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Ordered turns (agent_server/memory/queue.py): a turn of a conversation that is answering another request waits,
and runs after the turns that came before it, seeing their answers; past MEMORY_TURN_QUEUE_SECONDS it gets a 409 that
says why. Through the real app, SDK and offline model, on a real HTTP server; on SQLite, and on PostgreSQL too when
MEMORY_TEST_POSTGRES_URL names one; across two worker processes on one SQLite file in test_workers.py."""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import loopback
import pytest
import sqlalchemy as sa
from agents import Agent, function_tool
from support import ServerThread, post_turn, reply_text

from agent_server import llm, memory
from agent_server.memory.store import Busy, Store, StoredItem
from agent_server.store.schema import turn_queue

from .test_memory import ADA, backend, counts  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)


class SlowTool:
    """An agent whose one tool `hold` sleeps until the test lets it go, or `seconds` have passed."""

    def __init__(self, seconds: float) -> None:
        self.started, self.release = threading.Event(), threading.Event()

        @function_tool(name_override="hold")
        async def hold() -> str:
            """Waits for the test."""
            self.started.set()
            until = time.monotonic() + seconds
            while not self.release.is_set() and time.monotonic() < until:
                await asyncio.sleep(0.02)
            return "released"

        self.agent = Agent(name="slow", instructions="x", model=llm.model(), tools=[hold])


@pytest.fixture
def slow_agent(monkeypatch: pytest.MonkeyPatch, api_mode: str) -> Iterator[Callable[..., SlowTool]]:
    """The app's agent made a SlowTool's (`seconds` at most); its tool let go when the test ends, passed or not."""
    made: list[SlowTool] = []

    def make(seconds: float = 60) -> SlowTool:
        made.append(SlowTool(seconds))
        monkeypatch.setattr("agent_server.agent.create_agent", lambda: made[-1].agent)
        return made[-1]

    yield make
    for tool in made:
        tool.release.set()


@pytest.fixture
def served(backend: str, api_mode: str, model_log: list[dict[str, Any]]) -> Iterator[str]:  # noqa: F811
    from agent_server.app import app

    with ServerThread(app) as url:
        yield url


def send(url: str, conversation_id: str, text: str, stream: bool = False, timeout: float = 60) -> str:
    """One turn, from a client of its own (a tab, a device): the reply's text. As Ada, where the app reads
    `x-test-user` (test_memory.py's `backend`); an app that reads no identity header has one owner, `local`."""
    body = {"input": [{"role": "user", "content": text}], "context": {"conversation_id": conversation_id}}
    with loopback.Client(base_url=url, headers={"x-test-user": ADA}, timeout=timeout) as client:
        return reply_text(post_turn(client, body, stream)[0])


def in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """`work` on a thread of its own; what it returned (or raised) lands in the list."""
    done: list[Any] = []

    def run() -> None:
        try:
            done.append(work())
        except Exception as error:  # the test asserts on it
            done.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, done


def until(check: Callable[[], Any], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def in_store(transaction: Callable[[sa.Connection], Any], write: bool = False) -> Any:
    """`transaction` on the test's own connection to the app's database."""

    async def run() -> Any:
        store = Store(memory.memory_settings().url)
        try:
            return await store.run(transaction, write)
        finally:
            await store.close()

    return asyncio.run(run())


def waiting(conversation_id: str) -> int:
    """How many turns wait for the conversation (their places in agent_turn_queue)."""
    query = sa.select(sa.func.count()).where(turn_queue.c.conversation_id == conversation_id)
    return int(in_store(lambda connection: connection.scalar(query)))


def kept(url: str, conversation_id: str) -> list[dict[str, Any]]:
    with loopback.Client(base_url=url, headers={"x-test-user": ADA}) as client:
        return client.get(f"/conversations/{conversation_id}").json()["items"]


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_turns_sent_at_once_answer_in_the_order_they_came_each_seeing_the_ones_before(served, slow_agent, stream):
    """Three clients of one conversation (a second tab, a client that sends before the answer ends): the first turn
    runs a slow tool, the second and third come while it runs, one after the other. All three are answered, in the
    order they came, each with the answers before it in its history."""
    slow = slow_agent()
    conversation = f"ordered-{uuid.uuid4()}"
    first, first_answer = in_thread(lambda: send(served, conversation, "Please hold", stream))
    assert slow.started.wait(30), "the first turn never reached its tool"
    later = []
    for number, text in enumerate(["Second", "Third"], start=1):
        later.append(in_thread(functools.partial(send, served, conversation, text, stream)))
        until(lambda number=number: waiting(conversation) == number, f"{text!r} to wait for its turn")
    slow.release.set()
    for thread, _ in [(first, first_answer), *later]:
        thread.join(60)
    (second_answer, third_answer) = (answer for _, answer in later)
    assert first_answer[0].startswith("The tool returned: released."), first_answer
    assert counts(2, 1, 1) in second_answer[0], "the second turn saw the first one's answer"
    assert counts(3, 2, 1) in third_answer[0], "the third saw both"
    items = kept(served, conversation)
    assert [item.get("role") or item["type"] for item in items] == [
        "user", "function_call", "function_call_output", "assistant", "user", "assistant", "user", "assistant",
    ]  # fmt: skip
    assert [item["content"] for item in items if item.get("role") == "user"] == ["Please hold", "Second", "Third"]
    assert waiting(conversation) == 0, "each left the queue with its turn"


def test_a_turn_that_waits_past_MEMORY_TURN_QUEUE_SECONDS_gets_a_409_that_says_why(served, slow_agent, app_settings):
    app_settings.setenv("MEMORY_TURN_QUEUE_SECONDS", "1")
    slow = slow_agent()  # the first turn holds the conversation until the refused one has its answer
    conversation = f"ordered-{uuid.uuid4()}"
    first, first_answer = in_thread(lambda: send(served, conversation, "Please hold"))
    assert slow.started.wait(30), "the first turn never reached its tool"
    body = {"input": [{"role": "user", "content": "Meanwhile"}], "context": {"conversation_id": conversation}}
    started = time.monotonic()
    refused = loopback.post(f"{served}/invocations", json=body, headers={"x-test-user": ADA}, timeout=60)
    waited = time.monotonic() - started
    assert refused.status_code == 409, refused.text
    message = refused.json()["error"]["message"]
    assert message == (
        f"Conversation {conversation} has been answering another request for 1 s (MEMORY_TURN_QUEUE_SECONDS=1); "
        "send this one when that one is done."
    )
    assert refused.json()["error"]["param"] == "context.conversation_id"
    assert 0.9 < waited < 2.5, waited
    assert waiting(conversation) == 0, "it left the queue"
    assert first.is_alive(), "refused while the first turn still ran"
    slow.release.set()
    first.join(60)
    assert first_answer[0].startswith("The tool returned: released."), first_answer
    assert counts(2, 1, 1) in send(served, conversation, "Again"), "the refused turn stored nothing"


def test_a_waiting_turn_whose_client_hangs_up_leaves_the_queue(served, slow_agent):
    slow = slow_agent()
    conversation = f"ordered-{uuid.uuid4()}"
    first, first_answer = in_thread(lambda: send(served, conversation, "Please hold"))
    assert slow.started.wait(30)
    turn = {"input": [{"role": "user", "content": "Never mind"}], "context": {"conversation_id": conversation}}
    body = json.dumps(turn).encode()
    head = f"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nx-test-user: {ADA}\r\n"
    head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    host, port = served.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as gone:
        gone.sendall(head.encode() + body)
        until(lambda: waiting(conversation) == 1, "the second turn to wait")
    # Its client hung up as it waited.
    until(lambda: waiting(conversation) == 0, "the turn whose client hung up to leave the queue", seconds=5)
    assert first.is_alive(), "while the first turn still runs"
    slow.release.set()
    first.join(60)
    assert counts(2, 1, 1) in send(served, conversation, "Next"), "the turn whose client went stored nothing"
    assert [item["content"] for item in kept(served, conversation) if item.get("role") == "user"] == [
        "Please hold", "Next",
    ]  # fmt: skip


def test_a_free_conversation_goes_to_the_turn_that_waits_for_it_and_a_dead_waiter_holds_up_nobody(backend):  # noqa: F811
    """At the store: a turn that comes while another waits (on any process) does not take the conversation before
    it, even when it is free; a waiter whose process died stops refreshing its place, and is passed by."""
    conversation, gone = f"ordered-{uuid.uuid4()}", f"ordered-{uuid.uuid4()}"

    async def run() -> None:
        store = Store(memory.memory_settings().url)
        await store.open()
        try:
            await store.start_turn(ADA, conversation, "first", 60)
            hello = StoredItem({"role": "user", "content": "Hello"}, None)
            await store.finish_turn(ADA, conversation, "first", [hello], False, "Hello", 0)  # free again
            # Leases of their own: a database another run of this test used still holds that run's dead places.
            waiter, gone_waiter = f"waiter-{uuid.uuid4()}", f"gone-waiter-{uuid.uuid4()}"
            for conversation_id, lease in ((conversation, waiter), (gone, gone_waiter)):  # `gone` has no row
                place = {"owner": ADA, "conversation_id": conversation_id, "lease": lease, "expires_at": time.time()}
                await store.run(lambda c, place=place: c.execute(turn_queue.insert().values(place)), write=True)
            await store.run(_places_good_for(60, waiter, gone_waiter), write=True)
            for conversation_id in (conversation, gone):
                with pytest.raises(Busy):
                    await store.start_turn(ADA, conversation_id, "newcomer", 60)
            await store.run(_places_good_for(-1, waiter, gone_waiter), write=True)  # their processes stopped
            assert [s.item["content"] for s in await store.start_turn(ADA, conversation, "newcomer", 60)] == ["Hello"]
            assert await store.start_turn(ADA, gone, "newcomer", 60) == []
        finally:
            await store.close()

    asyncio.run(run())


def _places_good_for(seconds: float, *leases: str) -> Callable[[sa.Connection], None]:
    def update(connection: sa.Connection) -> None:
        kept = turn_queue.update().where(turn_queue.c.lease.in_(leases))
        connection.execute(kept.values(expires_at=time.time() + seconds))

    return update
