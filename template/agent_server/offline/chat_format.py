# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The Chat Completions wire format of an answer: a completion, or the chunks of a stream.

Built from the `openai` package's own types, so a payload the SDK could not parse fails here,
when it is built, not in the client that reads it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.completion_usage import CompletionUsage

from agent_server.offline.replies import Answer, split_for_stream


def chat_completion(body: dict[str, Any], said: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None, "annotations": []}
    if said.reasoning:  # as DeepSeek-style servers send it, which the SDK reads as a reasoning item
        message["reasoning_content"] = said.reasoning
    if not said.tool_calls:
        message["content"] = said.text
        message["annotations"] = chat_citations(said)
    else:
        message["tool_calls"] = [
            {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in said.tool_calls
        ]
    completion = ChatCompletion.model_validate(
        {
            "id": f"chatcmpl-{said.digest}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(said)}],
            "usage": chat_usage(said),
            "service_tier": "default",
            "system_fingerprint": None,
        }
    )
    return completion.to_dict()


def chat_citations(said: Answer) -> list[dict[str, Any]]:
    """The sources the answer cites, as Chat Completions names them (a url_citation object in each)."""
    return [
        {
            "type": "url_citation",
            "url_citation": {"url": c.url, "title": c.title, "start_index": c.start, "end_index": c.end},
        }
        for c in said.citations
    ]


def chat_usage(said: Answer) -> CompletionUsage:
    return CompletionUsage.model_validate(
        {
            "prompt_tokens": said.input_tokens,
            "completion_tokens": said.output_tokens,
            "total_tokens": said.input_tokens + said.output_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
    )


def _finish_reason(said: Answer) -> str:
    if said.ends == "incomplete":
        return "length"  # cut at the output-token limit (max_tokens, max_completion_tokens)
    return "tool_calls" if said.tool_calls else "stop"


def chat_chunks(body: dict[str, Any], said: Answer) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed chat completion: role, deltas, finish reason, then usage if asked."""
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish_reason: str | None = None, **replacing: Any) -> dict[str, Any]:
        data = {
            "id": f"chatcmpl-{said.digest}",
            "object": "chat.completion.chunk",
            "created": created,
            "model": body["model"],
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            **({"usage": None} if include_usage else {}),  # as the API does when usage is asked for
            **replacing,
        }
        return ChatCompletionChunk.model_validate(data).to_dict()

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for piece in split_for_stream(said.reasoning) if said.reasoning else []:
        yield chunk({"reasoning_content": piece})
    if not said.tool_calls:
        for piece in split_for_stream(said.text):
            yield chunk({"content": piece})
        if said.citations:  # as OpenAI's search models stream them, which the SDK reads (delta.annotations)
            yield chunk({"annotations": chat_citations(said)})
    for index, call in enumerate(said.tool_calls):
        announce = {
            "index": index,
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield chunk({"tool_calls": [announce]})
        for piece in split_for_stream(call.arguments):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(said))
    if include_usage:
        yield chunk({}, choices=[], usage=chat_usage(said))
