# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""MLflow tracing for every request: where the traces go, and how exporting them stays off the request path.

| where the app runs | MLFLOW_TRACKING_URI | traces go to |
|---|---|---|
| your machine (default) | unset | ./mlruns, a local store with no server to run (see the README) |
| Databricks Apps | databricks (set in app.yaml) | the experiment in MLFLOW_EXPERIMENT_ID (the bundle's experiment) |
| anywhere | http(s)://your-mlflow-server | that server |

Each request is one trace: MLflow's agent server opens the root span and `mlflow.openai.autolog()`
adds the agent run, model calls and tool calls under it. Export is asynchronous and bounded: a
finished trace is queued (MLflow drops it when the queue is full) and sent by background threads
with few retries and a short timeout, so a tracing back end that is down or slow never fails or
slows a request, nor holds up shutdown for minutes. Set MLFLOW_TRACE_SAMPLING_RATIO=0 to stop tracing.
Large payloads are kept as previews, and the local store is private and pruned: see
agent_server/trace_store.py.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from agent_server import trace_store

# mlflow-skinny has no SQL store: the file store is its one local store that needs no server.
LOCAL_STORE = "file:./mlruns"

# Defaults that keep exporting off the request path and bounded; a value already set wins.
BOUNDED_EXPORT = {
    "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING": "true",  # export from background threads, never in the request
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",  # MLflow's 7 retries keep a dead back end busy for minutes
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",  # seconds; a back end that never answers costs at most this
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
    limits = trace_store.Limits.from_env()
    mlflow.tracing.configure(span_processors=[trace_store.bounded_payloads(limits.payload_chars)])  # mlflow 3.3+
    uri = env["MLFLOW_TRACKING_URI"]
    if _is_local_file_store(uri):
        from mlflow.store.tracking.file_store import FileStore
        from mlflow.utils.file_utils import local_file_uri_to_path

        store = Path(local_file_uri_to_path(uri))
        FileStore(str(store))  # creates a new store now, with MLflow's default experiment, so it can be made private
        trace_store.make_private(store)
        trace_store.keep_pruned(store, limits)
    # Replaces the SDK's own trace exporter (which sends to OpenAI's servers) with MLflow's.
    mlflow.openai.autolog(silent=True)
    set_tracing_disabled(False)
    # Sets up MLflow's tracer now (about a second of imports), not inside the first request, where it
    # would hold up every other request on the event loop.
    mlflow.tracing.enable()


def flush() -> None:
    """Send the traces still queued, before the process stops (start-app calls it). Bounded by the retries
    above; never raises."""
    import mlflow

    try:
        mlflow.flush_trace_async_logging()
    except Exception as error:  # a tracing failure must not turn a clean stop into a crash
        logging.getLogger(__name__).warning("Could not flush the remaining traces: %s", error)


def _is_local_file_store(uri: str) -> bool:
    return uri.startswith("file:") or ("://" not in uri and not uri.startswith(("databricks", "uc")))
