# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Validate a request the way the real OpenAI API does, for the offline model.

- The body is checked against the `openai` package's own request TypedDicts, with unknown
  keys rejected at every depth ("Unknown parameter"), as the real API does.
- Rules the TypedDicts cannot express (tool calls paired with their outputs, item id
  prefixes, content part types per role, non-empty model and input) are checked too,
  with the real API's wording.

A violation raises ApiError, which carries the real API's 400 body (`message`, `param`).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterable
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import SchemaValidator, ValidationError

from agent_server.history.tool_pairs import ID_PREFIXES

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
    return schema, f"{_BRANCH}{index}"


def validate_schema(api: str, body: dict[str, Any]) -> None:
    """Raise a 400 for the first problem pydantic finds in the body, in the real API's terms."""
    validator = request_validator(api, body.get("stream") is True)
    try:
        validator.validate_python(body, strict=True)
    except ValidationError as exc:
        raise _api_error(_one_problem(exc.errors(include_url=False))[0]) from None


def _one_problem(errors: list[Any], done: int = 0) -> tuple[Any, bool]:
    """The one problem the real API would report, where pydantic reports one per union branch.

    At the first union, follow the branch the caller meant: not one whose own `type` or `role`
    refused the value, nor one that refused its JSON type, nor one where a nested `type` or
    `role` fits no branch; of the rest, the one with the fewest problems. When no branch takes
    the value, one error says what would. The flag is False when no branch took the `type`.
    """
    loc = errors[0]["loc"]
    cut = next((i for i in range(done, len(loc)) if _is_branch(loc[i])), None)
    if cut is None:
        return errors[0], True
    branches: dict[str, list[Any]] = {}
    for error in errors:
        if error["loc"][:cut] == loc[:cut] and len(error["loc"]) > cut and _is_branch(error["loc"][cut]):
            branches.setdefault(error["loc"][cut], []).append(error)
    candidates = list(branches.values())

    refusals = [_refusal(branch, cut) for branch in candidates]
    if all(refusals):  # no branch takes this `type` or `role`
        literals = [error for error in refusals if error["type"] == "literal_error"]
        return ({**literals[0], "ctx": {"expected": _one_of(literals)}} if literals else refusals[0]), False
    outright = [len(branch) == 1 and len(branch[0]["loc"]) == cut + 1 for branch in candidates]
    if all(outright):  # no branch takes this JSON type
        merged = {**candidates[0][0], "type": "literal_error", "ctx": {"expected": _one_of(b[0] for b in candidates)}}
        return merged, True  # the value is the caller's mistake here, not a sign of another shape

    def rank(number: int) -> tuple[bool, bool, bool, int]:
        branch = candidates[number]
        problems = len({_up_to_next_branch(error["loc"], cut + 1) for error in branch})  # a nested union is one
        return refusals[number] is not None, outright[number], not picks[number][1], problems

    picks = [_one_problem(branch, cut + 1) for branch in candidates]
    return picks[min(range(len(candidates)), key=rank)]


def _refusal(branch: list[Any], cut: int) -> Any:
    """The error that says the branch's own `type` or `role` is another literal or missing, if any."""
    own = [error for error in branch if error["loc"][cut + 1 :] in (("type",), ("role",))]
    literal = [error for error in own if error["type"] == "literal_error"]
    return next(iter(literal or [error for error in own if error["type"] == "missing"]), None)


def _one_of(errors: Iterable[Any]) -> str:
    """What any of the refusing branches would have taken: "one of 'a', 'b'" or "a string or an array"."""
    words = [_expected(error) or error["msg"] for error in errors]
    literals = dict.fromkeys(value for word in words for value in re.findall(r"'[^']*'", word))
    if len(literals) > 1 and all(word.startswith("'") for word in words):
        return "one of " + ", ".join(literals)
    return " or ".join(dict.fromkeys(words))


def _up_to_next_branch(loc: Any, start: int) -> tuple[Any, ...]:
    return tuple(next((loc[:i] for i in range(start, len(loc)) if _is_branch(loc[i])), loc))


def _is_branch(part: Any) -> bool:
    return isinstance(part, str) and part.startswith(_BRANCH)


def _expected(error: Any) -> str | None:
    """What the API would have accepted, in words, when we know it."""
    if error["type"] == "literal_error":
        return str(error["ctx"]["expected"])
    return _EXPECTED_BY_ERROR.get(error["type"])


_EXPECTED_BY_ERROR = {
    "string_type": "a string",
    "list_type": "an array",
    "dict_type": "an object",
    "typed_dict_type": "an object",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean",
    "none_required": "null",
}


def describe(value: Any) -> str:
    """How the API names a JSON value in messages: short scalars verbatim, the rest by type."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else "a string"
    if isinstance(value, (int, float)):
        return repr(value)
    return "an array" if isinstance(value, list) else "an object"


def _api_error(error: Any) -> ApiError:
    param = _param_path(part for part in error["loc"] if not _is_branch(part))
    if error["type"] == "missing":
        return ApiError(f"Missing required parameter: '{param}'.", param)
    if error["type"] == "extra_forbidden":
        return ApiError(f"Unknown parameter: '{param}'.", param)
    expected = _expected(error)
    if expected is None:  # pydantic's own words, as a clause: "value should be greater than 0"
        reason = error["msg"][:1].lower() + error["msg"][1:]
    else:
        reason = f"expected {expected}, but got {describe(error['input'])}"
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
        if not allowed or not isinstance(content, list):
            continue
        for j, part in enumerate(content):
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
        for i, item in enumerate(body["input"]):
            if item.get("type") == "function_call":
                check_arguments(item.get("arguments"), f"input[{i}].arguments")


def check_item_ids(items: list[dict[str, Any]]) -> None:
    for i, item in enumerate(items):
        item_id = item.get("id")
        prefix = ID_PREFIXES.get(item.get("type") or "message", "").rstrip("_")
        if item_id is None or not prefix or item_id.startswith(prefix):
            continue
        raise ApiError(
            f"Invalid 'input[{i}].id': '{item_id}'. Expected an ID that begins with '{prefix}'.",
            f"input[{i}].id",
        )


def check_arguments(arguments: Any, param: str) -> None:
    """A tool call's arguments in the history must be a JSON object, as strict servers (vLLM, several hosted
    OpenAI-compatible providers) check on every request: a call cut off mid-arguments would fail every later turn."""
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ApiError(f"Invalid value for '{param}': the tool call's arguments are not a JSON object.", param)


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
            for k, call in enumerate(message["tool_calls"]):
                check_arguments(
                    call.get("function", {}).get("arguments"), f"messages.[{i}].tool_calls.[{k}].function.arguments"
                )
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
