# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Turn the SDK's run items into output items a client can replay as they are.

The SDK's items carry what a replay must not: in chat-completions mode every id is
the placeholder "__fake_id__", openai 3.x models dump `async`, `caller` and
`namespace` as null, and the SDK adds its own `provider_data`. Ids here are
either ones the Responses API accepts (`msg_`, `fc_`, `rs_` prefixes) or absent.

A tool call the app answered gets the id `output_bound_call_id(call_id, output)`, which
names its output: a client that replays the call with a second output of its own (the AI
SDK's generateText records an error for a tool it could not run) still has the app's
output picked by the render (agent_server/history/tool_pairs.py). So a call goes out only with its
output, when that is known; one never answered goes out last, with a plain id.

Every tool call from the model also gets a non-empty id that no other call in the run has
(`with_unique_call_ids`). openai-agents' `Model` contract asks for exactly that
(agents/models/interface.py, 0.24), and the SDK relies on it: it refuses an empty id
(ModelBehaviorError, a 500) and skips a call whose id and arguments match an earlier one in
the history, as if already run. Some OpenAI-compatible servers number every call `call_0`,
or send no id at all. Wrapping the model fixes that where it arises, before the SDK or a
client sees the id.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any

from agents import Agent, Model
from pydantic import BaseModel

from agent_server.history.tool_outputs import tool_output_shape
from agent_server.history.tool_pairs import ID_PREFIXES, output_bound_call_id
from agent_server.scheduling import turn_starts


def new_id(item_type: str) -> str:
    return f"{ID_PREFIXES[item_type]}{uuid.uuid4().hex}"


def replayable_id(item_type: str, current: Any) -> str:
    """Keep an id the Responses API would accept; replace anything else."""
    prefix = ID_PREFIXES[item_type]
    if isinstance(current, str) and current.startswith(prefix) and len(current) > len(prefix):
        return current
    return new_id(item_type)


def to_output_item(raw_item: Any, message_id: str | None = None) -> dict[str, Any] | None:
    """One SDK item (pydantic model or dict) as a clean output item, or None if it is not one a client replays."""
    if isinstance(raw_item, BaseModel):
        item = raw_item.model_dump(mode="json", by_alias=True, exclude_none=True)
    else:
        item = {key: value for key, value in dict(raw_item).items() if value is not None}
    item.pop("provider_data", None)  # the SDK's bookkeeping, not part of any API's item
    item_type = item.get("type")
    if item_type == "message":
        item["id"] = message_id or replayable_id("message", item.get("id"))
        item.setdefault("status", "completed")
    elif item_type in ("function_call", "reasoning"):
        item["id"] = replayable_id(item_type, item.get("id"))
    elif item_type == "function_call_output":
        item.pop("id", None)
        item["output"] = tool_output_shape(item.get("output"))  # text as text, never a Python repr
    else:
        return None
    return item


class ReplayableOutput:
    """The run's items in order, as clients replay them; each answered call bound to its output."""

    def __init__(self) -> None:
        self.held: list[dict[str, Any]] = []  # calls waiting for outputs, and what came after them

    def add(self, raw_item: Any, message_id: str | None = None) -> list[dict[str, Any]]:
        """The items ready to go out once this one is added (none while a call waits for its output)."""
        item = to_output_item(raw_item, message_id)
        if item is None:
            return []
        if item["type"] == "function_call" or (self.held and item["type"] == "function_call_output"):
            self.held.append(item)
            return self._release() if self._all_answered() else []
        return [*self.finish(), item]

    def finish(self) -> list[dict[str, Any]]:
        """Whatever is still held: calls with no output keep their plain ids."""
        return self._release()

    def _all_answered(self) -> bool:
        answered = {item["call_id"] for item in self.held if item["type"] == "function_call_output"}
        return all(item["call_id"] in answered for item in self.held if item["type"] == "function_call")

    def _release(self) -> list[dict[str, Any]]:
        outputs = {item["call_id"]: item["output"] for item in self.held if item["type"] == "function_call_output"}
        for item in self.held:
            if item["type"] == "function_call" and item["call_id"] in outputs:
                item["id"] = output_bound_call_id(item["call_id"], outputs[item["call_id"]])
        released, self.held = self.held, []
        return released


class UniqueCallIds(Model):
    """A model that passes everything through, with each tool call's `call_id` made unique."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # anything else the SDK asks of the model it wraps

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        turn_starts.model_called()
        response = await self.inner.get_response(system_instructions, input, *args, **kwargs)
        fixer = _CallIdFixer(input)
        for position, item in enumerate(response.output):
            fixer.fix(position, item)
        return response

    async def stream_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        turn_starts.model_called()
        fixer = _CallIdFixer(input)
        async for event in self.inner.stream_response(system_instructions, input, *args, **kwargs):
            # The same call arrives in output_item.added, output_item.done and response.completed.
            if hasattr(event, "item") and hasattr(event, "output_index"):
                fixer.fix(event.output_index, event.item)
            response = getattr(event, "response", None)
            for position, item in enumerate(getattr(response, "output", None) or []):
                fixer.fix(position, item)
            yield event

    async def close(self) -> None:
        await self.inner.close()

    def get_retry_advice(self, request: Any) -> Any:
        return self.inner.get_retry_advice(request)

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self.inner._cleanup_on_run_end(owner)


def with_unique_call_ids(agent: Agent) -> Agent:
    """The agent with its model wrapped, unless it is wrapped already or named by a string."""
    if isinstance(agent.model, Model) and not isinstance(agent.model, UniqueCallIds):
        return agent.clone(model=UniqueCallIds(agent.model))
    return agent


class _CallIdFixer:
    """One model response: the ids its calls get, by output position, against the ids taken before it."""

    def __init__(self, history: Any) -> None:
        self.taken = set(_call_ids(history if isinstance(history, list) else []))
        self.by_position: dict[int, str] = {}

    def fix(self, position: int, item: Any) -> None:
        call_id = getattr(item, "call_id", None)
        if getattr(item, "type", None) != "function_call" or not isinstance(call_id, str):
            return
        if position not in self.by_position:
            fresh = call_id if call_id and call_id not in self.taken else f"call_{uuid.uuid4().hex}"
            self.taken.add(fresh)
            self.by_position[position] = fresh
        item.call_id = self.by_position[position]


def _call_ids(items: Iterable[Any]) -> Iterable[str]:
    """The call ids in the model's input, whose items are dicts or the SDK's pydantic models."""
    for item in items:
        read = item.get if isinstance(item, dict) else lambda key, item=item: getattr(item, key, None)
        call_id = read("call_id")
        if read("type") == "function_call" and isinstance(call_id, str):
            yield call_id
