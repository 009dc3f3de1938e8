# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""One conversation, exported: `GET /conversations/{id}/export?format=markdown|json`, its owner's only.

    format=markdown (the default)  a Markdown file: the title, then each turn in order: what the user wrote (and the
                                   attachments named), the assistant's answers, each tool call with its arguments and
                                   output, and each approval request with the user's answer
    format=json                    {"id", "title", "created_at", "updated_at", "branch", "items"}: the stored items,
                                   as GET /conversations/{id} and GET /me/export give them
    branch=N                       earlier branch N (as GET /conversations/{id} lists them) instead of the current one

Without `branch` the export is the conversation's current branch: what GET /conversations/{id} shows, and what its
next turn continues. Another identity's id, or one that does not exist, is a 404 that says nothing more.
"""

from __future__ import annotations

import json
import re
from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, Request, Response

from agent_server.errors import BadRequest, NotFound, quoted
from agent_server.history import approvals
from agent_server.memory import branches, statements, turn_transactions
from agent_server.memory.api import branch_asked, for_caller
from agent_server.memory.database import store
from agent_server.store.schema import conversations
from agent_server.store.search_schema import TEXT_PARTS

router = APIRouter(prefix="/conversations", include_in_schema=False)
FORMATS = {"markdown": ("text/markdown; charset=utf-8", "md"), "json": ("application/json", "json")}


@router.get("/{conversation_id}/export")
async def export_conversation(conversation_id: str, request: Request) -> Response:
    async def answer(owner: str) -> Response:
        chosen = request.query_params.get("format", "markdown")
        if chosen not in FORMATS:
            raise BadRequest("'format' must be markdown or json.", "format")
        branch = branch_asked(request.query_params.get("branch"))
        found = await (await store()).run(lambda connection: read(connection, owner, conversation_id, branch))
        if found is None:
            raise NotFound(
                f"You have no conversation {quoted(conversation_id)}" + (f" with a branch {branch}." if branch else ".")
            )
        body = json.dumps(found, ensure_ascii=False, indent=1) if chosen == "json" else markdown(found)
        media, suffix = FORMATS[chosen]
        name = "-".join(re.findall(r"[A-Za-z0-9]+", found["title"]))[:60] or "conversation"
        headers = {"content-disposition": f'attachment; filename="{name}.{suffix}"', "cache-control": "no-store"}
        return Response(body, media_type=media, headers=headers)

    return await for_caller(request, answer)


def read(connection: sa.Connection, owner: str, conversation_id: str, branch: int | None) -> dict[str, Any] | None:
    """The conversation (or its earlier `branch`) as the JSON export gives it; None if the owner has no such one."""
    columns = (conversations.c.title, conversations.c.created_at, conversations.c.updated_at)
    row = connection.execute(sa.select(*columns).where(statements.conversation_is(owner, conversation_id))).first()
    if row is None:
        return None
    if branch is None:
        stored = turn_transactions.read_items(connection, owner, conversation_id)
    else:
        stored = branches.read(connection, owner, conversation_id, branch)
        if not stored:
            return None
    shown = [{**each.item, "id": each.item_id} if each.item_id else each.item for each in stored]
    return {"id": conversation_id, "title": row.title, "created_at": row.created_at, "updated_at": row.updated_at,
            "branch": branch, "items": shown}  # fmt: skip


def markdown(conversation: dict[str, Any]) -> str:
    """The conversation as Markdown: each turn under its speaker, tool calls and outputs in fenced blocks."""
    lines = [f"# {one_line(conversation['title']) or 'Conversation'}", ""]
    if conversation["branch"] is not None:
        lines += [f"_Earlier branch {conversation['branch']}._", ""]
    names: dict[str, str] = {}
    for item in conversation["items"]:
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") in ("user", "assistant", "system", "developer"):
            lines += [f"## {'You' if item['role'] == 'user' else item['role'].capitalize()}", ""]
            text = text_of(item.get("content"))
            lines += [text, ""] if text else []
            lines += [f"- Attached: {name}" for name in attachments(item.get("content"))]
            lines += [""] if attachments(item.get("content")) else []
        elif kind == "function_call":
            call_id, name = str(item.get("call_id", "")), str(item.get("name", ""))
            names[call_id] = name
            asked = "Approval requested to run" if call_id.startswith(approvals.ID_PREFIX) else "Tool call"
            lines += [f"**{asked}** `{one_line(name)}`", "", *fenced(item.get("arguments", ""), "json"), ""]
        elif kind == "function_call_output":
            call_id, output = str(item.get("call_id", "")), item.get("output", "")
            if call_id.startswith(approvals.ID_PREFIX) and approvals.is_decision(output):
                answered = "Approved" if output == approvals.APPROVED else one_line(str(output))
                lines += [f"**Approval answer** for `{one_line(names.get(call_id, ''))}`: {answered}", ""]
            else:
                shown = output if isinstance(output, str) else text_of(output) or json.dumps(output)
                lines += [f"**Tool output** of `{one_line(names.get(call_id, ''))}`", "", *fenced(shown), ""]
        elif kind == "reasoning":
            summary = " ".join(
                str(part.get("text", "")) for part in item.get("summary") or [] if isinstance(part, dict)
            )
            lines += [f"_Reasoning: {one_line(summary)}_", ""] if summary.strip() else []
    return "\n".join(lines).rstrip() + "\n"


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part for part in content if isinstance(part, dict) and part.get("type") in TEXT_PARTS]
        return "\n\n".join(str(part.get("text", "")) for part in parts)
    return ""


def attachments(content: Any) -> list[str]:
    """The names of a message's images and files: a file's own name, or what it is."""
    named = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") == "input_file":
            named.append(one_line(str(part.get("filename") or "a file")))
        elif isinstance(part, dict) and part.get("type") == "input_image":
            named.append(one_line(str(part.get("filename") or "an image")))
    return named


def fenced(text: Any, language: str = "") -> list[str]:
    """`text` in a fence longer than any run of backticks in it, so nothing in it ends the block."""
    text = str(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + language, text, fence]


def one_line(text: str) -> str:
    return " ".join(str(text).split())
