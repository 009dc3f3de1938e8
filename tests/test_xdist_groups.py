"""This suite's `--dist loadgroup` (scripts/test) keeps each xdist_group on one worker, as the installed pytest and
pytest-xdist do it: a group's module-scoped servers (the load balancer's three instances, the deploy rehearsal's
installed runtime, the browser) are then set up once a run, not once per worker. pytest 9.2 broke it silently
(pyproject.toml pins below it)."""

from __future__ import annotations

import subprocess
import sys

GROUPED = """
import os
import pytest

@pytest.mark.parametrize("case", range(6))
@pytest.mark.xdist_group("together")
def test_grouped(case):
    with open("workers.txt", "a") as out:
        out.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_a_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-q"]
    result = subprocess.run([*command, "-c", "/dev/null", "test_grouped.py"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 6 and len(set(workers)) == 1, f"the group ran on {sorted(set(workers))}"
