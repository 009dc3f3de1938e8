"""The serving benchmark's report (serve.py): the cells' medians over the runs, app A beside app B, as Markdown."""

from __future__ import annotations

import os
import statistics

from serve_profile import profile_section
from served_app import CLIENT_CORE, CLOCK_TICK, CONCURRENCY, MODES, SERVER_CORE, VERSIONS, App, Settings, cpu_model

HEADING = "## Serving: HEAD against 0.1.0 (benchmarks/serve.py)"
TRACING = ("off", "on")
TARGET = 0.7  # issue 49: B's CPU per request at most 0.7x of release 0.1.0's, at c=8 with tracing off


def med(values: list[float]) -> float:
    values = [value for value in values if value == value]  # no NaN
    return statistics.median(values) if values else float("nan")


def ms(value: float, digits: int = 1) -> str:
    return "–" if value != value else f"{value:,.{digits}f}"


def compared(apps: list[App]) -> list[App]:
    """The apps B is measured against: A (the release), and C (the commit before a change) when there is one."""
    return [apps[0], *apps[2:]]


def results_table(apps: list[App], runs: list[dict]) -> list[str]:
    """runs: per run, {(app key, tracing, mode, concurrency): Cell}. Each app's medians, and B over each other app."""
    b, keys = apps[1].key, [app.key for app in apps]
    against = [app.key for app in compared(apps)]
    header = (
        ["mode", "concurrency", "tracing"]
        + [f"CPU ms/req {key}" for key in keys]
        + [f"CPU ratio {b}/{key}" for key in against]
        + [f"req/s {key}" for key in keys]
        + [f"p50 / p95 / p99 ms {key}" for key in keys]
        + ["errors " + " / ".join(keys)]
        + [f"peak RSS MiB {key}" for key in keys]
    )
    lines = ["| " + " | ".join(header) + " |", "|---|---:|---|" + "---:|" * (len(header) - 3)]
    for mode in MODES:
        for concurrency in CONCURRENCY:
            for tracing in TRACING:
                cells = [{key: run[key, tracing, mode, concurrency] for key in keys} for run in runs]

                def each(name: str, key: str, cells: list = cells) -> float:
                    return med([getattr(one[key], name) for one in cells])

                row = [mode_name(mode), str(concurrency), tracing]
                row += [ms(each("cpu_ms", key), 2) for key in keys]
                row += [f"{ms(med([one[b].cpu_ms / one[key].cpu_ms for one in cells]), 2)}×" for key in against]
                row += [ms(each("rps", key), 0) for key in keys]
                row += [" / ".join(ms(each(name, key), 0) for name in ("p50", "p95", "p99")) for key in keys]
                row.append(" / ".join(str(sum(sum(one[key].errors.values()) for one in cells)) for key in keys))
                row += [ms(each("rss_mib", key), 0) for key in keys]
                lines.append("| " + " | ".join(row) + " |")
    return lines


def mode_name(mode: str) -> str:
    return "stream" if mode == "stream" else "not streaming"


