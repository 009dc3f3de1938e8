# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The first answer to an approval request is final, however the history comes back.

A client may send an approval after a denial of the same request: alone, in the whole history again, in a
regenerate (`custom_inputs.replace_history`), to another worker or instance, or after a restart. The history
holds only what the client chose to send, so the app keeps each answer itself, per owner and approval id, the
first time it sees it, and from then on honours that one: an approval of a denied call runs nothing (the model is
told of the denial), and a denial of a call approved before runs nothing either (the call ran, or runs, once).

- With memory on, the answers are kept in its store (memory/approval_store.py), shared by every process and
  instance on it, across restarts, until their request expires (MCP_APPROVAL_MAX_AGE_HOURS).
- With memory off there is no store: each process keeps the newest KEPT answers it saw, for as long. An answer
  that reaches another worker or instance (or this one after a restart) is that process's first.

approved_calls.py calls `settle` before it runs any approved call.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from agent_server import config, memory
from agent_server.errors import HttpError
from agent_server.history import approvals
from agent_server.memory import approval_store, database
from agent_server.memory.store import Unavailable

if TYPE_CHECKING:
    from agent_server.turn_context import TurnContext

logger = logging.getLogger(__name__)

KEPT = 100_000  # answers, with memory off
_answers: OrderedDict[tuple[str, str], tuple[float, bool]] = OrderedDict()  # (owner, id) -> (when, approved)


class AnswersUnavailable(HttpError, status=503):
    """The store that keeps the answers failed: no approved call runs on a guess."""


async def settle(history: list[dict[str, Any]], context: TurnContext) -> None:
    """Keep the answers in `history` (the handler's, in which only the approvals this app signed are APPROVED)
    that are the first to their request, and turn every other into the first one, in place: in what the model
    sees, and in what the memory turn stores."""
    given = approvals.answers(history)
    if not given:
        return
    owner = context.owner or ""
    try:
        first = await (_kept(owner, given) if memory.enabled() else _kept_here(owner, given))
    except Unavailable as error:
        raise AnswersUnavailable(f"Conversation memory is unavailable: {error}. Nothing was run; try again.") from None
    for approval_id in approvals.keep_first(history, first):
        logger.info("approval %s was answered otherwise first: that answer stands", approval_id)
    if context.turn is not None:  # what the turn stores says so too
        approvals.keep_first((entry.item for entry in context.turn.merged.new), first)


async def _kept(owner: str, given: dict[str, bool]) -> dict[str, bool]:
    store = await database.store()
    first = await store.run(functools.partial(approval_store.answers_given, owner, list(given)))
    new = {approval_id: approved for approval_id, approved in given.items() if approval_id not in first}
    if new:
        first |= await store.run(functools.partial(approval_store.keep_first_answers, owner, new), write=True)
    return first


async def _kept_here(owner: str, given: dict[str, bool]) -> dict[str, bool]:
    now = time.time()
    max_age = config.settings().mcp.approval_max_age_hours * 3600
    first = {key: _answers.setdefault((owner, key), (now, approved))[1] for key, approved in given.items()}
    while len(_answers) > KEPT or now - next(iter(_answers.values()))[0] > max_age:  # the oldest go first
        _answers.popitem(last=False)
    return first
