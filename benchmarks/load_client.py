"""The load client: requests to a served app from N workers at once, and one measured cell of them (the app's CPU
per request, throughput, latencies and peak memory)."""

from __future__ import annotations

import asyncio
import collections
import statistics
import time

import httpx
from served_app import BODIES, HEADERS, MODES, REPLIES, Cell, Served, cpu_seconds, peak_rss_kib, quiet, reset_peak_rss


def client_for(url: str, concurrency: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx.AsyncClient(base_url=url, limits=limits, timeout=30, trust_env=False)


async def one_request(client: httpx.AsyncClient, mode: str) -> str | None:
    """None when the app answered with the model's reply (the stub's, or the offline model's), else what went wrong."""
    try:
        if mode == "stream":
            async with client.stream("POST", "/invocations", content=BODIES[mode], headers=HEADERS) as response:
                body = await response.aread()
            complete = b"[DONE]" in body
        else:
            response = await client.post("/invocations", content=BODIES[mode], headers=HEADERS)
            body, complete = response.content, True
    except httpx.HTTPError as error:
        return type(error).__name__
    if response.status_code != 200:
        return f"HTTP {response.status_code}"
    if not any(reply in body for reply in REPLIES) or not complete:
        return "no reply in the body"
    return None


async def load(
    url: str, mode: str, concurrency: int, count: int, seconds: float, keep_going=lambda: True
) -> tuple[list[float], collections.Counter, float]:
    """`count` requests (fewer if `seconds` run out or keep_going() turns false) from `concurrency` workers.
    Returns the latencies (s) of the good ones, the errors and the elapsed seconds."""
    latencies: list[float] = []
    errors: collections.Counter = collections.Counter()
    sent = 0
    started = time.perf_counter()
    deadline = started + seconds

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal sent
        while sent < count and time.perf_counter() < deadline and keep_going():
            sent += 1
            begun = time.perf_counter()
            error = await one_request(client, mode)
            if error is None:
                latencies.append(time.perf_counter() - begun)
            else:
                errors[error] += 1

    async with client_for(url, concurrency) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    if sent < count and time.perf_counter() >= deadline:
        errors[f"not sent (over {seconds:.0f} s)"] += count - sent
    return latencies, errors, elapsed


async def warm_up(served: Served, count: int) -> None:
    for mode in MODES:
        _, errors, _ = await load(served.url, mode, 8, count // 2, served.settings.cell_seconds)
        if errors:
            raise RuntimeError(f"app {served.app.key} failed its warm-up ({dict(errors)}):\n{served.log_tail()}")


async def measure_cell(served: Served, mode: str, concurrency: int) -> Cell:
    pid, count = served.pid, served.settings.requests[concurrency]
    await quiet(pid)
    reset_peak_rss(pid)
    before = cpu_seconds(pid)
    latencies, errors, elapsed = await load(served.url, mode, concurrency, count, served.settings.cell_seconds)
    await quiet(pid)  # the trace export a request leaves to MLflow's background thread is part of its cost
    used = cpu_seconds(pid) - before
    done = len(latencies)
    if len(latencies) >= 2:
        cuts = statistics.quantiles([s * 1000 for s in latencies], n=100, method="inclusive")
        p50, p95, p99 = cuts[49], cuts[94], cuts[98]
    else:
        p50 = p95 = p99 = float("nan")
    return Cell(
        cpu_ms=used * 1000 / done if done else float("nan"),
        rps=done / elapsed if elapsed else float("nan"),
        p50=p50,
        p95=p95,
        p99=p99,
        done=done,
        errors=errors,
        rss_mib=peak_rss_kib(pid) / 1024,
    )


async def stub_stats(stub_url: str) -> dict:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as client:
        return (await client.get(stub_url.removesuffix("/v1") + "/stats")).json()
