# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The built-in offline model: an OpenAI-compatible API that runs in process, with no network.

It serves `POST /v1/chat/completions` and `POST /v1/responses`, streaming or not, and is
deterministic, so tests and demos need no credentials. It is also STRICT: every request is
validated the way the real OpenAI API validates it, so a history bug (an unknown key, a
`null` where a string belongs, a tool output without its call) fails offline with the same
400 it would get in production, instead of passing here and failing there.

- The body is checked against the `openai` package's own request TypedDicts, with unknown
  keys rejected at every depth ("Unknown parameter"), as the real API does.
- Rules the TypedDicts cannot express (tool calls paired with their outputs, item id
  prefixes, content part types per role, non-empty model and input) are checked too,
  with the real API's wording.

The reply is computed from the conversation: it either calls a tool the latest user turn
names (or `get_current_time` when it mentions the time), or says
"Offline model: I saw {u} user, {a} assistant and {t} tool turns. You said: {latest user text}".

Use it in process with `offline_client()`, an AsyncOpenAI wired to the app, or over HTTP with
`python -m agent_server.offline_model --port 8123` and OPENAI_BASE_URL=http://127.0.0.1:8123/v1.
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import json
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import TypeAdapter
from pydantic_core import SchemaValidator, ValidationError

BASE_URL = "http://offline-model/v1"
API_KEY = "offline"
CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"

# Item id prefixes the Responses API insists on, for the item types that carry ids we check.
ID_PREFIXES: dict[str, tuple[str, ...]] = {
    "message": ("msg",),
    "function_call": ("fc",),
    "function_call_output": ("fc",),
    "reasoning": ("rs",),
}
# The content part types each message role may hold in the Responses API.
INPUT_PART_TYPES = ("input_text", "input_image", "input_file")
PART_TYPES_BY_ROLE: dict[Any, tuple[str, ...]] = {
    "assistant": ("output_text", "refusal"),
    "user": INPUT_PART_TYPES,
    "system": INPUT_PART_TYPES,
    "developer": INPUT_PART_TYPES,
}


class ApiError(Exception):
    """A request the real API would refuse; rendered as its `{"error": {...}}` body."""

    def __init__(self, message: str, param: str | None, status: int = 400, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"message": message, "type": "invalid_request_error", "param": param, "code": code}


# --------------------------------------------------------------------------------------------
# Schema validation against the openai package's request TypedDicts
# --------------------------------------------------------------------------------------------

_BRANCH = "\x00branch:"  # marks union-branch segments in error locations (no field name starts so)


@functools.cache
def request_validator(api: str, streaming: bool) -> SchemaValidator:
    """A strict validator for one API's create-params, built once per (api, streaming)."""
    from openai.types.chat import completion_create_params as chat_params
    from openai.types.responses import response_create_params as responses_params

    params_type = {
        ("chat", False): chat_params.CompletionCreateParamsNonStreaming,
        ("chat", True): chat_params.CompletionCreateParamsStreaming,
        ("responses", False): responses_params.ResponseCreateParamsNonStreaming,
        ("responses", True): responses_params.ResponseCreateParamsStreaming,
    }[(api, streaming)]
    schema = copy.deepcopy(TypeAdapter(params_type).core_schema)
    return SchemaValidator(_make_strict(schema))


