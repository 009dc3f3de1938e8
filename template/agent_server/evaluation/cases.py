# Owned by the template: changes here are overwritten by `copier update`. Put your own cases in evals/cases.yaml.
"""The evaluation set: evals/cases.yaml (or a .jsonl file, one case a line), read and checked.

    thresholds:            # optional: a scorer whose pass rate (0 to 1) is below its threshold fails the run
      correctness: 0.8
    cases:
      - name: tells-the-time
        goal: The user wants to know the time.       # optional: what `--simulate` plays the user for
        turns:                                       # one conversation, sent turn by turn
          - user: What time is it?
            expect:                                  # every key optional
              tools: [get_current_time]              # called this turn: a name, or {name, arguments}
              contains: ["The tool returned"]        # text the answer must hold (case-insensitive)
              not_contains: ["sorry"]                # and must not
              reference: "The tool returned"         # what a correct answer says (the correctness judge)
              guidelines: ["States the time"]        # what the guidelines judge holds the answer to
              max_seconds: 30                        # the turn's latency bound
          - user: What is my name?
            new_conversation: true                   # optional: this turn opens a new conversation, same user

A mistake in the file is an EvaluationSetError that names the file and the place: `cases[1].turns[0].expect.tool:
unknown key`. Read with pydantic, so every key is checked and none is silently ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

DEFAULT_PATH = Path("evals/cases.yaml")
LISTED = BeforeValidator(lambda value: tuple(value) if isinstance(value, list) else value)  # YAML's lists: tuples


class EvaluationSetError(ValueError):
    """The evaluation set cannot be read; the message names the file and what is wrong where."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ToolExpectation(Strict):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None  # each given argument must have this value; None: any arguments


class Expectations(Strict):
    tools: tuple[ToolExpectation, ...] = ()
    contains: tuple[str, ...] = ()
    not_contains: tuple[str, ...] = ()
    reference: str | None = Field(default=None, min_length=1)
    guidelines: tuple[str, ...] = ()
    max_seconds: float | None = Field(default=None, gt=0)

    @field_validator("tools", mode="before")
    @classmethod
    def _named_tools(cls, value: Any) -> Any:
        """A tool given by its name alone is {name: ...}."""
        if isinstance(value, list):
            return tuple({"name": tool} if isinstance(tool, str) else tool for tool in value)
        return value

    @field_validator("contains", "not_contains", "guidelines", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else tuple(value) if isinstance(value, list) else value


class CaseTurn(Strict):
    user: str = Field(min_length=1)
    expect: Expectations = Expectations()
    new_conversation: bool = False  # a new chat of the same user: what long-term memory carries across


class Case(Strict):
    name: str = Field(min_length=1, max_length=120)
    turns: Annotated[tuple[CaseTurn, ...], LISTED] = Field(min_length=1)
    goal: str | None = None
    persona: str | None = None

    @field_validator("turns")
    @classmethod
    def _first_opens(cls, value: tuple[CaseTurn, ...]) -> tuple[CaseTurn, ...]:
        if value and value[0].new_conversation:
            raise ValueError("the first turn's new_conversation: the first turn opens the case's conversation already")
        return value


class EvaluationSet(Strict):
    cases: Annotated[tuple[Case, ...], LISTED] = Field(min_length=1)
    thresholds: dict[str, float] = {}
    source: str = ""

    @field_validator("thresholds")
    @classmethod
    def _rates(cls, value: dict[str, float]) -> dict[str, float]:
        for name, threshold in value.items():
            if not 0 <= threshold <= 1:
                raise ValueError(f"the threshold of {name!r} is {threshold}: a pass rate, between 0 and 1")
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> EvaluationSet:
        names = [case.name for case in self.cases]
        if twice := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(f"two cases are named {twice[0]!r}: each case needs a name of its own")
        return self


def load(*paths: Path) -> EvaluationSet:
    """The cases of every file, in order, and the thresholds of all of them (a later file's win)."""
    cases: list[Any] = []
    thresholds: dict[str, Any] = {}
    for path in paths:
        document = _read(path)
        found, rates = document.get("cases"), document.get("thresholds")
        if found is not None and not isinstance(found, list):
            raise EvaluationSetError(f"{path}: 'cases' must be a list of cases, not {_kind(found)}.")
        if rates is not None and not isinstance(rates, dict):
            raise EvaluationSetError(
                f"{path}: 'thresholds' must map scorer names to pass rates (such as latency: 1), not {_kind(rates)}."
            )
        cases.extend(found or [])
        thresholds.update(rates or {})
    where = ", ".join(str(path) for path in paths)
    try:
        return EvaluationSet.model_validate({"cases": cases, "thresholds": thresholds, "source": where})
    except ValidationError as error:
        raise EvaluationSetError(f"{where}: {_described(error)}") from None


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EvaluationSetError(
            f"{path}: no such file. Add your cases there (see docs/traces-and-evaluation.md), or name the file "
            "with --cases."
        ) from None
    except IsADirectoryError:
        raise EvaluationSetError(f"{path}: a directory, not a cases file (.yaml, or .jsonl).") from None
    except UnicodeDecodeError as error:
        raise EvaluationSetError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start}).") from None
    except OSError as error:  # no permission, and the rest
        raise EvaluationSetError(f"{path}: cannot be read: {error.strerror or error}.") from None
    try:
        if path.suffix == ".jsonl":
            return {"cases": [json.loads(line) for line in text.splitlines() if line.strip()]}
        import yaml

        document = yaml.safe_load(text)
    except (ValueError, ImportError) as error:
        raise EvaluationSetError(
            f"{path}: not valid {'JSON lines' if path.suffix == '.jsonl' else 'YAML'}: {error}"
        ) from None
    except Exception as error:  # yaml.YAMLError: its subclasses say where
        raise EvaluationSetError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(document, dict):
        raise EvaluationSetError(f"{path}: the file must hold a mapping with a 'cases' list.")
    return document


def _kind(value: Any) -> str:
    """A YAML value's kind, as the file's author knows it."""
    if isinstance(value, bool):
        return "true or false"
    kinds = {int: "a number", float: "a number", str: "text", dict: "a mapping", list: "a list"}
    return next((kind for known, kind in kinds.items() if isinstance(value, known)), type(value).__name__)


def _described(error: ValidationError) -> str:
    """Each problem on a line, at its place: `cases[1].turns[0].expect.tool: unknown key`. A problem with a list
    that only echoes one inside it (a list left empty by its bad item) is left out."""
    problems = error.errors()
    places = [tuple(problem["loc"]) for problem in problems]
    lines = []
    for problem, loc in zip(problems, places, strict=True):
        if any(len(other) > len(loc) and other[: len(loc)] == loc for other in places):
            continue
        place = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
        message = "unknown key" if problem["type"] == "extra_forbidden" else problem["msg"]
        lines.append(f"{place or 'the file'}: {message}")
    return "; ".join(lines)
