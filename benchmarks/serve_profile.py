"""Where a served app's CPU goes: py-spy on it under load (serve.py --profile), summed by package and function,
and the report's section of it."""

from __future__ import annotations

import asyncio
import collections
import re
import subprocess
from pathlib import Path

from load_client import load, warm_up
from served_app import CLIENT_CORE, App, Served, Settings, cpu_seconds, quiet

PACKAGE_GROUPS = {
    "uvicorn": "uvicorn/starlette/fastapi",
    "starlette": "uvicorn/starlette/fastapi",
    "fastapi": "uvicorn/starlette/fastapi",
    "httpx": "httpx/httpcore",
    "httpcore": "httpx/httpcore",
    "httpx2": "httpx/httpcore",  # openai 3's own forks of them
    "httpcore2": "httpx/httpcore",
    "pydantic": "pydantic",
    "pydantic_core": "pydantic",
}
PROFILE_RATE = 500  # samples a second; --nonblocking reads the app's memory from the other core, never pausing it
ALWAYS_SHOWN = (
    "agents",
    "asyncio",
    "uvicorn/starlette/fastapi",
    "mlflow",
    "agent_server",
    "openai",
    "httpx/httpcore",
    "pydantic",
)


def frame_place(frame: str) -> tuple[str, str, str]:
    """(package, function, short file) of one py-spy frame, `function (/full/path.py:line)`."""
    function, _, where = frame.rpartition(" (")
    path = where.rstrip(")").rpartition(":")[0] or where.rstrip(")")
    if "/site-packages/" in path:
        short = path.split("/site-packages/", 1)[1]
        top = short.split("/", 1)[0].removesuffix(".py")
        return PACKAGE_GROUPS.get(top, top), function or frame, short
    if "/agent_server/" in path:
        short = "agent_server/" + path.split("/agent_server/", 1)[1]
        return "agent_server", function or frame, short
    frozen = re.fullmatch(r"<frozen ([\w.]+)>", path)  # os, abc, _collections_abc, importlib._bootstrap
    if frozen:
        return f"stdlib {frozen.group(1).lstrip('_').split('.')[0]}", function or frame, path
    stdlib = re.search(r"/lib/python3\.\d+/(.*)$", path)
    if stdlib:
        short = stdlib.group(1)
        top = short.split("/", 1)[0].removesuffix(".py")
        return ("asyncio" if top == "asyncio" else f"stdlib {top}"), function or frame, short
    return "other", function or frame, path or frame


def summarise_profile(raw: str) -> tuple[int, list[tuple[str, float, float]], list[tuple[str, str, float]]]:
    """From py-spy's raw (collapsed) stacks: samples, per package (self %, inclusive %), top functions by self %."""
    total = 0
    self_by_package: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    by_function: collections.Counter[tuple[str, str]] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count, frames = int(count_text), [frame_place(frame) for frame in stack.split(";")]
        total += count
        package, function, short = frames[-1]
        self_by_package[package] += count
        by_function[package, f"{function} ({short})"] += count
        for seen in {frame[0] for frame in frames}:
            inclusive[seen] += count
    if not total:
        return 0, [], []
    shown = set(ALWAYS_SHOWN) | {name for name, count in self_by_package.items() if count / total >= 0.01}
    packages = sorted(
        ((name, 100 * self_by_package[name] / total, 100 * inclusive[name] / total) for name in shown),
        key=lambda row: -row[1],
    )
    functions = [(package, where, 100 * count / total) for (package, where), count in by_function.most_common(20)]
    return total, packages, functions


def inclusive_functions(raw: str, package: str, top: int = 15) -> list[tuple[str, float]]:
    """The functions of `package` with the largest inclusive share (anywhere on the stack) of py-spy's samples."""
    total = 0
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        total += int(count_text)
        places = {
            f"{function} ({short})" for name, function, short in map(frame_place, stack.split(";")) if name == package
        }
        for place in places:
            counts[place] += int(count_text)
    return [(place, 100 * count / total) for place, count in counts.most_common(top)] if total else []