def _make_strict(node: Any) -> Any:
    """Rewrite a core schema in place so it rejects what the real API rejects."""
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "typed-dict":
            node["extra_behavior"] = "forbid"  # the API answers "Unknown parameter" at any depth
        elif kind == "generator":
            node["type"] = "list"  # `Iterable[...]` fields validate lazily; a list validates now
        elif kind == "union":
            # Our own labels make branch segments in error locations unmistakable.
            node["choices"] = [_labelled_choice(index, choice) for index, choice in enumerate(node["choices"])]
        for value in node.values():
            _make_strict(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            _make_strict(value)
    return node


def _labelled_choice(index: int, choice: Any) -> tuple[Any, str]:
    schema = choice[0] if isinstance(choice, tuple) else choice
    if schema.get("type") == "typed-dict":
        name = schema["cls"].__name__
    elif schema.get("type") == "definition-ref":
        name = schema["schema_ref"].split(":")[0].rsplit(".", 1)[-1]
    else:
        name = schema.get("type", "?")
    return schema, f"{_BRANCH}{index}:{name}"


def validate_schema(api: str, body: dict[str, Any]) -> None:
    """Raise the real API's 400 for the first problem pydantic finds in the body."""
    validator = request_validator(api, body.get("stream") is True)
    try:
        validator.validate_python(body, strict=True)
    except ValidationError as exc:
        errors = [{**error, "loc": tuple(error["loc"])} for error in exc.errors(include_url=False)]
        raise _api_error(_resolve_unions(errors)[0]) from None


# Pydantic reports one error per union branch. The real API reports one problem, in the
# branch the caller meant, so we keep only the most relevant branch of every failed union:
#   1. a branch whose `type`/`role` literal matched the value (the caller meant that shape),
#   2. a branch that accepted the value's JSON type (it got further than the others),
#   3. a branch without nested discriminator mismatches,
#   4. the branch with the fewest errors (the first such one on a tie).


def _resolve_unions(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replace the per-branch errors of each failed union by those of its most relevant branch."""
    resolved: list[dict[str, Any]] = []
    pending = list(errors)
    while pending:
        cut = _first_branch_index(pending[0]["loc"])
        if cut is None:
            resolved.append(pending.pop(0))
            continue
        prefix = pending[0]["loc"][:cut]
        in_union = [e for e in pending if _is_branch_of(e["loc"], prefix)]
        pending = [e for e in pending if not _is_branch_of(e["loc"], prefix)]
        resolved.extend(_resolve_union(prefix, in_union))
    return resolved


def _first_branch_index(loc: tuple[Any, ...]) -> int | None:
    return next((i for i, part in enumerate(loc) if isinstance(part, str) and part.startswith(_BRANCH)), None)


def _is_branch_of(loc: tuple[Any, ...], prefix: tuple[Any, ...]) -> bool:
    cut = len(prefix)
    return loc[:cut] == prefix and len(loc) > cut and isinstance(loc[cut], str) and loc[cut].startswith(_BRANCH)


def _resolve_union(prefix: tuple[Any, ...], errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_branch: dict[str, list[dict[str, Any]]] = {}
    for error in errors:
        label = error["loc"][len(prefix)]
        by_branch.setdefault(label, []).append({**error, "loc": prefix + error["loc"][len(prefix) + 1 :]})
    candidates = [_resolve_unions(branch_errors) for branch_errors in by_branch.values()]

    if all(_rejected_outright(prefix, c) for c in candidates):
        return [_merged_type_error(prefix, [c[0] for c in candidates])]
    matched = [c for c in candidates if not _discriminator_failed(prefix, c)]
    if not matched:
        value_error = _discriminator_value_error(prefix, candidates)
        if value_error is not None:
            return [value_error]
        matched = candidates
    return min(matched, key=lambda c: _branch_rank(prefix, c))


def _branch_rank(prefix: tuple[Any, ...], errors: list[dict[str, Any]]) -> tuple[bool, int, int]:
    nested_mismatches = sum(e["type"] == "discriminator_mismatch" for e in errors)
    return _rejected_outright(prefix, errors), nested_mismatches, len(errors)


def _rejected_outright(prefix: tuple[Any, ...], errors: list[dict[str, Any]]) -> bool:
    """The branch refused the value itself (wrong JSON type), not something inside it."""
    return len(errors) == 1 and errors[0]["loc"] == prefix


def _discriminator_failed(prefix: tuple[Any, ...], errors: list[dict[str, Any]]) -> bool:
    return any(e["loc"] in (prefix + ("type",), prefix + ("role",)) for e in errors)


def _discriminator_value_error(prefix: tuple[Any, ...], candidates: list[list[dict[str, Any]]]) -> dict | None:
    """No branch takes this `type` (or `role`): one error listing the values that would fit."""
    for key in ("type", "role"):
        literal_errors = [
            e for c in candidates for e in c if e["loc"] == prefix + (key,) and e["type"] == "literal_error"
        ]
        if literal_errors:
            values = _unique(v for e in literal_errors for v in re.findall(r"'[^']*'", e["ctx"]["expected"]))
            return {
                "type": "discriminator_mismatch",
                "loc": prefix + (key,),
                "input": literal_errors[0]["input"],
                "expected": f"one of {', '.join(values)}",
            }
    return None


def _merged_type_error(prefix: tuple[Any, ...], errors: list[dict[str, Any]]) -> dict[str, Any]:
    """Every branch refused the value's JSON type: say which types would have been accepted."""
    phrases = _unique(_expected(e) or e["msg"] for e in errors)
    if "a string" in phrases:  # a string literal is a narrower string; naming both is noise
        phrases = [p for p in phrases if not p.startswith("'")]
    return {"type": "union_type", "loc": prefix, "input": errors[0]["input"], "expected": " or ".join(phrases)}


_EXPECTED_BY_ERROR = {
    "string_type": "a string",
    "list_type": "an array",
    "dict_type": "an object",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean",
    "none_required": "null",
}


def _expected(error: dict[str, Any]) -> str | None:
    """What the API would have accepted, in words, when we know it."""
    if "expected" in error:  # one of our merged union errors
        return error["expected"]
    if error["type"] == "literal_error":
        expected = error["ctx"]["expected"]
        return "a boolean" if expected in ("True", "False") else expected  # `stream: Literal[True]`
    return _EXPECTED_BY_ERROR.get(error["type"])


def _describe(value: Any) -> str:
    """How the API names a JSON value in messages: short scalars verbatim, the rest by type."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else "a string"
    if isinstance(value, (int, float)):
        return repr(value)
    return "an array" if isinstance(value, list) else "an object"


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _api_error(error: dict[str, Any]) -> ApiError:
    param = _param_path(error["loc"])
    if error["type"] == "missing":
        return ApiError(f"Missing required parameter: '{param}'.", param)
    if error["type"] == "extra_forbidden":
        return ApiError(f"Unknown parameter: '{param}'.", param)
    expected = _expected(error)
    if expected is None:  # pydantic's own words, as a clause: "value should be greater than 0"
        reason = error["msg"][:1].lower() + error["msg"][1:]
    else:
        reason = f"expected {expected}, but got {_describe(error['input'])}"
    return ApiError(f"Invalid value for '{param}': {reason}.", param)


def _param_path(loc: Iterable[Any]) -> str:
    """`('input', 2, 'content')` -> `input[2].content`, the API's spelling."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


# --------------------------------------------------------------------------------------------
# Rules the TypedDicts cannot express
# --------------------------------------------------------------------------------------------


def check_content_part_types(body: dict[str, Any]) -> None:
    """Assistant messages hold output parts; user, system and developer messages hold input parts.

    Runs before the schema check, so the real API's wording wins over the union error the
    TypedDicts would give (and they would let an assistant message hold input parts); hence
    the defensive shape checks.
    """
    items = body.get("input")
    for i, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, dict) or item.get("type", "message") != "message":
            continue
        allowed = PART_TYPES_BY_ROLE.get(item.get("role"))
        content = item.get("content")
        for j, part in enumerate(content if allowed and isinstance(content, list) else []):
            part_type = part.get("type") if isinstance(part, dict) else None
            if isinstance(part_type, str) and part_type not in allowed:
                supported = ", ".join(f"'{t}'" for t in allowed[:-1]) + f" and '{allowed[-1]}'"
                raise ApiError(
                    f"Invalid value: '{part_type}'. Supported values are: {supported}.", f"input[{i}].content[{j}]"
                )


def check_model(body: dict[str, Any]) -> None:
    model = body.get("model")
    if model is None:
        raise ApiError("Missing required parameter: 'model'.", "model")
    if not isinstance(model, str) or not model.strip():
        raise ApiError("Invalid value for 'model': expected a non-empty string.", "model")


def check_not_empty(body: dict[str, Any], key: str) -> None:
    value = body.get(key)
    if value is None:
        raise ApiError(f"Missing required parameter: '{key}'.", key)
    if value == []:
        raise ApiError(
            f"Invalid '{key}': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            key,
            code="empty_array",
        )
    if value == "":
        raise ApiError(
            f"Invalid '{key}': empty string. Expected a string with minimum length 1, but got an empty string instead.",
            key,
            code="empty_string",
        )


def check_responses_semantics(body: dict[str, Any]) -> None:
    check_model(body)
    # This model keeps no state, so every stored response or conversation is unknown to it.
    if body.get("previous_response_id") is not None:
        raise ApiError(f"Previous response with id '{body['previous_response_id']}' not found.", "previous_response_id")
    if body.get("conversation") is not None:
        conversation = body["conversation"]
        conversation_id = conversation if isinstance(conversation, str) else conversation.get("id")
        raise ApiError(f"Conversation with id '{conversation_id}' not found.", "conversation", status=404)
    check_not_empty(body, "input")
    if isinstance(body["input"], list):
        check_item_ids(body["input"])
        check_tool_pairing(body["input"])


def check_item_ids(items: list[dict[str, Any]]) -> None:
    for i, item in enumerate(items):
        item_id = item.get("id")
        prefixes = ID_PREFIXES.get(item.get("type") or "message")
        if item_id is None or prefixes is None or item_id.startswith(prefixes):
            continue
        raise ApiError(
            f"Invalid 'input[{i}].id': '{item_id}'. Expected an ID that begins with '{prefixes[0]}'.",
            f"input[{i}].id",
        )


def check_tool_pairing(items: list[dict[str, Any]]) -> None:
    """Each function_call_output answers an earlier function_call, and each call is answered."""
    called: set[str] = set()
    answered: set[str] = set()
    for item in items:
        if item.get("type") == "function_call":
            called.add(item["call_id"])
        elif item.get("type") == "function_call_output":
            if item.get("call_id") not in called:
                raise ApiError(
                    f"No tool call found for function call output with call_id {item.get('call_id')}.", "input"
                )
            answered.add(item["call_id"])
    for item in items:
        if item.get("type") == "function_call" and item["call_id"] not in answered:
            raise ApiError(f"No tool output found for function call {item['call_id']}.", "input")


def check_chat_semantics(body: dict[str, Any]) -> None:
    check_model(body)
    check_not_empty(body, "messages")
    messages = body["messages"]
    for i, message in enumerate(messages):
        if message["role"] == "assistant" and message.get("tool_calls"):
            _check_tool_calls_answered(messages, i)
        elif message["role"] == "tool":
            _check_tool_message_answers_a_call(messages, i)


def _check_tool_calls_answered(messages: list[dict[str, Any]], i: int) -> None:
    unanswered = [call["id"] for call in messages[i]["tool_calls"]]
    for message in messages[i + 1 :]:
        if message["role"] != "tool":
            break
        if message["tool_call_id"] in unanswered:
            unanswered.remove(message["tool_call_id"])
    if unanswered:
        raise ApiError(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(unanswered)}",
            f"messages.[{i}].role",
        )


