# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""A background run's stream (agent_server/runs/): numbered, replayed byte for byte from any cursor, running on
when its client goes away; cursors checked; RUNS_MAX_EVENT_BYTES; one trace however often it is read. On SQLite,
and on PostgreSQL too when MEMORY_TEST_POSTGRES_URL names one (test_memory.py's `backend`)."""

# ruff: noqa: F811  (the fixtures of test_memory.py and test_runs.py, imported below, are the tests' arguments)
from __future__ import annotations

import json
import logging

import pytest
from support import reply_text, sse_events

from .test_memory import backend  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)
from .test_runs import ASK, client, ended, slow, tracing_state, until  # noqa: F401


def test_a_background_stream_is_numbered_and_replays_byte_for_byte_from_any_cursor(client):
    with client.stream("POST", "/invocations", json={**ASK, "background": True, "stream": True}) as response:
        live = response.read().decode()
    events = sse_events(live)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    assert live.endswith("data: [DONE]\n\n")
    run_id = events[0]["response"]["id"]
    assert events[-1]["response"]["output"] == [e["item"] for e in events if e["type"] == "response.output_item.done"]
    blocks = live.split("\n\n")
    for cursor in (-1, 0, 2, len(events) - 1):
        replay = client.get(f"/responses/{run_id}", params={"stream": "true", "starting_after": cursor}).text
        assert replay == "\n\n".join(blocks[cursor + 1 :]), f"after {cursor}: the same bytes"


def test_a_client_that_goes_away_leaves_the_run_running(client, slow):
    body = {"input": [{"role": "user", "content": "Please hold"}], "background": True, "stream": True}
    with client.stream("POST", "/responses", json=body) as response:
        first = next(response.iter_lines())
    run_id = json.loads(first.removeprefix("data: "))["response"]["id"]
    slow.release.set()
    assert ended(client, run_id)["status"] == "completed"


@pytest.mark.parametrize(
    "params",
    [{"stream": "true", "starting_after": "x"}, {"stream": "true", "starting_after": "-2"}, {"starting_after": "3"},
     {"stream": "maybe"}],
)  # fmt: skip
def test_a_bad_cursor_is_a_400_that_says_why(client, params):
    run_id = client.post("/responses", json={**ASK, "background": True}).json()["id"]
    answer = client.get(f"/responses/{run_id}", params=params)
    assert answer.status_code == 400, answer.text
    assert "starting_after" in answer.json()["error"]["message"] or "stream" in answer.json()["error"]["message"]


def test_a_cursor_is_plain_digits_up_to_what_the_database_holds(client):
    """Past 2**31 - 1 (the events' INTEGER column on PostgreSQL; past 2**63 SQLite's) was a 200 and a broken stream."""
    run_id = client.post("/responses", json={**ASK, "background": True}).json()["id"]
    ended(client, run_id)
    for cursor in ("99999999999999999999", str(2**63), str(2**31), "1.5", "1_0", " 1", "\u0661"):
        answer = client.get(f"/responses/{run_id}", params={"stream": "true", "starting_after": cursor})
        assert answer.status_code == 400 and "starting_after" in answer.json()["error"]["message"], cursor
    last = client.get(f"/responses/{run_id}", params={"stream": "true", "starting_after": str(2**31 - 1)})
    assert last.status_code == 200 and last.text == "data: [DONE]\n\n", "after every event"


def test_a_run_past_its_event_bytes_fails_with_a_413_and_its_stream_ends_saying_so(client, app_settings):
    app_settings.setenv("RUNS_MAX_EVENT_BYTES", "900")
    run_id = client.post("/responses", json={**ASK, "background": True}).json()["id"]
    answer = until(lambda: (r := client.get(f"/responses/{run_id}")).status_code != 200 and r, "the run to fail")
    assert answer.status_code == 413 and answer.json()["status"] == "failed"
    assert "RUNS_MAX_EVENT_BYTES" in answer.json()["error"]["message"]
    replay = client.get(f"/responses/{run_id}", params={"stream": "true"}).text
    assert replay.endswith("data: [DONE]\n\n")
    last = sse_events(replay)[-1]
    assert last["type"] == "response.failed", "the last event is written past the limit too"
    assert last["response"]["status"] == "failed" and "RUNS_MAX_EVENT_BYTES" in last["response"]["error"]["message"]


def test_a_last_event_that_would_pass_the_event_bytes_is_written_without_its_output(client, app_settings):
    """A run whose events fit in RUNS_MAX_EVENT_BYTES, but not its last event with its output (which repeats the
    output's items), completes: its stream ends with response.completed, without the output; GET has it."""
    body = {**ASK, "background": True, "stream": True}
    first = sse_events(client.post("/responses", json=body).text)
    last = first[-1]
    bare = json.dumps({**last, "response": {**last["response"], "output": []}})
    before_last = sum(len(json.dumps(event)) for event in first[:-1])
    room = len(json.dumps(last)) - len(bare)  # what the output adds to the last event
    assert room > 100
    app_settings.setenv("RUNS_MAX_EVENT_BYTES", str(before_last + len(bare) + room // 2))
    events = sse_events(client.post("/responses", json=body).text)
    assert [event["type"] for event in events] == [event["type"] for event in first]
    assert events[-1]["type"] == "response.completed" and events[-1]["response"]["output"] == []
    done = client.get(f"/responses/{events[0]['response']['id']}").json()
    assert done["status"] == "completed" and reply_text(done["output"]) == reply_text(last["response"]["output"])


@pytest.mark.usefixtures("traced")
def test_a_run_is_one_trace_however_often_its_stream_is_read(client, slow, caplog):
    import mlflow

    caplog.set_level(logging.INFO, "agent_server.runs")  # a run resumed or claimed says so (for the trace's assert)

    run_id = client.post("/responses", json={"input": [{"role": "user", "content": "Please hold"}], "background": True})
    run_id = run_id.json()["id"]
    for _ in range(3):  # three reconnections while it runs, each dropped after an event
        with client.stream("GET", f"/responses/{run_id}", params={"stream": "true", "starting_after": "-1"}) as read:
            next(read.iter_lines())
    slow.release.set()
    run = ended(client, run_id)
    assert run["status"] == "completed", run["error"]
    assert run.get("metadata", {}).get("trace_id"), f"no trace: {run}\n{tracing_state()}\n{caplog.text}"
    trace_id = run["metadata"]["trace_id"]
    for cursor in ("-1", "2"):
        client.get(f"/responses/{run_id}", params={"stream": "true", "starting_after": cursor})
    mlflow.flush_trace_async_logging()
    trace = mlflow.get_trace(trace_id)
    assert trace.data.spans[0].name == "handle_stream" and "hold" in [span.name for span in trace.data.spans]
    traced = mlflow.search_traces(
        filter_string=f"trace.timestamp_ms >= {trace.info.request_time - 1}", return_type="list"
    )
    runs = [t for t in traced if t.data.spans and t.data.spans[0].name.startswith("handle_")]
    assert [t.info.trace_id for t in runs] == [trace_id], "one trace for the run, none for reading it"
