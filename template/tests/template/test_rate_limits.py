# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Fair shares (turn/rate_limits.py): each identity's turns a minute and at once, a 429 with Retry-After
over either, and no other identity's turn refused for it."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import loopback
import pytest
import sqlalchemy as sa
import sqlalchemy.ext.asyncio as sa_async
from agents import Agent, function_tool
from conftest import AppSettings
from support import ServerThread, fresh_database, reply_text, served_with_memory

from agent_server import llm
from agent_server.turn.rate_limits import Shares


def someone() -> dict[str, str]:
    """A new identity: the limits are kept per process, and other tests' turns are not this one's."""
    return {"x-test-user": f"user-{uuid.uuid4()}@example.com"}


@pytest.fixture
def served(app_settings: AppSettings, api_mode: str, tmp_path) -> Iterator[str]:
    with served_with_memory(app_settings, tmp_path) as url:
        yield url


def turn(url: str, who: dict[str, str], **body: object) -> httpx.Response:
    return loopback.post(f"{url}/invocations", json={"input": "Hello", **body}, headers=who, timeout=60)


def test_an_identity_over_its_turns_a_minute_gets_a_429_and_others_do_not(served, app_settings):
    app_settings.setenv("RATE_LIMIT_TURNS_PER_MINUTE", "3")
    ada, bob = someone(), someone()
    assert [turn(served, ada).status_code for _ in range(3)] == [200, 200, 200]
    refused = turn(served, ada)
    assert refused.status_code == 429, refused.text
    assert "RATE_LIMIT_TURNS_PER_MINUTE" in refused.json()["error"]["message"]
    assert 1 <= int(refused.headers["retry-after"]) <= 20  # a token comes back every 20 s at 3 a minute
    background = turn(served, ada, background=True)  # a background run is a turn too, refused before it starts
    assert background.status_code == 429 and background.headers["retry-after"], background.text
    assert turn(served, bob).status_code == 200, "another identity's share is its own"


def test_an_identity_over_its_turns_at_once_gets_a_429_until_one_ends(served, app_settings, monkeypatch):
    app_settings.setenv("RATE_LIMIT_CONCURRENT_TURNS", "1")
    running, go_on = threading.Event(), threading.Event()

    def hold() -> str:
        running.set()
        go_on.wait(30)
        return "done"

    slow = Agent(name="slow", instructions="x", model=llm.model(), tools=[function_tool(hold, name_override="hold")])
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: slow)
    ada, bob = someone(), someone()
    first: list[httpx.Response] = []
    holding = threading.Thread(target=lambda: first.append(turn(served, ada, input="Use hold")))
    holding.start()
    try:
        assert running.wait(30), "the first turn never reached its tool"
        refused = turn(served, ada)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1", refused.text
        assert "RATE_LIMIT_CONCURRENT_TURNS" in refused.json()["error"]["message"]
        assert "You said: Hello" in reply_text(turn(served, bob).json()["output"]), "another identity is not held up"
    finally:
        go_on.set()
        holding.join(60)
    assert first[0].status_code == 200
    assert turn(served, ada).status_code == 200, "the identity's turn ended: it may take another"


def test_with_memory_off_a_turn_whose_identity_cannot_be_read_is_refused_not_uncounted(app_settings, api_mode):
    """Memory off, MEMORY_USER_HEADER set: a turn with no identity, two, or one too long would be counted against no
    one. It gets memory's own 401 or 400, however many are sent."""
    app_settings.setenv("MEMORY_BACKEND", "none")
    app_settings.setenv("MEMORY_USER_HEADER", "x-test-user")
    app_settings.setenv("RATE_LIMIT_TURNS_PER_MINUTE", "3")
    from agent_server.app import app

    unreadable = {
        "none": ([], 401, "names none (x-test-user)"),
        "twice": ([("x-test-user", "ada@example.com"), ("x-test-user", "bob@example.com")], 400, "2 times"),
        "too long": ([("x-test-user", "a" * 400)], 400, "400 characters; at most 320"),
    }
    with ServerThread(app) as url:
        for headers, status, says in unreadable.values():
            answers = [loopback.post(f"{url}/invocations", json={"input": "Hello"}, headers=headers) for _ in range(4)]
            assert [answer.status_code for answer in answers] == [status] * 4, answers[-1].text
            assert says in answers[-1].json()["error"]["message"] and "RATE_LIMIT" in answers[-1].text
        assert turn(url, someone()).status_code == 200, "a turn that names its user is served"


def test_without_limits_nothing_is_counted(served):
    who = someone()
    assert all(turn(served, who).status_code == 200 for _ in range(5))
    from agent_server.turn.rate_limits import SHARES

    assert who["x-test-user"] not in SHARES.buckets and who["x-test-user"] not in SHARES.running


def test_a_bucket_refills_at_its_rate_and_keeps_a_bounded_number_of_identities(monkeypatch):
    shares = Shares()
    assert [shares.claim("ada", 2, 0, now=0.0) for _ in range(2)] == [None, None]
    assert shares.claim("ada", 2, 0, now=0.0) == ("at most 2 turns a minute (RATE_LIMIT_TURNS_PER_MINUTE)", 30)
    assert shares.claim("ada", 2, 0, now=30.0) is None, "one turn back after 30 s at 2 a minute"
    monkeypatch.setattr("agent_server.turn.rate_limits.MAX_IDENTITIES", 3)
    for n in range(10):
        shares.claim(f"user-{n}", 2, 0, now=40.0)
    assert list(shares.buckets) == ["user-7", "user-8", "user-9"]
    assert list(shares.loads) == ["user-7", "user-8", "user-9"]


