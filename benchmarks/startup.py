"""Benchmark: start-up to the first 200 on /health, after a deployed install, for HEAD and release 0.1.0.

Run with `scripts/benchmark startup` (it renders and syncs both apps). For each app, a clean copy is installed
the way the Databricks Apps runtime installs it: `uv sync --locked` with the runtime's uv (0.10.2) and no uv
settings but the project's own (no UV_* variables, no user uv.toml), and Python free to write the bytecode it
compiles (no PYTHONDONTWRITEBYTECODE). Then `start-app` is started and timed to
its first 200 on /health: the first start after the install, then several more. The first start is where an
install that compiled no bytecode pays for compiling the SDK and MLflow. Wall-clock times, on a shared machine:
compare the apps and the starts within this run.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import cli
import sections

HEADING = "## Start-up (benchmarks/startup.py)"
RUNTIME_UV = "0.10.2"  # the Databricks Apps runtime's uv, as tests/deploy_support.py names it
LATER_STARTS = 3
JUNK = shutil.ignore_patterns(".venv", "mlruns", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache")


def runtime_uv(uv: str, folder: Path) -> Path:
    subprocess.run([uv, "venv", "--quiet", str(folder)], check=True)
    python = folder / "bin" / "python"
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), f"uv=={RUNTIME_UV}"], check=True)
    return folder / "bin" / "uv"


def plain_env(config_home: Path) -> dict[str, str]:
    # PYTHONDONTWRITEBYTECODE too (set on this machine): the runtime lets Python write what it compiles on a
    # first start, so an install without bytecode pays once, not on every start.
    dropped = ("UV_", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "LLM_", "OPENAI_", "DATABRICKS_")
    dropped += ("MLFLOW_", "MEMORY_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    return {**env, "XDG_CONFIG_HOME": str(config_home)}


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def time_to_health(app: Path, env: dict[str, str], limit: float = 120) -> float:
    """Seconds from starting start-app to its first 200 on /health; the process is stopped after."""
    port = free_port()
    env = {**env, "LLM_PROVIDER": "offline", "MEMORY_BACKEND": "none", "MLFLOW_TRACKING_URI": f"file:{app}/mlruns"}
    started = time.perf_counter()
    command = [str(app / ".venv" / "bin" / "start-app"), "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, cwd=app, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - started < limit:
            if process.poll() is not None:
                raise RuntimeError(f"start-app in {app} exited with {process.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as answer:
                    if answer.status == 200:
                        return time.perf_counter() - started
            except OSError:
                time.sleep(0.01)
        raise RuntimeError(f"start-app in {app} did not answer within {limit} s")
    finally:
        process.terminate()
        process.wait(30)


def measure(label: str, render: Path, uv: Path, work: Path) -> dict:
    app = work / label.split(" ")[0]
    shutil.copytree(render, app, ignore=JUNK)
    env = plain_env(work / "config")
    installed = time.perf_counter()
    subprocess.run([str(uv), "sync", "--locked", "--quiet"], cwd=app, env=env, check=True)
    install = time.perf_counter() - installed
    first = time_to_health(app, env)
    later = [time_to_health(app, env) for _ in range(LATER_STARTS)]
    return {"label": label, "install": install, "first": first, "later": statistics.median(later)}


def report(rows: list[dict], command: str, minutes: float) -> str:
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    out = [
        HEADING,
        "",
        f"Made by `{command}` on {date}, in {minutes:.1f} minutes, {os.cpu_count()} cores (shared machine), "
        f"Python {sys.version.split()[0]}. Each app is installed as the Databricks Apps runtime installs it (uv "
        f"{RUNTIME_UV}, `uv sync --locked`, no uv settings but the project's), then started with the offline model "
        f"and memory off; later starts are the median of {LATER_STARTS}.",
        "",
        "| app | install (s) | first start to /health (s) | later starts (s) | first / later |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        ratio = row["first"] / row["later"]
        out.append(
            f"| {row['label']} | {row['install']:.1f} | {row['first']:.2f} | {row['later']:.2f} | {ratio:.2f}× |"
        )
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_app_arguments(parser, "startup")
    parser.add_argument("--uv", default="uv", help="a uv to install the runtime's uv with")
    args = parser.parse_args()
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="startup-bench-"))
    try:
        uv = runtime_uv(args.uv, work / "runtime-uv")
        rows = [measure(args.before_label, Path(args.before), uv, work)] if args.before else []
        rows.append(measure(args.label, Path(args.app), uv, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    section = report(rows, args.command, (time.monotonic() - started) / 60)
    print(section)
    if args.write:
        sections.replace_section(Path(args.write), section, HEADING)


if __name__ == "__main__":
    main()
