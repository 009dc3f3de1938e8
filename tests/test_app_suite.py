"""The generated app installs from its committed lock and passes its own test suite."""

from __future__ import annotations

import pytest
from renders import assert_all_passed, uv

# The default render, and one whose defaults differ in every LLM setting.
SUITES = ["defaults", "databricks-responses"]


@pytest.mark.parametrize("name", SUITES)
def test_app_installs_locked_and_its_tests_pass(renders, name):
    app = renders[name]
    uv("sync", "--locked", "--dev", "--no-config", cwd=app)
    result = uv("run", "--locked", "--no-config", "pytest", "-p", "no:cacheprovider", cwd=app)
    assert_all_passed(result)