def tracing_cost(apps: list[App], runs: list[dict]) -> list[str]:
    lines = [
        "| app | mode | CPU ms/req off | CPU ms/req on | added by tracing (ms/req) | on / off |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for app in apps:
        for mode in MODES:
            cells = [(run[app.key, "off", mode, 8], run[app.key, "on", mode, 8]) for run in runs]
            lines.append(
                f"| {app.key} | {mode_name(mode)} "
                f"| {ms(med([off.cpu_ms for off, _ in cells]), 2)} | {ms(med([on.cpu_ms for _, on in cells]), 2)} "
                f"| {ms(med([on.cpu_ms - off.cpu_ms for off, on in cells]), 2)} "
                f"| {ms(med([on.cpu_ms / off.cpu_ms for off, on in cells]), 2)}× |"
            )
    return lines


def target_ratios(apps: list[App], runs: list[dict], mode: str) -> dict[str, float]:
    """At c=8, tracing off: the median of the runs' ratios of B's CPU per request over each compared app's."""
    b = apps[1].key
    return {
        app.key: med([run[b, "off", mode, 8].cpu_ms / run[app.key, "off", mode, 8].cpu_ms for run in runs])
        for app in compared(apps)
    }


def targets(apps: list[App], runs: list[dict]) -> str:
    """B at most TARGET of A's CPU per request, and below C's (the commit before the change) when there is a C."""
    a, b = apps[0].key, apps[1].key
    parts = []
    for mode in MODES:
        ratios = target_ratios(apps, runs, mode)
        said = [f"B/{a} {ratios[a]:.2f}× ({'met' if ratios[a] <= TARGET else 'not met'})"]
        said += [
            f"B/{key} {ratio:.2f}× ({'met' if ratio < 1 else 'not met'})" for key, ratio in ratios.items() if key != a
        ]
        p99 = med([run[b, "off", mode, 8].p99 for run in runs])
        name = "streaming" if mode == "stream" else "not streaming"
        parts.append(f"{name}: CPU/request " + ", ".join(said) + f", p99 {p99:.0f} ms")
    return "; ".join(parts)


def target_rule(apps: list[App]) -> str:
    rule = f"B at most {TARGET}× A's CPU per request"
    return rule + ", and below C's" if len(apps) > 2 else rule


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


def order_note(apps: list[App]) -> str:
    keys = [app.key for app in apps]
    if len(apps) == 2:
        return "A first in odd runs, B first in even ones"
    forth, back = ", ".join(keys), ", ".join(keys[::-1])
    return f"{forth} in odd runs, {back} in even ones, so B is measured right beside each of the others"


def checks_line(apps: list[App], checks: dict) -> str:
    sizes = {app.key: dict(checks.get(("input sizes", app.key), {})) for app in apps}
    traced = {
        app.key: [sum(column) for column in zip(*checks.get(("traces", app.key, "on"), [(0, 0)]), strict=True)]
        for app in apps
    }
    stored = [app for app in apps if app.memory == "as rendered"]
    return (
        "Checks: every model call carried the whole history "
        + ", ".join(
            f"({app.key}: " + ", ".join(f"{size} messages × {n}" for size, n in sorted(sizes[app.key].items())) + ")"
            for app in apps
        )
        + "; with tracing off no app wrote a trace (MLFLOW_TRACE_SAMPLING_RATIO=0), with it on "
        + ", ".join(f"{app.key} wrote {traced[app.key][0]:,} for {traced[app.key][1]:,} requests" for app in apps)
        + " (warm-up included)"
        + (
            "; conversation items stored: "
            + ", ".join(f"{app.key} {sum(checks.get(('stored', app.key), [])):,}" for app in stored)
            + " (memory as rendered)"
            if stored
            else ""
        )
        + "."
    )


def report(
    apps: list[App], runs: list[dict], settings: Settings, checks: dict, prof: dict[str, dict] | None, meta: dict
) -> str:
    """apps: A (the release), B (HEAD), and optionally C (the commit before a change), in that order."""
    pythons = sorted({app.python for app in apps})
    out = [HEADING, ""]
    out.append(
        f"Made by `{meta['command']}` on {meta['date']}, in {meta['minutes']:.1f} minutes. "
        f"{os.cpu_count()} cores ({cpu_model()}), Linux {os.uname().release}, Python {' and '.join(pythons)} "
        f"in the {len(apps)} apps. "
        f"The machine was shared with other engineers' test runs at the time (load average {meta['load_before']} "
        f"at the start, {meta['load_after']} at the end), so absolute figures are noisy: compare the ratios, "
        "each taken within cells measured one right after the other, before the median over the runs."
    )
    out += ["", *(f"- {app.key}: {app.label}" for app in apps), ""]
    out.append("| app | " + " | ".join(VERSIONS) + " |")
    out.append("|---|" + "---|" * len(VERSIONS))
    for app in apps:
        out.append(f"| {app.key} | " + " | ".join(app.versions.get(name, "?") for name in VERSIONS) + " |")
    requests = ", ".join(f"{count} at c={c}" for c, count in settings.requests.items())
    out += [
        "",
        f"{settings.runs} run(s); per run and app, one fresh process with tracing off and one with it on, each warmed "
        f"up with {settings.warmup} requests, then per cell {requests}. The apps' processes are up at once, and each "
        f"cell is measured on one app right after the other ({order_note(apps)}). "
        "Each process is one uvicorn worker "
        f"(`start-app --host 127.0.0.1 --port N --workers 1`) pinned to core {SERVER_CORE}; the stub model and the "
        f"httpx load client share core {CLIENT_CORE}. {memory_note(apps)} chat_completions mode, the whole two-turn "
        "history (with the answer as an id-less assistant output_text message) in every request. CPU ms/req is the app "
        "process's utime+stime over the cell (read with the process quiet before and after, so background trace "
        f"export counts; {CLOCK_TICK * 1000:.0f} ms ticks) per completed request; peak RSS is VmHWM, reset before "
        "each cell. Each app's figures and latencies are medians over the runs; a ratio is the median of the runs' "
        "ratios.",
        "",
    ]
    out += results_table(apps, runs)
    out += ["", f"Target ({target_rule(apps)}), at c=8 with tracing off: {targets(apps, runs)}.", ""]
    out += ["What tracing costs, at c=8 (medians of the runs' differences and ratios):", ""]
    out += tracing_cost(apps, runs)
    out += ["", checks_line(apps, checks)]
    for tracing, one in (prof or {}).items():
        out += profile_section(one, tracing, meta["command"])
    return "\n".join(out) + "\n"
