"""Benchmark: what the render step costs per request, next to the request itself.

Run with scripts/benchmark (it renders an app and runs this with the app's Python).
Measures, in one process and one run, so the numbers compare as ratios:
- render_history on chat-UI histories of 10, 100 and 1000 items (time per call, peak memory);
- a whole non-streaming /invocations request through the real app on the offline model.
Prints a Markdown table; scripts/benchmark writes it to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
import tracemalloc

os.environ.setdefault("LLM_PROVIDER", "offline")
os.environ.setdefault("LLM_API", "chat_completions")
os.environ.setdefault("MAX_INPUT_ITEMS", "2000")  # the largest history measured is 1000 items, over the app's default

from agent_server.app import app  # noqa: E402
from agent_server.history import render_history  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402


def chat_ui_history(turns: int) -> list[dict]:
    """A history as the chat UI replays it: user text, tool call and output, id-less assistant text."""
    items: list[dict] = []
    for turn in range(turns):
        items.append({"role": "user", "content": [{"type": "input_text", "text": f"question {turn}"}]})
        items.append(
            {"type": "function_call", "id": f"uuid-{turn}", "call_id": f"call_{turn}", "name": "f", "arguments": "{}"}
        )
        items.append({"type": "function_call_output", "call_id": f"call_{turn}", "output": "x" * 200})
        items.append(
            {"role": "assistant", "content": [{"type": "output_text", "text": "answer " * 40}], "id": f"u{turn}"}
        )
    return items


def seconds_per_call(function, repeats: int) -> float:
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            function()
        samples.append((time.perf_counter() - start) / repeats)
    return statistics.median(samples)


def peak_bytes(function) -> int:
    tracemalloc.start()
    function()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def history_of(size: int) -> list[dict]:
    """`size` items of chat-UI history, ending with the user's new question."""
    return chat_ui_history(size // 4 + 1)[: size - 1] + [{"role": "user", "content": "and now?"}]


def main() -> None:
    client = TestClient(app)
    rows = []
    for size in (10, 100, 1000):
        history = history_of(size)

        def render(history: list[dict] = history) -> None:
            render_history(history)

        def request(history: list[dict] = history) -> None:
            response = client.post("/invocations", json={"input": history})
            assert response.status_code == 200, response.text

        render_seconds = seconds_per_call(render, max(1, 2000 // size))
        request_seconds = seconds_per_call(request, max(1, 200 // size))
        rows.append((size, render_seconds, peak_bytes(render), request_seconds))

    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores (shared machine).\n")
    print("| history items | render time | peak memory | whole /invocations request | render share (runs twice) |")
    print("|---:|---:|---:|---:|---:|")
    for size, render_seconds, peak, request_seconds in rows:
        print(
            f"| {size} | {render_seconds * 1e6:,.0f} µs | {peak / 1024:,.0f} KiB "
            f"| {request_seconds * 1e3:,.1f} ms | {2 * render_seconds / request_seconds:.1%} |"
        )
    print(
        "\nThe request is non-streaming, through the real app (request guard, MLflow validation, handlers, SDK)"
        " on the in-process offline model in chat_completions mode. The render runs in the guard and in the handler."
    )


if __name__ == "__main__":
    sys.exit(main())
