# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The ASGI app: MLflow's AgentServer with the request guard in front of it."""

from __future__ import annotations

from agents import set_tracing_disabled
from mlflow.genai.agent_server import AgentServer

import agent_server.handlers  # noqa: F401  (registers the @invoke and @stream handlers)
from agent_server.request_guard import RequestGuard

# The SDK's own tracing exports to OpenAI's servers; this app traces with MLflow instead.
set_tracing_disabled(True)

agent_server = AgentServer("ResponsesAgent")
app = agent_server.app
app.add_middleware(RequestGuard)
