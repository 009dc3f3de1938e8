# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""A model per conversation (LLM_MODELS, agent_server/model_choice.py): clients list the models and choose one, each
conversation keeps its own through its turns and its background runs, and an unlisted name (a placeholder) gets the
conversation's model or the default. The real app, the real SDK, the offline model (which says which name it
answered as), in both API modes, streamed and not; the `openai` package as a real client."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from openai import OpenAI
from openai.types import Model
from support import reply_text, sse_events

from agent_server import config
from agent_server.memory import database
from agent_server.runs import recovery, store
from agent_server.runs.store import Run

from .test_memory import backend  # noqa: F401  (SQLite, and PostgreSQL when MEMORY_TEST_POSTGRES_URL names one)
from .test_responses_api import valid_response, valid_stream

LISTED = "offline=Everyday,big=Big model"


@pytest.fixture
def http(app_settings, backend: str, api_mode: str, model_log) -> Iterator[TestClient]:  # noqa: F811
    app_settings.setenv("LLM_MODELS", LISTED)  # each test its own user (backend: MEMORY_USER_HEADER), its own store
    from agent_server.app import app

    with TestClient(app, headers={"x-test-user": f"models-{uuid.uuid4()}@example.com"}) as client:
        yield client


def models_asked(model_log: list[dict[str, Any]]) -> list[str]:
    return [entry["body"]["model"] for entry in model_log]


def responses_turn(http: TestClient, text: str, stream: bool, **fields: Any) -> dict[str, Any]:
    """A /responses turn's response object (a stream's last event's, the stream checked)."""
    answer = http.post("/responses", json={"input": text, "stream": stream, **fields})
    assert answer.status_code == 200, answer.text
    if not stream:
        valid_response(answer.json())
        return answer.json()
    events = valid_stream(sse_events(answer.text))
    return events[-1]["response"]


