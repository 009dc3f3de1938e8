"""Benchmark: what the built-in offline model adds to a request's CPU, against the zero-cost stub model.

Run with `scripts/benchmark offline` (it renders and syncs HEAD and release 0.1.0, then runs this with the
template repo's own Python). For each app, two models, run by run: a fresh `start-app` process on the stub
(stub_model.py, over HTTP on the other core) and then one on the app's own offline model (in process,
LLM_PROVIDER=offline), each pinned to core 0, tracing off, memory off, the whole two-turn history in every
request, as serve.py sends it. The stub's own CPU is on the other core and not counted: the figure is what the
offline model costs the app's process, which every test and every demo pays. Ratios offline/stub are taken
within each run, then the median is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cli
import httpx
import load_client
import sections
import serve_report
import served_app

HEADING = "## The offline model against a zero-cost stub (benchmarks/offline_model.py)"
MODELS = ("stub", "offline")
CONCURRENCY = (1, 8)


async def measure(
    app: served_app.App, model: str, run: int, stub_url: str, work: Path, settings: served_app.Settings
) -> dict:
    folder = work / f"run{run}-{app.key}-{model}"
    served = served_app.Served(app, stub_url, folder, "off", settings, model=model)
    cells = {}
    try:
        await served.wait_healthy()
        await load_client.warm_up(served, settings.warmup)
        for mode in served_app.MODES:
            for concurrency in CONCURRENCY:
                cells[mode, concurrency] = cell = await load_client.measure_cell(served, mode, concurrency)
                if sum(cell.errors.values()):
                    raise RuntimeError(f"{model} {mode} c={concurrency}: errors {dict(cell.errors)}")
                served_app.log(f"run {run + 1} {model} {mode} c={concurrency}: {cell.cpu_ms:.2f} ms CPU/req")
    finally:
        served.stop()
    return cells


async def main_async(args: argparse.Namespace) -> str:
    settings = served_app.Settings.make(args.quick, args.runs)
    started = time.monotonic()
    os.sched_setaffinity(0, {served_app.CLIENT_CORE})
    apps = [served_app.App("HEAD", args.label, Path(args.app).resolve())]
    if args.before:
        apps.insert(0, served_app.App("before", args.before_label, Path(args.before).resolve()))
    for app in apps:
        served_app.app_facts(app)
    work = Path(tempfile.mkdtemp(prefix="offline-bench-"))
    stub_port = served_app.free_port()
    stub_url = f"http://127.0.0.1:{stub_port}/v1"
    stub = subprocess.Popen(
        ["taskset", "-c", str(served_app.CLIENT_CORE), sys.executable, str(served_app.HERE / "stub_model.py")]
        + ["--port", str(stub_port), "--max-seconds", "3600"],
        stdout=subprocess.DEVNULL,
    )
    runs: dict[str, list[dict]] = {app.key: [] for app in apps}
    try:
        for _ in range(50):
            try:
                await load_client.stub_stats(stub_url)
                break
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
        for run in range(settings.runs):
            for app in apps:
                runs[app.key].append(
                    {model: await measure(app, model, run, stub_url, work, settings) for model in MODELS}
                )
    finally:
        stub.terminate()
        stub.wait(10)
    return report(apps, runs, settings, args, (time.monotonic() - started) / 60)


def report(
    apps: list[served_app.App],
    runs: dict[str, list[dict]],
    settings: served_app.Settings,
    args: argparse.Namespace,
    minutes: float,
) -> str:
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    out = [HEADING, ""]
    out.append(
        f"Made by `{args.command}` on {date}, in {minutes:.1f} minutes; "
        + "; ".join(f"{app.label}: openai-agents {app.versions.get('openai-agents', '?')}" for app in apps)
        + f"; Python {apps[-1].python}. {settings.runs} run(s), the apps in turn within each, per cell "
        + ", ".join(f"{settings.requests[c]} requests at c={c}" for c in CONCURRENCY)
        + ", tracing off, the app pinned to one core. The stub's own CPU is on the other core and not counted, "
        "while the offline model runs in the app's process. Ratios are taken within each run, then their median."
    )
    out += [
        "",
        "| app | mode | concurrency | CPU ms/req, stub | CPU ms/req, offline | offline adds |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for app in apps:
        for mode in served_app.MODES:
            for concurrency in CONCURRENCY:
                cells = [(run["stub"][mode, concurrency], run["offline"][mode, concurrency]) for run in runs[app.key]]
                ratio = serve_report.med([offline.cpu_ms / stub.cpu_ms for stub, offline in cells])
                stub, offline = (
                    serve_report.med([s.cpu_ms for s, _ in cells]),
                    serve_report.med([o.cpu_ms for _, o in cells]),
                )
                name = "streaming" if mode == "stream" else "not streaming"
                out.append(
                    f"| {app.label.split(' (')[0]} | {name} | {concurrency} | {stub:.2f} | {offline:.2f} "
                    f"| {(ratio - 1) * 100:+.0f}% |"
                )
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_app_arguments(parser, "offline")
    parser.add_argument("--runs", type=int, default=None, help="runs (default 3; 1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few requests, one run")
    args = parser.parse_args()
    section = asyncio.run(main_async(args))
    print(section)
    if args.write:
        sections.replace_section(Path(args.write), section, HEADING)


if __name__ == "__main__":
    main()
