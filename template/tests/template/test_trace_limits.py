# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Local traces stay bounded and private (agent_server/observability/tracing.py)."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path

import mlflow
import pytest

from agent_server.config import TraceLimits
from agent_server.observability import tracing
from agent_server.observability.tracing import preview, prune

LIMITS = TraceLimits(payload_chars=100, max_bytes=3000, max_age_seconds=3600)


def fake_trace(store, name: str, size: int, age_seconds: float) -> None:
    folder = store / "0" / "traces" / name
    (folder / "artifacts").mkdir(parents=True)
    (folder / "artifacts" / "traces.json").write_bytes(b"x" * size)
    stamp = time.time() - age_seconds
    os.utime(folder, (stamp, stamp))


def test_a_short_payload_is_kept_and_a_long_one_previewed():
    assert preview('{"a": "b"}', 100) == '{"a": "b"}'
    long = json.dumps({"input": "x" * 500})
    kept = preview(long, 100)
    assert kept == {"truncated": True, "chars": len(long), "preview": long[:100]}


def test_prune_deletes_what_is_too_old_then_the_oldest_until_within_size(tmp_path):
    fake_trace(tmp_path, "tr-ancient", 10, age_seconds=7200)
    for age, name in ((400, "tr-old"), (300, "tr-middle"), (200, "tr-new"), (100, "tr-newest")):
        fake_trace(tmp_path, name, 1000, age_seconds=age)
    assert prune(tmp_path, LIMITS) == 2
    assert sorted(path.name for path in (tmp_path / "0" / "traces").iterdir()) == ["tr-middle", "tr-new", "tr-newest"]
    assert prune(tmp_path, LIMITS) == 0


def test_prune_reads_each_settled_trace_once_and_still_counts_new_ones(tmp_path):
    """What keep_pruned keeps between calls: sizes of settled traces, so a call walks only what is new."""
    sizes: dict[Path, int] = {}
    for age, name in ((400, "tr-old"), (300, "tr-middle")):
        fake_trace(tmp_path, name, 1000, age_seconds=age)
    fake_trace(tmp_path, "tr-writing", 500, age_seconds=0)  # young: measured, not remembered
    assert prune(tmp_path, LIMITS, sizes=sizes) == 0
    assert {folder.name: size for folder, size in sizes.items()} == {"tr-old": 1000, "tr-middle": 1000}
    # A remembered size is used as it is: the files are not read again (this one grew behind the cache's back).
    (tmp_path / "0" / "traces" / "tr-old" / "artifacts" / "traces.json").write_bytes(b"x" * 1500)
    os.utime(tmp_path / "0" / "traces" / "tr-old", (time.time() - 400, time.time() - 400))
    fake_trace(tmp_path, "tr-new", 1000, age_seconds=100)  # now 1000 + 1000 + 500 + 1000 > 3000
    assert prune(tmp_path, LIMITS, sizes=sizes) == 1
    left = sorted(path.name for path in (tmp_path / "0" / "traces").iterdir())
    assert left == ["tr-middle", "tr-new", "tr-writing"]
    assert "tr-old" not in {folder.name for folder in sizes}, "a deleted trace is forgotten"


def test_configuring_tracing_again_starts_no_second_pruner_for_its_store():
    """A store is pruned by one thread of the process, however often tracing is configured (the tests' conftest.py
    configures it again for each traced test; each call started a pruner of its own before)."""

    def pruners() -> int:
        return sum(thread.name == "trace-pruner" for thread in threading.enumerate())

    tracing.configure()
    before = pruners()
    tracing.configure()
    tracing.configure()
    assert before >= 1 and pruners() == before


def test_the_store_is_private(app_client):
    store = Path(os.environ["MLFLOW_TRACKING_URI"].removeprefix("file:"))  # the tests' own store (conftest.py)
    assert stat.S_IMODE(store.stat().st_mode) == 0o700


@pytest.mark.usefixtures("traced")
def test_a_huge_request_is_traced_as_a_preview(app_client):
    # A turn's trace has some twenty payloads (the request and answer of the turn, the run, each model call), each
    # kept to a preview of TRACE_MAX_ATTRIBUTE_CHARS: together less than the one request, were it traced whole.
    huge = "y" * 600_000
    response = app_client.post("/invocations", json={"input": [{"role": "user", "content": huge}]})
    assert response.status_code == 200, response.text
    mlflow.flush_trace_async_logging()
    trace = mlflow.get_trace(mlflow.get_last_active_trace_id())
    stored = json.dumps(trace.to_dict())
    assert len(stored) < len(huge), "the trace holds previews, not the request several times over"
    assert "truncated" in stored and "y" * 1000 in stored, "a preview of the request is kept"
