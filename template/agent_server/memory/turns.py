# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""A turn of a stored conversation: whose it is, which conversation, its merged history, and its storing.

A conversation is named by `context.conversation_id` (the Databricks chat UI sends its chat id)
or `custom_inputs.session_id` (upstream agent templates); a request that names none starts a
new one with an id the app makes, and every answer carries the id as `custom_outputs.session_id`. Except:
a request that names none and brings the model's own items (earlier answers, tool calls) is a client that
keeps its own history, as stateless API clients do. It is served as with memory off, and nothing is stored:
it would store its whole history again on every turn (n²/2 items for n turns), and read nothing back.

A conversation belongs to the identity that made it: on Databricks Apps, the user the platform
forwards (`X-Forwarded-User`, else `X-Forwarded-Email`), which only a deployed app can trust.
Ids are per owner, so another identity that names the same id reads and changes nothing of it:
it has no conversation of that id (GET and DELETE answer 404) and, if it sends a turn, starts its
own. What the client sends is merged with what is stored by merge.py's rule. The stored
items are the render's (history.render_each), and go through the render again on the way out, so
a conversation outlives changes of SDK, API mode and render rules.

A turn is stored when it completes, all at once with its answer. A turn that failed, or whose
stream the client cut, is not stored at all: the client still holds what it sent, and sends it again.
A background run that its client cancels is stored as it stopped (its prompt, what it produced, each call
it left running answered as interrupted), after the turns before it (turn/serve.py, merge.py).
Two turns of one conversation at once: the second waits, and runs once the first is done, seeing its answer;
turns that find their conversation busy run in the order they came, across workers and instances (queue.py).
One that waits longer than MEMORY_TURN_QUEUE_SECONDS gets a 409 that says how long the conversation has been busy.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from agent_server import llm
from agent_server.errors import BadRequest, Broken, HttpError, TooLarge
from agent_server.history import ApiMode, HistoryError, Rendered, approvals, render_each
from agent_server.identity import owner_of
from agent_server.json_body import hides_text
from agent_server.memory import branches, database, leases, queue, statements
from agent_server.memory.cut_short import marked
from agent_server.memory.merge import Merge, comparable, made_by_client, merge
from agent_server.memory.store import Busy, StoredItem, Unavailable
from agent_server.scheduling.offload import INLINE_ITEMS, cpu_work
from agent_server.store.schema import items as items_table
from agent_server.store.settings import enabled, memory_settings

logger = logging.getLogger("agent_server.memory")

CONVERSATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}")


def conversation_id_of(body: Mapping[str, Any]) -> str | None:
    """The conversation the request names, if any; BadRequest if it names two, or an id that cannot be one."""
    context, custom = body.get("context"), body.get("custom_inputs")
    named = {
        param: value
        for param, value in (
            ("context.conversation_id", context.get("conversation_id") if isinstance(context, dict) else None),
            ("custom_inputs.session_id", custom.get("session_id") if isinstance(custom, dict) else None),
        )
        if value is not None
    }
    for param, value in named.items():
        if not isinstance(value, str) or not CONVERSATION_ID.fullmatch(value):
            raise BadRequest(
                f"{param} must be 1 to 200 letters, digits and . _ : @ -, starting with a letter or digit.", param
            )
    if len(set(named.values())) > 1:
        raise BadRequest("context.conversation_id and custom_inputs.session_id name two conversations.", "context")
    return next(iter(named.values()), None)


def replaces_history(body: Mapping[str, Any]) -> bool:
    """Does the client send the whole conversation, to replace the stored one (`custom_inputs.replace_history`,
    merge.py's rule 0: an edit or a regenerate)? BadRequest if the flag is not a boolean."""
    custom = body.get("custom_inputs")
    flag = custom.get("replace_history", False) if isinstance(custom, dict) else False
    if not isinstance(flag, bool):
        raise BadRequest("custom_inputs.replace_history must be true or false.", "custom_inputs.replace_history")
    return flag


@dataclass
class History:
    """The history a turn runs on: rendered items (not yet paired) and the client items they stand for.

    Entries of stored items have indices below `stored`; a client item's index is `stored` + its own.
    """

    each: list[Rendered]
    client_items: list[Any]
    stored: int = 0

    def client_index(self, entry: Rendered) -> int | None:
        return entry.index - self.stored if entry.index >= self.stored else None


