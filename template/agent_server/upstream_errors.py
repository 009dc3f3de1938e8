# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Answer a request the model rejected with the model's own 4xx, not a bare 500.

MLflow's server turns every exception in a handler into a 500. The handlers
record the model's error here; the request guard, which sees the response go
out, then replaces that 500 with the model's status and message. A 400 from
the model is deterministic, so the client is told what to change instead of
being invited to retry.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

import openai

# Statuses passed on as they are; any other 4xx is the client's request (400), anything else is ours (502).
PASSED_ON = frozenset({429})
OUR_FAULT = frozenset({401, 403, 404})


@dataclass
class UpstreamFailure:
    error: openai.APIStatusError | None = None


_current: contextvars.ContextVar[UpstreamFailure | None] = contextvars.ContextVar("upstream_failure", default=None)


def track() -> UpstreamFailure:
    """Start tracking for the current request; the returned holder is shared with the handlers."""
    failure = UpstreamFailure()
    _current.set(failure)
    return failure


def record(error: openai.APIStatusError) -> None:
    failure = _current.get()
    if failure is not None:
        failure.error = error


def status_and_body(error: openai.APIStatusError) -> tuple[int, dict[str, Any]]:
    upstream = error.status_code
    if upstream in PASSED_ON:
        status = upstream
    elif 400 <= upstream < 500 and upstream not in OUR_FAULT:
        status = 400
    else:
        status = 502
    body = error.body if isinstance(error.body, dict) else {}
    detail = body.get("error", body) if isinstance(body.get("error", body), dict) else {}
    message = detail.get("message") or str(error)
    return status, {
        "error": {
            "message": f"The model rejected the request ({upstream}): {message}",
            "type": "invalid_request_error" if status == 400 else "upstream_error",
            "param": detail.get("param"),
        },
        "detail": f"The model rejected the request ({upstream}): {message}",
    }
