# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""A model answer that ends before it is done, as an answer (docs/failure-modes.md, "Answers the model cut short").

A Responses answer can end `incomplete` (cut at its output-token limit, `max_output_tokens`, or by a content
filter) or `failed` (the API's `error`), and a stream can end with an `error` event. openai-agents (0.22 and later)
raises a ModelBehaviorError for each, which keeps none of the answer: the turn was a 500 and lost the text the model
had written. Here:
- a streamed answer's last event (`response.incomplete`, `response.failed`, `error`) reaches the turn before the
  SDK's error does (it drains its events first), with the whole response;
- a non-streamed answer never reaches the SDK: the client (`keep_ended_answers`, on llm.model()'s client) raises
  ModelEnded with the response instead.
An incomplete answer keeps its messages (and reasoning), the last marked `status: "incomplete"` as the API marks it,
and says why in the answer's `custom_outputs` (`"incomplete": "max_output_tokens"`); the routes make it a response
of status `incomplete`. A tool call it had begun is dropped: its arguments may be cut too, and it never ran. A
failed answer is the model's failure (errors.py, ModelAnswerFailed): 429, 502 or 400 as its code says.
"""

from __future__ import annotations

from typing import Any

from agents import Agent
from agents.exceptions import ModelBehaviorError
from agents.items import MessageOutputItem, ReasoningItem
from agents.stream_events import RawResponsesStreamEvent, RunItemStreamEvent
from openai import AsyncOpenAI
from openai.types.responses import Response, ResponseOutputMessage, ResponseReasoningItem

from agent_server.errors import ModelAnswerFailed
from agent_server.model_requests import PlainResponses

ENDED = ("incomplete", "failed")
INCOMPLETE_KEY = "incomplete"  # in custom_outputs: why the answer was cut (the API's incomplete_details.reason)


class ModelEnded(Exception):
    """A non-streamed Responses answer that ended incomplete or failed, with its response."""

    def __init__(self, response: Response) -> None:
        super().__init__(f"The model's response ended {response.status}.")
        self.response = response


class _Responses(PlainResponses):
    async def create(self, **kwargs: Any) -> Any:
        response = await super().create(**kwargs)
        if isinstance(response, Response) and response.status in ENDED:
            raise ModelEnded(response)  # before the SDK, which would raise keeping only its words
        return response


_Responses.__name__ = PlainResponses.__name__  # openai's: MLflow names a traced call's span after the class


def keep_ended_answers(client: AsyncOpenAI) -> AsyncOpenAI:
    """The client, its non-streamed Responses answers that end incomplete or failed raised as ModelEnded."""
    client.__dict__["responses"] = _Responses(client)  # the client's `responses` is a cached_property
    return client


ENDINGS = (ModelEnded, ModelBehaviorError)


class Ending:
    """Watches a run's stream for the event that ended its answer early."""

    def __init__(self) -> None:
        self.response: Response | None = None
        self.error: tuple[str | None, str] | None = None  # an `error` event's code and message

    def see(self, event: Any) -> None:
        if not isinstance(event, RawResponsesStreamEvent):
            return
        kind, response = getattr(event.data, "type", None), getattr(event.data, "response", None)
        if kind in ("response.incomplete", "response.failed") and isinstance(response, Response):
            self.response = response
        elif kind == "error":
            self.error = (getattr(event.data, "code", None), str(getattr(event.data, "message", "") or ""))

    def kept(self, error: BaseException, context: Any, agent: Agent) -> list[RunItemStreamEvent]:
        """What the answer keeps, as the run's item events; a failed answer, or an error of another kind, raised."""
        response = error.response if isinstance(error, ModelEnded) else self.response
        if response is None and self.error is not None:
            raise ModelAnswerFailed(*self.error) from error
        if response is None:
            raise error
        if response.status == "failed":
            code = response.error.code if response.error is not None else None
            message = response.error.message if response.error is not None else "no reason given"
            raise ModelAnswerFailed(code, message) from error
        details = response.incomplete_details
        reason = (details.reason if details is not None else None) or "max_output_tokens"
        context.custom_outputs = {**(context.custom_outputs or {}), INCOMPLETE_KEY: reason}
        if context.turn is not None:
            context.turn.cut_short = reason  # the stored turn keeps it (memory/cut_short.py)
        kept = [item for item in response.output if isinstance(item, (ResponseOutputMessage, ResponseReasoningItem))]
        messages = [item for item in kept if isinstance(item, ResponseOutputMessage)]
        if messages:
            messages[-1].status = "incomplete"
        return [
            RunItemStreamEvent(
                name="message_output_created" if isinstance(item, ResponseOutputMessage) else "reasoning_item_created",
                item=MessageOutputItem(agent=agent, raw_item=item)
                if isinstance(item, ResponseOutputMessage)
                else ReasoningItem(agent=agent, raw_item=item),
            )
            for item in kept
        ]
