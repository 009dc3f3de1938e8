# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Users' thumbs up and down on answers, kept where the answers' traces are: as MLflow assessments.

    POST /feedback   {"trace_id": "tr-...", "value": true, "comment": "optional"}
                     200 {"trace_id", "assessment_id", "value", "comment", "replaced"}
    GET  /feedback?trace_id=tr-...&trace_id=...   (at most 100)
                     200 {"feedback": {"tr-...": {"value", "comment"}}}: the caller's own, on the traces named
                     that are the caller's and have it (the chat page shows its thumbs again after a reload)

Every answer carries its trace's id (`custom_outputs.trace_id`, turn/serve.py). The feedback is recorded with
`mlflow.log_feedback` as a `user_feedback` assessment whose source is HUMAN with the caller's identity (the
one conversation memory reads: identity.owner_of), the same name and source the Databricks chat UI uses, so
`mlflow.search_traces` and `uv run evaluate --from-feedback` read both alike. One per user per trace: a
second answer replaces the first (`mlflow.update_assessment`).

A trace is the caller's when its `mlflow.trace.user` (tracing.tag_trace) is the caller: any other trace,
an unknown one included, is a 404 that says nothing about whose it is. With MLFLOW_TRACE_SAMPLING_RATIO=0
there are no traces, and the 404 says so. MLflow's calls block (a file store, or a tracking server), so
the route runs in FastAPI's thread pool, off the event loop; a process writes one trace's feedback one at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from agent_server import config, identity
from agent_server.errors import BadRequest, NotFound, TooLarge, quoted
from agent_server.json_body import check_shown_text, small_json
from agent_server.observability import tracing

router = APIRouter(include_in_schema=False)

NAME = "user_feedback"
# MLflow's trace ids (`tr-` and 32 hex digits), or Unity Catalog's `trace:/<catalog>.<schema>/<id>`: nothing
# that could name a path in a file store.
TRACE_ID = re.compile(r"tr-[0-9a-f]{32}|trace:/[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*/[A-Za-z0-9_-]{1,64}")
FIELDS = ("trace_id", "value", "comment")
NO_TRACES = "This app keeps no traces (MLFLOW_TRACE_SAMPLING_RATIO=0), so there is no answer to give feedback on."


@router.post("/feedback")
async def give_feedback(request: Request) -> Response:
    owner = identity.owner_of(request.headers)
    limit = 4 * config.settings().traces.feedback_chars + 4096  # the comment, however escaped, and the rest
    trace_id, value, comment = checked(await small_json(request, limit, "feedback"))
    if tracing.records_nothing():
        raise NotFound(NO_TRACES)
    async with _one_at_a_time(trace_id):
        return await run_in_threadpool(_recorded, trace_id, owner, value, comment)


_WRITING: dict[str, asyncio.Lock] = {}
_WAITING: Counter[str] = Counter()


@contextlib.asynccontextmanager
async def _one_at_a_time(trace_id: str) -> AsyncIterator[None]:
    """This process's feedback on one trace, written one at a time: MLflow's file store reads a trace half written
    by another request (a 500, or a 404 for a trace that is the caller's), and two first answers at once would
    each log one. Waiting here, not in the thread pool, a burst holds none of its threads."""
    lock = _WRITING.setdefault(trace_id, asyncio.Lock())
    _WAITING[trace_id] += 1
    try:
        async with lock:
            yield
    finally:
        _WAITING[trace_id] -= 1
        if not _WAITING[trace_id]:
            del _WAITING[trace_id], _WRITING[trace_id]


MAX_READ = 100


@router.get("/feedback")
async def read_feedback(request: Request) -> Response:
    owner = identity.owner_of(request.headers)
    trace_ids = list(dict.fromkeys(request.query_params.getlist("trace_id")))
    if len(trace_ids) > MAX_READ:
        raise BadRequest(f"At most {MAX_READ} trace ids at once; this asks {len(trace_ids)}.", "trace_id")
    if bad := [trace_id for trace_id in trace_ids if not TRACE_ID.fullmatch(trace_id)]:
        raise BadRequest(f"{quoted(bad[0])} is not a trace id an answer carries.", "trace_id")
    if tracing.records_nothing() or not trace_ids:
        return JSONResponse({"feedback": {}})
    return JSONResponse({"feedback": await run_in_threadpool(_given, trace_ids, owner)})