async def profile(app: App, stub_url: str, work: Path, settings: Settings, uv: str, tracing: str) -> dict:
    """py-spy on app (HEAD) at c=8, not streaming, while the load client keeps it busy."""
    spy = [uv, "run", "--no-project", "--quiet", "--with", "py-spy", "py-spy"]
    version = subprocess.run([*spy, "--version"], capture_output=True, text=True, timeout=300, check=True)
    served = Served(app, stub_url, work / f"profile-tracing-{tracing}", tracing, settings)
    out = served.folder / "profile.txt"
    try:
        await served.wait_healthy()
        await warm_up(served, settings.warmup)
        await quiet(served.pid)
        record = subprocess.Popen(
            ["taskset", "-c", str(CLIENT_CORE), *spy, "record", "--pid", str(served.pid)]
            + ["--duration", str(int(settings.profile_seconds)), "--rate", str(PROFILE_RATE), "--nonblocking", "--gil"]
            + ["--full-filenames", "--format", "raw", "--output", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        await asyncio.sleep(0.5)
        before = cpu_seconds(served.pid)
        latencies, errors, elapsed = await load(
            served.url, "json", 8, 100_000, settings.profile_seconds + 30, keep_going=lambda: record.poll() is None
        )
        await quiet(served.pid)  # the trace export the requests left counts, as in a cell
        cpu = cpu_seconds(served.pid) - before
        _, spy_err = record.communicate(timeout=60)
        if record.returncode != 0:
            raise RuntimeError(f"py-spy failed ({record.returncode}): {spy_err.decode(errors='replace')[-2000:]}")
    finally:
        served.stop()
    raw = out.read_text()
    total, packages, functions = summarise_profile(raw)
    return {
        "tool": version.stdout.strip(),
        "samples": total,
        "seconds": settings.profile_seconds,
        "requests": len(latencies),
        "errors": sum(errors.values()),
        "cpu_ms": cpu * 1000 / max(1, len(latencies)),
        "packages": packages,
        "functions": functions,
        "mlflow": inclusive_functions(raw, "mlflow"),
    }


def profile_section(prof: dict, tracing: str, command: str) -> list[str]:
    out = [
        "",
        f"### Where HEAD's CPU goes (py-spy, c=8, not streaming, tracing {tracing})",
        "",
        f"`{command}` sampled app B with {prof['tool']} for {prof['seconds']:.0f} s while the load "
        f"client kept it busy (`py-spy record --pid PID --rate {PROFILE_RATE} --nonblocking --gil --format raw "
        "--full-filenames`, through `uv run --no-project --with py-spy`): "
        f"{prof['samples']:,} samples of the thread holding the GIL, while serving {prof['requests']:,} requests "
        f"({prof['errors']} errors, {prof['cpu_ms']:.2f} ms CPU/request under sampling). `--gil` because "
        "py-spy's idle detection counted waiting threads (the thread pool's queue, the trace pruner's sleep) as "
        "busy here; so C code that releases the GIL (socket calls, epoll, file writes) is not in these shares. Self "
        "is the share of samples whose innermost Python frame is in the package (C code counts for the Python "
        "function that called it); inclusive is the share with the package anywhere on the stack.",
        "",
        "| package | self % | inclusive % |",
        "|---|---:|---:|",
    ]
    out += [f"| {name} | {own:.1f} | {incl:.1f} |" for name, own, incl in prof["packages"]]
    out += ["", "| top 20 functions by self time | package | self % |", "|---|---|---:|"]
    out += [f"| `{where}` | {package} | {share:.1f} |" for package, where, share in prof["functions"]]
    if tracing == "on":
        out += ["", "| MLflow's functions by inclusive share | inclusive % |", "|---|---:|"]
        out += [f"| `{where}` | {share:.1f} |" for where, share in prof["mlflow"]]
    return out
