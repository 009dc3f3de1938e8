# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Long-term memory's facts: short plain texts about one user, kept for that exact identity, and found again by
full-text search (SQLite's FTS5, or PostgreSQL's text search with its 'simple' configuration).

A fact is cleaned before it is kept: control characters and direction marks go, runs of white space become one
space; one longer than MAX_FACT_CHARS is refused (FactRefused, which says why). A user keeps at most
LONG_TERM_MEMORY_MAX_FACTS facts of LONG_TERM_MEMORY_MAX_BYTES in all: a new fact drops the oldest ones past either
bound, in the transaction that adds it, and says how many went.

Search never reads the user's text as query syntax. Both stores index `terms`, the fact's words as this module
splits them (runs of letters and digits, lowercased, one space apart), and a query is split the same way into
at most MAX_QUERY_TERMS words, each matched as a plain word (an FTS5 string in double quotes; plainto_tsquery on
PostgreSQL), any of them. So `"`, `*`, `NEAR(`, `OR` or SQL in a query are words or nothing, and both stores find
the same facts. Matches come back best first: the most query words matched, then the newest.

Every statement names its owner: no function here reads or deletes another identity's facts.
"""

from __future__ import annotations

import re
import time
import unicodedata
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from agent_server.json_body import hides_text
from agent_server.memory import statements
from agent_server.store.schema import memories

MAX_FACT_CHARS = 500
MAX_QUERY_TERMS = 16
MAX_TERM_CHARS = 64  # a longer "word" (a hash, a key) is not searched for
RECALLED = 10  # at most, a recall's facts
WORDS = re.compile(r"[^\W_]+")  # letters and digits: FTS5's unicode61 and PostgreSQL's parser both split there
BIDI_MARKS = frozenset("\u200e\u200f\u061c")  # beside json_body's overrides and isolates: the direction marks


class FactRefused(ValueError):
    """A fact that is not kept; the message says why, for the model (and the user) to read."""


@dataclass(frozen=True)
class Fact:
    id: int
    text: str
    created_at: float

    def shown(self) -> dict[str, object]:
        return {"id": self.id, "text": self.text, "created_at": self.created_at}


@dataclass(frozen=True)
class Kept:
    """What remembering did: the fact kept, and how many of the owner's oldest facts it dropped."""

    fact: Fact
    dropped: int


def cleaned(text: str) -> str:
    """The fact as it is kept: plain text on one line, or FactRefused."""
    kept = "".join(" " if c.isspace() else "" if hides_text(c) or c in BIDI_MARKS else c for c in str(text))
    kept = " ".join(unicodedata.normalize("NFC", kept).split())
    if not kept:
        raise FactRefused("The fact is empty: say what to remember, in a short sentence.")
    if len(kept) > MAX_FACT_CHARS:
        raise FactRefused(
            f"The fact is {len(kept)} characters; at most {MAX_FACT_CHARS}. Remember a shorter one: one short sentence."
        )
    return kept


def terms(text: str) -> list[str]:
    """The words of `text` as both stores index them: lowercased runs of letters and digits, at most MAX_TERM_CHARS."""
    return [word for word in WORDS.findall(unicodedata.normalize("NFC", text).lower()) if len(word) <= MAX_TERM_CHARS]


def query_terms(query: str) -> list[str]:
    """The distinct words of a query, at most MAX_QUERY_TERMS, in their order."""
    return list(dict.fromkeys(terms(str(query)[: MAX_QUERY_TERMS * (MAX_TERM_CHARS + 1) * 4])))[:MAX_QUERY_TERMS]


def remember(owner: str, text: str, max_facts: int, max_bytes: int, connection: sa.Connection) -> Kept:
    """Keep `text` (cleaned) as the owner's newest fact, then drop the oldest past the bounds; FactRefused if the fact
    alone is over `max_bytes`."""
    text = cleaned(text)
    size = len(text.encode())
    if size > max_bytes:
        raise FactRefused(f"The fact is {size} bytes; this app keeps at most {max_bytes} bytes of facts a user.")
    now = time.time()
    values = {"owner": owner, "text": text, "terms": " ".join(terms(text)), "bytes": size, "created_at": now}
    fact_id = connection.execute(memories.insert().values(values).returning(memories.c.id)).scalar_one()
    dropped = _drop_oldest(owner, max_facts, max_bytes, connection)
    return Kept(Fact(fact_id, text, now), dropped)