@dataclass
class Turn:
    owner: str
    conversation_id: str
    lease: str
    merged: Merge
    history: History
    api: ApiMode
    named: str | None = None  # the conversation id the client named (None: one the app made for this turn)
    trace_id: str | None = None  # this turn's trace, kept with its answer (None: not traced)
    model: str | None = None  # with LLM_MODELS: the turn's model, kept with its answer (turn/prepare.py)
    cut_short: str | None = None  # why the model cut the answer short (model_ends.py), kept with it (cut_short.py)
    # A branch (replaced, diverged) stores what the client sent: its earlier answers keep the traces they had.
    kept_traces: dict[str, str] = field(default_factory=dict)
    kept_rows: int = 0  # replaced, diverged: the stored rows that stay at the start (the rest: an earlier branch)
    restores: int | None = None  # the earlier branch this turn continues (branches.py), or None: the conversation
    done: bool = field(default=False)

    def custom_outputs(self) -> dict[str, str]:
        return {"session_id": self.conversation_id}

    async def finish(self, output: Sequence[Mapping[str, Any]]) -> None:
        """Store this turn (what the client added, then the answer) and end it."""
        trace, model, cut = self.trace_id, self.model, self.cut_short
        answer = [(e.index, StoredItem(marked(e, output, cut), _id(e.client_id), trace_id=trace, model=model))
                  for e in render_each(list(output), self.api)]  # fmt: skip
        added = [
            *(
                StoredItem(entry.kept(), _id(entry.client_id), trace_id=self.kept_traces.get(comparable(entry.item)))
                for entry in self.merged.new
            ),
            *(stored for _index, stored in sorted([*answer, *_reasoning(output)], key=lambda pair: pair[0])),
        ]
        # A conversation keeps its title (the first message's, or the one its owner gave it) through edits.
        title = _title(self.merged.history) if self.merged.kind == "new conversation" else None
        current = memory_settings()
        try:
            await (await database.store()).finish_turn(
                self.owner, self.conversation_id, self.lease, added, self.merged.replaces, title, current.max_items,
                self.kept_rows, self.restores,
            )  # fmt: skip
        except (Unavailable, Busy) as error:
            raise MemoryFailure.of(self.conversation_id, error) from None
        finally:
            database.let_go(self.lease)
        self.done = True
        database.prune_soon()

    async def end(self) -> None:
        """A turn that did not finish gives its conversation back, storing nothing."""
        if not self.done:
            await database.release(self.owner, self.conversation_id, self.lease)


class MemoryFailure(HttpError, status=503):
    """Storing a turn failed (its database did): the answer is not given as if it were kept."""

    @classmethod
    def of(cls, conversation_id: str, error: Unavailable | Busy) -> MemoryFailure:
        if isinstance(error, Busy) and error.deleted:
            reason = "the conversation was deleted while this turn ran"
        elif isinstance(error, Busy):
            reason = "another turn took this conversation after this one ran past MEMORY_TURN_LEASE_SECONDS"
        else:
            reason = f"the conversation database failed: {error}"
        kind = TurnTaken if isinstance(error, Busy) else MemoryFailure
        return kind(f"This turn of conversation {conversation_id} was not stored ({reason}); send it again.")


class TurnTaken(MemoryFailure, status=409):
    """Storing a turn failed: its conversation was deleted, or taken by another turn, while it ran."""


def keeps_own_history(body: dict[str, Any], sent: History) -> bool:
    """A request that names no conversation and brings the model's own items: a client that keeps its own history
    (this module's docstring), served as with memory off, storing nothing."""
    return conversation_id_of(body) is None and not all(made_by_client(entry.item) for entry in sent.each)


async def start_turn(
    headers: Mapping[str, str], body: dict[str, Any], sent: History, continues_from: int | None = None
) -> Turn | None:
    """Take the conversation this request names (or a new one) and merge its stored items in; None if memory is off,
    or the client keeps its own history. `continues_from`: a background run's attempt, whose items from that index
    of `input` on continue the run's turn (merge.py): they are appended after the merged request, never merged.

    Unauthenticated (no identity), BadRequest (a bad id), TooLarge (too much to store), Conflict (busy),
    Unavailable (database).
    """
    if not enabled():
        return None
    owner = owner_of(headers)
    named = conversation_id_of(body)
    if keeps_own_history(body, sent):
        return None  # nothing to store or read
    replace, restores = replaces_history(body), branches.continued(body, named)
    conversation_id = named or str(uuid.uuid4())
    api = llm.llm_settings().api
    lease, hold = leases.new_lease(), database.turn_lease_seconds()
    try:
        stored_items = await (await database.store()).start_turn(owner, conversation_id, lease, hold)
    except Busy:  # another turn holds it: this one waits for its turn (a 409 past MEMORY_TURN_QUEUE_SECONDS)
        stored_items = await queue.wait_turn(owner, conversation_id, lease)
    database.holding(lease, owner, conversation_id)
    try:
        if restores is not None:  # the model sees that earlier branch, not the conversation's own items
            stored_items = await (await database.store()).continued_branch(owner, conversation_id, restores)
        stored = await cpu_work(len(stored_items) <= INLINE_ITEMS, _stored_history, stored_items, api)
        sent_each = [dataclasses.replace(e, index=e.index + stored.stored) for e in sent.each]
        first_continued = stored.stored + (len(sent.client_items) if continues_from is None else continues_from)
        request = [entry for entry in sent_each if entry.index < first_continued]
        merged = merge(stored.each, request, replace).continuing(sent_each[len(request) :])
        _check_size(merged)
    except BaseException:
        await database.release(owner, conversation_id, lease)
        raise
    ran_before(merged, stored.each)
    history = History(merged.history, [*stored.client_items, *sent.client_items], stored.stored)
    continuing = f", then {merged.continued} items of its run" if merged.continued else ""
    logger.info(
        "memory: conversation %s, %s (%d items added%s)", conversation_id, merged.kind, len(merged.new), continuing
    )
    kept = _traces(stored.each, stored_items) if merged.replaces else {}
    # The rows the kept items stand for, with the reasoning kept beside them (rendered items do not show it).
    rows = stored.each[merged.kept - 1].index + 1 if merged.replaces and merged.kept else 0
    return Turn(owner, conversation_id, lease, merged, history, api, named, kept_traces=kept, kept_rows=rows,
                restores=restores)  # fmt: skip


