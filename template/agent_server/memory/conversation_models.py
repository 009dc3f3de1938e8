# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The model each conversation uses (LLM_MODELS, agent_server/model_choice.py), kept in its row's `model` column;
and the model of each answer, in its items' (turns.py).

Read and written only when the owner lists several models, so an app that offers one pays nothing a turn. A turn
writes it while it holds the conversation (its lease), before the model is called: the next turn, a resumed run and
the page's reopened conversation read it. A conversation's first turn that fails goes with its row (turn_transactions
.release), its model with it.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from agent_server import config
from agent_server.memory import statements
from agent_server.memory.database import transact
from agent_server.store.schema import conversations


async def stored_model(owner: str, conversation_id: str) -> str | None:
    """The conversation's model, or None: it has none (the default answers), or does not exist."""
    query = sa.select(conversations.c.model).where(statements.conversation_is(owner, conversation_id))
    return await transact(lambda connection: connection.scalar(query))


async def keep_model(owner: str, conversation_id: str, model: str) -> None:
    """The conversation's model from now on."""
    change = conversations.update().where(statements.conversation_is(owner, conversation_id)).values(model=model)
    await transact(lambda connection: connection.execute(change), write=True)


async def shown_model(owner: str, conversation_id: str, models: list[str | None]) -> dict[str, Any]:
    """GET /conversations/{id}'s `model` (the page's picker shows it on reopen) and `models`, beside each item the
    model that made it (None: the client's item, or an answer from before the list), with several models listed."""
    if not config.settings().models.several:
        return {}
    return {"model": await stored_model(owner, conversation_id), "models": models}
