# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Model calls send their plain JSON arguments without openai's walk of them (agent_server/model_requests.py): the
walk would change nothing in them, the model gets the very body openai's own create() sends, and a tracer that
wraps create() (MLflow's autolog) sees the arguments as the SDK gave them."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Iterator
from typing import Annotated, Any

import pytest
import typing_extensions
from openai._utils import PropertyInfo  # what openai's walk renames or formats a field by
from openai.resources.chat.completions import AsyncCompletions
from openai.resources.responses import AsyncResponses
from openai.types.chat import completion_create_params
from openai.types.responses import response_create_params
from support import Conversation, message_text, post

from agent_server import llm
from agent_server.model_requests import moved, parameters, unwrapped

PARAMETERS = [
    completion_create_params.CompletionCreateParamsStreaming,
    completion_create_params.CompletionCreateParamsNonStreaming,
    response_create_params.ResponseCreateParamsStreaming,
    response_create_params.ResponseCreateParamsNonStreaming,
]
RESOURCES = {"chat_completions": AsyncCompletions, "responses": AsyncResponses}

# An earlier turn with a tool call, the answer replayed as the chat page replays it (no id), and a new question.
HISTORY = [
    {"role": "user", "content": "What time is it?"},
    {"type": "function_call", "call_id": "call_1", "name": "get_current_time", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "12:00"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Noon.", "annotations": []}]},
    {"role": "user", "content": "Thanks. Say hello"},
]


class Part(typing_extensions.TypedDict, total=False):  # a parameter type as openai would write one with both
    created: Annotated[str, PropertyInfo(format="iso8601")]


class Item(typing_extensions.TypedDict, total=False):
    async_: Annotated[bool, PropertyInfo(alias="async")]
    parts: typing_extensions.Required[Iterable[str | Part]]


class Params(typing_extensions.TypedDict, total=False):
    items: list[Item]


def renamed_or_formatted(hint: Any, path: str = "", seen: set[int] | None = None) -> Iterator[str]:
    """Where in a parameter type openai's walk would rename a field (an alias) or format a value."""
    seen = set() if seen is None else seen
    if id(hint) in seen:
        return
    seen.add(id(hint))
    if typing.get_origin(hint) is Annotated:
        base, *marks = typing.get_args(hint)
        if any(isinstance(mark, PropertyInfo) and (mark.alias or mark.format) for mark in marks):
            yield path
        yield from renamed_or_formatted(base, path, seen)
    elif typing_extensions.is_typeddict(hint):
        for name, field in typing_extensions.get_type_hints(hint, include_extras=True).items():
            yield from renamed_or_formatted(field, f"{path}.{name}", seen)
    else:
        for argument in typing.get_args(hint):
            yield from renamed_or_formatted(argument, path, seen)


@pytest.mark.parametrize("params", PARAMETERS, ids=lambda params: f"{params.__module__}.{params.__name__}")
def test_the_parameters_have_no_alias_and_no_format_so_the_walk_changes_no_plain_json(params: type) -> None:
    assert list(renamed_or_formatted(params)) == []


def test_the_check_finds_an_alias_or_a_format_deep_in_a_type() -> None:
    assert sorted(renamed_or_formatted(Params)) == [".items.async_", ".items.parts.created"]


def test_only_plain_json_that_create_takes_is_moved() -> None:
    from openai import omit

    accepted = parameters(AsyncCompletions)
    arguments = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": omit, "stream": True}
    assert moved({**arguments, "extra_body": {"top_p": 0.5}}, accepted) == {
        "model": "m",
        "stream": True,
        "extra_body": {"messages": [{"role": "user", "content": "hi"}], "top_p": 0.5},
    }
    assert moved({**arguments, "extra_body": {"messages": []}}, accepted)["extra_body"] == {"messages": []}, (
        "extra_body wins over an argument, as openai merges it"
    )
    assert moved({**arguments, "messages": iter([])}, accepted) is None, "openai makes a list of an iterator"
    assert moved({**arguments, "response_format": dict}, accepted) is None, "openai refuses a class here"
    assert moved({**arguments, "no_such_argument": 1}, accepted) is None, "openai raises its TypeError"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_model_gets_the_body_openais_create_sends_and_a_tracer_sees_the_sdks_arguments(
    app_client, api_mode: str, model_log: list[dict[str, Any]], stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    resource = RESOURCES[api_mode]
    accepted = parameters(resource)
    assert unwrapped(resource), "no tracer wraps create() while tracing records nothing"
    post(app_client, HISTORY, stream)
    sent_plain = [entry["body"] for entry in model_log]

    given: list[dict[str, Any]] = []
    create = resource.create

    async def tracer(self: Any, *args: Any, **kwargs: Any) -> Any:  # as MLflow's autolog wraps it
        given.append(kwargs)
        return await create(self, *args, **kwargs)

    monkeypatch.setattr(resource, "create", tracer)
    model_log.clear()
    post(app_client, HISTORY, stream)
    assert [entry["body"] for entry in model_log] == sent_plain, "openai's own walk sends the same body"
    assert len(given) == len(sent_plain) == 1
    history = given[0]["messages" if api_mode == "chat_completions" else "input"]
    assert "Noon." in str(history) and "Thanks. Say hello" in str(history), "the tracer sees the SDK's arguments"
    assert "extra_body" not in given[0] or not given[0]["extra_body"]
    assert moved(given[0], accepted) is not None, "the SDK's arguments are plain JSON: the call skips the walk"


@pytest.mark.usefixtures("traced")
def test_a_traced_model_call_records_the_history_it_was_given(app_client, api_mode: str) -> None:
    import mlflow

    assert not unwrapped(RESOURCES[api_mode]), "MLflow's autolog wraps create() while tracing records"
    post(app_client, HISTORY, False)
    trace = mlflow.get_trace(mlflow.get_last_active_trace_id())
    key = "messages" if api_mode == "chat_completions" else "input"
    calls = [span for span in trace.data.spans if span.name == RESOURCES[api_mode].__name__]  # openai's class
    assert len(calls) == 1 and "Thanks. Say hello" in str(calls[0].inputs[key]), [s.name for s in trace.data.spans]
    assert not calls[0].inputs.get("extra_body")


def test_a_model_of_the_other_api_mode_made_later_leaves_this_ones_calls_as_they_were(app_client, api_mode) -> None:
    """Every model of a provider shares its client, set up once: making one of the other API mode (a model users
    may pick) once undid the Responses client's keeping of an answer cut short, and the cut answer was a 502."""
    other = "chat_completions" if api_mode == "responses" else "responses"
    llm.model(dataclasses.replace(llm.llm_settings(), api=other, model=f"{other}-model"))
    items = Conversation(app_client, False).send("Hello there, please cut it short")
    assert message_text(items[0]).startswith("Offline model: I saw 1 user")
    assert items[0].get("status") == ("incomplete" if api_mode == "responses" else "completed"), items