def invocations_turn(http: TestClient, text: str, stream: bool, custom: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """An /invocations turn's reply text and custom_outputs."""
    answer = http.post("/invocations", json={"input": [{"role": "user", "content": text}], "stream": stream,
                                             "custom_inputs": custom})  # fmt: skip
    assert answer.status_code == 200, answer.text
    if not stream:
        return reply_text(answer.json()["output"]), answer.json()["custom_outputs"]
    done = [event for event in sse_events(answer.text) if event.get("type") == "response.output_item.done"]
    return reply_text([event["item"] for event in done]), done[-1]["custom_outputs"]


def test_get_models_lists_what_the_setting_says_in_the_openai_shape(http):
    listed = http.get("/models").json()
    assert listed["object"] == "list"
    assert [Model.model_validate(entry).id for entry in listed["data"]] == ["offline", "big"]
    shown = [(entry["label"], entry["default"]) for entry in listed["data"]]
    assert shown == [("Everyday", True), ("Big model", False)]
    assert {entry["object"] for entry in listed["data"]} == {"model"}


@pytest.mark.parametrize("stream", [False, True])
def test_a_responses_conversation_keeps_its_model_and_another_gets_the_default(http, model_log, stream):
    first = responses_turn(http, "Hello", stream, model="big")
    session = first["custom_outputs"]["session_id"]
    assert first["model"] == "big" and first["custom_outputs"]["model"] == "big"
    assert "Offline model, as big:" in reply_text(first["output"])
    # A client that sends a placeholder name on later turns (the openai package always sends one) keeps it on big.
    later = responses_turn(http, "Again", stream, model="gpt-4o", context={"conversation_id": session})
    assert later["model"] == "big" and "Offline model, as big: I saw 2 user" in reply_text(later["output"])
    other = responses_turn(http, "Hello", stream, model="my-agent")  # unlisted, new: the default
    assert other["model"] == "offline" and other["custom_outputs"]["model"] == "offline"
    assert models_asked(model_log) == ["big", "big", "offline"]
    # Picked again, from the next turn on.
    back = responses_turn(http, "Once more", stream, model="offline", context={"conversation_id": session})
    assert back["model"] == "offline" and models_asked(model_log)[-1] == "offline"
    shown = http.get(f"/conversations/{session}").json()
    assert shown["model"] == "offline"  # the page's picker shows it on reopen; and each answer's model beside it
    assert [model for model in shown["models"] if model] == ["big", "big", "offline"]
    assert len(shown["models"]) == len(shown["items"])
    exported = next(c for c in http.get("/me/export").json()["conversations"] if c["id"] == session)
    assert exported["model"] == "offline" and exported["models"] == shown["models"], "the user's own data says so too"


@pytest.mark.parametrize("stream", [False, True])
def test_invocations_choose_in_custom_inputs_and_custom_outputs_say_it(http, model_log, stream):
    text, outputs = invocations_turn(http, "Hello", stream, {"model": "big"})
    assert outputs["model"] == "big" and "as big" in text
    session = outputs["session_id"]
    text, outputs = invocations_turn(http, "Again", stream, {"session_id": session})
    assert outputs["model"] == "big" and "Offline model, as big: I saw 2 user" in text
    assert http.get(f"/conversations/{session}").json()["model"] == "big"
    _text, outputs = invocations_turn(http, "Hello", stream, {"model": "gpt-4o"})
    assert outputs["model"] == "offline"
    assert models_asked(model_log) == ["big", "big", "offline"]


def test_a_model_that_is_not_a_string_is_a_400_and_nothing_is_stored(http):
    for path, body in (("/responses", {"input": "Hi", "model": 7}),
                       ("/invocations", {"input": "Hi", "custom_inputs": {"model": ["big"]}})):  # fmt: skip
        answer = http.post(path, json=body)
        assert answer.status_code == 400 and "model" in answer.json()["error"]["param"], answer.text
    assert http.get("/conversations").json()["conversations"] == []


def test_the_openai_client_lists_models_and_chooses_one_per_request(http, model_log):
    client = OpenAI(base_url=str(http.base_url), api_key="unused", http_client=http, max_retries=0)
    assert [model.id for model in client.models.list()] == ["offline", "big"]
    big = client.responses.create(model="big", input="Hello")
    assert big.model == "big" and "as big" in big.output_text
    plain = client.responses.create(model="offline", input="Hello")
    assert plain.model == "offline" and plain.output_text.startswith("Offline model: I saw")  # the default: no name
    with client.responses.stream(model="big", input="Hello") as stream:
        assert stream.get_final_response().model == "big"
    assert models_asked(model_log) == ["big", "offline", "big"]


def ended(http: TestClient, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while (found := http.get(f"/responses/{run_id}").json())["status"] in ("queued", "in_progress"):
        assert time.monotonic() < deadline, "the run did not end"
        time.sleep(0.02)
    return found


def test_a_background_run_and_a_recovered_run_use_the_model_their_turn_started_with(http, model_log):
    owner = http.headers["x-test-user"]
    first = responses_turn(http, "Hello", False, model="big")
    session = first["custom_outputs"]["session_id"]
    run = http.post("/responses", json={"input": "Again", "model": "gpt-4o", "background": True,
                                        "context": {"conversation_id": session}}).json()  # fmt: skip
    done = ended(http, run["id"])
    assert done["status"] == "completed" and done["model"] == "big" and done["custom_outputs"]["model"] == "big"
    assert "as big: I saw 2 user" in reply_text(done["output"])
    stored = http.portal.call(database.store)
    kept = http.portal.call(stored.run, store.get(owner, run["id"]))
    assert kept.body["model"] == "big", "the run's request names the model it started on"
    # A process died with a run of that request; the conversation moved to the default since. Recovered, the run
    # answers on the model its turn started with.
    responses_turn(http, "Switch", False, model="offline", context={"conversation_id": session})
    body = {"input": "Go on", "model": "big", "context": {"conversation_id": session}}
    body["agent_server.path"] = "/responses"  # runs/execute.py's PATH_KEY: where its client posted
    dead = Run(f"resp_{uuid.uuid4().hex}", owner, session, None, "x", body, True, status="in_progress",
               holder="gone:1", heartbeat_until=time.time() - 1, created_at=time.time())  # fmt: skip

    async def crashed() -> None:
        opened = await database.store()
        await opened.run(store.create(dead), write=True)
        await recovery.beat()

    http.portal.call(crashed)
    recovered = ended(http, dead.id)
    assert recovered["status"] == "completed" and recovered["model"] == "big", recovered
    assert models_asked(model_log) == ["big", "big", "offline", "big"]


def test_one_model_listed_answers_as_before(app_settings, api_mode, model_log):
    from agent_server.app import app

    with TestClient(app, headers={"x-test-user": f"models-{uuid.uuid4()}@example.com"}) as http:
        assert [entry["id"] for entry in http.get("/models").json()["data"]] == ["offline"]
        answer = http.post("/responses", json={"input": "Hello", "model": "gpt-4o"}).json()
        assert answer["model"] == "offline" and "model" not in answer["custom_outputs"]
        assert "Offline model: I saw 1 user" in reply_text(answer["output"])
        conversation = http.get(f"/conversations/{answer['custom_outputs']['session_id']}").json()
        assert "model" not in conversation


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"LLM_MODELS": "big,big"}, "LLM_MODELS lists 'big' twice"),
        ({"LLM_MODELS": "openai:gpt-4.1,big"}, "mixing providers is not supported"),
        ({"LLM_MODELS": ",".join(f"m{n}" for n in range(20)), "LLM_MODEL": "other"}, "name 21 models; at most 20"),
        ({"LLM_MODELS": "big name"}, "is not a model name"),
        ({"LLM_MODELS": "big=" + "x" * 61}, "at most 60"),
    ],
)
def test_start_up_refuses_a_list_it_cannot_serve_in_one_line(env, says):
    with pytest.raises(config.ConfigurationError) as refused:
        config.reload({"LLM_PROVIDER": "offline", **env}).check()
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_the_default_is_llm_model_listed_first_if_the_list_does_not_name_it_else_the_lists_first():
    current = config.reload({"LLM_PROVIDER": "offline", "LLM_MODELS": "small,big=Big"})
    assert current.llm.model == "small" and current.models.default == "small"
    assert json.dumps([m.label for m in current.models.listed]) == '["small", "Big"]'
    current = config.reload({"LLM_PROVIDER": "offline", "LLM_MODELS": "small,big=Big", "LLM_MODEL": "big"})
    assert (current.llm.model, current.models.names) == ("big", ("small", "big"))
    # As a deploy gives them (databricks.yml): LLM_MODEL from a resource, LLM_MODELS the others.
    current = config.reload({"LLM_PROVIDER": "offline", "LLM_MODELS": "big", "LLM_MODEL": "endpoint"})
    assert (current.llm.model, current.models.names) == ("endpoint", ("endpoint", "big"))


