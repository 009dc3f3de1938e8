# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The OpenAI Responses API's shapes, which /responses speaks (responses_api.py): its response object, its
output items and its stream events, made from the app's own (MLflow's ResponsesAgent format, which /invocations
keeps).

- A response has `id`, `object`, `created_at`, `status`, `model`, `output`, `tools`, `tool_choice` and
  `parallel_tool_calls`; a failed one's `error` has a `code` the API knows.
- A tool the agent ran itself goes out as the API's item for a tool its server ran, an `mcp_call`, which carries
  its output: a `function_call_output` is no output item of the API, and a client (the AI SDK) refuses it, or runs
  a `function_call` it was given as its own. Its `id` is the call's `call_id`, so a replay renders to the very call
  and output the conversation stored (history/render.py). An approved call's output becomes an `mcp_call` with
  `approval_request_id`, as the API's own approvals do.
- Each content event carries `output_index` and `item_id`, its item announced by `response.output_item.added`;
  each event is numbered (`sequence_number`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable
from typing import Any

from agent_server.history.tool_outputs import tool_output_text

SERVER_LABEL = "app"  # the `server_label` of the tools the app runs: its own, and its MCP servers'
ERROR_CODES = {429: "rate_limit_exceeded"}  # a failed response's `error.code`; the API's own, else server_error
OUTPUT_INDEX_KEY = "agent_server.output_index"  # a run attempt's scope: the output_index its first item gets
CallLookup = Callable[[str], "dict[str, Any] | None"]  # the `function_call` a call id names, if the history has it


def response_fields(response: dict[str, Any], model: str | None = None, status: int | None = None) -> dict[str, Any]:
    """`response` with the fields every Responses API client reads; those it has already are kept."""
    if model is None:
        from agent_server import llm  # the configured model: read once the app has started

        model = llm.llm_settings().model
    filled = {"object": "response", "model": model, "tools": [], "tool_choice": "auto", "parallel_tool_calls": True}
    for key, value in filled.items():
        if response.get(key) is None:
            response[key] = value
    error = response.get("error")
    if isinstance(error, dict) and error.get("code") is None:
        response["error"] = {**error, "code": error_code(status)}
    return response


def ended(custom_outputs: dict[str, Any] | None) -> dict[str, Any]:
    """The status of an answer the model cut short, as the API gives it (model_ends.py marks it); else nothing."""
    reason = (custom_outputs or {}).get("incomplete")
    return {"status": "incomplete", "incomplete_details": {"reason": reason}} if reason else {}


def error_code(status: int | None) -> str:
    return ERROR_CODES.get(status or 0, "server_error")


def items_announced(events: Iterable[str]) -> int:
    """How many output items a run's stream announced: the next attempt's items are numbered after them."""
    return sum(1 for data in events if json.loads(data).get("type") == "response.output_item.added")


def unfinished(events: Iterable[str]) -> list[dict[str, Any]]:
    """The ends of the items a run's stream announced and never finished (its process stopped mid-message): each
    ends incomplete, its text not kept (the resumed attempt answers anew), so no item of the stream stays open."""
    announced: dict[int, dict[str, Any]] = {}
    for data in events:
        event = json.loads(data)
        if event.get("type") == "response.output_item.added" and "output_index" in event:  # /responses' only
            announced[event["output_index"]] = event["item"]
        elif event.get("type") == "response.output_item.done":
            announced.pop(event.get("output_index"), None)
    done = "response.output_item.done"
    return [{"type": done, "output_index": index, "item": _ended(item)} for index, item in announced.items()]


def interrupted_calls(events: Iterable[str], ended: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ends of the calls a run's client cancelled as they ran (`ended`: each call, then its output saying it was
    interrupted, as the run keeps them), as /responses streams them: each one's `mcp_call`, `incomplete`, with that
    output, at the index its start was given (a call never announced is announced first)."""
    announced: dict[Any, tuple[int, dict[str, Any]]] = {}
    count = 0
    for data in events:
        event = json.loads(data)
        if event.get("type") == "response.output_item.added":
            count += 1
            if isinstance(event.get("item"), dict) and event["item"].get("type") == "mcp_call":
                announced[event["item"].get("id")] = (event.get("output_index", count - 1), event["item"])
    calls = {item.get("call_id"): item for item in ended if item.get("type") == "function_call"}
    out = []
    for output in (item for item in ended if item.get("type") == "function_call_output"):
        index, started = announced.get(output.get("call_id"), (count, None))
        approved = started is not None and "approval_request_id" in started
        item = {**mcp_call(calls.get(output.get("call_id")), output, approved), "status": "incomplete"}
        if started is None:
            count += 1
            begun = {**{key: value for key, value in item.items() if key != "output"}, "status": "in_progress"}
            out.append({"type": "response.output_item.added", "output_index": index, "item": begun})
        out.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return out


def _ended(item: dict[str, Any]) -> dict[str, Any]:
    """An announced item cut off: a message without its text, a started call without output (both withheld)."""
    return {**item, "status": "incomplete", **({"content": []} if item.get("type") == "message" else {})}


def withheld(item: dict[str, Any]) -> bool:
    """Is this the end of a message whose text an output guardrail withheld, or of a started call that never
    finished (EventShaper.finish)? No output item."""
    if item.get("type") == "mcp_call":
        return item.get("status") == "incomplete" and "output" not in item
    return item.get("type") == "message" and item.get("status") == "incomplete" and not item.get("content")


def output_item(item: dict[str, Any]) -> dict[str, Any]:
    """A finished item as the API shapes it: a message's text parts with their `annotations`."""
    if item.get("type") == "message" and isinstance(item.get("content"), list):
        item = {**item, "content": [_part(part) for part in item["content"]]}
        item.setdefault("status", "completed")
    return item


def _part(part: Any) -> Any:
    if isinstance(part, dict) and part.get("type") == "output_text" and part.get("annotations") is None:
        return {**part, "annotations": []}
    return part


def mcp_call(call: dict[str, Any] | None, output: dict[str, Any], approved: bool = False) -> dict[str, Any]:
    """A tool call the app ran and its output, as one `mcp_call`; `approved`: the output of a call the user
    approved, whose call is the approval request (the history's, if it holds it)."""
    call_id = str(output.get("call_id"))
    item: dict[str, Any] = {
        "type": "mcp_call",
        "id": call_id,
        "name": (call or {}).get("name") or "tool",
        "arguments": (call or {}).get("arguments") or "{}",
        "server_label": SERVER_LABEL,
        "output": tool_output_text(output.get("output")),
        "status": "completed",
    }
    if approved:
        item["approval_request_id"] = call_id
    return item


def _started_call(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "function_call" and item.get("status") == "in_progress"


def started_mcp_call(call: dict[str, Any], approved: bool = False) -> dict[str, Any]:
    """A tool call the app runs, as it starts: its `mcp_call`, in progress and with no output yet."""
    started = mcp_call(call, {"call_id": call.get("call_id"), "output": ""}, approved)
    started.pop("output")
    return {**started, "status": "in_progress"}


def openai_output(items: list[dict[str, Any]], lookup: CallLookup = lambda _: None) -> list[dict[str, Any]]:
    """A whole answer's items (the non-streaming response's `output`) in the API's shapes."""
    shaper = EventShaper(lookup=lookup)
    for item in items:
        shaper.take({"type": "response.output_item.done", "item": item})
    shaper.finish()
    return shaper.output


class EventShaper:
    """One answer's events, MLflow's, as the Responses API streams them; its finished items in `output`."""

    def __init__(self, first_index: int = 0, lookup: CallLookup = lambda _: None) -> None:
        self.next_index = first_index  # a resumed run's attempt goes on after the items its stream has already
        self.lookup = lookup
        self.output: list[dict[str, Any]] = []
        self.extra: dict[str, Any] = {}  # the last custom_outputs, for the response's
        self._open: dict[str, tuple[int, str]] = {}  # streamed messages not finished: id -> (output_index, text)
        self._calls: list[tuple[dict[str, Any], dict[str, Any]]] = []  # calls held for their outputs, with events
        self._running: dict[str, tuple[int, dict[str, Any]]] = {}  # started calls (tools/progress.py): call id -> added

    def take(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        """The events this one becomes (none while a tool call waits for its output)."""
        kind = event.get("type")
        if kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            if isinstance(event.get("custom_outputs"), dict):
                self.extra = event["custom_outputs"]
            return self._done(event)
        out = self._release_calls()
        if kind == "response.output_item.added" and _started_call(event.get("item")):
            approved = self.lookup(str(event["item"].get("call_id"))) is not None  # the history's: one approved
            index, item = self._take_index(), started_mcp_call(event["item"], approved)
            self._running[item["id"]] = (index, item)  # its mcp_call, once it has its output, ends at this index
            out.append({"type": kind, "output_index": index, "item": item})
        elif kind == "response.output_text.delta":
            item_id = str(event.get("item_id"))
            index, text = self._open.get(item_id) or self._announce(item_id, out)
            self._open[item_id] = (index, text + str(event.get("delta", "")))
            out.append({**event, "item_id": item_id, "output_index": index, "content_index": 0, "logprobs": []})
        else:
            out.append(event)
        return out

    def finish(self) -> list[dict[str, Any]]:
        """The end of the answer: calls never answered go out as they are; a message never finished (an output
        guardrail blocked it) ends incomplete, its text withheld, and is no part of the output."""
        out = self._release_calls()
        for item_id, (index, _text) in self._open.items():
            item = {"type": "message", "id": item_id, "role": "assistant", "status": "incomplete", "content": []}
            out.append({"type": "response.output_item.done", "output_index": index, "item": item})
        self._open.clear()
        for index, item in self._running.values():  # started, never finished: ends, and is no part of the output
            out.append({"type": "response.output_item.done", "output_index": index, "item": _ended(item)})
        self._running.clear()
        return out

    def _done(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        item = output_item(event["item"])
        if item.get("type") == "function_call":
            self._calls.append((item, event))
            return []
        if item.get("type") == "function_call_output":
            held = next((held for held in self._calls if held[0].get("call_id") == item.get("call_id")), None)
            if held is not None:
                self._calls.remove(held)
            call = held[0] if held else self.lookup(str(item.get("call_id")))
            return self._finished({**event, "item": mcp_call(call, item, approved=held is None)})
        return [*self._release_calls(), *self._finished({**event, "item": item})]

    def _release_calls(self) -> list[dict[str, Any]]:
        out = [event for _call, held in self._calls for event in self._finished(held)]
        self._calls = []
        return out

    def _announce(self, item_id: str, out: list[dict[str, Any]]) -> tuple[int, str]:
        index = self._take_index()
        item = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}
        out.append({"type": "response.output_item.added", "output_index": index, "item": item})
        part = {"type": "output_text", "text": "", "annotations": []}
        at = {"item_id": item_id, "output_index": index, "content_index": 0}
        out.append({"type": "response.content_part.added", **at, "part": part})
        return index, ""

    def _finished(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        item = event["item"]
        out: list[dict[str, Any]] = []
        streamed = self._open.pop(str(item.get("id")), None) if item.get("type") == "message" else None
        running = self._running.pop(str(item.get("id")), None) if item.get("type") == "mcp_call" else None
        if running is not None:
            index = running[0]  # announced when it started
        elif streamed is None:
            index = self._take_index()
            started = {**copy.deepcopy(item), "status": "in_progress"}
            if item.get("type") == "message":
                started["content"] = []
            out.append({"type": "response.output_item.added", "output_index": index, "item": started})
        else:
            index, text = streamed
            parts = item.get("content") or []
            part = parts[0] if parts and isinstance(parts[0], dict) else {"type": "output_text", "text": text}
            at = {"item_id": item["id"], "output_index": index, "content_index": 0}
            if part.get("type") == "output_text":
                out.append({"type": "response.output_text.done", **at, "text": part["text"], "logprobs": []})
            out.append({"type": "response.content_part.done", **at, "part": part})
        self.output.append(item)
        out.append({**event, "output_index": index})
        return out

    def _take_index(self) -> int:
        self.next_index += 1
        return self.next_index - 1
