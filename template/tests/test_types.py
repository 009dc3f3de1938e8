# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The app type-checks: mypy, strict on the template's modules ([tool.mypy] in pyproject.toml), as CI runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parent.parent


def test_mypy_finds_no_type_errors():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"], cwd=APP, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"mypy found type errors (uv run mypy):\n{result.stdout}{result.stderr}"