def _drop_oldest(owner: str, max_facts: int, max_bytes: int, connection: sa.Connection) -> int:
    """Delete the owner's oldest facts until at most `max_facts` of at most `max_bytes` in all are left."""
    newest_first = sa.select(memories.c.id, memories.c.bytes).where(memories.c.owner == owner)
    kept, total, gone = 0, 0, []
    for fact_id, size in connection.execute(newest_first.order_by(memories.c.id.desc())):
        if kept < max_facts and total + size <= max_bytes:
            kept, total = kept + 1, total + size
        else:
            gone.append(fact_id)
    for start in range(0, len(gone), 500):
        batch = gone[start : start + 500]
        connection.execute(memories.delete().where(memories.c.owner == owner, memories.c.id.in_(batch)))
    return len(gone)


def recall(owner: str, query: str, connection: sa.Connection) -> list[Fact]:
    """The owner's facts that share a word with `query`, best first (most words shared, then newest), RECALLED at
    most."""
    words = query_terms(query)
    if not words:
        return []
    if connection.dialect.name == "sqlite":
        # The search's rowids, then the owner's among them: joined the other way, SQLite ran the search once for
        # each of the owner's facts (20 ms against 2 for 200 facts).
        match = sa.text(
            "SELECT id, text, created_at, terms FROM agent_memories WHERE owner = :owner AND id IN "
            "(SELECT rowid FROM agent_memories_search WHERE agent_memories_search MATCH :match)"
        )
        # Each word in double quotes: an FTS5 string, never an operator. A word holds no quote (WORDS).
        rows = connection.execute(match, {"match": " OR ".join(f'"{word}"' for word in words), "owner": owner})
    else:
        # plainto_tsquery of each word, a quoted literal joined with OR (||): no user text is query syntax. Literal,
        # not bound: asyncpg prepares each statement, and after five runs PostgreSQL plans a bound one generically,
        # without the words, and scans all the owner's facts (10 ms at 1,000 facts against 0.6 with the search index).
        simple: sa.ColumnElement[Any] = sa.literal_column("'simple'::regconfig")
        asked = [
            sa.func.plainto_tsquery(simple, sa.bindparam(None, word, sa.Text, literal_execute=True)) for word in words
        ]
        either: sa.ColumnElement[Any] = asked[0]
        for each in asked[1:]:
            either = either.op("||")(each)
        select = sa.select(memories.c.id, memories.c.text, memories.c.created_at, memories.c.terms).where(
            memories.c.owner == owner, sa.func.to_tsvector(simple, memories.c.terms).op("@@")(either)
        )
        rows = connection.execute(select)
    wanted = set(words)
    scored = [(len(wanted & set(row.terms.split())), row.id, Fact(row.id, row.text, row.created_at)) for row in rows]
    scored.sort(key=lambda each: (-each[0], -each[1]))
    return [fact for _score, _id, fact in scored[:RECALLED]]


def newest(owner: str, limit: int, connection: sa.Connection) -> list[Fact]:
    """The owner's `limit` newest facts, newest first."""
    columns = (memories.c.id, memories.c.text, memories.c.created_at)
    query = statements.newest_rows(owner, limit, *columns, by=memories.c.id)
    return [Fact(*row) for row in connection.execute(query)]


def forget(owner: str, fact_id: int, connection: sa.Connection) -> bool:
    """Delete one of the owner's facts; False if the owner has none by that id."""
    return connection.execute(memories.delete().where(memories.c.owner == owner, memories.c.id == fact_id)).rowcount > 0


def forget_all(owner: str, connection: sa.Connection) -> int:
    """Delete all the owner's facts; how many there were."""
    return connection.execute(memories.delete().where(memories.c.owner == owner)).rowcount