def test_an_identitys_load_is_its_turns_running_at_once_and_falls_over_about_a_second():
    shares = Shares()  # fair_steps.py lets the less loaded identities' steps go first
    assert shares.load_of("ada", now=0.0) == 0.0
    assert [shares.claim("ada", 0, 0, now=100.0) for _ in range(2)] == [None, None]
    assert shares.load_of("ada", now=100.0) == 2.0, "a flood weighs from its first turns"
    assert shares.load_of("ada", now=101.0) == 2.0
    shares.release("ada", now=101.0)
    assert shares.load_of("ada", now=101.0) == 2.0, "a gap between turns does not make it light at once"
    assert shares.load_of("ada", now=102.0) == pytest.approx(1 + math.exp(-1))
    shares.claim("ada", 0, 0, now=102.0)
    assert shares.load_of("ada", now=102.0) == 2.0, "two run again"
    for _ in range(2):
        shares.release("ada", now=120.0)
    assert "ada" not in shares.running, "no turn runs"
    assert shares.load_of("ada", now=120.0) == 2.0
    assert shares.load_of("ada", now=121.0) == pytest.approx(2 * math.exp(-1), rel=1e-6), "what it ran still counts"
    assert shares.load_of("bob", now=121.0) == 0.0


BACKENDS = ["sqlite"] + (["postgres"] if os.environ.get("MEMORY_TEST_POSTGRES_URL") else [])


@pytest.fixture(params=BACKENDS)
def on_store(request: pytest.FixtureRequest, app_settings: AppSettings, api_mode: str, tmp_path) -> Iterator[str]:
    """The app on SQLite, and on PostgreSQL when MEMORY_TEST_POSTGRES_URL names one; yields the database URL."""
    sqlite = request.param == "sqlite"
    url = fresh_database(tmp_path / "conversations.db") if sqlite else os.environ["MEMORY_TEST_POSTGRES_URL"]
    app_settings.setenv("MEMORY_BACKEND", request.param)
    app_settings.setenv("MEMORY_DATABASE_URL", url)
    app_settings.setenv("MEMORY_USER_HEADER", "x-test-user")
    yield url


def in_database(url: str, statement: str, **values: object) -> list[tuple]:
    """One statement on the app's database, as another instance's transaction would be."""

    async def run() -> list[tuple]:
        engine = sa_async.create_async_engine(url.replace("postgresql://", "postgresql+asyncpg://"))
        try:
            async with engine.begin() as connection:
                result = await connection.execute(sa.text(statement), values)
                return list(result) if result.returns_rows else []
        finally:
            await engine.dispose()

    return asyncio.run(run())


def test_on_postgres_an_identitys_turns_are_counted_for_every_instance_and_with_sqlite_per_process(
    on_store, app_settings
):
    """With memory on PostgreSQL, turns another instance took (its bucket's tokens, its running turns, as rows in the
    store) count here; a running turn whose process died stops counting as its row runs out. With SQLite the
    counts are this process's alone, and the store keeps none."""
    from agent_server.app import app

    app_settings.setenv("RATE_LIMIT_TURNS_PER_MINUTE", "3")
    ada = someone()
    owner = ada["x-test-user"]
    with ServerThread(app) as url:
        assert [turn(url, ada).status_code for _ in range(2)] == [200, 200]
        if not on_store.startswith("postgresql"):
            with contextlib.closing(sqlite3.connect(on_store)) as database:
                assert database.execute("SELECT * FROM agent_rate_limits").fetchall() == [], "none kept in the store"
            assert turn(url, ada).status_code == 200 and turn(url, ada).status_code == 429, "3 a minute, here"
            return
        [(tokens,)] = in_database(on_store, "SELECT tokens FROM agent_rate_limits WHERE owner = :o", o=owner)
        assert 0.9 < tokens < 1.1, "two of its three tokens taken, in the store"
        in_database(on_store, "UPDATE agent_rate_limits SET tokens = 0 WHERE owner = :o", o=owner)  # another's turn
        refused = turn(url, ada)
        assert refused.status_code == 429 and "RATE_LIMIT_TURNS_PER_MINUTE" in refused.text, refused.text
        assert 1 <= int(refused.headers["retry-after"]) <= 20

        app_settings.setenv("RATE_LIMIT_TURNS_PER_MINUTE", "0")
        app_settings.setenv("RATE_LIMIT_CONCURRENT_TURNS", "1")
        running = "INSERT INTO agent_turns_running VALUES (:id, :o, 'elsewhere:1', :until)"
        in_database(on_store, running, id=f"elsewhere:1/{uuid.uuid4().hex}", o=owner, until=time.time() + 30)
        refused = turn(url, ada)
        assert refused.status_code == 429 and "RATE_LIMIT_CONCURRENT_TURNS" in refused.text, refused.text
        in_database(
            on_store, "UPDATE agent_turns_running SET expires_at = :t WHERE owner = :o", t=time.time() - 1, o=owner
        )
        assert turn(url, ada).status_code == 200, "a turn whose process stopped renewing it counts no more"
        left = in_database(on_store, "SELECT holder FROM agent_turns_running WHERE owner = :o", o=owner)
        assert left == [("elsewhere:1",)], "the app's own turn gave its row back as it ended"
