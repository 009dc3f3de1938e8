"""Benchmark: what each request leaves to the cyclic garbage collector, not streaming and streaming.

Run with `scripts/benchmark garbage`: this file, run with the template repo's Python, runs itself with
`--measure` in each app's folder with the app's own Python, then writes the report. The app is
called in this process as an ASGI server calls it, with no HTTP client, so that every object counted is the
app's: the offline model (in process), tracing off, memory off, a two-turn history. Objects that
reference counting frees cost the collector nothing; objects in reference cycles stay until a collection finds
them, and are what makes collections frequent and long. With `gc.DEBUG_SAVEALL`, a collection after N requests
keeps what it found in `gc.garbage`, counted here per request and by type, and the tasks among them by their
coroutine.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime
import gc
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REQUESTS = 200
BODY = {
    "input": [
        {"role": "user", "content": "Name three rivers."},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Nile, Amazon, Yangtze."}],
        },
        {"role": "user", "content": "Tell me more about the second one."},
    ]
}


async def call(app: Any, body: bytes) -> tuple[int, bytes]:
    """One request to the ASGI app, as uvicorn makes it: the body, then a disconnect once the answer is sent."""
    answered = asyncio.Event()
    status, chunks, body_sent = 0, [], False

    async def receive() -> dict:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                answered.set()

    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/invocations",
        "raw_path": b"/invocations",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    await app(scope, receive, send)
    return status, b"".join(chunks)


def kind(thing: object) -> str:
    return f"{type(thing).__module__}.{type(thing).__qualname__}"


def label(thing: object) -> str:
    if isinstance(thing, asyncio.Task):
        return f"Task({thing.get_coro().__qualname__})"
    code = getattr(thing, "__code__", None)
    if code is not None:
        where = code.co_filename.split("site-packages/")[-1]
        return f"function {thing.__qualname__} ({where}:{code.co_firstlineno})"  # type: ignore[attr-defined]
    return type(thing).__name__


def cycle_through(found: list[object], type_name: str) -> str | None:
    """The shortest reference path, among the garbage, from the first object of `type_name` back to itself."""
    start = next((thing for thing in found if type(thing).__name__ == type_name), None)
    if start is None:
        return None
    members = {id(thing) for thing in found}
    queue, seen = collections.deque([(start, [label(start)])]), {id(start)}
    while queue:
        thing, path = queue.popleft()
        for referent in gc.get_referents(thing):
            if referent is start:
                return " → ".join([*path, label(start)])
            if id(referent) in members and id(referent) not in seen:
                seen.add(id(referent))
                queue.append((referent, [*path, label(referent)]))
    return None


async def measure(app: Any, stream: bool) -> dict:
    body = json.dumps({**BODY, "stream": stream}).encode()
    for _ in range(20):  # warm-up: caches, lazy imports, pools
        status, answer = await call(app, body)
        assert status == 200, answer[:500]
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(REQUESTS):
            await call(app, body)
        gc.collect()
        found = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    types = collections.Counter(kind(thing) for thing in found)
    tasks = collections.Counter(task.get_coro().__qualname__ for task in found if isinstance(task, asyncio.Task))
    cycle = cycle_through(found, "RunResultStreaming" if stream else "RunResult")
    del found
    gc.collect()
    return {
        "per_request": sum(types.values()) / REQUESTS,
        "types": [(name, count / REQUESTS) for name, count in types.most_common(12)],
        "tasks": [(name, count / REQUESTS) for name, count in tasks.most_common(5)],
        "cycle": cycle,
    }


async def main_async() -> dict:
    from agent_server.app import app

    async with app.router.lifespan_context(app):
        return {"json": await measure(app, False), "stream": await measure(app, True)}


HEADING = "## What a request leaves to the garbage collector (benchmarks/garbage.py)"


def measure_here(folder: Path) -> dict:
    """In an app's folder, with its Python: both modes' garbage."""
    os.environ.update(
        LLM_PROVIDER="offline",
        LLM_MODEL="offline",
        LLM_API="chat_completions",
        MEMORY_BACKEND="none",
        MLFLOW_TRACE_SAMPLING_RATIO="0",
        MLFLOW_TRACKING_URI=f"file:{folder / 'mlruns'}",
    )
    sys.path.insert(0, os.getcwd())
    return asyncio.run(main_async())


def report(apps: list[tuple[str, dict]], command: str) -> str:
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    method = " ".join(__doc__.split("\n\n", 1)[1].split("The app is", 1)[1].split())
    out = [HEADING, "", f"Made by `{command}` on {date}; {REQUESTS} requests per mode. The app is {method}"]
    out += ["", "| app | mode | objects in cycles per request | most common (per request) | tasks among them |"]
    out.append("|---|---|---:|---|---|")
    for label, modes in apps:
        for mode, found in modes.items():
            types = ", ".join(f"{name.removeprefix('builtins.')} {count:.1f}" for name, count in found["types"][:6])
            tasks = ", ".join(f"`{name}`" for name, _ in found["tasks"]) or "none"
            name = "streaming" if mode == "stream" else "not streaming"
            out.append(f"| {label} | {name} | {found['per_request']:.0f} | {types} | {tasks} |")
    for label, modes in apps:
        if modes["stream"]["cycle"]:
            out += ["", f"{label}, streaming: the run result is in a cycle, `{modes['stream']['cycle']}`."]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", help="measure the app in the current folder, keeping its traces here")
    parser.add_argument("--app", help="the rendered, synced HEAD app")
    parser.add_argument("--label", default="HEAD")
    parser.add_argument("--before", help="also measure this rendered, synced app (release 0.1.0)")
    parser.add_argument("--before-label", default="release 0.1.0")
    parser.add_argument("--write", help="replace this benchmark's section in this RESULTS.md")
    parser.add_argument("--command", default="scripts/benchmark garbage", help="how the run was started")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure_here(Path(args.measure))))
        return
    if not args.app:
        parser.error("--app (or --measure) is needed")
    measured = []
    for label, app in [(args.before_label, args.before), (args.label, args.app)]:
        if app:
            folder = tempfile.mkdtemp(prefix="garbage-bench-")
            python = str(Path(app) / ".venv" / "bin" / "python")
            done = subprocess.run(
                [python, __file__, "--measure", folder],
                cwd=app,
                capture_output=True,
                text=True,
                timeout=600,
                check=True,
            )
            measured.append((label, json.loads(done.stdout.strip().splitlines()[-1])))
    sys.path.insert(0, str(HERE))
    import sections

    sections.publish(report(measured, args.command), args.write, HEADING)


if __name__ == "__main__":
    main()
