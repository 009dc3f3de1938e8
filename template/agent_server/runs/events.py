# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""A run's stream: the app's streaming events, each numbered, between the Responses API's own first and last.

    response.created      {"response": {"id": "resp_...", "status": "in_progress", ...}}   sequence_number 0
    ...                   the turn's events (turn/serve.py; on /responses shaped), each with its sequence_number
    response.completed    (or response.failed, response.incomplete, response.cancelled) with the whole response

then `data: [DONE]`. Each event is stored as the JSON it was sent as, so a replay is byte for byte the stream.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agent_server import model_choice
from agent_server.runs.store import Run
from agent_server.turn.responses_shapes import response_fields, withheld
from agent_server.turn_context import INVOCATIONS

TERMINAL_EVENTS = {
    "completed": "response.completed",
    "failed": "response.failed",
    "incomplete": "response.incomplete",
    "cancelled": "response.cancelled",
}
DONE = b"data: [DONE]\n\n"


def framed(data: str) -> bytes:
    return f"data: {data}\n\n".encode()


def numbered(event: dict[str, Any], sequence_number: int) -> str:
    """The event's JSON text with its sequence number: the one time the event is encoded."""
    return json.dumps({**event, "sequence_number": sequence_number})


class Output(list[dict[str, Any]]):
    """A run's finished items, in order (its replayable output), and the guardrail that refused its turn, if one
    did (guardrails.py: the stream says so in the refusal's `custom_outputs`), for the response's."""

    guardrail: str | None = None

    @classmethod
    def of_response(cls, response: dict[str, Any]) -> Output:
        """The output a response object (a run's last event's) gives."""
        output = cls(response.get("output") or [])
        output.guardrail = (response.get("custom_outputs") or {}).get("guardrail")
        return output


def output_items(events: Iterable[str]) -> Output:
    """The finished items of a run's events, in order: its replayable output."""
    done = Output()
    for data in events:
        event = json.loads(data)
        if event.get("type") == "response.output_item.done" and not withheld(event["item"]):
            done.append(event["item"])
            done.guardrail = (event.get("custom_outputs") or {}).get("guardrail", done.guardrail)
    return done


def partial_items(events: Iterable[str]) -> list[dict[str, Any]]:
    """What a stopped run had produced: its finished items, and the text of a message it had not finished."""
    done: list[dict[str, Any]] = []
    texts: dict[Any, str] = {}
    for data in events:
        event = json.loads(data)
        if event.get("type") == "response.output_text.delta":
            texts[event.get("item_id")] = texts.get(event.get("item_id"), "") + str(event.get("delta", ""))
        elif event.get("type") == "response.output_item.done":
            done.extend([] if withheld(event["item"]) else [event["item"]])
            texts.pop(event["item"].get("id"), None)
    for item_id, text in texts.items():
        if text:
            message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
            done.append({**message, "id": item_id} if item_id else message)
    return done


def response_object(run: Run, output: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The run as the Responses API describes a response, with the app's `custom_outputs` and trace id."""
    response: dict[str, Any] = {
        "id": run.id,
        "object": "response",
        "created_at": int(run.created_at),
        "status": run.status,
        "background": run.background,
        "error": run.error["body"]["error"] if run.error else None,
        "output": output or [],
        "custom_outputs": {"session_id": run.conversation_id} if run.conversation_id else {},  # "": none (requests.py)
    }
    if isinstance(output, Output) and output.guardrail:
        response["custom_outputs"]["guardrail"] = output.guardrail
    answered = model_choice.answered_by(str(run.body.get("agent_server.path", INVOCATIONS)), run.body)  # execute's
    response["custom_outputs"].update(model_choice.custom_outputs(answered))
    if run.trace_id:
        response["metadata"] = {"trace_id": run.trace_id}  # MLflow's place for it (x-mlflow-return-trace-id)
    return response_fields(response, answered, status=run.error["status"] if run.error else None)  # tools, ...


def created(run: Run) -> dict[str, Any]:
    return {"type": "response.created", "response": response_object(run, None)}


def terminal(run: Run, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": TERMINAL_EVENTS[run.status], "response": response_object(run, output)}
