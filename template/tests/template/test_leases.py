# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""A turn's lease knows when its holder is gone (agent_server/memory/leases.py): no conversation stays locked
by a process that died mid-turn."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time

import httpx
import loopback
import pytest
from support import Conversation, ServerThread, StartedApp, app_env, mcp_tool_server, reply_text

from agent_server import config, memory
from agent_server.memory import leases
from agent_server.memory.store import Busy, Store

ADA = "ada@example.com"


def lease_of(database: str, conversation_id: str) -> str | None:
    with sqlite3.connect(database) as connection:
        row = connection.execute("SELECT lease FROM agent_conversations WHERE id = ?", (conversation_id,)).fetchone()
    return row[0] if row else None


@pytest.mark.waits
def test_a_turn_whose_process_was_killed_does_not_hold_its_conversation(tmp_path):
    """kill -9 while a turn waits on a slow tool; the app started again on the same file answers the next turn of
    that conversation at once (it frees its dead predecessor's lease), with the killed turn not stored."""
    database = str(tmp_path / "conversations.db")
    with ServerThread(mcp_tool_server().app) as tools:
        servers = json.dumps([{"name": "tools", "url": f"{tools}/mcp"}])
        env = app_env(LLM_PROVIDER="offline", MEMORY_DATABASE_URL=database, MCP_SERVERS=servers)
        killed = StartedApp(env)
        with killed as url, loopback.Client(base_url=url, timeout=60) as client:
            chat = Conversation(client, stream=True)
            chat.send("Hello")
            body = {"input": [{"role": "user", "content": "Please run slow_lookup"}], "stream": True}
            body["context"] = {"conversation_id": chat.id}
            mid_turn = threading.Thread(target=lambda: _post_until_cut(url, body))
            mid_turn.start()
            deadline = time.monotonic() + 30
            while lease_of(database, chat.id) is None:
                assert time.monotonic() < deadline, "the turn never took its conversation"
                time.sleep(0.05)
            assert lease_of(database, chat.id).startswith(f"{leases.INSTANCE}:{killed.pid}/"), "it names its holder"
            time.sleep(0.5)  # inside slow_lookup's 3 s
            killed.process.kill()
            mid_turn.join(timeout=30)
        with StartedApp(env) as url, loopback.Client(base_url=url, timeout=60) as client:
            chat.client = client
            assert lease_of(database, chat.id) is None, "freed at start-up"
            chat.history = chat.history[:2]  # what the client kept: the killed turn got no answer
            reply = reply_text(chat.send("Are you there?"))
            assert "I saw 2 user, 1 assistant and 0 tool turns" in reply, "the killed turn stored nothing"


def _post_until_cut(url: str, body: dict) -> None:
    try:
        loopback.post(f"{url}/invocations", json=body, timeout=60)
    except httpx.HTTPError:
        pass  # the server died under it, as intended


@pytest.mark.waits
def test_leases_are_renewed_while_their_turn_runs_and_free_soon_after_it_is_not(tmp_path):
    async def run() -> None:
        settings = config.Settings({"MEMORY_BACKEND": "sqlite", "MEMORY_DATABASE_URL": str(tmp_path / "c.db")})
        store = Store(memory.MemorySettings.from_config(settings).url)
        await store.open()
        keeper = leases.Leases(renew_every=0.5, turn_limit=6)  # a lease is good for 1.5 s between renewals
        keeper.start(store)
        try:
            running, too_long, abandoned = leases.new_lease(), leases.new_lease(), "elsewhere:1/abandoned"
            for conversation_id, lease in (("running", running), ("too-long", too_long), ("abandoned", abandoned)):
                await store.start_turn(ADA, conversation_id, lease, keeper.hold_seconds)
            keeper.hold(running, ADA, "running")
            keeper.held[too_long] = leases.Held(ADA, "too-long", time.time() - 5)  # at the turn limit in 1 s
            await asyncio.sleep(1.7)
            await store.start_turn(ADA, "abandoned", "next", 60)  # no one renewed it: free after 1.5 s
            await asyncio.sleep(2)
            with pytest.raises(Busy):
                await store.start_turn(ADA, "running", "next", 60)  # renewed all along
            await store.start_turn(ADA, "too-long", "next", 60)  # MEMORY_TURN_LEASE_SECONDS: no longer renewed
        finally:
            await keeper.stop()
            await store.close()

    asyncio.run(run())
