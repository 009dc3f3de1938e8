# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The caller's long-term memories (facts.py) over HTTP: see them and delete them.

    GET    /memories        {"enabled": bool, "memories": [{"id", "text", "created_at"}], "max_facts", "max_bytes"},
                            newest first; `enabled`: whether the agent remembers (LONG_TERM_MEMORY)
    DELETE /memories/{id}   204
    DELETE /memories        {"deleted": n}

Each answers for the caller's own facts only (identity.owner_of): another identity's id is a 404, as is an id that does
not exist. They answer with LONG_TERM_MEMORY off too, so a user can still see and delete what was kept while it was
on. With memory off (MEMORY_BACKEND=none) each is a 404 that says nothing is kept.
"""

from __future__ import annotations

import functools

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from agent_server.errors import NotFound
from agent_server.memory import facts
from agent_server.memory.api import for_caller
from agent_server.memory.database import store
from agent_server.memory.long_term import enabled as long_term_enabled
from agent_server.store.settings import memory_settings

router = APIRouter(prefix="/memories", include_in_schema=False)
LISTED = 1000  # more than LONG_TERM_MEMORY_MAX_FACTS allows is never kept for long


@router.get("")
async def list_memories(request: Request) -> Response:
    async def answer(owner: str) -> Response:
        found = await (await store()).run(functools.partial(facts.newest, owner, LISTED))
        current = memory_settings()
        return JSONResponse(
            {
                "enabled": long_term_enabled(),
                "memories": [fact.shown() for fact in found],
                "max_facts": current.max_facts,
                "max_bytes": current.max_fact_bytes,
            }
        )

    return await for_caller(request, answer, "memories", "Memory")


@router.delete("/{memory_id}")
async def delete_memory(memory_id: str, request: Request) -> Response:
    async def answer(owner: str) -> Response:
        number = int(memory_id) if memory_id.isascii() and memory_id.isdigit() and len(memory_id) < 19 else None
        if number is not None and await (await store()).run(functools.partial(facts.forget, owner, number), True):
            return Response(status_code=204)
        raise NotFound("You have no memory by that id.")

    return await for_caller(request, answer, "memories", "Memory")


@router.delete("")
async def delete_memories(request: Request) -> Response:
    async def answer(owner: str) -> Response:
        return JSONResponse({"deleted": await (await store()).run(functools.partial(facts.forget_all, owner), True)})

    return await for_caller(request, answer, "memories", "Memory")
