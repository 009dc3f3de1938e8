"""Benchmark: what long-term memory's recall adds to a turn, at 10 and 1,000 facts of the user, per backend.

Run with scripts/benchmark (it renders an app and runs this with the app's Python).
Two measures, on SQLite and on PostgreSQL (a real server, from tests/postgres.py), each store holding a user with
10 facts, a user with 1,000, and 1,000 facts of 100 other users (the search index covers every user's):
- the recall's own store work: the tool's database call, long_term._recall through Store.run, for a query that
  matches one fact (the offline model's query for "What is my name?") and one that matches none (then the newest
  facts are read instead); wall and CPU ms, configurations interleaved call by call;
- whole non-streaming /invocations turns through the real app in one process (httpx on the ASGI app, the offline
  model, chat_completions, tracing off, LONG_TERM_MEMORY on): "What is my name?" (the model calls recall, then
  answers: two model calls) against "Hello" (no tool, one model call), interleaved run by run.
Prints a Markdown section for RESULTS.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import gc
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

import cli
from sections import publish, store_machine

os.environ.setdefault("LLM_PROVIDER", "offline")
os.environ.setdefault("LLM_API", "chat_completions")
# Tracing off: a trace's export costs both turns alike and would dilute what the recall adds.
os.environ.setdefault("MLFLOW_TRACE_SAMPLING_RATIO", "0")
os.environ["MEMORY_BACKEND"] = "none"  # the app starts without a store; each request picks its backend (use())

import httpx  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from agent_server import config  # noqa: E402
from agent_server.app import app  # noqa: E402
from agent_server.memory import database, facts, long_term  # noqa: E402
from agent_server.memory.store import Store  # noqa: E402
from agent_server.store.schema import memories  # noqa: E402
from agent_server.store.settings import MemorySettings  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Long-term memory's recall (benchmarks/long_term_recall.py)"
BACKENDS = ("sqlite", "postgres")
SIZES = (10, 1000)  # the user's facts
OTHERS, OTHER_FACTS = 100, 10  # other users, and facts each: 1,000 more in the search index
USER_HEADER = "x-bench-user"
QUERIES = {"matches": "What is my name?", "matches none": "favourite colour"}
CALLS = 200  # store calls per configuration, interleaved
TURN_RUNS = 41
QUIET_SECONDS = 0.01
WORDS = ["tea", "coffee", "hiking", "chess", "jazz", "python", "rust", "gardens", "trains", "maps", "poems", "rain"]


def owner(size: int) -> str:
    return f"user-with-{size}-facts@example.com"


def fact_rows(who: str, count: int, first_name: str) -> list[dict]:
    """`count` facts of `who` as facts.remember keeps them: one says their name, the rest share none of the queries'
    words (but share words with each other and with other users' facts)."""
    texts = [f"My name is {first_name}."]
    texts += [
        f"Likes {WORDS[n % 12]} and {WORDS[(n * 5 + 1) % 12]}, note {n}, on weekday {n % 7}." for n in range(1, count)
    ]
    now = time.time()
    return [
        {
            "owner": who,
            "text": text,
            "terms": " ".join(facts.terms(text)),
            "bytes": len(text.encode()),
            "created_at": now - (count - n),
        }  # fmt: skip
        for n, text in enumerate(texts)
    ]


def fill(connection: sa.Connection) -> None:
    """The two users' facts and the other users', interleaved in id order as users add them over time."""
    rows = [row for n in range(OTHERS) for row in fact_rows(f"other-{n}@example.com", OTHER_FACTS, f"Other{n}")]
    rows += fact_rows(owner(SIZES[0]), SIZES[0], "Ada") + fact_rows(owner(SIZES[1]), SIZES[1], "Grace")
    rows.sort(key=lambda row: row["created_at"])
    connection.execute(memories.insert(), rows)
    if connection.dialect.name == "postgresql":
        # The statistics autovacuum would soon gather, as a store in use has them.
        connection.exec_driver_sql("ANALYZE agent_memories")


async def store_calls(stores: dict[str, Store]) -> dict[tuple[str, int, str], list[tuple[float, float]]]:
    """Per (backend, facts, query), each call's wall and CPU seconds for the recall tool's database call."""
    configs = [(backend, size, query) for backend in BACKENDS for size in SIZES for query in QUERIES]
    timed: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
    for call in range(CALLS + 1):  # call 0 warms up
        shift = call % len(configs)
        for backend, size, query in configs[shift:] + configs[:shift]:
            recall = functools.partial(long_term._recall, owner(size), QUERIES[query])
            cpu, start = time.process_time(), time.perf_counter()
            found, matched = await stores[backend].run(recall)
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            assert matched == (query == "matches") and len(found) == (1 if matched else facts.RECALLED), found
            if call:
                timed.setdefault((backend, size, query), []).append((elapsed, cpu))
    return timed


def tools_called(body: dict) -> list[str]:
    return [item["name"] for item in body["output"] if item.get("type") == "function_call"]


async def turns(
    stores: dict[str, Store], urls: dict[str, str]
) -> dict[tuple[str, int, str], list[tuple[float, float]]]:
    """Per (backend, facts, asked), each whole turn's wall and CPU seconds (every thread's, until the turn is quiet)."""
    variables = {
        backend: {
            "MEMORY_BACKEND": backend,
            "MEMORY_DATABASE_URL": urls[backend],
            "MEMORY_USER_HEADER": USER_HEADER,
            "LONG_TERM_MEMORY": "true",
            "LONG_TERM_MEMORY_MAX_FACTS": "5000",
            "LONG_TERM_MEMORY_MAX_BYTES": str(1 << 20),
        }
        for backend in BACKENDS
    }
    settings = {backend: config.Settings({**os.environ, **values}) for backend, values in variables.items()}

    def use(backend: str | None) -> None:
        # The app keeps one backend per process (config's settings, database.py's open store): swapping them lets
        # backends interleave.
        config.reload(settings[backend].env if backend else dict(os.environ))
        database._store = stores.get(backend or "")
        database._last_prune = time.time()  # no pruning task in the middle of a timed turn

    configs = [
        (backend, size, asked) for backend in BACKENDS for size in SIZES for asked in ("What is my name?", "Hello")
    ]
    timed: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
    gc.collect()
    gc.freeze()  # the imported app's objects: without this, each gc.collect() below is slow
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://localhost") as client,
    ):
        try:
            for run in range(TURN_RUNS + 1):  # run 0 warms up
                shift = run % len(configs)
                for backend, size, asked in configs[shift:] + configs[:shift]:
                    raw = json.dumps({"input": [{"role": "user", "content": asked}]}).encode()
                    headers = {"content-type": "application/json", USER_HEADER: owner(size)}
                    use(backend)
                    gc.collect()
                    cpu, start = time.process_time(), time.perf_counter()
                    response = await client.post("/invocations", content=raw, headers=headers)
                    elapsed = time.perf_counter() - start
                    await asyncio.sleep(QUIET_SECONDS)  # work the turn left to other threads counts for it
                    cpu = time.process_time() - cpu
                    assert response.status_code == 200, response.text
                    body = response.json()
                    expected = ["recall"] if asked != "Hello" else []
                    assert tools_called(body) == expected, body
                    if expected:
                        said = json.dumps(body)
                        assert ("Ada" if size == SIZES[0] else "Grace") in said, said
                    if run:
                        timed.setdefault((backend, size, asked), []).append((elapsed, cpu))
        finally:
            use(None)  # the lifespan's end closes the app's store: not ours
    return timed


