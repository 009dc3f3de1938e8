"""Benchmark: the generated app's own test suite, HEAD against release 0.1.0, test by test.

Run with `scripts/benchmark tests` (it renders and syncs both apps with their dev groups, then runs this with
the template repo's own Python). Each run runs both suites one after the other, in turn (A B, then B A), each
`pytest -p no:cacheprovider --junitxml` in the app's folder with the app's own Python. A test's time is
pytest's for it (setup, call and teardown); a test counts as slower when it is in both suites and, in the
median over the runs, takes HEAD more than SLOWER_RATIO times as long as 0.1.0 and at least SLOWER_SECONDS
longer (below that, a shared 2-core machine's noise). The report lists each such test, so that "no test got
slower" is a list that can be read, not a claim.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import cli
import sections
import served_app

HEADING = "## The app's test suite (benchmarks/test_suite.py)"
TARGET_SECONDS = 60  # issue 27: the owner's `uv run pytest` in a fresh render, on 2 cores
TEST_PROCESSES = len(os.sched_getaffinity(0)) + 1  # the app's conftest.py: a CPU each, plus one
SLOWER_RATIO = 1.5
SLOWER_SECONDS = 0.5
# The suites pick their own settings; none of the caller's may leak in.
DROPPED = ("VIRTUAL_ENV", "UV_", "PYTHONPATH", "LLM_", "OPENAI_", "DATABRICKS_", "MLFLOW_", "MEMORY_", "PYTEST_")


@dataclass(frozen=True)
class SuiteRun:
    wall_seconds: float  # pytest's whole process, collection and start-up included
    tests: dict[str, float]  # test id: seconds
    failed: int


def read_junit(path: Path) -> tuple[dict[str, float], int]:
    """Each test's seconds by its id (file::name) from a pytest JUnit XML report, and how many failed or erred.
    A template test's file is named as before its move to tests/template/, so a suite from either side of it
    compares test by test."""
    times: dict[str, float] = {}
    failed = 0
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        classname = case.get("classname", "").replace("tests.template.", "tests.", 1)
        test_id = f"{classname}::{case.get('name', '')}"
        times[test_id] = times.get(test_id, 0.0) + float(case.get("time") or 0)
        failed += sum(1 for child in case if child.tag in ("failure", "error"))
    return times, failed


def run_suite(app: Path, report: Path) -> SuiteRun:
    env = {key: value for key, value in os.environ.items() if not key.startswith(DROPPED)}
    started = time.monotonic()
    result = subprocess.run(
        [str(app / ".venv" / "bin" / "pytest"), "-p", "no:cacheprovider", "-q", f"--junitxml={report}"],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    wall = time.monotonic() - started
    if not report.exists():
        raise RuntimeError(f"{app}: pytest wrote no report ({result.returncode}):\n{result.stdout[-3000:]}")
    tests, failed = read_junit(report)
    return SuiteRun(wall, tests, failed)


def common_medians(before: list[SuiteRun], after: list[SuiteRun]) -> dict[str, tuple[float, float]]:
    """Each test both suites have, with its median seconds over the runs before and after."""
    common = set.intersection(*(set(run.tests) for run in before + after))
    return {
        test_id: (
            statistics.median(run.tests[test_id] for run in before),
            statistics.median(run.tests[test_id] for run in after),
        )
        for test_id in sorted(common)
    }


def slower_tests(before: list[SuiteRun], after: list[SuiteRun]) -> list[tuple[str, float, float]]:
    """The tests in both suites that got slower (see the module's doc): (id, median seconds before, after)."""
    return [
        (test_id, old, new)
        for test_id, (old, new) in common_medians(before, after).items()
        if new > old * SLOWER_RATIO and new - old >= SLOWER_SECONDS
    ]


def common_seconds(before: list[SuiteRun], after: list[SuiteRun]) -> tuple[int, float, float]:
    """How many tests both suites have, and their summed median seconds before and after."""
    medians = common_medians(before, after).values()
    return len(medians), sum(old for old, _ in medians), sum(new for _, new in medians)


def report(
    apps: list[served_app.App], runs: dict[str, list[SuiteRun]], args: argparse.Namespace, minutes: float
) -> str:
    before, after = runs[apps[0].key], runs[apps[1].key]
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    out = [HEADING, ""]
    out.append(
        f"Made by `{args.command}` on {date}, in {minutes:.1f} minutes, {os.cpu_count()} cores (shared machine), "
        f"Python {apps[-1].python}. {len(after)} run(s); each runs both suites in turn (A B, then B A), "
        "`pytest -p no:cacheprovider --junitxml` in the app's folder, with the options of its own pyproject.toml, "
        "as `uv run pytest` runs it there: HEAD in parallel (pytest-xdist, `-n auto --dist worksteal`: "
        f"{os.cpu_count()} cores, so {TEST_PROCESSES} test processes), 0.1.0 in one process. A test's time is "
        "pytest's (setup, call, teardown), in whichever process ran it; figures are medians over the runs."
    )
    out += ["", "| app | tests | failed | whole suite (s) | ratio to 0.1.0 |", "|---|---:|---:|---:|---:|"]
    base = statistics.median(run.wall_seconds for run in before)
    for app in apps:
        wall = statistics.median(run.wall_seconds for run in runs[app.key])
        count = max(len(run.tests) for run in runs[app.key])
        failed = max(run.failed for run in runs[app.key])
        out.append(f"| {app.label} | {count} | {failed} | {wall:.0f} | {wall / base:.2f}× |")
    head = statistics.median(run.wall_seconds for run in after)
    out += ["", f"Target: `uv run pytest` in a fresh render at most {TARGET_SECONDS} s on 2 cores: {head:.0f} s "
            f"({'met' if head <= TARGET_SECONDS else 'not met'})."]  # fmt: skip
    count, old, new = common_seconds(before, after)
    out += [
        "",
        f"The {count} tests both suites have (same file and name) took {old:.0f} s in 0.1.0 and {new:.0f} s "
        f"at HEAD ({new / old:.2f}×).",
    ]
    slower = slower_tests(before, after)
    rule = f"over {SLOWER_RATIO}× as long and at least {SLOWER_SECONDS} s longer"
    if not slower:
        out.append(f"No test both suites have got slower ({rule}).")
    else:
        out += ["", f"Tests that got slower ({rule}):", "", "| test | 0.1.0 (s) | HEAD (s) |", "|---|---:|---:|"]
        out += [f"| `{test_id}` | {old:.2f} | {new:.2f} |" for test_id, old, new in slower]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_app_arguments(parser, "tests")
    parser.add_argument("--runs", type=int, default=2, help="runs, each of both suites (default 2)")
    args = parser.parse_args()
    if not args.before:
        parser.error("--before (the 0.1.0 app) is needed: the figures are ratios to it")
    started = time.monotonic()
    apps = [
        served_app.App("A", args.before_label, Path(args.before).resolve()),
        served_app.App("B", args.label, Path(args.app).resolve()),
    ]
    for app in apps:
        served_app.app_facts(app)
    work = Path(tempfile.mkdtemp(prefix="suite-bench-"))
    runs: dict[str, list[SuiteRun]] = {app.key: [] for app in apps}
    for number in range(args.runs):
        for app in apps if number % 2 == 0 else apps[::-1]:
            suite = run_suite(app.path, work / f"run{number}-{app.key}.xml")
            print(
                f"tests: run {number + 1} {app.key}: {len(suite.tests)} tests, {suite.failed} failed, "
                f"{suite.wall_seconds:.0f} s",
                file=sys.stderr,
                flush=True,
            )
            runs[app.key].append(suite)
    if any(run.failed for suite in runs.values() for run in suite):
        sys.exit(f"a suite had failures, so its times are not comparable (the reports are in {work})")
    section = report(apps, runs, args, (time.monotonic() - started) / 60)
    print(section)
    if args.write:
        sections.replace_section(Path(args.write), section, HEADING)


if __name__ == "__main__":
    main()
