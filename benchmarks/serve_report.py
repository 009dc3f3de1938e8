"""The serving benchmark's report (serve.py): the cells' medians over the runs, app A beside app B, as Markdown."""

from __future__ import annotations

import os
import statistics

from serve_profile import profile_section
from served_app import CLIENT_CORE, CLOCK_TICK, CONCURRENCY, MODES, SERVER_CORE, VERSIONS, App, Settings, cpu_model

HEADING = "## Serving: HEAD against 0.1.0 (benchmarks/serve.py)"
TRACING = ("off", "on")


def med(values: list[float]) -> float:
    values = [value for value in values if value == value]  # no NaN
    return statistics.median(values) if values else float("nan")


def ms(value: float, digits: int = 1) -> str:
    return "–" if value != value else f"{value:,.{digits}f}"


def results_table(apps: list[App], runs: list[dict]) -> list[str]:
    """runs: per run, {(app key, tracing, mode, concurrency): Cell}."""
    a, b = apps[0].key, apps[1].key
    lines = [
        "| mode | concurrency | tracing | CPU ms/req A | CPU ms/req B | CPU ratio B/A | req/s A | req/s B "
        "| p50 / p95 / p99 ms A | p50 / p95 / p99 ms B | errors A / B | peak RSS MiB A | peak RSS MiB B |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in MODES:
        for concurrency in CONCURRENCY:
            for tracing in TRACING:
                pairs = [(run[a, tracing, mode, concurrency], run[b, tracing, mode, concurrency]) for run in runs]

                def each(name: str, which: int, pairs: list = pairs) -> float:
                    return med([getattr(pair[which], name) for pair in pairs])

                ratio = med([pair[1].cpu_ms / pair[0].cpu_ms for pair in pairs])
                errors = [sum(sum(pair[which].errors.values()) for pair in pairs) for which in (0, 1)]
                lines.append(
                    f"| {'stream' if mode == 'stream' else 'not streaming'} | {concurrency} | {tracing} "
                    f"| {ms(each('cpu_ms', 0), 2)} | {ms(each('cpu_ms', 1), 2)} | {ms(ratio, 2)}× "
                    f"| {ms(each('rps', 0), 0)} | {ms(each('rps', 1), 0)} "
                    + "".join(
                        f"| {ms(each('p50', w), 0)} / {ms(each('p95', w), 0)} / {ms(each('p99', w), 0)} "
                        for w in (0, 1)
                    )
                    + f"| {errors[0]} / {errors[1]} | {ms(each('rss_mib', 0), 0)} | {ms(each('rss_mib', 1), 0)} |"
                )
    return lines


def tracing_cost(apps: list[App], runs: list[dict]) -> list[str]:
    lines = [
        "| app | mode | CPU ms/req off | CPU ms/req on | added by tracing (ms/req) | on / off |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for app in apps:
        for mode in MODES:
            cells = [(run[app.key, "off", mode, 8], run[app.key, "on", mode, 8]) for run in runs]
            lines.append(
                f"| {app.key} | {'stream' if mode == 'stream' else 'not streaming'} "
                f"| {ms(med([off.cpu_ms for off, _ in cells]), 2)} | {ms(med([on.cpu_ms for _, on in cells]), 2)} "
                f"| {ms(med([on.cpu_ms - off.cpu_ms for off, on in cells]), 2)} "
                f"| {ms(med([on.cpu_ms / off.cpu_ms for off, on in cells]), 2)}× |"
            )
    return lines


def targets(apps: list[App], runs: list[dict]) -> str:
    a, b = apps[0].key, apps[1].key
    parts = []
    for mode in MODES:
        ratio = med([run[b, "off", mode, 8].cpu_ms / run[a, "off", mode, 8].cpu_ms for run in runs])
        p99 = med([run[b, "off", mode, 8].p99 for run in runs])
        name = "streaming" if mode == "stream" else "not streaming"
        parts.append(
            f"{name}: CPU/request {ratio:.2f}× of {apps[0].label} ({'met' if ratio <= 0.8 else 'not met'}), "
            f"p99 {p99:.0f} ms"
        )
    return "; ".join(parts)


def memory_note(apps: list[App]) -> str:
    """How each app ran its memory: "as rendered" is SQLite memory on, a fresh store per process."""
    said = {
        app.key: "as rendered (SQLite memory on, a fresh store per process)"
        if app.memory == "as rendered"
        else f"MEMORY_BACKEND={app.memory}"
        for app in apps
    }
    stateless = " Each request names no conversation and brings its own history, so memory stores none of it."
    return "Memory: " + ", ".join(f"{key} {how}" for key, how in said.items()) + "." + stateless


def report(
    apps: list[App], runs: list[dict], settings: Settings, checks: dict, prof: dict[str, dict] | None, meta: dict
) -> str:
    a, b = apps
    out = [HEADING, ""]
    out.append(
        f"Made by `{meta['command']}` on {meta['date']}, in {meta['minutes']:.1f} minutes. "
        f"{os.cpu_count()} cores ({cpu_model()}), Linux {os.uname().release}, Python {b.python} in both apps. "
        f"The machine was shared with other engineers' test runs at the time (load average {meta['load_before']} "
        f"at the start, {meta['load_after']} at the end), so absolute figures are noisy: compare the ratios, "
        "each taken within a pair of cells measured one right after the other, before the median over the runs."
    )
    out += ["", f"- A: {a.label}", f"- B: {b.label}", ""]
    out.append("| app | " + " | ".join(VERSIONS) + " |")
    out.append("|---|" + "---|" * len(VERSIONS))
    for app in apps:
        out.append(f"| {app.key} | " + " | ".join(app.versions.get(name, "?") for name in VERSIONS) + " |")
    requests = ", ".join(f"{count} at c={c}" for c, count in settings.requests.items())
    out += [
        "",
        f"{settings.runs} run(s); per run and app, one fresh process with tracing off and one with it on, each warmed "
        f"up with {settings.warmup} requests, then per cell {requests}. Both apps' processes are up at once, and each "
        "cell is measured on one app right after the other (A first in odd runs, B first in even ones). "
        "Each process is one uvicorn worker "
        f"(`start-app --host 127.0.0.1 --port N --workers 1`) pinned to core {SERVER_CORE}; the stub model and the "
        f"httpx load client share core {CLIENT_CORE}. {memory_note(apps)} chat_completions mode, the whole two-turn "
        "history (with the answer as an id-less assistant output_text message) in every request. CPU ms/req is the app "
        "process's utime+stime over the cell (read with the process quiet before and after, so background trace "
        f"export counts; {CLOCK_TICK * 1000:.0f} ms ticks) per completed request; peak RSS is VmHWM, reset before "
        "each cell. A, B and latencies are medians over the runs; the ratio is the median of the runs' ratios.",
        "",
    ]
    out += results_table(apps, runs)
    out += ["", f"Target (B at most 0.8× A's CPU per request), at c=8 with tracing off: {targets(apps, runs)}.", ""]
    out += ["What tracing costs, at c=8 (medians of the runs' differences and ratios):", ""]
    out += tracing_cost(apps, runs)
    sizes = {app.key: dict(checks.get(("input sizes", app.key), {})) for app in apps}
    traced = {
        app.key: (
            sum(n for n, _ in checks.get(("traces", app.key, "on"), [])),
            sum(r for _, r in checks.get(("traces", app.key, "on"), [])),
        )
        for app in apps
    }
    out += [
        "",
        "Checks: every model call carried the whole history "
        + ", ".join(
            f"({app.key}: " + ", ".join(f"{size} messages × {n}" for size, n in sorted(sizes[app.key].items())) + ")"
            for app in apps
        )
        + "; with tracing off neither app wrote a trace (MLFLOW_TRACE_SAMPLING_RATIO=0), with it on "
        + ", ".join(f"{app.key} wrote {traced[app.key][0]:,} for {traced[app.key][1]:,} requests" for app in apps)
        + " (warm-up included); conversation items B stored: "
        + f"{sum(checks.get(('stored', b.key), [])):,} (MEMORY: {b.memory}).",
    ]
    for tracing, one in (prof or {}).items():
        out += profile_section(one, tracing, meta["command"])
    return "\n".join(out) + "\n"
