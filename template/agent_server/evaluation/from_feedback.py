# Owned by the template: changes here are overwritten by `copier update`. Put your own cases in evals/cases.yaml.
"""`uv run evaluate --from-feedback`: the conversations users gave a thumbs down, written as new cases.

It reads the app's traces (the experiment in MLFLOW_EXPERIMENT_ID, else the local store's default one) for
`user_feedback` assessments that are false (observability/feedback.py; the Databricks chat UI writes the same),
and writes one case per disliked answer to evals/from_feedback.yaml (or --output): the conversation's user turns
up to that answer, in order, with the disliked answer and the user's comment as comments. Nothing is run: read
the file, add to each last turn what a good answer holds (contains, reference, guidelines), and move the cases
into evals/cases.yaml, so that what users disliked becomes a regression test.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_PATH = Path("evals/from_feedback.yaml")
MAX_TRACES = 5000
FEEDBACK = "user_feedback"


def write_cases(path: Path, since_days: float, experiment: str) -> int:
    """Write the cases of the experiment's thumbs-down answers of the last `since_days` days to `path`."""
    import mlflow

    since = int((time.time() - since_days * 86400) * 1000)
    traces = mlflow.search_traces(
        locations=[experiment], filter_string=f"timestamp_ms > {since}", max_results=MAX_TRACES, return_type="list"
    )
    disliked = [(trace, feedback) for trace in traces if (feedback := _thumbs_down(trace)) is not None]
    cases = [case_of(trace, feedback, traces) for trace, feedback in disliked]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(as_yaml([case for case in cases if case["turns"]]), encoding="utf-8")
    print(f"evaluate: {len(cases)} disliked answer(s) of {len(traces)} trace(s) written to {path}", file=sys.stderr)
    return 0


def _thumbs_down(trace: Any) -> Any:
    for assessment in trace.info.assessments or []:
        if assessment.name == FEEDBACK and assessment.valid is not False and assessment.value is False:
            return assessment
    return None


def case_of(trace: Any, feedback: Any, traces: list[Any]) -> dict[str, Any]:
    """The case: the conversation's user turns up to the disliked answer, named after its trace."""
    user_turns = user_texts(trace)
    if user_turns is None:  # the request was kept as a preview only (TRACE_PAYLOAD_MAX_CHARS): its session's turns
        session = trace.info.trace_metadata.get("mlflow.trace.session")
        earlier = sorted(
            (t for t in traces if session and t.info.trace_metadata.get("mlflow.trace.session") == session),
            key=lambda t: t.info.timestamp_ms,
        )
        user_turns = [t.info.request_preview or "" for t in earlier if t.info.timestamp_ms <= trace.info.timestamp_ms]
    return {
        "name": f"feedback-{trace.info.trace_id.removeprefix('tr-')[:12]}",
        "turns": [{"user": text} for text in user_turns if text],
        "disliked": trace.info.response_preview or "",
        "comment": feedback.rationale or "",
    }


def user_texts(trace: Any) -> list[str] | None:
    """The text of each user message in the request the trace recorded (the whole conversation, as the app ran
    it); None when the trace kept only a preview of it."""
    root = trace.data._get_root_span()
    inputs = root.inputs if root is not None else None
    items = inputs.get("input") if isinstance(inputs, dict) else None
    if not isinstance(items, list):
        return None
    texts = []
    for item in items:
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            parts = content if isinstance(content, list) else [{"text": content}]
            texts.append(" ".join(str(p.get("text") or "") for p in parts if isinstance(p, dict)).strip())
    return texts


def as_yaml(cases: list[dict[str, Any]]) -> str:
    import yaml

    lines = [
        "# Conversations users gave a thumbs down (uv run evaluate --from-feedback). Add to each last turn what a",
        "# good answer holds (contains, reference, guidelines), then move the case into evals/cases.yaml.",
        "cases:" if cases else "cases: []",
    ]
    for case in cases:
        lines.append(f"  # disliked answer: {_one_line(case['disliked'])}")
        if case["comment"]:
            lines.append(f"  # the user's comment: {_one_line(case['comment'])}")
        written = yaml.safe_dump([{"name": case["name"], "turns": case["turns"]}], allow_unicode=True, sort_keys=False)
        lines += ["  " + line for line in written.splitlines()]
    return "\n".join(lines) + "\n"


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat[:limit] + ("…" if len(flat) > limit else "")
