"""A stand-in Databricks workspace on loopback, for rehearsing a deploy with no network.

Run it with a rendered app's own Python, since it answers with that app's strict offline model:

    APP/.venv/bin/python tests/fake_workspace.py --port N --client-id ID --client-secret SECRET

It serves what databricks-sdk's OAuth M2M flow and the app's `databricks` provider use:
- GET  /.well-known/databricks-config               host metadata: where the OIDC endpoints are
- GET  /oidc/.well-known/oauth-authorization-server  OIDC discovery
- POST /oidc/v1/token                                client credentials: checks the client, issues
                                                     tokens that expire after --expires-in seconds
- POST /serving-endpoints/chat/completions           checks the bearer token (issued by us and not
- POST /serving-endpoints/responses                  expired, or --user-token), then lets the strict
                                                     offline model answer
- GET  /api/2.0/serving-endpoints/{name}             a serving endpoint: READY, except that a name starting
                                                     `missing-` does not exist (404) and `pending-` is NOT_READY
- POST /api/2.0/mcp/functions/main/tools            a managed MCP server (the app's own test MCP server,
                                                     tests/template/support.py), behind the same token check
- POST /api/2.0/database/credentials                 a Lakebase database token (checks the bearer token): with
                                                     --postgres-admin-url, it becomes the password of the
                                                     role --lakebase-role on that real PostgreSQL server,
                                                     so the token before it stops working; it expires after
                                                     --database-token-seconds
- GET  /api/2.0/mlflow/experiments/get               --experiment-id, the one experiment it knows
- POST /api/3.0/mlflow/traces                        MLflow's start of a trace export, recorded
- GET  /fake/log                                     every request it saw, for the test to read
Anything else gets a 404 in Databricks' error shape (the rest of MLflow's trace upload lands there).
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from agent_server.offline import create_offline_app
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

sys.path.insert(0, str(Path.cwd() / "tests" / "template"))  # run from the app's folder: its test helpers
from support import mcp_tool_server  # noqa: E402

MCP_PATH = "/api/2.0/mcp/functions/main/tools"


def create_app(
    client_id: str, client_secret: str, expires_in: int, user_token: str, experiment_id: str, lakebase: Any = None
) -> Any:
    tools = mcp_tool_server(MCP_PATH)
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None, lifespan=tools.lifespan)
    experiment = experiment_id
    issued: dict[str, dict[str, Any]] = {}  # access token -> {"label": "m2m-1", "expires_at": ...}
    log: list[dict[str, Any]] = []
    offline = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_offline_app()), base_url="http://offline")

    def host(request: Request) -> str:
        return str(request.base_url).rstrip("/")

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Response:
        entry: dict[str, Any] = {"method": request.method, "path": request.url.path}
        request.state.entry = entry
        response = await call_next(request)
        log.append({**entry, "status": response.status_code})
        return response

    @app.get("/.well-known/databricks-config")
    async def host_metadata(request: Request) -> dict[str, Any]:
        return {"oidc_endpoint": f"{host(request)}/oidc", "workspace_id": "1234567890123456"}

    @app.get("/oidc/.well-known/oauth-authorization-server")
    async def discovery(request: Request) -> dict[str, Any]:
        base = f"{host(request)}/oidc"
        return {
            "issuer": base,
            "authorization_endpoint": f"{base}/v1/authorize",
            "token_endpoint": f"{base}/v1/token",
        }

    @app.post("/oidc/v1/token")
    async def token(request: Request) -> Response:
        form = await request.form()
        if form.get("grant_type") != "client_credentials" or _basic_auth(request) != (client_id, client_secret):
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        access_token = secrets.token_urlsafe(24)
        label = f"m2m-{sum(1 for t in issued.values() if t['label'].startswith('m2m')) + 1}"
        issued[access_token] = {"label": label, "expires_at": time.time() + expires_in}
        request.state.entry["issued"] = label
        return JSONResponse({"access_token": access_token, "token_type": "Bearer", "expires_in": expires_in})

    def authorised(request: Request) -> bool:
        return token_ok(request.headers.get("authorization", ""), request.state.entry)

    def token_ok(authorization: str, entry: dict[str, Any]) -> bool:
        """Records which token the request carried; False for one we did not issue, or that expired."""
        bearer = authorization.removeprefix("Bearer ")
        if bearer and bearer == user_token:
            entry["token"] = "user"
        elif bearer in issued and time.time() < issued[bearer]["expires_at"]:
            entry["token"] = issued[bearer]["label"]
        else:
            entry["token"] = "expired" if bearer in issued else "unknown"
            return False
        return True

    async def serve(request: Request, path: str) -> Response:
        if not authorised(request):
            return _error(401, "UNAUTHENTICATED", "Invalid or expired access token.")
        body = await request.body()
        request.state.entry["model"] = json.loads(body).get("model")
        answer = await offline.post(path, content=body, headers={"content-type": "application/json"})
        return Response(answer.content, answer.status_code, media_type=answer.headers.get("content-type"))

    @app.post("/serving-endpoints/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await serve(request, "/v1/chat/completions")

    @app.post("/serving-endpoints/responses")
    async def responses(request: Request) -> Response:
        return await serve(request, "/v1/responses")

    @app.get("/api/2.0/serving-endpoints/{name}")
    async def serving_endpoint(request: Request, name: str) -> Response:
        if not authorised(request):
            return _error(401, "UNAUTHENTICATED", "Invalid or expired access token.")
        if name.startswith("missing-"):
            return _error(404, "RESOURCE_DOES_NOT_EXIST", f"Endpoint with name '{name}' does not exist.")
        ready = "NOT_READY" if name.startswith("pending-") else "READY"
        return JSONResponse({"name": name, "state": {"ready": ready, "config_update": "NOT_UPDATING"}})

    @app.post("/api/2.0/database/credentials")
    async def database_credential(request: Request) -> Response:
        if not authorised(request):
            return _error(401, "UNAUTHENTICATED", "Invalid or expired access token.")
        if lakebase is None:
            return _error(404, "RESOURCE_DOES_NOT_EXIST", "No Lakebase instance here.")
        body = await request.json()
        request.state.entry["instances"] = body.get("instance_names")
        token = "lakebase-" + secrets.token_hex(16)
        await lakebase.set_password(token)
        expires = time.time() + lakebase.lifetime
        expiration_time = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))
        return JSONResponse({"token": token, "expiration_time": expiration_time})

    @app.get("/api/2.0/mlflow/experiments/get")
    async def get_experiment(experiment_id: str) -> Response:
        if experiment_id != experiment:
            return _error(404, "RESOURCE_DOES_NOT_EXIST", f"Node ID {experiment_id} does not exist.")
        found = {"experiment_id": experiment, "name": "/Users/app/traces", "lifecycle_stage": "active"}
        return JSONResponse({"experiment": found})

    @app.post("/api/3.0/mlflow/traces")
    async def start_trace(request: Request) -> Response:
        body = await request.json()
        request.state.entry["trace"] = body
        return JSONResponse({"trace": {"trace_info": body["trace"]["trace_info"]}})

    @app.get("/fake/log")
    async def read_log() -> list[dict[str, Any]]:
        return [entry for entry in log if entry["path"] != "/fake/log"]

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def not_found(path: str) -> Response:
        return _error(404, "ENDPOINT_NOT_FOUND", f"No API found for '/{path}'")

    async def workspace(scope: Any, receive: Any, send: Any) -> None:
        """The managed MCP server's requests go straight to it (it streams), after the token check."""
        if scope["type"] != "http" or scope["path"] != MCP_PATH:
            await app(scope, receive, send)
            return
        entry: dict[str, Any] = {"method": scope["method"], "path": MCP_PATH}
        headers = {key.decode(): value.decode() for key, value in scope["headers"]}
        if token_ok(headers.get("authorization", ""), entry):
            await tools.app(scope, receive, send)
            log.append({**entry, "status": 200})
        else:
            await _error(401, "UNAUTHENTICATED", "Invalid or expired access token.")(scope, receive, send)
            log.append({**entry, "status": 401})

    return workspace


