# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The render's repairs (docs/history-shapes.md, "Repairs"): what no catalogue shape can show alone.

Each repair is logged at INFO with the item's index; the app's own tool output is kept whichever
side of a client's output it stands; and a conversation in which a client recorded its own error
output for a call the app ran goes on, with the model seeing only the app's output.
"""

from __future__ import annotations

import copy
import logging

import pytest
from history_catalogue import CLIENT_TOOL_ERROR, SHAPES, call, output, user
from support import Chat, reply_text

from agent_server.history import render_history
from agent_server.history.tool_pairs import output_bound_call_id

REPAIRS = [shape for shape in SHAPES if shape.group == "Repairs"]


@pytest.mark.parametrize("shape", REPAIRS, ids=lambda shape: shape.name)
def test_each_repair_is_logged_with_the_items_index(shape, caplog):
    with caplog.at_level(logging.INFO, logger="agent_server.history"):
        render_history(copy.deepcopy(shape.history))
    logged = [record.getMessage() for record in caplog.records if record.levelno == logging.INFO]
    assert any(message.startswith("history: input[") for message in logged), logged


@pytest.mark.parametrize("client_first", [True, False], ids=["client-output-first", "client-output-last"])
def test_the_output_a_calls_id_names_is_kept_wherever_it_stands(client_first):
    bound = {**call(), "id": output_bound_call_id("call_1", "09:30")}
    outputs = [output(text=CLIENT_TOOL_ERROR), output(text="09:30")]
    history = [user("What time is it?"), bound, *(outputs if client_first else outputs[::-1])]
    assert render_history(history) == [user("What time is it?"), call(), output(text="09:30")]


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_a_client_error_output_beside_the_apps_output_does_not_end_the_conversation(
    app_client, api_mode, model_log, stream
):
    chat = Chat(app_client, stream)
    call_item, app_output, _ = chat.send("What time is it?")
    assert call_item["id"] == output_bound_call_id(call_item["call_id"], app_output["output"])
    # What the AI SDK's generateText replays: its own error output right after the call.
    position = chat.history.index(call_item) + 1
    chat.history.insert(position, {**app_output, "output": CLIENT_TOOL_ERROR})

    model_log.clear()
    assert "I saw 2 user, 1 assistant and 1 tool turns" in reply_text(chat.send("Thanks"))
    sent = str(model_log[0]["body"])
    assert app_output["output"] in sent and CLIENT_TOOL_ERROR not in sent
