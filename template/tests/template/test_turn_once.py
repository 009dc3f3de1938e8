# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""A turn does its work once: its request's body is parsed once (a background run's attempt takes it as it was
parsed), and each event of its answer is encoded once, on /invocations and /responses, streamed and not."""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

import pytest
from support import sse_events

from agent_server.runs import execute

from .test_memory import backend  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)
from .test_runs import client, ended  # noqa: F401  (the runs' client, with memory on)


class Counted:
    """json.loads of the request's body, and json.dumps of the app's answer events (not the offline model's own)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.marker, self.parses, self.encoded = f"once-{uuid.uuid4()}", [], []
        loads, dumps = json.loads, json.dumps

        def counting_loads(text: Any, *args: Any, **kwargs: Any) -> Any:
            shown = text.decode(errors="replace") if isinstance(text, (bytes, bytearray)) else str(text)
            if self.marker in shown and '"input"' in shown and '"model"' not in shown and execute.PATH_KEY not in shown:
                self.parses.append(shown)  # the request's; not the model's (the offline model's), nor a kept run's
            return loads(text, *args, **kwargs)

        def counting_dumps(value: Any, *args: Any, **kwargs: Any) -> str:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if (
                isinstance(value, dict)
                and "offline" not in caller
                and (str(value.get("type", "")).startswith("response.") or value.get("object") == "response")
            ):
                self.encoded.append(value)  # an event, or a whole answer (a response object)
            return dumps(value, *args, **kwargs)

        monkeypatch.setattr(json, "loads", counting_loads)
        monkeypatch.setattr(json, "dumps", counting_dumps)

    def body(self, stream: bool, **fields: Any) -> dict[str, Any]:
        return {"input": [{"role": "user", "content": f"What time is it? {self.marker}"}], "stream": stream, **fields}


@pytest.mark.parametrize("path", ["/invocations", "/responses"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_turn_parses_its_body_once_and_encodes_each_event_once(client, monkeypatch, path, stream):  # noqa: F811
    counted = Counted(monkeypatch)
    response = client.post(path, json=counted.body(stream))
    assert response.status_code == 200, response.text
    assert len(counted.parses) == 1, "the route parses the body, and nothing parses it again"
    if stream:
        sent = [event for event in sse_events(response.text) if str(event.get("type", "")).startswith("response.")]
        assert len(sent) >= 5 and len(counted.encoded) == len(sent), "each event the client got, encoded once"
    else:
        [answer] = counted.encoded  # the whole answer, encoded once: no event of it is encoded on the way
        assert answer["output"] == response.json()["output"]


@pytest.mark.parametrize("path", ["/invocations", "/responses"])
def test_a_runs_request_is_parsed_once_and_each_of_its_events_encoded_once(client, monkeypatch, path):  # noqa: F811
    counted = Counted(monkeypatch)
    run = client.post(path, json=counted.body(False, background=True)).json()
    assert ended(client, run["id"])["status"] == "completed"
    assert len(counted.parses) == 1, "the route parses the body; the run's attempt takes it as it was parsed"
    kept = sse_events(client.get(f"/responses/{run['id']}?stream=true").text)
    written = [event for event in counted.encoded if "sequence_number" not in event and "object" not in event]
    numbered = sorted(event["sequence_number"] for event in counted.encoded if "sequence_number" in event)
    assert written == [] and numbered == [event["sequence_number"] for event in kept], "each kept event, encoded once"