async def holds_all(owner: str, conversation_id: str, ids: Sequence[str]) -> bool:
    """Does the conversation hold an item of each of these ids? A resumed run asks it of the answers it had finished:
    only its turn's finish stores them, so its turn was stored before its process stopped (runs/execute.py)."""
    wanted = set(ids)
    if not wanted:
        return False
    query = sa.select(sa.func.count(sa.distinct(items_table.c.item_id))).where(
        statements.items_of(owner, conversation_id), items_table.c.item_id.in_(wanted)
    )
    return await (await database.store()).run(lambda connection: connection.scalar(query)) == len(wanted)


def _traces(each: Sequence[Rendered], rows: Sequence[StoredItem]) -> dict[str, str]:
    """The stored answers' traces, by the item as the merge compares it."""
    return {comparable(entry.item): trace for entry in each if (trace := rows[entry.index].trace_id)}


def ran_before(merged: Merge, stored: Sequence[Rendered]) -> None:
    """An answer to a call whose output the conversation holds already (a regenerate, a retry that sends the
    approval again, or a denial sent after it) gets that output, in place: the call ran once, and does not run
    again (approved_calls.py); the first answer, an approval, stands (approval_answers.py)."""
    outputs = {
        entry.item["call_id"]: entry.item["output"]
        for entry in stored
        if entry.item.get("type") == "function_call_output"
        and str(entry.item.get("call_id", "")).startswith(approvals.ID_PREFIX)
        and not approvals.is_decision(entry.item.get("output"))
    }
    for entry in merged.history:
        item = entry.item
        if approvals.is_answer(item.get("output")) and item.get("call_id") in outputs:
            logger.info("memory: input[%d] answers a call this conversation ran already: its output", entry.index)
            item["output"] = outputs[item["call_id"]]


def _reasoning(output: Sequence[Mapping[str, Any]]) -> list[tuple[int, StoredItem]]:
    """The answer's reasoning, by place: kept for the page (GET /conversations/{id}), which the render drops."""
    return [
        (index, StoredItem({"type": "reasoning", "summary": list(item.get("summary") or [])}, None))
        for index, item in enumerate(output)
        if item.get("type") == "reasoning" and item.get("summary")
    ]


def _stored_history(rows: list[StoredItem], api: ApiMode) -> History:
    """Stored items rendered again, as today's render and API mode want them."""
    items = [{**row.item, "id": row.item_id} if row.item_id else row.item for row in rows]
    try:
        each = render_each(items, api)
    except HistoryError as error:  # cannot happen to items this render wrote; say which, rather than a 500
        raise Broken(f"A stored item of this conversation can no longer be rendered: {error}") from None
    return History(each, [_as_client_item(item) for item in items], len(items))


def _as_client_item(item: dict[str, Any]) -> dict[str, Any]:
    """What approvals.honour_only_genuine needs to know of a stored item: was it an approval request."""
    call_id = str(item.get("call_id", ""))
    if item.get("type") == "function_call" and call_id.startswith(approvals.ID_PREFIX):
        return {"type": "mcp_approval_request", "id": call_id, "name": item["name"], "arguments": item["arguments"]}
    if item.get("type") == "function_call_output" and call_id.startswith(approvals.ID_PREFIX):
        return {"type": "mcp_approval_response"}
    return item


def _check_size(merged: Merge) -> None:
    size, limit = sum(len(json.dumps(entry.item)) for entry in merged.new), memory_settings().max_turn_bytes
    if size > limit:
        raise TooLarge(
            f"This turn adds {size} bytes to the conversation; the limit is MEMORY_MAX_TURN_BYTES={limit}.", "input"
        )


def _title(history: Sequence[Rendered]) -> str:
    for entry in history:
        if entry.item.get("role") == "user":
            content = entry.item.get("content")
            text = content if isinstance(content, str) else " ".join(
                part.get("text", "") for part in content or [] if isinstance(part, dict)
            )  # fmt: skip
            # What a rename refuses (json_body.hides_text) goes; line breaks and tabs become spaces.
            shown = "".join(" " if c.isspace() else "" if hides_text(c) else c for c in text)
            return " ".join(shown.split())[:200]
    return ""


def _id(client_id: Any) -> str | None:
    return client_id if isinstance(client_id, str) and client_id else None
