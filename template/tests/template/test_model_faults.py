# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Model servers that break the tool call id contract: every call `call_0`, or no id at all.

The offline model plays such a server (OFFLINE_MODEL_CALL_IDS). openai-agents alone would fail
the first tool turn (an empty id is a ModelBehaviorError) or skip a repeated call as already
run; agent_server/output_items.py gives each call a fresh id, so every turn answers and the app's
output replays in every client shape.
"""

from __future__ import annotations

import pytest
from support import Chat, reply_text

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
