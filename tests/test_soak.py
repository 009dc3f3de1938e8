"""A bounded soak: many concurrent multi-turn conversations against one `start-app` process.

300 conversations of 3 turns (the second a tool turn), 32 at a time, half of them streamed, on the
offline model, after a warm-up of 50. Every turn must be a 200 that answers its own conversation
(each carries a unique marker, and each reply must name its own turn counts and prompt: no
cross-talk), and the server's resident memory may grow by less than 5% from after the warm-up to
the end. The figures are printed at the end of the run.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import httpx
import pytest
from renders import clean_env, uv
from servers import ServerProcess, free_port

CONVERSATIONS, TURNS, CONCURRENCY, WARM_UP = 300, 3, 32, 50


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def one_conversation(client: httpx.AsyncClient, number: int, failures: list[str]) -> None:
    marker, stream, history = uuid.uuid4().hex, number % 2 == 1, []
    prompts = [f"Hello {marker}", f"What time is it, {marker}?", f"Thanks {marker}"]
    for turn, prompt in enumerate(prompts, start=1):
        history.append({"role": "user", "content": prompt})
        response = await client.post("/invocations", json={"input": history, "stream": stream})
        if response.status_code != 200:
            failures.append(f"{response.status_code}: {response.text[:200]}")
            return
        items = output_items(response, stream)
        reply = next(item for item in reversed(items) if item["type"] == "message")["content"][0]["text"]
        tools = 1 if turn >= 2 else 0
        expected = f"I saw {turn} user, {turn - 1} assistant and {tools} tool turns. You said: {prompt}"
        if not reply.endswith(expected) or reply.count(marker) != 1:
            failures.append(f"cross-talk or a wrong answer in conversation {number}, turn {turn}: {reply!r}")
            return
        history.extend(items)


def output_items(response: httpx.Response, stream: bool) -> list[dict]:
    if not stream:
        return response.json()["output"]
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    return [event["item"] for event in events if event.get("type") == "response.output_item.done"]


async def run_conversations(url: str, first: int, count: int, failures: list[str]) -> float:
    limit = asyncio.Semaphore(CONCURRENCY)
    limits = httpx.Limits(max_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def one(number: int) -> None:
            async with limit:
                await one_conversation(client, number, failures)

        started = time.monotonic()
        await asyncio.gather(*(one(number) for number in range(first, first + count)))
        return time.monotonic() - started


@pytest.mark.xdist_group("soak")
def test_concurrent_conversations_answer_without_errors_cross_talk_or_growing_memory(renders, record_property):
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    port, log = free_port(), app / "soak.log"
    args = [str(app / ".venv" / "bin" / "start-app"), "--port", str(port)]
    health = f"http://127.0.0.1:{port}/health"
    # Traced as by default: to the app's ./mlruns.
    with ServerProcess(args, clean_env(LLM_PROVIDER="offline"), health, cwd=app, log=log) as server:
        failures: list[str] = []
        asyncio.run(run_conversations(server.url, 0, WARM_UP, failures))
        before = rss_bytes(server.pid)
        seconds = asyncio.run(run_conversations(server.url, WARM_UP, CONVERSATIONS, failures))
        after = rss_bytes(server.pid)
    requests = CONVERSATIONS * TURNS
    growth = (after - before) / before
    record_property(  # printed at the end of the run (conftest.py)
        "figures",
        (
            f"soak: {requests} requests ({CONVERSATIONS} conversations x {TURNS} turns, {CONCURRENCY} at a time) "
            f"in {seconds:.1f} s ({requests / seconds:.0f} req/s); {len(failures)} failures; "
            f"RSS {before / 2**20:.0f} MiB -> {after / 2**20:.0f} MiB ({growth:+.1%})"
        ),
    )
    assert not failures, failures[:5]
    assert growth < 0.05, f"RSS grew {growth:.1%}"
