# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""How a setting's variable is parsed and checked (config/__init__.py declares each setting with one of these).
Stdlib only, and no import of the rest of the app."""

from __future__ import annotations

import base64
import dataclasses
import re
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


class ConfigurationError(RuntimeError):
    """The environment does not describe a usable app. The message says what to set."""


# --- how a variable is parsed ---------------------------------------------------------------------------

Parse = Callable[[str, str], Any]  # (variable, its text) -> value, or ConfigurationError


def number(allow_zero: bool = False, integer: bool = False, scale: float = 1) -> Parse:
    """A positive (or, with allow_zero, non-negative) finite number, times `scale`."""

    def parse(name: str, raw: str) -> float | int:
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not value >= 0 or (value == 0 and not allow_zero) or value == float("inf"):
            kind = "non-negative" if allow_zero else "positive"
            raise ConfigurationError(f"{name}={raw!r} must be a {kind} number")
        return int(value * scale) if integer else value * scale

    return parse


def choice(values: tuple[str, ...], case: Callable[[str], str] = str.lower) -> Parse:
    def parse(name: str, raw: str) -> str:
        value = case(raw)
        if value not in values:
            raise ConfigurationError(f"{name}={value!r} is not one of {', '.join(values)}")
        return value

    return parse


def flag(name: str, raw: str) -> bool:
    """`true`, `1` or `yes` is on; anything else, off (as the README says of every true/false setting)."""
    return raw.lower() in ("1", "true", "yes")


def is_set(name: str, raw: str) -> bool:  # whether a secret is there; its value is left to the library that uses it
    return True


def text(name: str, raw: str) -> str:
    return raw


def lowercase(name: str, raw: str) -> str:
    return raw.lower()


def listed(name: str, raw: str) -> tuple[str, ...]:
    """Comma-separated values, each without a trailing slash."""
    return tuple(value.strip().rstrip("/") for value in raw.split(",") if value.strip())


def setting(variable: str, parse: Parse, default: Any, doc: str) -> Any:
    """A dataclass field read from `variable`; unset or blank is `default`."""
    return dataclasses.field(default=default, metadata={"variable": variable, "parse": parse, "doc": doc})


def read_group(cls: type[Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The values of `cls`'s fields, each from its variable in `env`."""
    values = {}
    for field in (each for each in dataclasses.fields(cls) if "variable" in each.metadata):
        raw = (env.get(field.metadata["variable"]) or "").strip()
        values[field.name] = field.metadata["parse"](field.metadata["variable"], raw) if raw else field.default
    return values


# --- the chat page's own text, colour and logo: shown to every user, so checked as strictly as a title -----------

BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
COLOUR = re.compile(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})")
MAX_PROMPTS = 4
LOGO_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
              ".gif": "image/gif", ".svg": "image/svg+xml"}  # fmt: skip
MAX_LOGO_BYTES = 128 * 1024  # it travels inside the page, as a data: URL


def shown_text(limit: int) -> Parse:
    """Text shown on the page: at most `limit` characters, no control or direction-override character."""

    def parse(name: str, raw: str) -> str:
        if len(raw) > limit:
            raise ConfigurationError(f"{name} is {len(raw)} characters; at most {limit}")
        if any(unicodedata.category(c) in ("Cc", "Cs") or c in BIDI_CONTROLS for c in raw):
            raise ConfigurationError(f"{name} must not hold control characters or direction overrides")
        return raw

    return parse


def prompts(name: str, raw: str) -> tuple[str, ...]:
    """Up to MAX_PROMPTS suggested prompts, separated by `|`."""
    found = tuple(prompt.strip() for prompt in raw.split("|") if prompt.strip())
    if len(found) > MAX_PROMPTS:
        raise ConfigurationError(f"{name} names {len(found)} prompts (separated by |); at most {MAX_PROMPTS}")
    return tuple(shown_text(200)(name, prompt) for prompt in found)


def colour(name: str, raw: str) -> str:
    if not COLOUR.fullmatch(raw):
        raise ConfigurationError(f"{name}={raw!r} must be a colour as #rgb or #rrggbb")
    return raw.lower()


def image_file(name: str, raw: str) -> str:
    """An image file (relative to the directory the app starts in), as the data: URL the page shows it by."""
    path = Path(raw)
    kind = LOGO_TYPES.get(path.suffix.lower())
    if kind is None:
        raise ConfigurationError(f"{name}={raw!r} must be a {', '.join(sorted(LOGO_TYPES))} file")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConfigurationError(f"{name}={raw!r} cannot be read: {error.strerror or error}") from None
    if len(data) > MAX_LOGO_BYTES:
        raise ConfigurationError(f"{name}={raw!r} is {len(data)} bytes; at most {MAX_LOGO_BYTES}")
    return f"data:{kind};base64,{base64.b64encode(data).decode()}"
