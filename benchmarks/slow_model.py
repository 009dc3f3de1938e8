"""The app's offline model over HTTP, each model call answered a fixed time late: a model server whose latency, not
this machine's CPU, is what a turn waits on (load_balancer.py). Run it with a rendered app's own Python:

    APP/.venv/bin/python benchmarks/slow_model.py --port N --delay-seconds 1

and point the app at it: LLM_PROVIDER=openai, OPENAI_BASE_URL=http://127.0.0.1:N/v1 (any key and model).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import uvicorn
from agent_server.offline import create_offline_app
from fastapi import Request
from fastapi.responses import Response


def create_app(delay: float) -> Any:
    app = create_offline_app()

    @app.middleware("http")
    async def late(request: Request, call_next: Any) -> Response:
        if request.url.path.startswith("/v1/"):
            await asyncio.sleep(delay)
        return await call_next(request)

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay-seconds", type=float, required=True)
    args = parser.parse_args()
    uvicorn.run(create_app(args.delay_seconds), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
