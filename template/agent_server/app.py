# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The ASGI app: its own turn routes (routes.py), the routers, the chat page at /, and small middlewares.

A request meets, in order: OneErrorShape (every error in one shape, error_responses.py), HealthCheck (GET /health
says 503 while conversations cannot be stored, health.py), BrowserGuard (no driving the agent from other web pages,
browser_guard.py), SignIn (with OIDC_ISSUER: who calls, checked, sign_in/), then its route. What a route refuses
is an HttpError, which one handler answers (`answer_http_error`). POST /invocations and /responses serve a turn
(routes.py, turn/); GET /agent/info and GET /health keep what MLflow's agent server answered there. MLflow stays
for tracing, evaluation, feedback and its types.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse

from agent_server import agent, config, mcp_servers, memory, model_choice
from agent_server.errors import HttpError, route_error
from agent_server.memory.api import router as conversations_router
from agent_server.memory.export import router as export_router
from agent_server.memory.memories_api import router as memories_router
from agent_server.memory.shares_api import router as shares_router
from agent_server.memory.your_data import router as your_data_router
from agent_server.middleware.browser_guard import BrowserGuard
from agent_server.middleware.error_responses import OneErrorShape
from agent_server.middleware.health import HealthCheck
from agent_server.observability import logs, tracing
from agent_server.observability.feedback import router as feedback_router
from agent_server.routes import routes as turn_routes
from agent_server.runs import close_runs, open_runs
from agent_server.runs.routes import router as runs_router
from agent_server.scheduling import garbage_collection
from agent_server.sign_in import SignIn
from agent_server.tools import mcp_connections
from agent_server.turn.rate_limits import share_the_loop

# Every request is traced with MLflow (locally to ./mlruns by default; see agent_server/observability/tracing.py).
tracing.configure()

logger = logging.getLogger("agent_server")


@contextlib.asynccontextmanager
async def _lifespan(served_app: Any) -> AsyncIterator[None]:
    """Conversation memory and the MCP servers' connections, opened at start-up and closed at shutdown."""
    share_the_loop()
    await memory.open_memory()
    await mcp_connections.open_connections(mcp_servers.declared(agent))
    if memory.enabled():
        await open_runs()  # runs that stopped with an earlier process resume here, with the tools connected
    try:
        async with garbage_collection.serving():  # start-up's objects frozen, full collections on a clock
            yield
    finally:
        if memory.enabled():
            await close_runs()  # before the MCP servers and the store they run on close
        await mcp_connections.close_connections()
        await memory.close_memory()
        if tracing.flushes_on_stop():
            tracing.flush()  # each worker process's own traces (start_server.py)


app = FastAPI(title="Agent Server", lifespan=_lifespan)
app.router.routes[0:0] = turn_routes  # first: the routes that serve turns are tried before every other
# The last added runs first.
app.add_middleware(SignIn)  # with OIDC_ISSUER: who calls, checked, before anything reads it (sign_in/)
app.add_middleware(BrowserGuard)
app.add_middleware(HealthCheck)
app.add_middleware(OneErrorShape)


@app.exception_handler(HttpError)
async def answer_http_error(request: Request, error: HttpError) -> JSONResponse:
    """Every route's refusals, in the one error shape (errors.py), with the status their class says."""
    if error.status >= 500:
        logger.warning("%s %s: %s (%d)", request.method, logs.logged_path(request.url.path), error, error.status)
    return route_error(error)


@app.get("/agent/info", include_in_schema=False)
async def agent_info() -> dict[str, Any]:
    """What MLflow's agent server says of the app (the Databricks Apps platform reads it)."""
    import mlflow

    name = config.settings().deployment.databricks_app_name or "mlflow_agent_server"
    return {"name": name, "use_case": "agent", "mlflow_version": mlflow.__version__, "agent_api": "responses"}


@app.get("/health", include_in_schema=False)
async def health() -> dict[str, str]:
    """Healthy (HealthCheck answers 503 first while conversations cannot be stored)."""
    return {"status": "healthy"}


app.include_router(conversations_router)
app.include_router(export_router)
app.include_router(shares_router)
app.include_router(runs_router)
app.include_router(feedback_router)
app.include_router(memories_router)
app.include_router(your_data_router)
app.include_router(model_choice.router)  # GET /models


CHAT_PAGE = (Path(__file__).parent / "chat_ui.html").read_text(encoding="utf-8")


def content_security_policy(page: str) -> str:
    """Only the page's own inline script and style run, and it talks only to this app: should markup ever
    get into the page, the browser would still run none of it nor send anything elsewhere."""

    def hashes(tag: str) -> str:
        blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", page, re.DOTALL)
        return " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(b.encode()).digest()).decode()}'" for b in blocks)

    return (
        f"default-src 'none'; script-src {hashes('script')}; style-src {hashes('style')}; connect-src 'self'; "
        "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


CHAT_PAGE_HEADERS = {"Content-Security-Policy": content_security_policy(CHAT_PAGE)}


LOOK_BLOCK = '<script type="application/json" id="look">{}</script>'  # a data block, which no page runs


@functools.lru_cache(maxsize=1)
def page_with_look(settings: config.Settings) -> str:
    """The chat page with the owner's look (CHAT_* settings) in its data block, as JSON that cannot end the block:
    the page reads it as data, and sets each value as text or a property, never as markup."""
    look, limits = settings.page, settings.attachments  # and the attachments' limits: the page checks before sending
    data = {"title": look.title, "greeting": look.greeting, "prompts": list(look.prompts), "accent": look.accent,
            "logo": look.logo, "attachments": {"max_files": limits.max_files, "max_file_bytes": limits.max_file_bytes,
            "max_turn_bytes": limits.max_turn_bytes}}  # fmt: skip
    block = json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return CHAT_PAGE.replace(LOOK_BLOCK, LOOK_BLOCK.replace("{}", block), 1)


@app.get("/", response_class=HTMLResponse, include_in_schema=False)
async def chat_page() -> HTMLResponse:
    """The chat page: markdown replies, tool blocks, and history kept the way hosted chat UIs keep it."""
    return HTMLResponse(page_with_look(config.settings()), headers=CHAT_PAGE_HEADERS)


@app.get("/c/{conversation_id}", response_class=HTMLResponse, include_in_schema=False)
async def conversation_page(conversation_id: str) -> HTMLResponse:
    """A conversation's address: the same page, which opens the conversation for its owner (a new chat for anyone
    else, with no word of whether it exists)."""
    return await chat_page()


@app.get("/s/{token}", response_class=HTMLResponse, include_in_schema=False)
async def shared_page(token: str) -> HTMLResponse:
    """A share link's address: the same page, which shows the snapshot read-only (memory/shares_api.py). No referrer
    leaves it, so the token in its address reaches no other site."""
    return HTMLResponse(
        page_with_look(config.settings()), headers={**CHAT_PAGE_HEADERS, "Referrer-Policy": "no-referrer"}
    )
