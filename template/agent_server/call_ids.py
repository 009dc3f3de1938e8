# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Give every tool call from the model a non-empty id that no other call in the run has.

openai-agents' `Model` contract asks for exactly that (agents/models/interface.py, 0.24),
and the SDK relies on it: it refuses an empty id (ModelBehaviorError, a 500) and skips a
call whose id and arguments match an earlier one in the history, as if already run. Some
OpenAI-compatible servers number every call `call_0`, or send no id at all. Wrapping the
model fixes that where it arises, before the SDK or a client sees the id, so the app's
own output always replays.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any

from agents import Agent, Model


class UniqueCallIds(Model):
    """A model that passes everything through, with each tool call's `call_id` made unique."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # anything else the SDK asks of the model it wraps

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        response = await self.inner.get_response(system_instructions, input, *args, **kwargs)
        fixer = _CallIdFixer(input)
        for position, item in enumerate(response.output):
            fixer.fix(position, item)
        return response

    async def stream_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
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
        if read("type") == "function_call" and isinstance(read("call_id"), str):
            yield read("call_id")
