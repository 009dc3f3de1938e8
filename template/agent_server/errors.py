# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Every error the app answers: in one shape, and for a model failure, with the status that says why.

    {"error": {"message": "...", "type": "...", "param": "input[3]" or null}, "detail": "..."}

`error` is the OpenAI API's error shape, which OpenAI clients read; `detail` repeats the message
for FastAPI-style clients. Every route raises an HttpError subclass for what it refuses, and one exception handler
(app.py: `answer_http_error`) answers it in that shape; OneErrorShape (middleware/error_responses.py) puts the rest
(FastAPI's own `{"detail": ...}`: a 404 for an unknown path, a 405) in it too.

A turn that the model fails is answered with the status this module gives the failure (`failure_answer`; README,
"Failure modes"):

| the model | status | retried by the app |
|---|---|---|
| rejected the request (400, 422, ...) | 400, with the model's message: change the request | no |
| is rate-limited (429) | 429, with its Retry-After | yes, LLM_MAX_RETRIES times first |
| refused the app's credentials (401, 403) or does not exist (404) | 502 | no |
| failed (5xx) or could not be reached | 502 | yes, LLM_MAX_RETRIES times first |
| did not answer within LLM_TIMEOUT_SECONDS | 504 | yes, LLM_MAX_RETRIES times first |
| kept calling tools past the agent's max_turns | 502 | no |
| ended its answer `failed` (Responses API): rate-limited / server error / anything else | 429 / 502 / 400 | no |
| gave an answer the SDK cannot use (its ModelBehaviorError) | 502 | no |

A streamed response has sent its 200 before the model is called, so there the failure is
an `error` event in the stream instead. A `param` the model names (`input[5]`, or in
chat-completions mode `messages.[6]`) is turned into the index of the client's own item. A guardrail that trips
is no failure: the handlers answer it with a refusal, a 200 (guardrails.py).

The SDK and the openai client are imported on first use, not with this module: start-app checks the settings
of the modules that import this one before it loads them (seconds of imports).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse

if TYPE_CHECKING:
    import openai


TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "unavailable_error",
    504: "upstream_timeout",
}
# Model statuses passed on as they are; any other 4xx is the client's request (400), anything else is ours (502).
PASSED_ON = frozenset({429})
OUR_FAULT = frozenset({401, 403, 404})


def model_failures() -> tuple[type[BaseException], ...]:
    """The exceptions that are the model's failures: a turn answers them with the status that says why."""
    import openai
    from agents.exceptions import MaxTurnsExceeded, ModelBehaviorError

    return (openai.APIError, MaxTurnsExceeded, ModelAnswerFailed, ModelBehaviorError)


class ModelAnswerFailed(Exception):
    """A model answer that ended `failed` (model_ends.py): the Responses API's error, its code and message."""

    def __init__(self, code: str | None, message: str) -> None:
        super().__init__(message)
        self.code = code


