# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The arguments the offline model calls a tool with: the smallest JSON object its parameters' schema accepts.

An owner's new tool with a required parameter (`roll_dice(sides: int)`) then runs offline, as a real model would
call it, instead of failing on `{}`. Required properties get a value of their type (a nested object its own
required properties), an enum its first member; optional ones (not required, or with a default) are left out.
It reads the schemas pydantic emits through openai-agents, strict or not: `$ref` to `$defs`, `anyOf` with null,
`allOf`, `const`, bounds on numbers, lengths and item counts, and the common string formats. Deterministic: the
same schema always gets the same arguments.
"""

from __future__ import annotations

import json
import math
from typing import Any

# A value each string format accepts (pydantic's datetime, date, time, UUID, email, URL and timedelta fields).
FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00",
    "duration": "PT1S",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "email": "offline@example.com",
    "uri": "https://example.com/",
}
WORD = "offline"  # every plain string
DEEPEST = 32  # a schema that nests (or refers to itself) deeper gets an empty object there


def tool_arguments(parameters: dict[str, Any] | None) -> str:
    """The call's `arguments`: a JSON object that satisfies the tool's parameters' schema."""
    found = value(parameters or {}, parameters or {}, 0)
    return json.dumps(found if isinstance(found, dict) else {}, separators=(",", ":"))


def value(schema: dict[str, Any], root: dict[str, Any], depth: int) -> Any:
    """The smallest value of `schema`; `root` holds the `$defs` its `$ref`s point to."""
    if depth > DEEPEST:
        return {}
    deeper = depth + 1
    if isinstance(reference := schema.get("$ref"), str):
        return value(_resolved(reference, root), root, deeper)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if branches := schema.get(key):  # a value of the first branch that is not null: the useful one
            typed = [branch for branch in branches if branch.get("type") != "null"] or branches
            return value(typed[0], root, deeper)
    if branches := schema.get("allOf"):
        parts = [value(branch, root, deeper) for branch in branches]
        if all(isinstance(part, dict) for part in parts):
            return {key: item for part in parts for key, item in part.items()}
        return parts[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((name for name in kind if name != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        required = [key for key in schema.get("required") or [] if "default" not in _property(schema, key, root)]
        return {key: value(_property(schema, key, root), root, deeper) for key in required}
    if kind == "array":
        return _array(schema, root, deeper)
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _string(schema)


def _property(schema: dict[str, Any], key: str, root: dict[str, Any]) -> dict[str, Any]:
    """A property's schema, a `$ref` resolved: its siblings (a default, a description) are the property's own."""
    found: dict[str, Any] = (schema.get("properties") or {}).get(key, {})
    if isinstance(found.get("$ref"), str):
        return {**_resolved(found["$ref"], root), **{name: v for name, v in found.items() if name != "$ref"}}
    return found


def _resolved(reference: str, root: dict[str, Any]) -> dict[str, Any]:
    """The schema a local `$ref` ("#/$defs/Name", or any JSON pointer into the root) points to."""
    found: Any = root
    for part in reference.removeprefix("#").strip("/").split("/"):
        if part:
            found = found.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(found, dict) else {}
    return found if isinstance(found, dict) else {}


def _array(schema: dict[str, Any], root: dict[str, Any], depth: int) -> list[Any]:
    fixed = schema.get("prefixItems") or []  # a tuple's items, one schema each
    items = [value(item, root, depth) for item in fixed]
    rest = schema.get("items")
    while len(items) < int(schema.get("minItems") or 0):
        items.append(value(rest if isinstance(rest, dict) else {}, root, depth))
    return items


def _number(schema: dict[str, Any], integer: bool) -> int | float:
    """1, moved into the schema's bounds: a count, a size or a divisor that works."""
    low, high = schema.get("minimum"), schema.get("maximum")
    if (above := schema.get("exclusiveMinimum")) is not None:
        low = math.floor(above) + 1 if integer else above + 1
    if (below := schema.get("exclusiveMaximum")) is not None:
        high = math.ceil(below) - 1 if integer else below - 1
    number: int | float = 1
    if low is not None and number < low:
        number = math.ceil(low) if integer else low
    if high is not None and number > high:
        number = math.floor(high) if integer else high
    return int(number) if integer else float(number)


def _string(schema: dict[str, Any]) -> str:
    text = FORMATS.get(schema.get("format", ""), WORD)
    shortest, longest = int(schema.get("minLength") or 0), schema.get("maxLength")
    text = text.ljust(shortest, "x")
    return text[: int(longest)] if longest is not None else text
