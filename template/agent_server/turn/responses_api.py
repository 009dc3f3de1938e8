# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""POST /responses answers in the OpenAI Responses API's shapes (responses_shapes.py), which its clients (the
`openai` package, the AI SDK's `openai.responses`) validate; /invocations keeps MLflow's agent format (a tool call
and its output as `function_call` and `function_call_output`), which the Databricks clients read.

The turn's events (serve.py) are shaped here as objects, once, before they are encoded (routes.py) or numbered and
kept (a background run's, runs/). A synchronous stream gets its own first and last events here
(`response.created`, `response.in_progress`, then `response.completed` or `response.failed`); a run's come from
runs/events.py, so a run's stream, its replay from a cursor and a resumed attempt carry the same fields.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from agent_server.turn.responses_shapes import EventShaper, error_code, openai_output, response_fields
from agent_server.turn_context import TurnContext

Event = dict[str, Any]


def shaper(context: TurnContext) -> EventShaper:
    """The shaper of one turn's events: its items numbered after those its run's earlier attempts announced."""
    first = context.run.first_output_index if context.run is not None else 0
    return EventShaper(first, context.call_named)


class ResponseStream:
    """A synchronous /responses stream: the API's first events, the turn's shaped, and its last, each numbered."""

    def __init__(self, context: TurnContext) -> None:
        self.context = context
        self.shapes = shaper(context)
        self.sequence = 0
        self.response = {"id": f"resp_{uuid.uuid4().hex}", "created_at": int(time.time()), "background": False}

    def first(self) -> list[Event]:
        return self._numbered([self._lifecycle("response.created"), self._lifecycle("response.in_progress")])

    def take(self, event: Event) -> list[Event]:
        return self._numbered(self.shapes.take(event))

    def last(self) -> list[Event]:
        """The items left open, ended, then `response.completed`."""
        out = self.shapes.finish()
        metadata = {"trace_id": self.context.trace_id} if self.context.trace_id else None
        extra = {"custom_outputs": self.shapes.extra, **({"metadata": metadata} if metadata else {})}
        out.append(self._lifecycle("response.completed", "completed", output=self.shapes.output, **extra))
        return self._numbered(out)

    def failed(self, status: int, body: dict[str, Any]) -> list[Event]:
        """The API's `error` event and `response.failed`, for a turn that failed after its stream began."""
        error = {"code": error_code(status), "message": body["error"]["message"]}
        extra = {"custom_outputs": self.shapes.extra}
        out = [*self.shapes.finish(), {"type": "error", "param": None, **error}]
        out.append(self._lifecycle("response.failed", "failed", error=error, output=self.shapes.output, **extra))
        return self._numbered(out)

    def _lifecycle(self, kind: str, status: str = "in_progress", **fields: Any) -> Event:
        response = {**self.response, "status": status, "error": None, "output": [], **fields}
        return {"type": kind, "response": response_fields(response, self.context.model_name or None)}

    def _numbered(self, events: list[Event]) -> list[Event]:
        for event in events:
            event["sequence_number"] = self.sequence
            self.sequence += 1
        return events


def response_body(context: TurnContext, output: list[dict[str, Any]]) -> dict[str, Any]:
    """A /responses answer that does not stream: the response object of the collected turn."""
    body: dict[str, Any] = {"object": "response", "output": output}
    if context.custom_outputs:
        body["custom_outputs"] = context.custom_outputs
    if context.trace_id:
        body["metadata"] = {"trace_id": context.trace_id}
    response = {"id": f"resp_{uuid.uuid4().hex}", "created_at": int(time.time()), "background": False}
    return response_fields(
        {**body, **response, "status": "completed", "output": openai_output(output, context.call_named)},
        context.model_name or None,  # the model that answered (model_choice.py)
    )
