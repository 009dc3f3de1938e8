# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The one shape of every error the app answers, whoever finds the problem.

    {"error": {"message": "...", "type": "...", "param": "input[3]" or null}, "detail": "..."}

`error` is the OpenAI API's error shape, which OpenAI clients read; `detail` repeats the message
for FastAPI-style clients (MLflow's own errors use it). See the README, "Failure modes".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "unavailable_error",
    504: "upstream_timeout",
}


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": TYPES.get(status, "server_error"), "param": param}, "detail": message}


def error_response(
    status: int, message: str, param: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(status, message, param), status_code=status, headers=dict(headers or {}))
