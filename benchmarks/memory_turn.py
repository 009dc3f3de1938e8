"""Benchmark: what server-side conversation memory adds to a turn, per backend and history length.

Run with scripts/benchmark (it renders an app and runs this with the app's Python).
Times whole non-streaming /invocations requests through the real app in one process and one
event loop (httpx on the ASGI app, the offline model), for conversations with 10 and 1000 items
already stored:
- MEMORY_BACKEND=none, the baseline: the client sends the whole history and its new turn;
- sqlite and postgres (a real server, from tests/postgres.py), the client sending only its new
  turn (what memory is for), and again sending the whole history (the merge finds it extends).
Backends interleave run by run, each turn on a fresh conversation holding exactly the stored
history, written beforehand through the Store API. Prints a Markdown section for RESULTS.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import gc
import io
import json
import logging
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import cli
from sections import publish, store_machine

os.environ.setdefault("LLM_PROVIDER", "offline")
os.environ.setdefault("LLM_API", "chat_completions")
# Tracing off: a trace's export costs both sides alike and would dilute the ratio of what memory adds.
os.environ.setdefault("MLFLOW_TRACE_SAMPLING_RATIO", "0")
os.environ.setdefault("MAX_INPUT_ITEMS", "2000")  # the baseline sends 1001 items, over the app's default
os.environ["MEMORY_BACKEND"] = "none"  # the app starts without memory; each request picks its backend (use())

import httpx  # noqa: E402
from agent_server import config, llm, memory  # noqa: E402
from agent_server.app import app  # noqa: E402
from agent_server.history import render_each  # noqa: E402
from agent_server.memory import database  # noqa: E402
from agent_server.memory.store import Store, StoredItem  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Conversation memory (benchmarks/memory_turn.py)"
RUNS = {10: 21, 1000: 21}  # stored items: timed runs (the long history's requests take most of the time)
CONFIGS = [
    ("none", "whole history"),
    ("sqlite", "new turn"),
    ("sqlite", "whole history"),
    ("postgres", "new turn"),
    ("postgres", "whole history"),
]
EXPECTED_MERGE = {"new turn": "new turn", "whole history": "extends"}  # memory_merge.py's kinds
NEW_TURN = {"role": "user", "content": "And now?"}
QUIET_SECONDS = 0.01
STORE_TURNS = 300
CPU_TARGET = 1.25  # issue 27: with memory on, a conversation turn's CPU at most 1.25x memory off


def chat_history(size: int) -> list[dict]:
    """`size` items in whole turns as the chat UI replays them: tool turns (question, call, output, answer),
    and a plain question and answer where fewer than four items are left."""
    assert size % 2 == 0, "whole turns need an even number of items"
    items: list[dict] = []
    turn = 0
    while len(items) < size:
        items.append({"role": "user", "content": [{"type": "input_text", "text": f"question {turn}"}]})
        if size - len(items) >= 3:
            items.append(
                {
                    "type": "function_call",
                    "id": f"uuid-{turn}",
                    "call_id": f"call_{turn}",
                    "name": "f",
                    "arguments": "{}",
                }
            )
            items.append({"type": "function_call_output", "call_id": f"call_{turn}", "output": "x" * 200})
        items.append(
            {"role": "assistant", "content": [{"type": "output_text", "text": "answer " * 40}], "id": f"u{turn}"}
        )
        turn += 1
    return items


def stored_form(items: list[dict]) -> list[StoredItem]:
    """The items as the app itself stores a turn (memory.Turn.finish): rendered, with the client's ids."""
    each = render_each(items, llm.llm_settings().api)
    return [StoredItem(entry.item, entry.client_id if isinstance(entry.client_id, str) else None) for entry in each]


async def prepare(store: Store, stored: list[StoredItem]) -> str:
    """A new conversation holding `stored`, written as one turn through the Store API."""
    conversation_id, lease = f"bench-{uuid.uuid4().hex}", uuid.uuid4().hex
    await store.start_turn(memory.LOCAL_OWNER, conversation_id, lease, 60)
    await store.finish_turn(memory.LOCAL_OWNER, conversation_id, lease, stored, False, "benchmark", 0)
    return conversation_id