def _check_tool_message_answers_a_call(messages: list[dict[str, Any]], i: int) -> None:
    j = i - 1
    while j >= 0 and messages[j]["role"] == "tool":
        j -= 1
    caller = messages[j] if j >= 0 and messages[j]["role"] == "assistant" else {}
    if messages[i]["tool_call_id"] not in {call["id"] for call in caller.get("tool_calls") or []}:
        raise ApiError(
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
            "'tool_calls'.",
            f"messages.[{i}].role",
        )


# --------------------------------------------------------------------------------------------
# The deterministic reply
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    role: str  # "user", "assistant" or "tool"
    text: str


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Answer:
    """What the model says (text, or one tool call) and the numbers its wire formats report."""

    text: str
    tool_call: ToolCall | None
    digest: str  # ids derive from it, so a replayed request gets the same ids
    input_tokens: int
    output_tokens: int


def chat_answer(body: dict[str, Any]) -> Answer:
    tools = [tool["function"]["name"] for tool in _offered_function_tools(body)]
    return answer(body["messages"], chat_turns(body["messages"]), tools)


def responses_answer(body: dict[str, Any]) -> Answer:
    tools = [tool["name"] for tool in _offered_function_tools(body)]
    return answer(body["input"], responses_turns(body["input"]), tools)