def _given(trace_ids: list[str], owner: str) -> dict[str, dict[str, Any]]:
    given = {}
    for trace_id in trace_ids:
        trace = _owned_trace(trace_id, owner, flush=False)  # one with feedback was exported when it was given
        if trace is not None and (own := _own_feedback(trace, owner)) is not None:
            given[trace_id] = {"value": own.value, "comment": own.rationale}
    return given


def _recorded(trace_id: str, owner: str, value: bool, comment: str | None) -> Response:
    trace = _owned_trace(trace_id, owner)
    if trace is None:
        raise NotFound(f"You have no answer with the trace id {quoted(trace_id)}.", "trace_id")
    assessment, replaced = record(trace, owner, value, comment)
    return JSONResponse(
        {
            "trace_id": trace_id,
            "assessment_id": assessment.assessment_id,
            "value": value,
            "comment": comment,
            "replaced": replaced,
        }
    )


def checked(body: Any) -> tuple[str, bool, str | None]:
    """(trace_id, value, comment) of a feedback body, or BadRequest naming what is wrong."""
    if not isinstance(body, dict):
        raise BadRequest('The body must be a JSON object: {"trace_id": "...", "value": true or false, "comment"?}.')
    if unknown := sorted(set(body) - set(FIELDS)):
        raise BadRequest(f"Unknown field {quoted(unknown[0])}: feedback has {', '.join(FIELDS)}.", param=unknown[0])
    trace_id, value, comment = body.get("trace_id"), body.get("value"), body.get("comment")
    if not isinstance(trace_id, str) or not TRACE_ID.fullmatch(trace_id):
        raise BadRequest("'trace_id' must be the trace id an answer carries (custom_outputs.trace_id).", "trace_id")
    if not isinstance(value, bool):
        raise BadRequest("'value' must be true (a good answer) or false (a bad one).", param="value")
    if comment is not None and not isinstance(comment, str):
        raise BadRequest("'comment' must be text.", param="comment")
    limit = config.settings().traces.feedback_chars
    if comment is not None and len(comment) > limit:
        message = f"'comment' is {len(comment)} characters; at most FEEDBACK_MAX_COMMENT_CHARS={limit}."
        raise TooLarge(message, param="comment")
    if comment is not None:  # shown on the page, in MLflow and in evaluation cases, as a title is
        check_shown_text(comment, "comment", lines=True)
    return trace_id, value, comment or None


def _owned_trace(trace_id: str, owner: str, flush: bool = True) -> Any:
    """The trace, if it is the owner's; None for any other (unknown, another identity's, or not the app's)."""
    import mlflow

    # flush: an answer's trace may still be queued for export (tracing.py exports in the background)
    trace = mlflow.get_trace(trace_id, silent=True, flush=flush)
    if trace is None or trace.info.trace_metadata.get("mlflow.trace.user") != owner:
        return None
    return trace


def record(trace: Any, owner: str, value: bool, comment: str | None) -> tuple[Any, bool]:
    """The caller's feedback on the trace, logged or replacing their earlier one; and whether it replaced one."""
    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType, Feedback

    source = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id=owner)
    trace_id = trace.info.trace_id
    if (earlier := _own_feedback(trace, owner)) is not None:
        replacement = Feedback(name=NAME, value=value, rationale=comment, source=source)
        return mlflow.update_assessment(trace_id, earlier.assessment_id, replacement), True
    return mlflow.log_feedback(trace_id=trace_id, name=NAME, value=value, rationale=comment, source=source), False


def _own_feedback(trace: Any, owner: str) -> Any:
    """The owner's `user_feedback` on the trace, if they gave one (and it was not overridden)."""
    for assessment in trace.info.assessments or []:
        if assessment.name == NAME and assessment.source.source_id == owner and assessment.valid is not False:
            return assessment
    return None