async def store_alone(stores: dict[str, Store], stored: list[StoredItem], turns: int = STORE_TURNS) -> dict[str, float]:
    """Each backend's CPU ms for a turn's store work alone (start_turn, then finish_turn with a question and its
    answer), on conversations holding `stored`: backends in turn, `turns` each, after one turn each to warm up."""
    answer = stored_form([NEW_TURN, {"role": "assistant", "content": [{"type": "output_text", "text": "Yes."}]}])
    cpu = dict.fromkeys(stores, 0.0)
    for turn in range(turns + 1):
        for backend, store in stores.items():
            conversation_id, lease = await prepare(store, stored), uuid.uuid4().hex
            started = time.process_time()
            await store.start_turn(memory.LOCAL_OWNER, conversation_id, lease, 60)
            await store.finish_turn(memory.LOCAL_OWNER, conversation_id, lease, answer, False, None, 0)
            cpu[backend] += (time.process_time() - started) if turn else 0.0
    return {backend: spent / turns * 1e3 for backend, spent in cpu.items()}


def clock_memory_calls() -> list[float]:
    """Wraps memory.start_turn and memory.Turn.finish (read, merge; store) to add up the time spent in them."""
    spent = [0.0]

    def timed(function):
        async def call(*args, **kwargs):
            started = time.perf_counter()
            try:
                return await function(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - started

        return call

    memory.start_turn, memory.Turn.finish = timed(memory.start_turn), timed(memory.Turn.finish)
    return spent


class MergeKinds(logging.Handler):
    """Records the merge each turn made (memory.start_turn logs it), to check the run measured what it says."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.kinds: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("memory: conversation"):
            self.kinds.append(record.args[1])


async def measure(
    postgres_url: str, folder: str
) -> tuple[dict[tuple[str, str, int], list[tuple[float, float, float]]], dict[str, float]]:
    """Per (backend, client sends, stored items), each run's seconds for the whole turn, in memory calls, and of
    this process's CPU (every thread's: the store's thread too) from the request's start until the turn is quiet;
    and each backend's CPU for a turn's store work alone (store_alone)."""
    variables = {
        "none": {"MEMORY_BACKEND": "none"},
        "sqlite": {"MEMORY_BACKEND": "sqlite", "MEMORY_DATABASE_URL": f"{folder}/c.db"},
        "postgres": {"MEMORY_BACKEND": "postgres", "MEMORY_DATABASE_URL": postgres_url},
    }
    settings = {backend: config.Settings({**os.environ, **values}) for backend, values in variables.items()}
    urls = {backend: memory.MemorySettings.from_config(settings[backend]).url for backend in ("sqlite", "postgres")}
    stores = {backend: Store(url) for backend, url in urls.items()}
    for store in stores.values():
        await store.open()

    def use(backend: str) -> None:
        # The app keeps one backend per process (config's settings, memory/database.py's open store): swapping
        # them lets backends interleave.
        config.reload(settings[backend].env)
        database._store = stores.get(backend)
        database._last_prune = time.time()  # no pruning task in the middle of a timed turn

    merges = MergeKinds()
    memory_log = logging.getLogger("agent_server.memory")
    memory_log.addHandler(merges)
    memory_log.setLevel(logging.INFO)
    memory_log.propagate = False

    in_memory = clock_memory_calls()
    alone = await store_alone(stores, stored_form(chat_history(10)))
    gc.collect()
    gc.freeze()  # the imported app's objects: without this, each gc.collect() below takes a third of a second
    seconds: dict[tuple[str, str, int], list[tuple[float, float, float]]] = {}
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://localhost") as client,
    ):
        for size, runs in RUNS.items():
            history = chat_history(size)
            stored = stored_form(history)
            for run in range(runs + 1):  # run 0 warms up (connections, first-use imports) and is not kept
                conversations = {
                    (backend, sends): await prepare(stores[backend], stored)
                    for backend, sends in CONFIGS
                    if backend != "none"
                }
                shift = run % len(CONFIGS)  # each run starts with another backend: no backend always goes first
                for backend, sends in CONFIGS[shift:] + CONFIGS[:shift]:
                    body: dict = {"input": [*history, NEW_TURN] if sends == "whole history" else [NEW_TURN]}
                    if backend != "none":
                        body["context"] = {"conversation_id": conversations[backend, sends]}
                    raw = json.dumps(body).encode()  # the client's own work is not the server's latency
                    use(backend)
                    gc.collect()  # garbage left by the last turn would be collected in this one
                    in_memory[0] = 0.0
                    cpu = time.process_time()
                    start = time.perf_counter()
                    response = await client.post(
                        "/invocations", content=raw, headers={"content-type": "application/json"}
                    )
                    elapsed = time.perf_counter() - start
                    await asyncio.sleep(QUIET_SECONDS)  # work the turn left to other threads counts for it
                    cpu = time.process_time() - cpu
                    assert response.status_code == 200, response.text
                    if backend != "none":
                        assert merges.kinds.pop() == EXPECTED_MERGE[sends], f"{backend}, {sends}: unexpected merge"
                    if run:
                        seconds.setdefault((backend, sends, size), []).append((elapsed, in_memory[0], cpu))
    use("none")
    for store in stores.values():
        await store.close()
    return seconds, alone


def main() -> None:
    parser = cli.arguments(__doc__, "memory")
    args = parser.parse_args()
    server_version, (seconds, alone) = cli.on_postgres(measure)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        report(seconds, server_version, args.command)
        print(
            f"\nThe store's work alone, CPU per turn (start_turn, then finish_turn with a question and its answer, on a"
            f" conversation of 10 items; {STORE_TURNS} turns a backend, in turn; the process's CPU, PostgreSQL's"
            " own not in it): " + ", ".join(f"{backend} {ms:.2f} ms" for backend, ms in alone.items()) + "."
        )
    publish(out.getvalue(), args.write, HEADING)


def report(seconds: dict, server_version: str, command: str) -> None:
    print(HEADING + "\n")
    print(f"`{command}` on {datetime.date.today()}. {store_machine(server_version)}\n")
    print(
        "| backend | client sends | stored items | ms per turn (median) | added ms vs none (median) "
        "| in memory calls (ms, median) | CPU ms per turn (median) | CPU vs none (median ratio) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for size in RUNS:
        baseline = [whole for whole, _, _ in seconds["none", "whole history", size]]
        baseline_cpu = [cpu for _, _, cpu in seconds["none", "whole history", size]]
        for backend, sends in CONFIGS:
            whole, in_memory, cpu = zip(*seconds[backend, sends, size], strict=True)
            # Run by run: the two requests of a pair ran moments apart, under the same load on the machine.
            added = statistics.median(ours - theirs for ours, theirs in zip(whole, baseline, strict=True))
            ratio = statistics.median(ours / theirs for ours, theirs in zip(cpu, baseline_cpu, strict=True))
            memory_ms = f"{statistics.median(in_memory) * 1e3:,.1f}" if backend != "none" else "–"
            print(
                f"| {backend} | {sends} | {size} | {statistics.median(whole) * 1e3:,.1f} "
                f"| {'baseline' if backend == 'none' else f'{added * 1e3:+,.1f}'} | {memory_ms} "
                f"| {statistics.median(cpu) * 1e3:,.1f} | {'baseline' if backend == 'none' else f'{ratio:.2f}×'} |"
            )
    print(
        "\nWhole non-streaming /invocations requests through the real app (request guard, MLflow, handlers, SDK)"
        f" on the in-process offline model in chat_completions mode; medians of {RUNS[10]} runs at 10 stored items"
        f" and {RUNS[1000]} at 1000, backends interleaved run by run, each memory turn on a fresh conversation"
        " holding exactly the stored items. The fair comparison is none, where the client must send the whole"
        " history, against memory with the client sending only its new turn; memory with the whole history sent"
        " again is the other way a client may use it (the merge finds it extends the stored conversation)."
        " Added ms is the median of run-by-run differences from none, not the difference of the medians."
        " Memory calls are memory.start_turn (lease, read, render the stored items again, merge) and Turn.finish"
        " (render the answer, write the turn, give the lease back), timed inside the same requests: a figure less"
        " noisy than the difference of two whole requests. At 1000 stored items each turn also drops the oldest"
        " turn (MEMORY_MAX_ITEMS, 1000 by default). The model sees the whole history either way. Tracing is off"
        " (MLFLOW_TRACE_SAMPLING_RATIO=0): a trace's export costs both sides alike and would dilute the ratio."
        " CPU is this process's (time.process_time, every thread's) from a request's start until 10 ms after its"
        " answer, so the store's thread and what the turn leaves to run later count for it; PostgreSQL's own"
        " server process is not in it. CPU vs none is the median of run-by-run ratios; the target is a named"
        f" conversation's new turn at most {CPU_TARGET}× none."
        " The machine is shared and noisy: compare ratios within this run, not across runs."
    )


if __name__ == "__main__":
    sys.exit(main())
