# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""DELETE /me in the trace store (agent_server/observability/your_traces.py): the caller's traces, which hold their
turns' words, go with the feedback given on them; no one else's trace is touched. The app in this process, its
traces in the tests' local MLflow store, memory on and off."""

# ruff: noqa: F811  (the fixture imported below is the test's argument)
from __future__ import annotations

import mlflow
import pytest

from .test_feedback import ADA, BOB, answer_trace_id, either_client  # noqa: F401


@pytest.mark.usefixtures("traced")
def test_delete_me_deletes_the_callers_traces_and_their_feedback_and_no_one_elses(either_client):
    client = either_client
    streamed, answered = answer_trace_id(client, stream=True), answer_trace_id(client, stream=False)
    given = client.post("/feedback", json={"trace_id": answered, "value": False, "comment": "my own words"})
    assert given.status_code == 200, given.text
    bobs = client.post("/invocations", json={"input": "Hello from Bob"}, headers={"x-test-user": BOB}).json()
    others = bobs["custom_outputs"]["trace_id"]
    assert mlflow.get_trace(answered).info.trace_metadata["mlflow.trace.user"] == ADA
    deleted = client.delete("/me")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["deleted"]["traces"] == 2 and "were deleted" in deleted.json()["about"], deleted.json()
    for trace_id in (streamed, answered):
        assert mlflow.get_trace(trace_id, silent=True) is None, "the trace, with the feedback on it, is gone"
    assert client.get("/feedback", params={"trace_id": answered}).json() == {"feedback": {}}
    assert mlflow.get_trace(others).info.trace_metadata["mlflow.trace.user"] == BOB, "no one else's"
    again = client.delete("/me").json()
    assert again["deleted"]["traces"] == 0
