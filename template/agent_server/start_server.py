# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The web app: MLflow's AgentServer with the request guard, and the `start-app` command."""

from __future__ import annotations

import argparse
import logging
import os
import sys

import uvicorn
from agents import set_tracing_disabled
from mlflow.genai.agent_server import AgentServer

import agent_server.handlers  # noqa: F401  (registers the @invoke and @stream handlers)
from agent_server import llm
from agent_server.request_guard import RequestGuard

# The SDK's own tracing exports to OpenAI's servers; this app traces with MLflow instead.
set_tracing_disabled(True)

agent_server = AgentServer("ResponsesAgent")
app = agent_server.app
app.add_middleware(RequestGuard)

logger = logging.getLogger(__name__)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="start-app", description="Serve the agent on /invocations.")
    default_port = int(os.environ.get("DATABRICKS_APP_PORT") or os.environ.get("PORT") or 8000)
    parser.add_argument("--host", default=os.environ.get("HOST", "0.0.0.0"))
    parser.add_argument("--port", type=int, default=default_port, help="default: $DATABRICKS_APP_PORT, $PORT or 8000")
    parser.add_argument("--workers", type=int, default=1)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        current = llm.check_configuration()
    except llm.ConfigurationError as error:
        sys.exit(f"start-app: {error}")
    print(f"start-app: {current.provider} model {current.model!r} over {current.api} on port {args.port}", flush=True)
    uvicorn.run("agent_server.start_server:app", host=args.host, port=args.port, workers=args.workers)


if __name__ == "__main__":
    main()
