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


def describe(value: Any) -> str:
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
