# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""MLflow tracing for every request: where the traces go, and how exporting them stays off the request path.

| where the app runs | MLFLOW_TRACKING_URI | traces go to |
|---|---|---|
| your machine (default) | unset | ./mlruns, a local store with no server to run (see the README) |
| Databricks Apps | databricks (set in app.yaml) | the experiment in MLFLOW_EXPERIMENT_ID (the bundle's experiment) |
| anywhere | http(s)://your-mlflow-server | that server |

Each request is one trace: the turn opens the root span (turn/serve.py) and `mlflow.openai.autolog()`
adds the agent run, model calls and tool calls under it. Export is asynchronous and bounded: a
finished trace is queued (MLflow drops it when the queue is full) and sent by background threads
with few retries and a short timeout, so a tracing back end that is down or slow never fails or
slows a request, nor holds up shutdown for minutes. Set MLFLOW_TRACE_SAMPLING_RATIO=0 to stop tracing: the
SDK's own tracing is then off too, so no request builds spans that nothing keeps.

No request can grow the disk without limit. Each trace records a request's whole conversation,
several times over (the request, the agent run, each model call), so traces are capped three ways:
- TRACE_PAYLOAD_MAX_CHARS (default 20000): a span input, output or attribute longer than this
  is kept as a preview with its full length, not in full (wherever traces go);
- TRACES_MAX_MB (default 200) and TRACES_MAX_AGE_DAYS (default 7): the oldest local traces are
  deleted, at start-up and then every minute, until the store is within both;
- the local store's folder is 0700, readable by the app's own user only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from agent_server import config
from agent_server.config import TraceLimits

logger = logging.getLogger(__name__)

# mlflow-skinny has no SQL store: the file store is its one local store that needs no server.
LOCAL_STORE = "file:./mlruns"
# Set by start-app (flush_on_stop) for the processes it serves in, its workers too, which flush their traces as they
# stop (app.py's lifespan); a test's client of the app in process does not wait for the export queue as it closes.
_FLUSH_ON_STOP = "AGENT_SERVER_FLUSH_TRACES_ON_STOP"

PRUNE_EVERY_SECONDS = 60

# Defaults that keep exporting off the request path and bounded; a value already set wins.
BOUNDED_EXPORT = {
    "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING": "true",  # export from background threads, never in the request
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",  # MLflow's 7 retries keep a dead back end busy for minutes
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",  # seconds; a back end that never answers costs at most this
    # MLflow prices each traced model call from a model catalog it downloads from a public host, once a process
    # (mlflow/utils/providers.py, 3.17). Empty: no request leaves for a host the app was never told of, and an
    # offline machine does not wait on its retries; traces then carry no cost estimate (mlflow-skinny ships no
    # catalog of its own). Set the variable to the catalog's address to have them.
    "MLFLOW_MODEL_CATALOG_URI": "",
}


def tracing_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The MLflow variables to add to `env`: where traces go and how they are sent. Never overrides `env`."""
    added = {name: value for name, value in BOUNDED_EXPORT.items() if not env.get(name)}
    uri = env.get("MLFLOW_TRACKING_URI") or LOCAL_STORE
    if not env.get("MLFLOW_TRACKING_URI"):
        added["MLFLOW_TRACKING_URI"] = uri
    if _is_local_file_store(uri) and not env.get("MLFLOW_ALLOW_FILE_STORE"):
        # MLflow asks for this opt-in because its full package prefers a SQL store, which skinny lacks.
        added["MLFLOW_ALLOW_FILE_STORE"] = "true"
    return added


def configure(env: MutableMapping[str, str] | None = None) -> None:
    """Point MLflow at the right store and trace the agent runs. No network: MLflow connects on first export."""
    env = os.environ if env is None else env
    env.update(tracing_environment(env))

    import mlflow.openai
    from agents import set_tracing_disabled
    from mlflow.entities.trace_location import MlflowExperimentLocation

    if experiment_id := env.get("MLFLOW_EXPERIMENT_ID"):
        # Named up front, or MLflow asks the tracking server whether it exists as each request starts.
        mlflow.tracing.set_destination(MlflowExperimentLocation(experiment_id=experiment_id))
    limits = config.settings().traces
    mlflow.tracing.configure(span_processors=[bounded_payloads(limits.payload_chars)])  # mlflow 3.3+
    uri = env["MLFLOW_TRACKING_URI"]
    if _is_local_file_store(uri):
        from mlflow.store.tracking.file_store import FileStore
        from mlflow.utils.file_utils import local_file_uri_to_path

        store = Path(local_file_uri_to_path(uri))
        FileStore(str(store))  # creates a new store now, with MLflow's default experiment, so it can be made private
        make_private(store)
        keep_pruned(store.resolve(), limits)
    if records_nothing(env):
        # MLflow would keep no trace: the SDK's own tracing would still build every span of every run.
        set_tracing_disabled(True)
    else:
        # Replaces the SDK's own trace exporter (which sends to OpenAI's servers) with MLflow's.
        mlflow.openai.autolog(silent=True)
        skip_absent_package_lookups()
        set_tracing_disabled(False)
    # Sets up MLflow's tracer now (about a second of imports), not inside the first request, where it
    # would hold up every other request on the event loop.
    mlflow.tracing.enable()


# What mlflow-skinny 3.17 imports for every trace, or every value it encodes, to find out whether it runs in
# a notebook, on a Databricks cluster or beside another library; in a served app each of them fails.
MLFLOW_PROBES = (
    # span encoder (mlflow/tracing/utils, TraceJSONEncoder._is_safe_to_encode_str), for each value JSON cannot
    # encode by itself, some 20 per model call (openai's `omit`): its stream types are not safe to print
    "llama_index.core.base.response.schema",
    "IPython",  # notebook display of traces (mlflow/tracing/display), once or more per trace
    "dbruntime.databricks_repl_context",  # Databricks notebook context (mlflow/utils/databricks_utils), per trace
    "pyspark",  # Spark task properties (mlflow/utils/databricks_utils), per trace
    "openai.resources.beta.chat.completions",  # the openai client span's type (mlflow/openai/autolog); not in openai 2+
)


def skip_absent_package_lookups() -> None:
    """Mark the modules MLflow probes for (MLFLOW_PROBES) as absent, when they are not installed.

    Each probe made an import search every folder on sys.path and fail, several times per request: about a tenth
    of a traced request's CPU. A None in sys.modules makes the same import fail at once, as it would have anyway.
    """
    for name in MLFLOW_PROBES:
        if name not in sys.modules and not _installed(name):
            sys.modules[name] = None  # type: ignore[assignment]  # what the import system reads as "not there"


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None  # imports the parent packages, if there are any
    except ModuleNotFoundError:
        return False  # a parent package is not there


def records_nothing(env: Mapping[str, str] | None = None) -> bool:
    """MLFLOW_TRACE_SAMPLING_RATIO=0: MLflow samples no request. A value MLflow cannot read is left to MLflow."""
    env = os.environ if env is None else env
    try:
        return float(env.get("MLFLOW_TRACE_SAMPLING_RATIO") or 1) <= 0
    except ValueError:
        return False


def tag_trace(owner: str | None, conversation_id: str | None) -> str | None:
    """Tag the current trace with its owner and conversation (MLflow's user and session metadata), so the
    MLflow UI groups a conversation's traces and feedback can check whose a trace is (feedback.py); and return
    its id, which every answer carries as `custom_outputs.trace_id`. None: this request is not traced."""
    import mlflow  # already imported by the server that calls this

    span = mlflow.get_current_active_span()
    if span is None:
        return None  # not traced (MLFLOW_TRACE_SAMPLING_RATIO): MLflow would warn on every update
    tags = {"mlflow.trace.user": owner, "mlflow.trace.session": conversation_id}
    try:
        mlflow.update_current_trace(metadata={key: value for key, value in tags.items() if value is not None})
    except Exception as error:  # tracing must never fail a request
        logger.debug("could not tag the trace with its owner and conversation: %s", error)
    return str(span.trace_id)


def tag_guardrail(name: str) -> None:
    """Tag the current trace with the guardrail that tripped (guardrails.py), so the refused turns can be found."""
    import mlflow

    if mlflow.get_current_active_span() is None:
        return  # not traced
    try:
        mlflow.update_current_trace(tags={"guardrail": name})
    except Exception as error:  # tracing must never fail a request
        logger.debug("could not tag the trace with its guardrail: %s", error)


def flush_on_stop() -> None:
    """Every process start-app serves in (uvicorn's workers inherit the environment) flushes as it stops."""
    os.environ[_FLUSH_ON_STOP] = "1"


def flushes_on_stop() -> bool:
    return os.environ.get(_FLUSH_ON_STOP) == "1"


def flush() -> None:
    """Send the traces still queued, before the process stops (app.py's lifespan, under start-app). Bounded by the
    retries above; never raises."""
    import mlflow

    try:
        mlflow.flush_trace_async_logging()
    except Exception as error:  # a tracing failure must not turn a clean stop into a crash
        logger.warning("Could not flush the remaining traces: %s", error)


def _is_local_file_store(uri: str) -> bool:
    return uri.startswith("file:") or ("://" not in uri and not uri.startswith(("databricks", "uc")))


def preview(serialised: str, max_chars: int) -> str | dict[str, Any]:
    """A span attribute (MLflow keeps each as JSON text) as it is when short enough, else a preview of it
    that says how long it was."""
    if len(serialised) <= max_chars:
        return serialised
    return {"truncated": True, "chars": len(serialised), "preview": serialised[:max_chars]}


def bounded_payloads(max_chars: int) -> Any:
    """An MLflow span processor that keeps each span's inputs, outputs and other attributes to previews, and its
    events' too (MLflow's autolog keeps a streamed model answer's chunks as events: `mlflow.chunk.value`).

    It reads the attributes as MLflow stored them (JSON text on the OpenTelemetry span), so a large
    payload is measured and cut without being parsed and serialised again on the event loop.
    """

    def preview_large_payloads(span: Any) -> None:
        inner = getattr(span, "_span", None)
        stored = getattr(inner, "attributes", None) or {}
        for key, value in list(stored.items()):
            if isinstance(value, str) and len(value) > max_chars:
                span.set_attribute(key, preview(value, max_chars))
        events = getattr(inner, "_events", None)
        if inner is not None and events is not None and any(_is_large(event.attributes, max_chars) for event in events):
            inner._events = [_previewed(event, max_chars) for event in events]  # what `span.events` reads

    return preview_large_payloads


def _is_large(attributes: Any, max_chars: int) -> bool:
    return any(isinstance(value, str) and len(value) > max_chars for value in (attributes or {}).values())


def _previewed(event: Any, max_chars: int) -> Any:
    from opentelemetry.sdk.trace import Event

    cut = {k: json.dumps(preview(v, max_chars)) for k, v in event.attributes.items() if _is_large({k: v}, max_chars)}
    return Event(event.name, {**event.attributes, **cut}, event.timestamp) if cut else event


def make_private(store: Path) -> None:
    store.chmod(0o700)


# A trace folder is written once, by the exporter, within moments: one this old is measured once and remembered.
SETTLED_SECONDS = 10


def prune(store: Path, limits: TraceLimits, now: float | None = None, sizes: dict[Path, int] | None = None) -> int:
    """Delete traces past the age limit, then the oldest until the store is within the size limit.

    `sizes` remembers each settled trace's size from one call to the next, so that a call reads the files of the
    traces written since the last one only: walking every file of a full store (some 17 files a trace) took a
    second of CPU every minute for 3,000 traces.
    """
    now = time.time() if now is None else now
    sizes = {} if sizes is None else sizes
    traces = sorted((folder.stat().st_mtime, folder) for folder in store.glob("*/traces/*") if folder.is_dir())
    for gone in set(sizes) - {folder for _, folder in traces}:
        del sizes[gone]
    measured = {}
    for modified, folder in traces:
        size = sizes.get(folder)
        if size is None:
            size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
            if now - modified > SETTLED_SECONDS:
                sizes[folder] = size
        measured[folder] = size
    total, deleted = sum(measured.values()), 0
    for modified, folder in traces:
        if now - modified <= limits.max_age_seconds and total <= limits.max_bytes:
            break
        shutil.rmtree(folder, ignore_errors=True)
        total -= measured[folder]
        sizes.pop(folder, None)
        deleted += 1
    if deleted:
        logger.info("Pruned %d local trace(s) from %s (TRACES_MAX_MB, TRACES_MAX_AGE_DAYS)", deleted, store)
    return deleted


# Held by a pruning pass, and by `uv run evaluate` for as long as it writes and reads its traces (pruning_held).
_PRUNING = threading.Lock()
_PRUNED: dict[Path, TraceLimits] = {}  # each store a thread of this process prunes, with its latest limits


@contextlib.contextmanager
def pruning_held() -> Iterator[None]:
    """No pruning pass in this process while inside (a pass under way ends first): an evaluation reads its turns'
    traces back, and MLflow copies and scores them, minutes after they were written (evaluation/cli.py)."""
    with _PRUNING:
        yield


def keep_pruned(store: Path, limits: TraceLimits) -> None:
    """Prune `store` now, then every minute (skipped while held), in its one daemon thread (it dies with the app)."""
    started, _PRUNED[store] = store in _PRUNED, limits  # configured again (the tests do): its next pass takes these
    if not started:
        threading.Thread(target=_prune_every_minute, args=(store,), name="trace-pruner", daemon=True).start()


def _prune_every_minute(store: Path) -> None:
    sizes: dict[Path, int] = {}  # of settled traces, kept between passes (prune); each pass takes the latest limits
    while True:
        if _PRUNING.acquire(blocking=False):
            try:
                prune(store, _PRUNED[store], sizes=sizes)
            except OSError as error:  # a file that vanished under us; try again next time
                logger.warning("Could not prune local traces: %s", error)
            finally:
                _PRUNING.release()
        time.sleep(PRUNE_EVERY_SECONDS)
