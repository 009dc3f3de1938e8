from __future__ import annotations

from pathlib import Path

import pytest
from renders import MATRIX, render

# Fixtures that tests in several modules share, one instance per worker: the chat page's browser and apps, the
# template versions the update tests update between, and the Apps runtime's uv.
pytest_plugins = ["chat_page_fixtures", "deploy_support", "load_balancer_cluster", "update_support"]


@pytest.fixture(scope="session")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One render per answer set in MATRIX, made once per test session (per worker)."""
    base = tmp_path_factory.mktemp("renders")
    return {name: render(base / name, data) for name, data in MATRIX.items()}


# Figures a test reports (record_property("figures", text)), printed at the end of the run. Test output
# is not shown for passing tests, nor relayed from xdist workers; a report's properties are.
FIGURES: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        FIGURES.extend(value for name, value in report.user_properties if name == "figures")


def pytest_terminal_summary(terminalreporter) -> None:
    for figures in FIGURES:
        terminalreporter.write_line(figures)
