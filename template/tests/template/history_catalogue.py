# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The history shapes clients really send, and what the render step makes of each, read from history_catalogue.yaml.

This is test data (tests/template/test_history_catalogue.py sends every shape through the real
server, both API modes, streaming and not) and the source of docs/history-shapes.md
(tests/template/history_shapes_doc.py writes it). The shapes are data, so they live in the YAML file beside this
one; this module says what their fields mean. After changing a shape, regenerate the doc:

    uv run python tests/template/history_shapes_doc.py > docs/history-shapes.md
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent_server.history import API_MODES


@dataclass(frozen=True)
class Shape:
    """One history shape: who sends it, what it looks like, and its render.

    `history` is what the client sends before its next user message. `render` is what
    `render_history` returns for it in both API modes, unless `chat_completions` says
    otherwise for that mode. `error` is the HistoryError text instead of a render (in
    the modes `error_modes` lists): the endpoint answers it as a 400 naming the item.
    """

    name: str
    client: str
    note: str
    history: list[dict[str, Any]]
    render: list[dict[str, Any]] | None = None
    chat_completions: list[dict[str, Any]] | None = None
    error: str | None = None
    error_modes: tuple[str, ...] = API_MODES
    group: str = "Clients"

    def expected(self, api: str) -> list[dict[str, Any]] | None:
        """The render in API mode `api`, or None where the shape is an error."""
        if self.error is not None and api in self.error_modes:
            return None
        if api == "chat_completions" and self.chat_completions is not None:
            return self.chat_completions
        return self.render


# --- Conversation memory: what a client sends, merged with what is stored (agent_server/memory/merge.py) ---


@dataclass(frozen=True)
class MergeCase:
    name: str
    client: str  # who sends it
    note: str
    stored: list[dict[str, Any]]  # the conversation's stored items (as the render stores them)
    sent: list[dict[str, Any]]  # the request's `input`, with the conversation's id in `context.conversation_id`
    kind: str  # merge.merge's answer: replaced, new conversation, extends, window, new turn or diverged


CATALOGUE = yaml.safe_load(Path(__file__).with_name("history_catalogue.yaml").read_text(encoding="utf-8"))
TIME: str = CATALOGUE["values"]["time"]
CLIENT_TOOL_ERROR: str = CATALOGUE["values"]["client_tool_error"]
SHAPES = [
    Shape(**{**fields, "error_modes": tuple(fields.get("error_modes", API_MODES))}) for fields in CATALOGUE["shapes"]
]
SHAPES_BY_NAME = {shape.name: shape for shape in SHAPES}
assert len(SHAPES_BY_NAME) == len(SHAPES), "shape names must be unique"
MERGES = [MergeCase(**fields) for fields in CATALOGUE["merges"]]


# Items as the tests that build their own histories write them (tests/template/test_repairs.py).
def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def call(call_id: str = "call_1", arguments: str = "{}") -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "get_current_time", "arguments": arguments}


def output(call_id: str = "call_1", text: str = TIME) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}
