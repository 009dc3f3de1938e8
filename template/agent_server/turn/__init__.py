# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""A turn, as plain functions of one state (turn_context.TurnContext), handed to each as an argument:

- checks.py: what a turn refuses before anything runs, and its history rendered;
- prepare.py: `prepare`, the request made a turn: checked, rendered, merged with its stored conversation;
- serve.py: `events`, the one streaming core: the agent run as the answer's events, the turn stored and ended;
- collect.py: an answer that does not stream, the stream collected;
- responses_api.py (with responses_shapes.py): /responses' answer in the OpenAI Responses API's shapes.

routes.py serves a client's turn with them, and runs/execute.py a background run's.
"""

from __future__ import annotations

from agent_server.turn.collect import collected, invocations_body
from agent_server.turn.prepare import prepare
from agent_server.turn.serve import events

__all__ = ["collected", "events", "invocations_body", "prepare"]
