# Owned by the template: changes here are overwritten by `copier update`. Put your own cases in evals/cases.yaml.
"""What each turn is scored on: MLflow scorers, the deterministic ones always, the judges with a judge model.

| scorer | on | passes when | runs |
|---|---|---|---|
| turn_succeeded | each turn | the app answered it with no error | always |
| expected_tools | each turn with `tools` | each expected tool was called (with the given arguments) | always |
| required_text | each turn with `contains`/`not_contains` | the answer holds each, and none of the others | always |
| latency | each turn with `max_seconds` | the turn took no longer | always |
| correctness | each turn with `reference` | the judge finds the reference's content in the answer | with a judge |
| follows_guidelines | each turn with `guidelines` | the judge finds the answer meets each | with a judge |
| conversation_completeness, knowledge_retention | each case, as a whole | as MLflow's judges say | with a judge |

A scorer with nothing to check on a turn returns None, which MLflow records as no assessment: a pass rate
counts only the turns that had something to check. Every value is True/False, or the judges' "yes"/"no".
The scorers read what the evaluation recorded on each turn's trace (conversation.py): the answer as the
trace's outputs, the turn's error and seconds as attributes of its root span.
"""

from __future__ import annotations

import json
from typing import Any

from mlflow.entities import Feedback
from mlflow.genai.scorers import scorer

ERROR_ATTRIBUTE = "evaluate.error"
SECONDS_ATTRIBUTE = "evaluate.seconds"
TURN_ATTRIBUTE = "evaluate.turn"  # the turn's own id: MLflow scores a copy of each trace, with an id of its own
PASSING = (True, "yes")


def answer_items(outputs: Any) -> list[dict[str, Any]]:
    items = outputs.get("output") if isinstance(outputs, dict) else None
    return [item for item in items or [] if isinstance(item, dict)]


def answer_text(outputs: Any) -> str:
    """The text of the answer's messages."""
    return "\n".join(
        part.get("text") or ""
        for item in answer_items(outputs)
        if item.get("type") == "message"
        for part in item.get("content") or []
        if isinstance(part, dict)
    )


def tool_calls(outputs: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, arguments) of each tool the answer called: function tools and MCP tools alike."""
    calls = []
    for item in answer_items(outputs):
        if item.get("type") in ("function_call", "mcp_call", "mcp_approval_request"):
            try:
                arguments = json.loads(item.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            calls.append((str(item.get("name")), arguments if isinstance(arguments, dict) else {}))
    return calls


def root_attribute(trace: Any, name: str) -> Any:
    root = trace.data._get_root_span() if trace is not None else None
    return root.get_attribute(name) if root is not None else None


@scorer
def turn_succeeded(trace: Any) -> Feedback:
    error = root_attribute(trace, ERROR_ATTRIBUTE)
    if error:
        return Feedback(value=False, rationale=f"The turn failed: {error}")
    return Feedback(value=True, rationale="The app answered the turn.")


@scorer
def expected_tools(outputs: Any, expectations: dict[str, Any]) -> Feedback | None:
    wanted = (expectations or {}).get("tools") or []
    if not wanted:
        return None
    called = tool_calls(outputs)
    for tool in wanted:
        arguments = tool.get("arguments") or {}
        if not any(name == tool["name"] and _holds(args, arguments) for name, args in called):
            named = tool["name"] + (f" with {json.dumps(arguments)}" if arguments else "")
            said = ", ".join(f"{name}({json.dumps(args)})" for name, args in called) or "no tool"
            return Feedback(value=False, rationale=f"Expected a call to {named}; the agent called {said}.")
    return Feedback(value=True, rationale=f"Called {', '.join(tool['name'] for tool in wanted)}.")


def _holds(arguments: dict[str, Any], expected: dict[str, Any]) -> bool:
    return all(key in arguments and arguments[key] == value for key, value in expected.items())


@scorer
def required_text(outputs: Any, expectations: dict[str, Any]) -> Feedback | None:
    contains, not_contains = (expectations or {}).get("contains") or [], (expectations or {}).get("not_contains") or []
    if not contains and not not_contains:
        return None
    said = answer_text(outputs)
    text = said.casefold()
    if missing := [wanted for wanted in contains if wanted.casefold() not in text]:
        return Feedback(value=False, rationale=f"The answer does not contain {missing[0]!r}: {_short(said)}")
    if present := [unwanted for unwanted in not_contains if unwanted.casefold() in text]:
        return Feedback(value=False, rationale=f"The answer contains {present[0]!r}: {_short(said)}")
    return Feedback(value=True, rationale="The answer holds the text it must, and none it must not.")


@scorer
def latency(trace: Any, expectations: dict[str, Any]) -> Feedback | None:
    bound = (expectations or {}).get("max_seconds")
    seconds = root_attribute(trace, SECONDS_ATTRIBUTE)
    if bound is None or seconds is None:
        return None
    took = f"The turn took {float(seconds):.2f} s (at most {bound} s)."
    return Feedback(value=float(seconds) <= float(bound), rationale=took)


def _short(text: str, limit: int = 160) -> str:
    return repr(text[:limit] + ("…" if len(text) > limit else ""))


DETERMINISTIC = (turn_succeeded, expected_tools, required_text, latency)


def judges(model: str) -> list[Any]:
    """MLflow's built-in judges on `model` (as MLflow names one: `openai:/gpt-4.1-mini`), each run only on the turns
    (or cases) it applies to."""
    from mlflow.genai.scorers import ConversationCompleteness, Correctness, ExpectationsGuidelines, KnowledgeRetention

    correctness_judge, guidelines_judge = Correctness(model=model), ExpectationsGuidelines(model=model)

    @scorer
    def correctness(inputs: Any, outputs: Any, expectations: dict[str, Any]) -> Any:
        if not (expectations or {}).get("expected_response"):
            return None
        reference = {"expected_response": expectations["expected_response"]}
        return _named("correctness", correctness_judge(inputs=inputs, outputs=outputs, expectations=reference))

    @scorer  # not named `guidelines`: MLflow's result table names the expectation's column so
    def follows_guidelines(inputs: Any, outputs: Any, expectations: dict[str, Any]) -> Any:
        if not (expectations or {}).get("guidelines"):
            return None
        held_to = {"guidelines": expectations["guidelines"]}
        return _named("follows_guidelines", guidelines_judge(inputs=inputs, outputs=outputs, expectations=held_to))

    return [
        correctness,
        follows_guidelines,
        ConversationCompleteness(model=model, name="conversation_completeness"),
        KnowledgeRetention(model=model, name="knowledge_retention"),
    ]


def _named(name: str, feedback: Any) -> Any:
    """The judge's feedback under this scorer's name (MLflow would keep the judge's own, such as
    `expectations_guidelines`)."""
    if isinstance(feedback, Feedback):
        feedback.name = name
    return feedback


def passed(value: Any) -> bool | None:
    """Whether a scorer's value is a pass; None for no value (the scorer had nothing to check)."""
    if value is None or (isinstance(value, float) and value != value):  # NaN: no assessment on this row
        return None
    return value in PASSING
