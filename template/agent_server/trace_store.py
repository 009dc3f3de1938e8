# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Keep local traces bounded and private: no request can grow the disk without limit.

Each trace records a request's whole conversation, several times over (the request, the agent
run, each model call), so the local store (./mlruns) is capped three ways:
- TRACE_PAYLOAD_MAX_CHARS (default 20000): a span input, output or attribute longer than this
  is kept as a preview with its full length, not in full;
- TRACES_MAX_MB (default 200) and TRACES_MAX_AGE_DAYS (default 7): the oldest traces are
  deleted, at start-up and then every minute, until the store is within both;
- the store's folder is 0700, readable by the app's own user only.
Traces sent to Databricks or an MLflow server are previewed the same way but never pruned here.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)
PRUNE_EVERY_SECONDS = 60


@dataclass(frozen=True)
class Limits:
    payload_chars: int
    max_bytes: int
    max_age_seconds: float

    @classmethod
    def from_env(cls) -> Limits:
        def number(name: str, default: float) -> float:
            raw = os.environ.get(name, "").strip()
            return float(raw) if raw.replace(".", "", 1).isdigit() and float(raw) > 0 else default

        return cls(
            payload_chars=int(number("TRACE_PAYLOAD_MAX_CHARS", 20_000)),
            max_bytes=int(number("TRACES_MAX_MB", 200) * 1024 * 1024),
            max_age_seconds=number("TRACES_MAX_AGE_DAYS", 7) * 86400,
        )


def preview(serialised: str, max_chars: int) -> str | dict[str, Any]:
    """A span attribute (MLflow keeps each as JSON text) as it is when short enough, else a preview of it
    that says how long it was."""
    if len(serialised) <= max_chars:
        return serialised
    return {"truncated": True, "chars": len(serialised), "preview": serialised[:max_chars]}


def bounded_payloads(max_chars: int) -> Any:
    """An MLflow span processor that keeps each span's inputs, outputs and other attributes to previews.

    It reads the attributes as MLflow stored them (JSON text on the OpenTelemetry span), so a large
    payload is measured and cut without being parsed and serialised again on the event loop.
    """

    def preview_large_payloads(span: Any) -> None:
        stored = getattr(getattr(span, "_span", None), "attributes", None) or {}
        for key, value in list(stored.items()):
            if isinstance(value, str) and len(value) > max_chars:
                span.set_attribute(key, preview(value, max_chars))

    return preview_large_payloads


def make_private(store: Path) -> None:
    store.chmod(0o700)


def prune(store: Path, limits: Limits, now: float | None = None) -> int:
    """Delete traces past the age limit, then the oldest until the store is within the size limit."""
    now = time.time() if now is None else now
    traces = sorted((folder.stat().st_mtime, folder) for folder in store.glob("*/traces/*") if folder.is_dir())
    sizes = {folder: sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) for _, folder in traces}
    total, deleted = sum(sizes.values()), 0
    for modified, folder in traces:
        if now - modified <= limits.max_age_seconds and total <= limits.max_bytes:
            break
        shutil.rmtree(folder, ignore_errors=True)
        total -= sizes[folder]
        deleted += 1
    if deleted:
        logger.info("Pruned %d local trace(s) from %s (TRACES_MAX_MB, TRACES_MAX_AGE_DAYS)", deleted, store)
    return deleted


def keep_pruned(store: Path, limits: Limits) -> threading.Thread:
    """Prune now, then every minute in a daemon thread (it dies with the app)."""

    def loop() -> None:
        while True:
            try:
                prune(store, limits)
            except OSError as error:  # a file that vanished under us; try again next time
                logger.warning("Could not prune local traces: %s", error)
            time.sleep(PRUNE_EVERY_SECONDS)

    thread = threading.Thread(target=loop, name="trace-pruner", daemon=True)
    thread.start()
    return thread
