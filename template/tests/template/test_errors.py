# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""One exception type per meaning, its status decided by its class; one route error helper, in the one shape."""

from __future__ import annotations

import importlib
import json

import pytest

from agent_server import errors


@pytest.mark.parametrize(
    ("kind", "status", "type_"),
    [
        (errors.BadRequest, 400, "invalid_request_error"),
        (errors.Unauthenticated, 401, "authentication_error"),
        (errors.NotFound, 404, "not_found_error"),
        (errors.BodyTimeout, 408, "timeout_error"),
        (errors.Conflict, 409, "conflict_error"),
        (errors.TooLarge, 413, "request_too_large"),
        (errors.Broken, 500, "server_error"),
    ],
)
def test_each_meaning_has_its_status(kind, status, type_):
    response = errors.route_error(kind("What is wrong.", "input[2]"))
    assert issubclass(kind, errors.HttpError)
    assert response.status_code == status
    assert json.loads(response.body) == {
        "error": {"message": "What is wrong.", "type": type_, "param": "input[2]"},
        "detail": "What is wrong.",
    }


def test_a_store_that_cannot_answer_is_one_type_a_503_that_says_what_to_do():
    for module in ("agent_server.memory.store", "agent_server.memory.records"):
        assert importlib.import_module(module).Unavailable is errors.Unavailable
    failed = errors.Unavailable("OperationalError: disk I/O error")
    response = errors.route_error(failed, "Nothing was deleted.", "Memory")
    assert response.status_code == 503
    message = "Memory is unavailable: OperationalError: disk I/O error. Nothing was deleted."
    assert json.loads(response.body) == {
        "error": {"message": message, "type": "unavailable_error", "param": None},
        "detail": message,
    }
    said = json.loads(errors.route_error(errors.Unavailable("it is not open")).body)["detail"]
    assert said == "Conversation memory is unavailable: it is not open. Try again."
