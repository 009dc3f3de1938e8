from __future__ import annotations

from pathlib import Path

import pytest
from renders import MATRIX, render


@pytest.fixture(scope="session")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One render per answer set in MATRIX, made once per test session (per worker)."""
    base = tmp_path_factory.mktemp("renders")
    return {name: render(base / name, data) for name, data in MATRIX.items()}
