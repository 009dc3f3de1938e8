# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Conversation search: the caller's conversations whose title, or the text of one of whose messages, holds every
word of a query (the last word as a prefix too, so a search box can search as the user types), newest first, each
with a short snippet of its first matching message. GET /conversations?q= (api.py) answers with it.

The index (store/search_schema.py) is SQLite's FTS5 or PostgreSQL's text search, kept by the database on every write.
A query is never read as query syntax: it is split into words as long-term memory splits its queries
(facts.query_terms: letters and digits, at most 16 words, however long the text), each a quoted FTS5 string or a
quoted lexeme of a PostgreSQL tsquery. Quotes, operators, NUL or ten kilobytes are words or nothing.
Every statement names its owner: no one finds another identity's conversations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from agent_server.memory.facts import query_terms
from agent_server.store.schema import conversations, items

FOUND = 50  # at most, a search's conversations
SNIPPET_BEFORE, SNIPPET_AFTER = 40, 100  # characters of the message around its first match


@dataclass(frozen=True)
class Found:
    id: str
    title: str
    updated_at: float
    snippet: str  # "" when only the title matched
    in_title: bool

    def shown(self) -> dict[str, object]:
        return {"id": self.id, "title": self.title, "updated_at": self.updated_at, "snippet": self.snippet,
                "in_title": self.in_title}  # fmt: skip


def search(owner: str, query: str, connection: sa.Connection) -> list[Found]:
    """The owner's conversations that match `query`, newest first, FOUND at most."""
    words = query_terms(query)
    if not words:
        return []
    matches = _sqlite(owner, words) if connection.dialect.name == "sqlite" else _postgres(owner, words)
    hits = sa.select(matches.c.conversation_id, matches.c.seq).subquery("hits")
    first_text = sa.func.min(sa.case((hits.c.seq >= 0, hits.c.seq)))
    per_conversation = (
        sa.select(hits.c.conversation_id, sa.func.min(hits.c.seq).label("first"), first_text.label("first_text"))
        .group_by(hits.c.conversation_id)
        .subquery("per_conversation")
    )
    newest = (
        sa.select(
            conversations.c.id,
            conversations.c.title,
            conversations.c.updated_at,
            per_conversation.c.first,
            per_conversation.c.first_text,
        )  # fmt: skip
        .join(per_conversation, per_conversation.c.conversation_id == conversations.c.id)
        .where(conversations.c.owner == owner)
        .order_by(conversations.c.updated_at.desc(), conversations.c.id)
        .limit(FOUND)
    )
    rows = connection.execute(newest).all()
    wanted = [(row.id, row.first_text) for row in rows if row.first_text is not None]
    texts: dict[tuple[str, int], str] = {}
    if wanted:
        pairs = sa.tuple_(items.c.conversation_id, items.c.seq).in_(wanted)
        read = sa.select(items.c.conversation_id, items.c.seq, items.c.words).where(items.c.owner == owner, pairs)
        texts = {(c, s): w or "" for c, s, w in connection.execute(read)}
    return [
        Found(
            row.id, row.title, row.updated_at, snippet(texts.get((row.id, row.first_text), ""), words), row.first < 0
        )  # fmt: skip
        for row in rows
    ]


def _sqlite(owner: str, words: list[str]) -> Any:
    # Each word an FTS5 string in double quotes (a word holds no quote), all of them required; the last a prefix.
    match = " ".join(f'"{word}"' for word in words) + "*"
    return (
        sa.text(
            "SELECT conversation_id, seq FROM agent_conversation_words WHERE owner = :owner AND id IN "
            "(SELECT rowid FROM agent_conversation_search WHERE agent_conversation_search MATCH :match)"
        )
        .bindparams(owner=owner, match=match)
        .columns(conversation_id=sa.String, seq=sa.Integer)
        .subquery("matches")
    )


def _postgres(owner: str, words: list[str]) -> Any:
    # Each word a quoted lexeme ('word', the last 'word':*), all required; literals, not bound, as facts.py says why.
    simple: sa.ColumnElement[Any] = sa.literal_column("'simple'::regconfig")
    lexemes = [f"'{word}'" for word in words[:-1]] + [f"'{words[-1]}':*"]
    asked = sa.func.to_tsquery(simple, sa.bindparam(None, " & ".join(lexemes), sa.Text, literal_execute=True))
    in_items = sa.select(items.c.conversation_id, items.c.seq).where(
        items.c.owner == owner, sa.func.to_tsvector(simple, items.c.words).op("@@")(asked)
    )
    in_titles = sa.select(conversations.c.id.label("conversation_id"), sa.literal(-1).label("seq")).where(
        conversations.c.owner == owner, sa.func.to_tsvector(simple, conversations.c.title).op("@@")(asked)
    )
    return sa.union_all(in_items, in_titles).subquery("matches")


def snippet(text: str, words: list[str]) -> str:
    """The part of `text` around the first place a query word starts, with an ellipsis where it was cut."""
    if not text:
        return ""
    pattern = "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True))
    found = re.search(rf"(?<![^\W_])(?:{pattern})", text, re.IGNORECASE)
    at = found.start() if found else 0
    start = max(0, at - SNIPPET_BEFORE)
    if start:  # from a word's start
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < at else start
    end = min(len(text), at + SNIPPET_AFTER)
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")
