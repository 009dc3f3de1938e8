# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The render boundary: chat history in whatever shape a client sent, out as
items that every supported openai-agents version accepts in both API modes.

Why a render step (measured on openai-agents 0.4-0.24, mlflow 3.5-3.17):
- MLflow's `ResponsesAgentRequest` drops the `id` of assistant messages and adds
  `"status": None`; openai-agents >= 0.19 then rejects the item in chat-completions mode
  (`UserError: Unhandled item type or structure`), on every later turn.
- In Responses mode the SDK forwards items untouched, so a null `status`, a client-made id
  or a chat-completions-shaped message reaches the API as is, and gets a 400.
- Real clients replay what they were sent, in their own shapes, and break tool pairing in
  ways they repeat on every later turn: a history refused once is refused forever.

So each item is rewritten into the one shape both modes accept, and what a real
conversation breaks is repaired; only what no conversation could produce is a
HistoryError, a 400 that names the item. Stdlib only, on purpose, so the rules can be
read and tested on their own. docs/history-shapes.md shows every shape real clients send
and its render (tests/template/history_catalogue.py).

The package, one job a module:
- render.py: each item on its own (render_each), and the whole history (render_history);
- content_parts.py: message content (text, refusals, images, files) as both APIs name it;
- tool_pairs.py: one output per tool call, and the repairs of real conversations that break that;
- approvals.py: the signed, stateless approval of tool calls that ask the user first;
- errors.py: HistoryError, and how a client's value is named in its message.
"""

from __future__ import annotations

from agent_server.config import API_MODES, ApiMode
from agent_server.history.errors import HistoryError, json_type
from agent_server.history.render import render_each, render_history, render_with_sources
from agent_server.history.tool_pairs import INTERRUPTED_CALL_OUTPUT, Rendered, pair_calls_with_outputs

__all__ = [
    "API_MODES",
    "INTERRUPTED_CALL_OUTPUT",
    "ApiMode",
    "HistoryError",
    "Rendered",
    "json_type",
    "pair_calls_with_outputs",
    "render_each",
    "render_history",
    "render_with_sources",
]
