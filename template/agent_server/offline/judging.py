# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The offline model as a judge: what it answers a request for structured output (a JSON schema).

MLflow's built-in judges (mlflow-skinny 3.17, mlflow/genai/judges/adapters/gateway_adapter.py) ask for
`{"result": "yes" | "no", "rationale": "..."}` through `response_format` (Chat Completions) or `text.format`
(Responses), with `strict: true`. The offline model answers with an object of exactly that schema, and a verdict
that is deterministic and means something: "no" when the prompt holds a `<claim>` that its `<document>` does
not contain (the correctness judge compares the reference answer with the agent's answer that way), else "yes".
So `uv run evaluate --judge offline` runs every judge offline, and a case whose answer lacks its reference fails.
"""

from __future__ import annotations

import json
import re
from typing import Any

OFFLINE_RATIONALE = "Offline judge: {why}"


def requested_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema the request asks the answer to follow, if it asks for one (either API)."""
    wanted = body.get("response_format") or (body.get("text") or {}).get("format") or {}
    if not isinstance(wanted, dict) or wanted.get("type") != "json_schema":
        return None
    schema = wanted.get("json_schema", wanted)  # Chat Completions nests it; Responses does not
    found = schema.get("schema") if isinstance(schema, dict) else None
    return found if isinstance(found, dict) else {}


def verdict(prompt: str) -> tuple[bool, str]:
    """(passes, why): fails only a claim its document does not contain."""
    claim, document = _tagged("claim", prompt), _tagged("document", prompt)
    if claim is None or document is None:
        return True, OFFLINE_RATIONALE.format(why="nothing it can check, so it passes.")
    if _normal(claim) in _normal(document):
        return True, OFFLINE_RATIONALE.format(why=f"the answer contains {claim!r}.")
    return False, OFFLINE_RATIONALE.format(why=f"the answer does not contain {claim!r}.")


def structured_text(schema: dict[str, Any], prompt: str) -> str:
    """The answer, as JSON text that follows `schema`."""
    passes, why = verdict(prompt)
    return json.dumps(_instance(schema, passes, why, "result"))


def _instance(schema: dict[str, Any], passes: bool, why: str, name: str) -> Any:
    if "enum" in schema:
        choices = list(schema["enum"])
        said = "yes" if passes else "no"
        return said if said in choices else choices[0 if passes else -1]
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
    if kind == "object":
        properties = schema.get("properties") or {}
        return {key: _instance(value, passes, why, key) for key, value in properties.items()}
    if kind == "array":
        return []
    if kind == "boolean":
        return passes
    if kind in ("integer", "number"):
        return int(passes)
    return ("yes" if passes else "no") if name == "result" else why


def _tagged(tag: str, text: str) -> str | None:
    found = re.search(rf"<{tag}>(.*?)</{tag}>", text, re.DOTALL)
    return found.group(1) if found else None


def _normal(text: str) -> str:
    return " ".join(text.lower().split())
