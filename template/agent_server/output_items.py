# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Turn the SDK's run items into output items a client can replay as they are.

The SDK's items carry what a replay must not: in chat-completions mode every id is
the placeholder "__fake_id__", openai 3.x models dump `async`, `caller` and
`namespace` as null, and the SDK adds its own `provider_data`. Ids here are
either ones the Responses API accepts (`msg_`, `fc_`, `rs_` prefixes) or absent.

A tool call the app answered gets the id `output_bound_call_id(call_id, output)`, which
names its output: a client that replays the call with a second output of its own (the AI
SDK's generateText records an error for a tool it could not run) still has the app's
output picked by the render (agent_server/tool_pairs.py). So a call goes out only with its
output, when that is known; one never answered goes out last, with a plain id.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel

from agent_server.tool_pairs import output_bound_call_id

ID_PREFIXES = {"message": "msg_", "function_call": "fc_", "reasoning": "rs_"}


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
        if not isinstance(item.get("output"), str):
            item["output"] = str(item.get("output", ""))
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
