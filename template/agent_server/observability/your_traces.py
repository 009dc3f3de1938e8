# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""DELETE /me in the trace store: the caller's MLflow traces, each of which holds a turn's inputs and outputs, and
the feedback given on them (assessments of the trace, which go with it).

A trace is the caller's when MLflow's `mlflow.trace.user` names them (tracing.tag_trace tags every traced answer),
so the traces of turns that memory did not keep go too (memory off, a failed turn, a client that keeps its own
history). They are deleted from the experiment the app writes its traces to (MLFLOW_EXPERIMENT_ID, else MLflow's
own choice: its default experiment in the local store), in the store it writes to (MLFLOW_TRACKING_URI). What the
app cannot reach it names: on Databricks, copies the workspace keeps beyond the experiment (traces synced to a Unity
Catalog table, monitoring and inference tables) follow the workspace's retention, not the app's.
MLflow's calls block (a file store, or a tracking server): callers run this off the event loop.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass

logger = logging.getLogger(__name__)

PAGE = 500
ON_DATABRICKS = (
    " On Databricks, copies the workspace keeps beyond the app's experiment (traces synced to a Unity Catalog table, "
    "monitoring and inference tables) follow the workspace's own retention, which the app does not own: ask the "
    "workspace's administrators to delete those."
)


@dataclass
class TracesDeleted:
    count: int  # the traces deleted, feedback and all
    about: str  # what the answer says of them


def platform_note() -> str:
    """What the app cannot delete where its traces go ("" where it can delete them all)."""
    import mlflow

    return ON_DATABRICKS if str(mlflow.get_tracking_uri()).startswith("databricks") else ""


def delete_traces_of(owner: str) -> TracesDeleted:
    """Delete every trace of `owner`'s in the app's experiment; never raises (a failure is said in `about`)."""
    import mlflow

    try:
        mlflow.flush_trace_async_logging()  # an answer's trace may still wait in the export queue
        client = mlflow.MlflowClient()
        experiment = _experiment_id()
        found = _owned(client, experiment, owner) if _exists(client, experiment) else []
        count = 0
        for start in range(0, len(found), 100):
            count += client.delete_traces(experiment, trace_ids=found[start : start + 100]) or 0
    except Exception as error:  # the store is down, or refuses: the rest of DELETE /me stands, and says so
        logger.warning("tracing: could not delete a user's traces: %s", error)
        why = str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__
        return TracesDeleted(0, f"Your traces could not be deleted now ({why}): DELETE /me again deletes them.")
    return TracesDeleted(count, f"Your traces ({count}), with any feedback on them, were deleted.{platform_note()}")


def _experiment_id() -> str:
    """Where the app's traces go: the experiment MLflow's fluent API resolves (MLFLOW_EXPERIMENT_ID or _NAME), or its
    default one."""
    from mlflow.tracking import fluent

    return fluent._get_experiment_id() or "0"  # it reads MLFLOW_EXPERIMENT_ID (and _NAME) itself


def _exists(client: object, experiment: str) -> bool:
    """False when the experiment was never made (an app that has traced nothing yet): it holds no trace."""
    from mlflow.exceptions import MlflowException

    try:
        client.get_experiment(experiment)  # type: ignore[attr-defined]
    except MlflowException as error:
        if error.error_code == "RESOURCE_DOES_NOT_EXIST":
            return False
        raise
    return True


def _owned(client: object, experiment: str, owner: str) -> list[str]:
    """The ids of the owner's traces: searched by MLflow's filter, then checked one by one (an owner with a quote
    in it is searched for without the filter, which could not say it)."""
    quoted = "'" not in owner and "\\" not in owner
    where = f"metadata.`mlflow.trace.user` = '{owner}'" if quoted else None
    search = client.search_traces  # type: ignore[attr-defined]
    # MLflow 3.7 and later name the experiment a location; older releases have only `experiment_ids`.
    within = "locations" if "locations" in inspect.signature(search).parameters else "experiment_ids"
    ids: list[str] = []
    token = None
    while True:
        found = {within: [experiment], "filter_string": where, "max_results": PAGE, "page_token": token}
        page = search(include_spans=False, **found)
        ids += [trace.info.trace_id for trace in page if trace.info.trace_metadata.get("mlflow.trace.user") == owner]
        token = page.token
        if not token:
            return ids
