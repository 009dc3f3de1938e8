# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The Responses wire format of an answer: a response, or the numbered events of a stream.

Built from the `openai` package's own types, so a payload the SDK could not parse fails here,
when it is built, not in the client that reads it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any, Literal

from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseOutputItem,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
    ResponseOutputTextAnnotationAddedEvent,
    ResponseReasoningItem,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)
from openai.types.responses.response_output_text import AnnotationURLCitation

from agent_server.offline.replies import Answer, split_for_stream


def response_completed(body: dict[str, Any], said: Answer) -> dict[str, Any]:
    """The finished response (its status `said.ends`: completed, incomplete or failed)."""
    return response_object(body, said, [] if said.ends == "failed" else output_items(said, done=True)).to_dict()


def response_events(body: dict[str, Any], said: Answer) -> Iterator[dict[str, Any]]:
    """The event sequence of a streamed response, numbered as the real API numbers it."""
    number = itertools.count()
    started = response_object(body, said, output=None)
    events: list[ResponseStreamEvent] = [
        ResponseCreatedEvent(type="response.created", response=started, sequence_number=next(number)),
        ResponseInProgressEvent(type="response.in_progress", response=started, sequence_number=next(number)),
    ]
    if said.ends == "failed":  # as the API fails a response: no output, then response.failed
        failed = response_object(body, said, [])
        events.append(ResponseFailedEvent(type="response.failed", response=failed, sequence_number=next(number)))
        return (event.to_dict() for event in events)
    done_items = output_items(said, done=True)
    for index, (item, done_item) in enumerate(zip(output_items(said, done=False), done_items, strict=True)):
        events += _output_item_events(index, item, done_item, number)
    ended = response_object(body, said, done_items)
    if said.ends == "incomplete":
        events.append(ResponseIncompleteEvent(type="response.incomplete", response=ended, sequence_number=next(number)))
    else:
        events.append(ResponseCompletedEvent(type="response.completed", response=ended, sequence_number=next(number)))
    return (event.to_dict() for event in events)


def _output_item_events(
    index: int, item: ResponseOutputItem, done_item: ResponseOutputItem, number: Iterator[int]
) -> list[ResponseStreamEvent]:
    assert item.id is not None  # the offline model ids every output item
    where: dict[str, Any] = {"item_id": item.id, "output_index": index}
    events: list[ResponseStreamEvent] = [
        ResponseOutputItemAddedEvent(
            type="response.output_item.added", output_index=index, item=item, sequence_number=next(number)
        )
    ]
    if isinstance(done_item, ResponseOutputMessage):
        part = {**where, "content_index": 0}
        text = done_item.content[0].text  # type: ignore[union-attr]  # output_items() writes one text part
        events.append(
            ResponseContentPartAddedEvent(
                type="response.content_part.added", **part, part=output_text_part(""), sequence_number=next(number)
            )
        )
        events += [
            ResponseTextDeltaEvent(
                type="response.output_text.delta", **part, delta=piece, logprobs=[], sequence_number=next(number)
            )
            for piece in split_for_stream(text)
        ]
        events.append(
            ResponseTextDoneEvent(
                type="response.output_text.done", **part, text=text, logprobs=[], sequence_number=next(number)
            )
        )
        events += [
            ResponseOutputTextAnnotationAddedEvent(
                type="response.output_text.annotation.added", **part, annotation_index=n,
                annotation=annotation.to_dict(), sequence_number=next(number),
            )
            for n, annotation in enumerate(done_item.content[0].annotations)  # type: ignore[union-attr]
        ]  # fmt: skip
        events.append(
            ResponseContentPartDoneEvent(
                type="response.content_part.done", **part, part=done_item.content[0], sequence_number=next(number)
            )
        )
    elif isinstance(done_item, ResponseFunctionToolCall):
        arguments = done_item.arguments
        events += [
            ResponseFunctionCallArgumentsDeltaEvent(
                type="response.function_call_arguments.delta", **where, delta=piece, sequence_number=next(number)
            )
            for piece in split_for_stream(arguments)
        ]
        events.append(
            ResponseFunctionCallArgumentsDoneEvent(
                type="response.function_call_arguments.done",
                **where,
                arguments=arguments,
                sequence_number=next(number),
            )
        )
    events.append(
        ResponseOutputItemDoneEvent(
            type="response.output_item.done", output_index=index, item=done_item, sequence_number=next(number)
        )
    )
    return events


def output_items(said: Answer, done: bool) -> list[ResponseOutputItem]:
    """The answer as Responses output items: finished, or as first announced in a stream."""
    status: Literal["completed", "in_progress", "incomplete"] = "completed" if done else "in_progress"
    if not said.tool_calls:
        if done and said.ends == "incomplete":  # the message the limit cut, as the API marks it
            status = "incomplete"
        content: list[ResponseOutputText | ResponseOutputRefusal] = [output_text_part(said.text, said)] if done else []
        message = ResponseOutputMessage(
            id=f"msg_{said.digest}", type="message", status=status, role="assistant", content=content
        )
        return [*_reasoning_items(said, done), message]
    return [
        ResponseFunctionToolCall(
            id=f"fc_{said.digest}" + (f"_{number}" if number else ""),
            type="function_call",
            status=status,
            call_id=call.call_id,
            name=call.name,
            arguments=call.arguments if done else "",
        )
        for number, call in enumerate(said.tool_calls)
    ]


def _reasoning_items(said: Answer, done: bool) -> list[ResponseOutputItem]:
    """The reasoning summary before the answer, when the model reasoned (its text comes with the finished item)."""
    if not said.reasoning:
        return []
    summary = [{"type": "summary_text", "text": said.reasoning}] if done else []
    return [ResponseReasoningItem.model_validate({"id": f"rs_{said.digest}", "type": "reasoning", "summary": summary})]


def output_text_part(text: str, said: Answer | None = None) -> ResponseOutputText:
    """A text part; the whole answer's (`said`) with the sources it cites, as url_citation annotations."""
    return ResponseOutputText(type="output_text", text=text, annotations=url_citations(said), logprobs=[])


def url_citations(said: Answer | None) -> list[Any]:
    return [
        AnnotationURLCitation(
            type="url_citation", url=cite.url, title=cite.title, start_index=cite.start, end_index=cite.end
        )
        for cite in (said.citations if said else ())
    ]


def response_object(body: dict[str, Any], said: Answer, output: list[ResponseOutputItem] | None) -> Response:
    """A `Response` that echoes the request's settings, as the real API does; in progress without output."""
    done = output is not None
    status = said.ends if done else "in_progress"
    now = int(time.time())
    usage = {
        "input_tokens": said.input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": said.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": said.input_tokens + said.output_tokens,
    }
    # The request's settings are param dicts; pydantic validates them into the response's models.
    return Response.model_validate(
        {
            "id": f"resp_{said.digest}",
            "object": "response",
            "created_at": now,
            "status": status,
            "completed_at": now if status == "completed" else None,
            "error": {"code": "server_error", "message": "The offline model failed, as asked."}
            if status == "failed"
            else None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "metadata": body.get("metadata") or {},
            "model": body["model"],
            "output": output or [],
            "parallel_tool_calls": _or(body.get("parallel_tool_calls"), True),
            "previous_response_id": None,
            "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
            "store": _or(body.get("store"), True),
            "temperature": _or(body.get("temperature"), 1.0),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": _or(body.get("tool_choice"), "auto"),
            "tools": body.get("tools") or [],
            "top_p": _or(body.get("top_p"), 1.0),
            "truncation": body.get("truncation") or "disabled",
            "usage": usage if done else None,
        }
    )


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value