def _offered_function_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    if body.get("tool_choice") == "none":  # the caller forbade tool calls for this turn
        return []
    return [tool for tool in body.get("tools") or [] if tool["type"] == "function"]


def chat_turns(messages: list[dict[str, Any]]) -> list[Turn]:
    """User, assistant-with-text and tool turns of a chat; system and tool-call-only turns don't count."""
    turns = []
    for message in messages:
        role, text = message["role"], _content_text(message.get("content"))
        if role in ("user", "tool") or (role == "assistant" and text):
            turns.append(Turn(role, text))
    return turns


def responses_turns(items: str | list[dict[str, Any]]) -> list[Turn]:
    """The same turns as `chat_turns`, read from Responses input items."""
    if isinstance(items, str):
        return [Turn("user", items)]
    turns = []
    for item in items:
        kind, role = item.get("type", "message"), item.get("role")
        if kind == "message" and role in ("user", "assistant"):
            text = _content_text(item["content"])
            if role == "user" or text:
                turns.append(Turn(role, text))
        elif kind == "function_call_output":
            turns.append(Turn("tool", _content_text(item["output"])))
    return turns


def _content_text(content: Any) -> str:
    """A string content as is; a list of parts as its text parts joined with newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content if isinstance(part.get("text"), str))
    return ""


def answer(history: Any, turns: list[Turn], tool_names: list[str]) -> Answer:
    """Call a tool the latest user turn asks for, or describe the conversation."""
    digest = request_digest(history)
    last_user = max((i for i, turn in enumerate(turns) if turn.role == "user"), default=-1)
    latest_user_text = turns[last_user].text if last_user >= 0 else ""
    tool_outputs = [turn.text for turn in turns[last_user + 1 :] if turn.role == "tool"]
    tool = None if tool_outputs else requested_tool(latest_user_text, tool_names)

    text, tool_call = "", None
    if tool is not None:
        tool_call = ToolCall(call_id=f"call_{digest}", name=tool, arguments="{}")
    else:
        counts = {role: sum(turn.role == role for turn in turns) for role in ("user", "assistant", "tool")}
        text = (
            f"Offline model: I saw {counts['user']} user, {counts['assistant']} assistant and {counts['tool']} "
            f"tool turns. You said: {latest_user_text}"
        )
        if tool_outputs:
            text = f"The tool returned: {tool_outputs[-1]}. {text}"
    spoken = text if tool_call is None else tool_call.name + tool_call.arguments
    return Answer(text, tool_call, digest, token_count(json.dumps(history)), token_count(spoken))


def requested_tool(user_text: str, tool_names: list[str]) -> str | None:
    lowered = user_text.lower()
    for name in tool_names:
        if name.lower() in lowered:
            return name
    if "get_current_time" in tool_names and re.search(r"\btime\b", lowered):
        return "get_current_time"
    return None


def request_digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def token_count(text: str) -> int:
    return max(1, len(text) // 4)  # the usual four-characters-a-token estimate


def split_for_stream(text: str) -> list[str]:
    """At least two deltas (when the text has two characters), as a real stream would send."""
    pieces = re.findall(r"\S+\s*|\s+", text)
    if len(pieces) < 2 and len(text) >= 2:
        pieces = [text[: len(text) // 2], text[len(text) // 2 :]]
    return pieces or [text]


# --------------------------------------------------------------------------------------------
# Chat Completions wire format
# --------------------------------------------------------------------------------------------


def chat_completion(body: dict[str, Any]) -> dict[str, Any]:
    said = chat_answer(body)
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None, "annotations": []}
    if said.tool_call is None:
        message["content"] = said.text
    else:
        call = said.tool_call
        message["tool_calls"] = [
            {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
        ]
    return {
        "id": f"chatcmpl-{said.digest}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(said)}],
        "usage": chat_usage(said),
        "service_tier": "default",
        "system_fingerprint": None,
    }


def chat_usage(said: Answer) -> dict[str, Any]:
    return {
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


def _finish_reason(said: Answer) -> str:
    return "stop" if said.tool_call is None else "tool_calls"


def chat_chunks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed chat completion: role, deltas, finish reason, then usage if asked."""
    said = chat_answer(body)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        data = {
            "id": f"chatcmpl-{said.digest}",
            "object": "chat.completion.chunk",
            "created": created,
            "model": body["model"],
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        return {**data, "usage": None} if include_usage else data  # as the API does when usage is asked for

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    if said.tool_call is None:
        for piece in split_for_stream(said.text):
            yield chunk({"content": piece})
    else:
        call = said.tool_call
        announce = {
            "index": 0,
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield chunk({"tool_calls": [announce]})
        for piece in split_for_stream(call.arguments):
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(said))
    if include_usage:
        yield {**chunk({}), "choices": [], "usage": chat_usage(said)}


# --------------------------------------------------------------------------------------------
# Responses wire format
# --------------------------------------------------------------------------------------------


def response_completed(body: dict[str, Any]) -> dict[str, Any]:
    said = responses_answer(body)
    return response_object(body, said, [output_item(said, done=True)])


def response_events(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The event sequence of a streamed response, numbered as the real API numbers it."""
    said = responses_answer(body)
    started = response_object(body, said, output=None)
    item = output_item(said, done=False)
    where = {"item_id": item["id"], "output_index": 0}

    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
    ]
    if said.tool_call is None:
        part = {**where, "content_index": 0}
        events.append({"type": "response.content_part.added", **part, "part": output_text_part("")})
        events += [
            {"type": "response.output_text.delta", **part, "delta": piece, "logprobs": []}
            for piece in split_for_stream(said.text)
        ]
        events.append({"type": "response.output_text.done", **part, "text": said.text, "logprobs": []})
        events.append({"type": "response.content_part.done", **part, "part": output_text_part(said.text)})
    else:
        arguments = said.tool_call.arguments
        events += [
            {"type": "response.function_call_arguments.delta", **where, "delta": piece}
            for piece in split_for_stream(arguments)
        ]
        events.append({"type": "response.function_call_arguments.done", **where, "arguments": arguments})
    done_item = output_item(said, done=True)
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": done_item},
        {"type": "response.completed", "response": response_object(body, said, [done_item])},
    ]
    for number, event in enumerate(events):
        yield {**event, "sequence_number": number}


def output_item(said: Answer, done: bool) -> dict[str, Any]:
    """The answer as a Responses output item: finished, or as first announced in a stream."""
    status = "completed" if done else "in_progress"
    if said.tool_call is None:
        return {
            "id": f"msg_{said.digest}",
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": [output_text_part(said.text)] if done else [],
        }
    call = said.tool_call
    return {
        "id": f"fc_{said.digest}",
        "type": "function_call",
        "status": status,
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments if done else "",
    }


def output_text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def response_object(body: dict[str, Any], said: Answer, output: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A `Response` that echoes the request's settings, as the real API does; in progress without output."""
    done = output is not None
    now = int(time.time())
    usage = {
        "input_tokens": said.input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": said.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": said.input_tokens + said.output_tokens,
    }
    return {
        "id": f"resp_{said.digest}",
        "object": "response",
        "created_at": now,
        "status": "completed" if done else "in_progress",
        "completed_at": now if done else None,
        "error": None,
        "incomplete_details": None,
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


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


# --------------------------------------------------------------------------------------------
# The app
# --------------------------------------------------------------------------------------------


def parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise ApiError(
            "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload, "
            "but what was sent was not valid JSON.",
            None,
        ) from None
    if not isinstance(body, dict):
        raise ApiError(f"Invalid type for 'body': expected an object, but got {_describe(body)} instead.", None)
    return body


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Python's json would accept NaN and Infinity


def sse(events: Iterable[dict[str, Any]], named: bool) -> Iterator[str]:
    """Server-sent events; the Responses API names each event, Chat Completions ends with [DONE]."""
    for event in events:
        prefix = f"event: {event['type']}\n" if named else ""
        yield f"{prefix}data: {json.dumps(event)}\n\n"
    if not named:
        yield "data: [DONE]\n\n"


def create_offline_app() -> FastAPI:
    """The offline model as an ASGI app; `app.state.request_log` records every request."""
    app = FastAPI(title="Offline model", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.request_log = []

    async def handle(request: Request, api: str) -> Response:
        raw = await request.body()
        body: dict[str, Any] = {}
        try:
            body = parse_body(raw)
            if api == "responses":
                check_content_part_types(body)
            validate_schema(api, body)
            if api == "chat":
                check_chat_semantics(body)
                response = _chat_response(body)
            else:
                check_responses_semantics(body)
                response = _responses_response(body)
        except ApiError as exc:
            app.state.request_log.append(
                {"path": request.url.path, "status": exc.status, "error": exc.body, "body": body}
            )
            return JSONResponse({"error": exc.body}, status_code=exc.status)
        app.state.request_log.append({"path": request.url.path, "status": 200, "error": None, "body": body})
        return response

    @app.post(CHAT_PATH)
    async def chat_completions(request: Request) -> Response:
        return await handle(request, "chat")

    @app.post(RESPONSES_PATH)
    async def responses(request: Request) -> Response:
        return await handle(request, "responses")

    return app


# Streams are built in full before the 200 goes out, so a failure can never hide mid-stream.
def _chat_response(body: dict[str, Any]) -> Response:
    if body.get("stream"):
        return StreamingResponse(sse(list(chat_chunks(body)), named=False), media_type="text/event-stream")
    return JSONResponse(chat_completion(body))


def _responses_response(body: dict[str, Any]) -> Response:
    if body.get("stream"):
        return StreamingResponse(sse(list(response_events(body)), named=True), media_type="text/event-stream")
    return JSONResponse(response_completed(body))


def offline_client(app: FastAPI | None = None) -> openai.AsyncOpenAI:
    """An AsyncOpenAI that talks to the offline model in process (a new app unless one is given)."""
    transport = httpx.ASGITransport(app=app if app is not None else create_offline_app())
    return openai.AsyncOpenAI(
        base_url=BASE_URL,
        api_key=API_KEY,
        max_retries=0,
        http_client=httpx.AsyncClient(transport=transport, base_url=BASE_URL),
    )


def main(argv: list[str] | None = None) -> None:
    """Serve the offline model over HTTP, for apps configured with OPENAI_BASE_URL."""
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve the offline model at http://HOST:PORT/v1.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    uvicorn.run(create_offline_app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
