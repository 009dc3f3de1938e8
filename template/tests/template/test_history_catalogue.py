# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Every history shape in tests/template/history_catalogue.py, rendered and sent through the real server.

Each shape goes to /invocations in both API modes, streaming and not, followed by a new
user message. The offline model must get exactly the catalogued render (in chat-completions
mode, as the SDK's own converter turns it into messages), and the model_log fixture fails
the test on any error answer. Shapes the catalogue lists as rejected must be a 400 that
names the item, before any model call.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
from agents import Runner
from agents.models.chatcmpl_converter import Converter
from history_catalogue import SHAPES, SHAPES_BY_NAME, Shape
from history_shapes_doc import markdown
from support import post

from agent_server import agent, llm
from agent_server.history import HistoryError, render_history

API_MODES = list(llm.API_MODES)
NEXT = {"role": "user", "content": "And now?"}
DOC = Path(__file__).resolve().parents[2] / "docs" / "history-shapes.md"


def shape_id(shape: Shape) -> str:
    return shape.name


def skeleton(value: Any) -> Any:
    """The shape of a JSON value: its keys, item types and roles, with every other value replaced by its type."""
    if isinstance(value, dict):
        return {key: inner if key in ("type", "role") else skeleton(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [skeleton(inner) for inner in value]
    return type(value).__name__


def assert_catalogued(live: list[dict[str, Any]], shape: Shape) -> None:
    """`live` has the catalogued items in order; each item's keys are ones the catalogue shows, with the same types."""
    catalogued = shape.history
    assert [(item.get("type"), item.get("role")) for item in live] == [
        (item.get("type"), item.get("role")) for item in catalogued
    ]
    for live_item, catalogued_item in zip(live, catalogued, strict=True):
        assert live_item.keys() <= catalogued_item.keys(), f"{shape.name} does not show {live_item}"
        assert skeleton(live_item) == skeleton({key: catalogued_item[key] for key in live_item})


def assert_model_got(model_log: list[dict[str, Any]], api: str, rendered: list[dict[str, Any]]) -> None:
    """The first model request held exactly `rendered` then NEXT, as the SDK sends it in mode `api`."""
    body = model_log[0]["body"]
    if api == "responses":
        assert body["input"] == [*rendered, NEXT]
    else:
        system, *messages = body["messages"]
        assert system["role"] == "system"
        assert messages == Converter.items_to_messages([*rendered, NEXT])


@pytest.mark.parametrize("api", API_MODES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_render(shape, api):
    expected = shape.expected(api)
    if expected is None:
        with pytest.raises(HistoryError) as error:
            render_history(copy.deepcopy(shape.history), api)
        assert str(error.value).startswith(shape.error)
        return
    assert render_history(copy.deepcopy(shape.history), api) == expected
    assert render_history(copy.deepcopy(expected), api) == expected, "rendering a render changes nothing"


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_shape_through_the_server(app_client, api_mode, model_log, shape, stream):
    history = [*copy.deepcopy(shape.history), NEXT]
    expected = shape.expected(api_mode)
    if expected is None:
        response = app_client.post("/invocations", json={"input": history, "stream": stream})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["message"].startswith(shape.error)
        assert shape.error.startswith(f"{error['param']}: ")
        assert not model_log, "a rejected history never reaches the model"
        return
    items = post(app_client, history, stream)
    assert items[-1]["type"] == "message"
    assert_model_got(model_log, api_mode, expected)


def test_docs_match_the_catalogue():
    assert DOC.read_text() == markdown(), (
        "regenerate: uv run python tests/template/history_shapes_doc.py > docs/history-shapes.md"
    )


# --- the catalogued recordings still match what the SDK and this app emit today ------------------


def test_sdk_to_input_list_is_catalogued(app_client, api_mode, model_log):
    result = asyncio.run(Runner.run(agent.create_agent(), "What time is it?"))
    live = result.to_input_list()
    assert_catalogued(live, SHAPES_BY_NAME[f"sdk-to-input-list-{api_mode.replace('_', '-')}"])

    model_log.clear()
    post(app_client, [*live, NEXT], stream=False)
    assert_model_got(model_log, api_mode, render_history(live, api_mode))


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_app_output_is_catalogued(app_client, api_mode, model_log, stream):
    first = {"role": "user", "content": "What time is it?"}
    live = [first, *post(app_client, [first], stream)]
    assert_catalogued(live, SHAPES_BY_NAME["app-output-stream" if stream else "app-output-invoke"])

    model_log.clear()
    post(app_client, [*live, NEXT], stream)
    assert_model_got(model_log, api_mode, render_history(live, api_mode))
