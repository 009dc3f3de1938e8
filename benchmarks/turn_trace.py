"""One turn of a rendered app, traced: which of the app's modules run, how many of them are middleware, how often
the request's body is parsed and how often an answer event is encoded, on /invocations and /responses, streamed and
not. Run it with a rendered app's own Python, in the app's folder (a render of HEAD, and one of commit 4930628,
the last before the app served its own turns, show what changed):

    cd APP && uv run python PATH/TO/benchmarks/turn_trace.py --label NAME

It prints a Markdown table. The app runs in this process and thread (httpx's ASGI transport, with the app's lifespan)
on its offline model, memory off, tracing off; one warm-up turn first, so that imports and first-use set-up are
not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

CASES = [("/invocations", False), ("/invocations", True), ("/responses", False), ("/responses", True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True)
    args = parser.parse_args()
    os.environ.update(LLM_PROVIDER="offline", MEMORY_BACKEND="none", MLFLOW_TRACE_SAMPLING_RATIO="0")
    os.environ.update(MLFLOW_TRACKING_URI=f"file:{Path.cwd() / 'turn-trace-mlruns'}", MLFLOW_ALLOW_FILE_STORE="true")
    rows = asyncio.run(traced_turns(str(Path("agent_server").resolve())))
    print(f"| {args.label} | route | app modules run | middleware modules run | body parses | event encodes |")
    for (path, stream), (modules, middleware, parses, encodes) in zip(CASES, rows, strict=True):
        kind = "streamed" if stream else "not streamed"
        print(f"| {args.label} | POST {path}, {kind} | {modules} | {middleware} | {parses} | {encodes} |")


async def traced_turns(root: str) -> list[tuple[int, int, int, int]]:
    import httpx
    from agent_server.app import app

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            await client.post("/invocations", json={"input": "warm up"})
            return [await traced_turn(client, root, path, stream) for path, stream in CASES]


async def traced_turn(client: Any, root: str, path: str, stream: bool) -> tuple[int, int, int, int]:
    """(app modules, middleware modules, parses of the body, encodes of answer events) of one turn."""
    marker = f"trace-{uuid.uuid4()}"
    files: set[str] = set()
    parses, encodes = [0], [0]
    loads, dumps = json.loads, json.dumps

    def counting_loads(text: Any, *args: Any, **kwargs: Any) -> Any:
        shown = text.decode(errors="replace") if isinstance(text, (bytes, bytearray)) else str(text)
        if marker in shown and '"input"' in shown and '"model"' not in shown:
            parses[0] += 1
        return loads(text, *args, **kwargs)

    def counting_dumps(value: Any, *args: Any, **kwargs: Any) -> str:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if isinstance(value, dict) and "offline" not in caller and str(value.get("type", "")).startswith("response."):
            encodes[0] += 1
        return dumps(value, *args, **kwargs)

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            name = frame.f_code.co_filename
            if name.startswith(root) and f"{os.sep}offline{os.sep}" not in name:
                files.add(name)

    json.loads, json.dumps = counting_loads, counting_dumps  # type: ignore[assignment]
    sys.setprofile(profile)  # the app's work in worker threads (offload.py) is too small here to go there
    try:
        body = {"input": [{"role": "user", "content": f"What time is it? {marker}"}], "stream": stream}
        response = await client.post(path, json=body)
    finally:
        sys.setprofile(None)
        json.loads, json.dumps = loads, dumps
    assert response.status_code == 200, response.text
    middleware = {name for name in files if f"{os.sep}middleware{os.sep}" in name}
    return len(files), len(middleware), parses[0], encodes[0]


if __name__ == "__main__":
    main()
