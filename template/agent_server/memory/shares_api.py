# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Share links over HTTP (shares.py), off unless SHARE_LINKS=true: every route is a 404 while it is off.

    POST   /conversations/{id}/shares  {"shown_name": "..."} -> 201 {"id", "conversation_id", "title", "shown_name",
                                       "created_at", "token", "url"}: a link to a snapshot of the conversation as it
                                       is now; the token and url are in this answer only
    GET    /shares                     {"shares": [{"id", "conversation_id", "title", "shown_name", "created_at"}]}
    DELETE /shares/{id}                204: revoked
    GET    /shared/{token}             {"title", "shown_name", "created_at", "items"}: the snapshot, read-only, for
                                       anyone the app lets in (the chat page shows it at /s/{token})
    POST   /shared/{token}/continue    201 {"id"}: a new conversation of the caller's own, holding the snapshot

The owner's routes answer for the caller's own conversations and links only. A token that names no snapshot
(revoked, its conversation deleted, made up) is a 404 that says nothing of what was there. A token gives read
access to its snapshot and nothing more: no route that changes a conversation takes one. Tokens are never logged
(observability/logs.py drops them from the access log).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from agent_server import config, llm
from agent_server.errors import NotFound, quoted
from agent_server.json_body import one_text_field, small_json
from agent_server.memory import shares
from agent_server.memory.api import for_caller, waiting_shown
from agent_server.memory.database import store

router = APIRouter(include_in_schema=False)
MAX_SHOWN_NAME = 80  # store/share_schema.py's column
NOT_SHARED = "Nothing is shared at this link."


async def on(request: Request, answer: Callable[[str], Awaitable[Response]]) -> Response:
    """`answer` for the caller, with share links on (and memory: api.for_caller); a 404 while SHARE_LINKS is off."""
    if not config.settings().memory.share_links:
        raise NotFound("This app has no share links (SHARE_LINKS is off).")
    return await for_caller(request, answer, "share links")


@router.post("/conversations/{conversation_id}/shares")
async def share(conversation_id: str, request: Request) -> Response:
    async def answer(owner: str) -> Response:
        shown_name = checked_name(await small_json(request, 4096, "share"))
        made = await (await store()).run(functools.partial(shares.create, owner, conversation_id, shown_name), True)
        if made is None:
            raise NotFound(f"You have no conversation {quoted(conversation_id)}.")
        return JSONResponse({**made, "url": f"/s/{made['token']}"}, status_code=201)

    return await on(request, answer)


def checked_name(body: Any) -> str:
    """The shown name of a new link's body, its ends stripped; BadRequest naming what is wrong."""
    return one_text_field(body, "shown_name", MAX_SHOWN_NAME, "the name viewers of the link see")


@router.get("/shares")
async def list_shares(request: Request) -> Response:
    async def answer(owner: str) -> Response:
        return JSONResponse({"shares": await (await store()).run(functools.partial(shares.of_owner, owner))})

    return await on(request, answer)


@router.delete("/shares/{share_id}")
async def revoke(share_id: str, request: Request) -> Response:
    async def answer(owner: str) -> Response:
        if not await (await store()).run(functools.partial(shares.revoke, owner, share_id), write=True):
            raise NotFound(f"You have no share link {quoted(share_id)}.")
        return Response(status_code=204)

    return await on(request, answer)


@router.get("/shared/{token}")
async def view(token: str, request: Request) -> Response:
    async def answer(_viewer: str) -> Response:
        found = await (await store()).run(functools.partial(shares.read, token))
        if found is None:
            raise NotFound(NOT_SHARED)
        stored = [{**each.item, "id": each.item_id} if each.item_id else each.item for each in found.items]
        items = [entry.item for entry in waiting_shown(stored, llm.llm_settings().api)]
        shown = {"title": found.title, "shown_name": found.shown_name, "created_at": found.created_at, "items": items}
        return JSONResponse(shown, headers={"cache-control": "no-store", "referrer-policy": "no-referrer"})

    return await on(request, answer)


@router.post("/shared/{token}/continue")
async def continue_in_new_chat(token: str, request: Request) -> Response:
    async def answer(viewer: str) -> Response:
        def copy(connection: Any) -> str | None:
            found = shares.read(token, connection)
            return None if found is None else shares.copy_to(viewer, found, connection)

        copied = await (await store()).run(copy, write=True)
        if copied is None:
            raise NotFound(NOT_SHARED)
        return JSONResponse({"id": copied}, status_code=201)

    return await on(request, answer)