def test_an_earlier_branch_keeps_the_model_of_each_answer_and_gives_it_back(http):
    first = responses_turn(http, "Hello", False, model="big")
    session = first["custom_outputs"]["session_id"]
    responses_turn(http, "Again", False, model="big", context={"conversation_id": session})
    # Back to the first answer, then on the default: the two big answers become branch 1, each with its model.
    went_back = [{"type": "item_reference", "id": first["output"][-1]["id"]}, {"role": "user", "content": "Other"}]
    responses_turn(http, "", False, input=went_back, model="offline", context={"conversation_id": session})
    earlier = http.get(f"/conversations/{session}", params={"branch": 1}).json()
    assert [model for model in earlier["models"] if model] == ["big", "big"], earlier["models"]
    exported = next(c for c in http.get("/me/export").json()["conversations"] if c["id"] == session)
    assert [model for model in exported["branches"][0]["models"] if model] == ["big", "big"]
    # Continued, branch 1 is the conversation again, its answers still marked as big's.
    body = {"input": [{"role": "user", "content": "On it"}], "context": {"conversation_id": session},
            "custom_inputs": {"branch": 1, "model": "big"}}  # fmt: skip
    assert http.post("/invocations", json=body).status_code == 200
    assert [model for model in http.get(f"/conversations/{session}").json()["models"] if model] == ["big"] * 3
