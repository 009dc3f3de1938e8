"""The generated app installs from its committed lock and passes its own test suite."""

from __future__ import annotations

import re

import pytest
from renders import MATRIX, uv

# The default render, and one whose defaults differ in every LLM setting.
SUITES = ["defaults", "databricks-responses"]


@pytest.mark.parametrize("name", SUITES)
def test_app_installs_locked_and_its_tests_pass(renders, name):
    assert name in MATRIX
    app = renders[name]
    uv("sync", "--locked", "--no-config", cwd=app)
    result = uv("run", "--locked", "--no-config", "pytest", "-p", "no:cacheprovider", cwd=app)
    summary = result.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary), summary
    assert not re.search(r"failed|skipped|xfail|error", summary), summary
