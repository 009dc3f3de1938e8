# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""An answer's citations (`url_citation` annotations on its text) reach the client, are kept with the
conversation and shown again (GET /conversations/{id}), and never reach the model: a history that replays them,
in either API's shape, is rendered without them, and the strict offline model accepts it. The offline model cites
a source when asked to ("cite"), in both wire formats. Both API modes (api_mode), streaming and not."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import post_turn, reply_text

from agent_server.offline.replies import CITED_SOURCE

pytestmark = pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])


def citations(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    [message] = [item for item in items if item["type"] == "message"]
    return [note for part in message["content"] for note in part.get("annotations") or []]


def test_an_answer_cites_its_source_the_conversation_keeps_it_and_the_model_never_sees_it(
    app_client, stream, model_log
):
    items, custom = post_turn(app_client, {"input": [{"role": "user", "content": "Please cite a source"}]}, stream)
    [note] = citations(items)
    assert note["type"] == "url_citation" and note["url"] == CITED_SOURCE, note
    assert reply_text(items)[note["start_index"] : note["end_index"]] == "[1]"
    conversation = custom["session_id"]
    kept = app_client.get(f"/conversations/{conversation}").json()["items"]
    assert kept[-1]["role"] == "assistant" and kept[-1]["annotations"] == [note], "kept, to show again"

    following = {"input": [{"role": "user", "content": "Thanks"}], "context": {"conversation_id": conversation}}
    assert "I saw 2 user, 1 assistant" in reply_text(post_turn(app_client, following, stream)[0])
    # The page's Edit sends the stored items before the edited message back, citations and all.
    edited = [*kept, {"role": "user", "content": "Thanks a lot"}]
    again = {**following, "input": edited, "custom_inputs": {"replace_history": True}}
    assert "I saw 2 user, 1 assistant" in reply_text(post_turn(app_client, again, stream)[0])
    assert app_client.get(f"/conversations/{conversation}").json()["items"][1] == kept[1], "still kept"
    assert all("annotations" not in json.dumps(entry["body"]) for entry in model_log), "the model never sees them"


def test_a_client_that_replays_citations_in_either_shape_goes_on(app_client, stream, model_log):
    """A client that keeps its own history (no conversation named): the app's output replayed exactly, and a
    chat-completions client's assistant message with its `annotations` (each url_citation in its own object)."""
    asked = {"role": "user", "content": "Cite javascript:alert(1) please"}
    items, _ = post_turn(app_client, {"input": [asked]}, stream)
    [note] = citations(items)
    assert note["url"] == "javascript:alert(1)", "any address: the page, not the model, decides what is a link"
    chat_shaped = {
        "role": "assistant",
        "content": reply_text(items),
        "annotations": [{"type": "url_citation", "url_citation": {k: v for k, v in note.items() if k != "type"}}],
    }
    for history in ([asked, *items], [asked, chat_shaped]):
        answer, _ = post_turn(app_client, {"input": [*history, {"role": "user", "content": "Thanks"}]}, stream)
        assert "I saw 2 user, 1 assistant" in reply_text(answer)
    assert all("annotations" not in json.dumps(entry["body"]) for entry in model_log)


def test_a_responses_client_gets_the_citations(app_client, stream):
    response = app_client.post("/responses", json={"input": "Cite a source", "stream": stream})
    assert response.status_code == 200, response.text
    text = response.text
    assert CITED_SOURCE in text and '"url_citation"' in text
