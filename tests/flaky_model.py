"""The strict offline model on loopback, failing as an overloaded model server does when told to.

Run it with a rendered app's own Python, since it answers with that app's offline model:

    APP/.venv/bin/python tests/flaky_model.py --port N

and point the app at it: LLM_PROVIDER=openai, OPENAI_BASE_URL=http://127.0.0.1:N/v1 (any key and model).
- POST /v1/chat/completions, /v1/responses  the offline model's answer, or, while failures are
                                           armed, a 503 in the OpenAI error shape (one per request)
- POST /fake/fail-next?count=1             arm that many failures
- GET  /fake/log                           [{"path", "status"}] of every model request
- GET  /health                             200
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from agent_server.offline import create_offline_app
from fastapi import Request
from fastapi.responses import JSONResponse, Response

OVERLOADED = {
    "error": {
        "message": "The model is overloaded (flaky_model.py).",
        "type": "server_error",
        "param": None,
        "code": None,
    }
}


def create_app() -> Any:
    app = create_offline_app()
    state: dict[str, Any] = {"failures": 0, "log": []}

    @app.middleware("http")
    async def flaky(request: Request, call_next: Any) -> Response:
        if not request.url.path.startswith("/v1/"):
            return await call_next(request)
        if state["failures"] > 0:
            state["failures"] -= 1
            response: Response = JSONResponse(OVERLOADED, status_code=503)
        else:
            response = await call_next(request)
        state["log"].append({"path": request.url.path, "status": response.status_code})
        return response

    @app.post("/fake/fail-next")
    async def fail_next(count: int = 1) -> dict[str, int]:
        state["failures"] += count
        return {"failures": state["failures"]}

    @app.get("/fake/log")
    async def log() -> list[dict[str, Any]]:
        return state["log"]

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(create_app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