class HttpError(ValueError):
    """What the app refuses, or cannot do, for a request: answered with its class's `status` and this message,
    naming `param` if it can. One subclass a meaning, which states its status once: `class X(HttpError, status=N)`."""

    status = 500
    then = "Try again."  # what the client can do, after the reason an Unavailable store gives
    what = "Conversation memory"  # whose store an Unavailable is (routes of long-term memory say "Memory")
    headers: Mapping[str, str] = {}  # sent with the answer (a 429's Retry-After)

    def __init_subclass__(cls, status: int = 500, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.status = status

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class BadRequest(HttpError, status=400): ...  # the request is wrong: change it


class Unauthenticated(HttpError, status=401): ...  # the request names no caller where one is needed


class NotFound(HttpError, status=404): ...  # the caller has nothing by that name, or the app keeps nothing of the kind


class BodyTimeout(HttpError, status=408): ...  # the body did not arrive within BODY_TIMEOUT_SECONDS


class Conflict(HttpError, status=409): ...  # the conversation is another turn's for longer than this one may wait


class TooLarge(HttpError, status=413): ...  # the request holds more than a limit allows


class UnsupportedType(HttpError, status=415): ...  # an attachment of a type the app does not take


class Broken(HttpError, status=500): ...  # what the app stored can no longer be used: its fault, not the request's


# The conversation store cannot answer now (its database failed, or it is not open): try again. Its message is the
# reason, which route_error says to the client.
class Unavailable(HttpError, status=503): ...


def quoted(value: str, limit: int = 200) -> str:
    """A client's value (an id, a header) in a message: quoted, and no more than its first `limit` characters."""
    return repr(value[:limit]) + (f" (and {len(value) - limit} more characters)" if len(value) > limit else "")


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": TYPES.get(status, "server_error"), "param": param}, "detail": message}


def error_response(
    status: int, message: str, param: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(status, message, param), status_code=status, headers=dict(headers or {}))


def route_error(error: HttpError, then: str | None = None, what: str | None = None) -> JSONResponse:
    """A route's answer to `error`: its status and message in the one shape; an Unavailable store says whose
    (`what`, else the error's own) and what the client can do (`then`, else the error's own). The app's one
    exception handler answers every HttpError a route raises with it (app.py)."""
    status, body = error_of(error, then, what)
    return JSONResponse(body, status_code=status, headers=dict(error.headers))


def error_of(error: HttpError, then: str | None = None, what: str | None = None) -> tuple[int, dict[str, Any]]:
    """(status, body) of an HttpError's answer."""
    if isinstance(error, Unavailable):
        message = f"{what or error.what} is unavailable: {error}. {then or error.then}"
        return error.status, error_body(error.status, message)
    return error.status, error_body(error.status, str(error), error.param)


def failure_answer(
    error: BaseException, sources: list[int | None] | None = None, failure: ModelFailure | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """(status, body, headers) that answer what stopped a turn: an HttpError as it says, the model's failure with
    the status that says why (its `param` turned into the client's item), anything else a 500 that says what."""
    if isinstance(error, HttpError):
        return (*error_of(error), dict(error.headers))
    if isinstance(error, model_failures()):
        status, text, param, headers = status_and_message(error)
        return status, error_body(status, text, client_param(param, sources, failure or ModelFailure())), headers
    return 500, error_body(500, str(error)), {}


@dataclass
class ModelFailure:
    """The model's failure in this request, if any, and the items the agent ran on (to name the client's item)."""

    error: BaseException | None = None
    model_input: list[Any] | None = None  # the items the agent ran on
    system_messages: int = 0  # messages the SDK puts before them in chat-completions mode


def client_param(param: str | None, sources: list[int | None] | None, failure: ModelFailure) -> str | None:
    """The model's `param` for one of the items the agent ran on, as the index of the client's item."""
    items = failure.model_input
    match = re.fullmatch(r"(input|messages)\.?\[(\d+)\](.*)", param or "")
    if match is None or sources is None or items is None or len(items) != len(sources):
        return param  # not about an item, or the owner's customize_history changed the items
    key, number, rest = match.group(1), int(match.group(2)), match.group(3)
    item = number if key == "input" else _item_of_message(items, number - failure.system_messages)
    if item is None or not 0 <= item < len(sources):
        return param
    if sources[item] is None:
        return None  # an item of the stored conversation (agent_server/memory/), not of this request
    return f"input[{sources[item]}]{rest}"


def _item_of_message(items: list[Any], message: int) -> int | None:
    """The first item that the SDK's chat-completions converter turns into message number `message`."""
    if message < 0:
        return None  # the agent's instructions
    counts = _LazyMessageCounts(items)
    item = bisect.bisect_right(counts, message)
    return item if item < len(items) else None


class _LazyMessageCounts:
    """counts[k]: how many messages items[: k + 1] convert to (non-decreasing, so it can be bisected)."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, k: int) -> int:
        from agents.models.chatcmpl_converter import Converter

        return len(Converter.items_to_messages(self.items[: k + 1]))


def status_and_message(error: BaseException) -> tuple[int, str, str | None, dict[str, str]]:
    """(status, message, param, headers) for a model failure."""
    import openai
    from agents.exceptions import MaxTurnsExceeded, ModelBehaviorError

    if isinstance(error, ModelBehaviorError):
        return 502, f"The model's answer could not be used: {error.message}", None, {}
    if isinstance(error, ModelAnswerFailed):
        status = 429 if error.code == "rate_limit_exceeded" else 502 if error.code in (None, "server_error") else 400
        return status, f"The model failed to answer ({error.code or 'no code'}): {error}", None, {}
    if isinstance(error, MaxTurnsExceeded):
        return 502, f"The agent stopped without a final answer: {error.message} (it kept calling tools).", None, {}
    if isinstance(error, openai.APITimeoutError):
        return 504, "The model did not answer in time (LLM_TIMEOUT_SECONDS).", None, {}
    if isinstance(error, openai.APIStatusError):
        return _status_error(error)
    return 502, f"The model could not be reached: {error}", None, {}


def _status_error(error: openai.APIStatusError) -> tuple[int, str, str | None, dict[str, str]]:
    upstream = error.status_code
    if upstream in PASSED_ON:
        status = upstream
    elif 400 <= upstream < 500 and upstream not in OUR_FAULT:
        status = 400
    else:
        status = 502
    body = error.body if isinstance(error.body, dict) else {}
    detail: Any = body.get("error", body)
    detail = detail if isinstance(detail, dict) else {}
    message = f"The model rejected the request ({upstream}): {detail.get('message') or error}"
    retry_after = error.response.headers.get("retry-after")
    return status, message, detail.get("param"), {"Retry-After": retry_after} if retry_after else {}
