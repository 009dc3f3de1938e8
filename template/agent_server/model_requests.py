# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Model calls whose arguments are plain JSON skip openai's walk of them against its parameter types.

Before it sends a request, openai's `create()` walks every argument against the API's parameter types
(openai/_utils/_transform.py): to rename a field that has an alias, format a date or a file, and turn pydantic models
and other iterables into JSON. The chat completions and Responses parameters have no alias and no format
(tests/template/test_model_requests.py checks the installed openai), so for plain JSON (dicts, lists, strings,
numbers: what the SDK sends) the walk gives back what it was given. It still costs about 1 ms a call on a two-turn
history, a fifth of a served turn's CPU, because it tries each value against every member of each union (six for
a chat message). Here such arguments go to `create()` in `extra_body`, which openai merges into the request's body
as it is: the same JSON, sent through openai's own client (options, retries, streams and answers unchanged).

Arguments that are not plain JSON (a pydantic model, a generator, a `response_format` class), or that `create()`
does not take, go to `create()` as they are, so openai converts them, or refuses them, as it always did. So does
every call while something wraps `create()`: MLflow's autolog (tracing on) or another tracer records a call's
arguments as they are given, so it must see them unmoved.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import openai
from openai.resources.chat.completions import AsyncCompletions
from openai.resources.responses import AsyncResponses

# Arguments that stay create()'s own: its request options, and what decides the answer's type or is required.
OPTIONS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})
KEPT = OPTIONS | {"model", "stream"}
OPENAI_FOLDER = str(Path(openai.__file__).parent)


def plain(value: Any) -> bool:
    """Whether `value` is JSON as it is (openai's walk would give it back unchanged)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, (list, tuple)):
        return all(plain(item) for item in value)
    if type(value) is dict:
        return all(type(key) is str and plain(item) for key, item in value.items())
    return False


def unwrapped(resource: type, name: str = "create") -> bool:
    """Whether the class's method is still openai's own: no tracer (MLflow's autolog, OpenTelemetry's) wraps it."""
    method = resource.__dict__.get(name)
    return isinstance(method, types.FunctionType) and method.__code__.co_filename.startswith(OPENAI_FOLDER)


def parameters(resource: type[Any]) -> frozenset[str]:
    """The names create() takes (its signature, through openai's wrapper of it)."""
    return frozenset(inspect.signature(resource.create).parameters) - {"self"}


def moved(arguments: dict[str, Any], accepted: frozenset[str]) -> dict[str, Any] | None:
    """create()'s arguments with the body's plain JSON in `extra_body`; None if any of it is not plain JSON, or is
    an argument create() does not take (openai then converts it, or raises its TypeError, as before)."""
    body: dict[str, Any] = {}
    for key, value in arguments.items():
        if key in KEPT or isinstance(value, (openai.Omit, openai.NotGiven)):
            continue
        if key not in accepted or not plain(value):
            return None
        body[key] = value
    extra = arguments.get("extra_body")
    if extra is not None and not isinstance(extra, Mapping):
        return None
    kept = {key: value for key, value in arguments.items() if key in KEPT}
    return {**kept, "extra_body": {**body, **(extra or {})}}  # extra_body wins over the arguments, as in openai


ACCEPTED = {resource: parameters(resource) for resource in (AsyncCompletions, AsyncResponses)}


def lean(resource: type[Any], arguments: dict[str, Any]) -> dict[str, Any] | None:
    """`moved()` arguments for the resource's create(), unless a tracer wraps it: None, to call it as it was called."""
    return moved(arguments, ACCEPTED[resource]) if unwrapped(resource) else None


class PlainCompletions(AsyncCompletions):
    async def create(self, **arguments: Any) -> Any:
        if (plain_arguments := lean(AsyncCompletions, arguments)) is None:
            return await super().create(**arguments)
        return await super().create(messages=(), **plain_arguments)  # create() requires it; extra_body's replaces it


class PlainResponses(AsyncResponses):
    async def create(self, **arguments: Any) -> Any:
        return await super().create(**(lean(AsyncResponses, arguments) or arguments))


# MLflow names a traced model call's span after the class of the resource called: openai's names, as before.
PlainCompletions.__name__ = AsyncCompletions.__name__
PlainResponses.__name__ = AsyncResponses.__name__


def send_plain_json(client: openai.AsyncOpenAI) -> openai.AsyncOpenAI:
    """The client, its chat completions and Responses calls sending plain JSON arguments without openai's walk."""
    client.chat.__dict__["completions"] = PlainCompletions(client)  # cached_propertys, as model_ends.py sets
    client.__dict__["responses"] = PlainResponses(client)
    return client