class Lakebase:
    """The role the app logs in as, on a real PostgreSQL server: each new token becomes its password."""

    def __init__(self, admin_url: str, role: str, lifetime: int) -> None:
        self.admin_url, self.role, self.lifetime = admin_url, role, lifetime

    async def set_password(self, token: str) -> None:
        import asyncpg  # the app's own driver, in the app's Python that runs this file

        connection = await asyncpg.connect(self.admin_url)
        try:
            await connection.execute(f"ALTER ROLE \"{self.role}\" PASSWORD '{token}'")
        finally:
            await connection.close()


def _basic_auth(request: Request) -> tuple[str, str] | None:
    scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    user, _, password = base64.b64decode(encoded).decode().partition(":")
    return user, password


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error_code": code, "message": message}, status_code=status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret", required=True)
    parser.add_argument("--expires-in", type=int, default=3600, help="token lifetime in seconds")
    parser.add_argument("--user-token", default="", help="a token accepted as a signed-in user's")
    parser.add_argument("--experiment-id", default="0", help="the one MLflow experiment it knows")
    parser.add_argument("--postgres-admin-url", default="", help="a superuser's URL of a real PostgreSQL server")
    parser.add_argument("--lakebase-role", default="", help="the role whose password database tokens become")
    parser.add_argument("--database-token-seconds", type=int, default=3600, help="database token lifetime")
    args = parser.parse_args()
    user_token = args.user_token or secrets.token_hex(16)
    lakebase = None
    if args.postgres_admin_url:
        lakebase = Lakebase(args.postgres_admin_url, args.lakebase_role, args.database_token_seconds)
    app = create_app(args.client_id, args.client_secret, args.expires_in, user_token, args.experiment_id, lakebase)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