async def measure(postgres_url: str, folder: str) -> tuple[dict, dict]:
    urls = {"sqlite": f"{folder}/facts.db", "postgres": postgres_url}
    stores = {}
    for backend in BACKENDS:
        env = {**os.environ, "MEMORY_BACKEND": backend, "MEMORY_DATABASE_URL": urls[backend]}
        stores[backend] = Store(MemorySettings.from_config(config.Settings(env)).url)
        await stores[backend].open()
        await stores[backend].run(fill, write=True)
    try:
        calls = await store_calls(stores)
        whole = await turns(stores, urls)
    finally:
        for store in stores.values():
            await store.close()
    return calls, whole


def main() -> None:
    parser = cli.arguments(__doc__, "recall")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few calls and turns")
    args = parser.parse_args()
    if args.quick:
        global CALLS, TURN_RUNS
        CALLS, TURN_RUNS = 5, 2
    started = time.monotonic()
    server_version, (calls, whole) = cli.on_postgres(measure)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        report(calls, whole, server_version, args.command, time.monotonic() - started)
    publish(out.getvalue(), args.write, HEADING)


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:,.2f}"


def report(calls: dict, whole: dict, server_version: str, command: str, seconds: float) -> None:
    print(HEADING + "\n")
    print(f"`{command}` on {datetime.date.today()}, {seconds:.0f} s. {store_machine(server_version)}\n")
    print("The recall's store work (the tool's database call: long_term._recall through Store.run):\n")
    print("| backend | user's facts | query | ms per call (median) | CPU ms per call (median) |")
    print("|---|---:|---|---:|---:|")
    for backend in BACKENDS:
        for size in SIZES:
            for query in QUERIES:
                wall, cpu = zip(*calls[backend, size, query], strict=True)
                print(f"| {backend} | {size:,} | {query} | {ms(wall)} | {ms(cpu)} |")
    print(
        '\nWhole turns, "What is my name?" (recall, then the answer: two model calls) against "Hello" (one model'
        " call, no tool):\n"
    )
    print(
        "| backend | user's facts | ms, Hello (median) | ms, recalled (median) | added ms (median) "
        "| CPU ms, Hello (median) | CPU ms, recalled (median) | added CPU ms (median) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for backend in BACKENDS:
        for size in SIZES:
            plain, recalled = whole[backend, size, "Hello"], whole[backend, size, "What is my name?"]
            # Run by run: the two turns of a pair ran moments apart, under the same load on the machine.
            added = [ours[0] - theirs[0] for ours, theirs in zip(recalled, plain, strict=True)]
            added_cpu = [ours[1] - theirs[1] for ours, theirs in zip(recalled, plain, strict=True)]
            print(
                f"| {backend} | {size:,} | {ms([w for w, _ in plain])} | {ms([w for w, _ in recalled])} "
                f"| {statistics.median(added) * 1e3:+,.2f} | {ms([c for _, c in plain])} "
                f"| {ms([c for _, c in recalled])} | {statistics.median(added_cpu) * 1e3:+,.2f} |"
            )
    print(
        f"\nEach store holds the user's 10 or 1,000 facts and {OTHERS * OTHER_FACTS:,} facts of {OTHERS} other users"
        " (the search index covers every user's), one of each user's facts saying their name;"
        " PostgreSQL's table ANALYZEd after it is filled, as autovacuum would soon do."
        f' Store calls: {CALLS} of each configuration, interleaved call by call; "matches" is the offline model\'s'
        f' query for "What is my name?" (one fact matches), "matches none" is "{QUERIES["matches none"]}"'
        f" (no fact matches, so the {facts.RECALLED} newest are read instead: two statements). CPU is this process's"
        " (time.process_time, every thread's: the SQLite store's thread too); PostgreSQL's server process is not in"
        " it. On PostgreSQL the query's words are literals in the statement (facts.py): bound as parameters, after"
        " five calls asyncpg's prepared statement took PostgreSQL's generic plan, which cannot see the words and read"
        " each of the user's facts by the owner index (11.3 ms at 1,000 facts in the run before, about 4.5 now)."
        " Turns: non-streaming /invocations through the"
        " real app (request guard, MLflow, handlers, SDK) on the"
        f" in-process offline model in chat_completions mode, LONG_TERM_MEMORY on, tracing off"
        f" (MLFLOW_TRACE_SAMPLING_RATIO=0), no conversation named; medians of {TURN_RUNS} runs, every configuration"
        " interleaved run by run; CPU from a request's start until 10 ms after its answer. Added is the median of"
        " run-by-run differences (recalled minus Hello, in the same run), not the difference of the medians: most of"
        " it is the second model call and the tool call through the SDK, not the store. The machine is shared and"
        " noisy: compare within this run, not across runs."
    )


if __name__ == "__main__":
    sys.exit(main())
