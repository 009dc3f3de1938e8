# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Model servers that break the tool call id contract: every call `call_0`, or no id at all; and model answers that
end early, cut at their output-token limit or failed (agent_server/model_ends.py).

The offline model plays such a server (OFFLINE_MODEL_CALL_IDS). openai-agents alone would fail
the first tool turn (an empty id is a ModelBehaviorError) or skip a repeated call as already
run; agent_server/output_items.py gives each call a fresh id, so every turn answers and the app's
output replays in every client shape.
"""

from __future__ import annotations

import importlib.metadata
import json

import pytest
from support import Chat, Conversation, message_text, reply_text, sse_events

from agent_server import llm

pytestmark = pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])


@pytest.fixture(params=["reuse", "empty"])
def faulty_call_ids(request: pytest.FixtureRequest, api_mode: str):
    model = llm.offline_app()
    model.state.call_ids = request.param
    yield request.param
    model.state.call_ids = "unique"


@pytest.mark.parametrize("replay", ["exact", "chat_ui", "chat_completions"])
def test_tool_turns_continue_on_a_model_with_faulty_call_ids(app_client, faulty_call_ids, stream, replay):
    chat = Chat(app_client, stream)
    chat.send("What time is it?", replay)
    twice = chat.send("What time is it twice?", replay)
    assert [item["type"] for item in twice] == [*["function_call"] * 2, *["function_call_output"] * 2, "message"]
    assert "I saw 3 user, 2 assistant and 3 tool turns" in reply_text(chat.send("Thanks", replay))

    call_ids = [item["call_id"] for item in chat.history if item.get("type") == "function_call"]
    call_ids += [call["id"] for item in chat.history for call in item.get("tool_calls") or []]
    assert len(call_ids) == 3 and all(call_ids) and len(set(call_ids)) == 3, call_ids


def test_the_owners_agent_on_llm_model_runs_as_it_is_not_copied_per_request(api_mode, stream):
    """llm.model() is wrapped once (UniqueCallIds), so a request runs the owner's agent itself: copying an Agent
    costs the SDK a look at its type hints every time."""
    from agents import Agent, Model

    from agent_server.output_items import UniqueCallIds
    from agent_server.turn.serve import for_this_request

    assert isinstance(llm.model(), UniqueCallIds) and isinstance(llm.model(), Model)
    owners = Agent(name="owner", instructions="x", model=llm.model())
    assert for_this_request(owners, []) is owners
    elsewhere = Agent(name="own model", instructions="x", model=llm.model().inner)  # a model of the owner's own
    assert isinstance(for_this_request(elsewhere, []).model, UniqueCallIds)


@pytest.mark.parametrize("replay", ["exact", "chat_ui"])
def test_a_call_to_a_tool_that_does_not_exist_is_answered_to_the_model_and_the_turn_goes_on(app_client, stream, replay):
    """Models call tools they made up. The SDK's own answer, `Tool '...' not found.`, goes back to the model as the
    call's output (openai-agents' tool_not_found_behavior), and the conversation continues."""
    chat = Chat(app_client, stream)
    items = chat.send("Use imagined_tool, please", replay)
    assert [item["type"] for item in items] == ["function_call", "function_call_output", "message"]
    assert items[0]["name"] == "imagined_tool" and "not found" in items[1]["output"]
    assert reply_text(items).startswith("The tool returned: Tool 'imagined_tool' not found.")
    assert "I saw 2 user, 1 assistant and 1 tool turns" in reply_text(chat.send("Thanks", replay))


def test_an_answer_cut_at_its_token_limit_keeps_its_text_and_says_so(app_client, api_mode, stream):
    """A Responses answer that ends `incomplete` (max_output_tokens) is no 500: its text is kept, in the answer and
    the stored turn, its message marked `status: "incomplete"`, and custom_outputs says why. In chat-completions mode
    openai-agents passes a finish_reason "length" on as a finished answer: the text is kept, unmarked."""
    chat = Conversation(app_client, stream)
    items = chat.send("Hello there, please cut it short")
    whole = "Offline model: I saw 1 user, 0 assistant and 0 tool turns. You said: Hello there, please cut it short"
    assert [item["type"] for item in items] == ["message"] and message_text(items[0]) == whole[: len(whole) // 2]
    stored = app_client.get(f"/conversations/{chat.id}").json()["items"]
    if api_mode == "responses":
        assert items[0]["status"] == "incomplete", items
        assert stored[-1]["status"] == "incomplete" and stored[-1]["content"] == message_text(items[0]), stored
        assert stored[-1]["incomplete_details"] == {"reason": "max_output_tokens"}  # the page's "Cut short"
    # The cut turn is history the model reads again, in either mode.
    assert "I saw 2 user, 1 assistant and 0 tool turns" in reply_text(chat.send("Go on"))

    response = app_client.post("/responses", json={"input": "Please cut it short", "stream": stream})
    assert response.status_code == 200, response.text
    body = sse_events(response.text)[-1]["response"] if stream else response.json()
    if api_mode == "responses":
        assert body["status"] == "incomplete" and body["incomplete_details"] == {"reason": "max_output_tokens"}
        assert body["output"][0]["status"] == "incomplete"
        assert body["custom_outputs"]["incomplete"] == "max_output_tokens"
        assert not stream or sse_events(response.text)[-1]["type"] == "response.incomplete"
    else:
        assert body["status"] == "completed"
    assert body["output"][0]["content"][0]["text"].startswith("Offline model: I saw 1 user")


def test_an_answer_the_model_failed_is_the_apps_model_failure_not_a_500(app_client, api_mode, stream, model_log):
    """A Responses answer that ends `failed` (in chat-completions mode, the server's 500) is a 502 that says so; a
    stream ends with the `error` event and, on /responses, `response.failed`."""
    for path in ("/invocations", "/responses"):
        response = app_client.post(path, json={"input": "Please fail the response", "stream": stream})
        if not stream:
            assert response.status_code == 502, response.text
            message = response.json()["error"]["message"]
            assert "failed, as asked" in message and (api_mode != "responses" or "failed to answer" in message)
            continue
        events = sse_events(response.text)
        errors = [event for event in events if event.get("type") == "error" or "error" in event]
        assert errors and "failed, as asked" in json.dumps(errors[0]), events
        assert path == "/invocations" or events[-1]["type"] == "response.failed", events
    model_log.clear()  # the chat-completions model answered with its 500, as asked


SDK_LINE = tuple(int(part) for part in importlib.metadata.version("openai-agents").split(".")[:2])


def test_an_answer_cut_short_by_a_model_of_the_owners_own_is_kept_or_a_502(app_client, monkeypatch, stream):
    """An agent on a Responses model object the owner made (not llm.model(): no client that hands the ended response
    to the turn): a stream keeps the text from its last event; an answer that does not stream gets the model's
    failure, a 502 that says why, never a 500 (model_ends.py)."""
    from agents import Agent, OpenAIResponsesModel

    from agent_server.offline import offline_client

    own = OpenAIResponsesModel(model="offline", openai_client=offline_client(llm.offline_app()))
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: Agent(name="own", instructions="x", model=own))
    response = app_client.post("/invocations", json={"input": "Please cut it short", "stream": stream})
    if stream:
        done = [event for event in sse_events(response.text) if event.get("type") == "response.output_item.done"]
        assert done[-1]["item"]["status"] == "incomplete" and "Offline model" in message_text(done[-1]["item"])
        assert done[-1]["custom_outputs"]["incomplete"] == "max_output_tokens"
    elif SDK_LINE >= (0, 22):  # openai-agents 0.22 and later raise ModelBehaviorError for a response not completed
        assert response.status_code == 502, response.text
        assert "could not be used" in response.json()["error"]["message"] and "incomplete" in response.text
    else:  # 0.21 hands the response over as it came: the text kept, its message marked incomplete
        assert response.status_code == 200, response.text
        [message] = response.json()["output"]
        assert message["status"] == "incomplete" and "Offline model" in message_text(message)
