# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The render's error, and how it names what a client sent. Stdlib only, like the render."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class HistoryError(ValueError):
    """An item that cannot be rendered. `index` is its position in the input."""

    def __init__(self, index: int, reason: str) -> None:
        self.index = index
        super().__init__(f"input[{index}]: {reason}")


def required_str(part: Mapping[str, Any], key: str, index: int) -> str:
    value = part.get(key)
    if not isinstance(value, str):
        raise HistoryError(index, f"a {show(part.get('type'))} part needs a '{key}' string")
    return value


def part_name(part: Any) -> str:
    if isinstance(part, Mapping):
        return show(part.get("type"))
    return f"of type {json_type(part)}"


def show(value: Any) -> str:
    """A client-sent value, quoted for an error message, whatever JSON type it has."""
    return repr(value) if isinstance(value, str) else f"of type {json_type(value)}"


def json_type(value: Any) -> str:
    """A JSON value's type as JSON names it, for messages about what a client sent (the app's one such helper)."""
    if value is None:
        return "null"
    names = ((bool, "boolean"), (Mapping, "object"), (list, "array"), (str, "string"), ((int, float), "number"))
    return next((name for kind, name in names if isinstance(value, kind)), type(value).__name__)
