# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""What conversation memory keeps for approvals (schema 4): the key that signs approval requests, and the first
answer to each request. Each function here is one transaction (store.py's `Store.run`), on SQLite and PostgreSQL.

- The key is made once, by whichever process opens the store first: each inserts its own if there is none (one
  statement, which a second process's insert cannot overtake), then reads the one that is there. So every worker
  and instance on one store signs with one key, and it outlives restarts and deploys (history/approvals.py).
- An answer is kept per owner and approval id, the first time it is seen: inserted if absent, then read back, so
  of two requests that answer at once the first to commit wins, and the other honours it (approval_answers.py).
  An answer is kept as long as its request can still be answered (MCP_APPROVAL_MAX_AGE_HOURS), then deleted.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from agent_server.store.schema import approval_answers, approval_keys

KEY_NAME = "approvals"


def _insert_if_absent(connection: sa.Connection, table: sa.Table, rows: Sequence[Mapping[str, Any]]) -> None:
    dialect: Any = postgresql if connection.dialect.name == "postgresql" else sqlite
    connection.execute(dialect.insert(table).on_conflict_do_nothing(), list(rows))


def signing_key(connection: sa.Connection, name: str = KEY_NAME) -> str:
    """The store's key called `name` (approval requests', or sign-in's cookies': sign_in/keys.py): made now if it
    has none."""
    row = {"name": name, "key": secrets.token_hex(32), "created_at": time.time()}
    _insert_if_absent(connection, approval_keys, [row])
    return str(connection.scalar(sa.select(approval_keys.c.key).where(approval_keys.c.name == name)))


def answers_given(owner: str, ids: Sequence[str], connection: sa.Connection) -> dict[str, bool]:
    """The answers kept for these approval ids of `owner`: True approved, False denied."""
    query = sa.select(approval_answers.c.approval_id, approval_answers.c.approved).where(
        approval_answers.c.owner == owner, approval_answers.c.approval_id.in_(list(ids))
    )
    return {approval_id: bool(approved) for approval_id, approved in connection.execute(query)}


def keep_first_answers(owner: str, answers: Mapping[str, bool], connection: sa.Connection) -> dict[str, bool]:
    """Keep each of `answers` that has none kept yet; returns the answers kept for those ids (another request's,
    where it came first)."""
    now = time.time()
    rows = [{"owner": owner, "approval_id": id_, "approved": yes, "answered_at": now} for id_, yes in answers.items()]
    _insert_if_absent(connection, approval_answers, rows)
    return answers_given(owner, list(answers), connection)


def forget_answers_before(cutoff: float, connection: sa.Connection) -> int:
    """Delete the answers given before `cutoff` (seconds since the epoch): their requests can no longer be
    answered. Returns how many."""
    return connection.execute(approval_answers.delete().where(approval_answers.c.answered_at < cutoff)).rowcount
