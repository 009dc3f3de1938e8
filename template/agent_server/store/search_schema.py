# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""What conversation search (search.py) indexes, and the migration that adds its index (schema 10).

Each stored item keeps `words`: the text its user or assistant wrote (a message's text parts, joined), NULL for
everything else (tool calls and their outputs, reasoning, approvals): search finds what people wrote, not tool JSON.
turn_transactions.py writes it with the item; the migration fills it in for the items stored before.

The index follows every write by itself, whichever path made it (a turn, a rename, a delete, DELETE /me, pruning):
- SQLite: `agent_conversation_words` holds one row per indexed item (its seq) and per titled conversation
  (seq -1, the title), kept by triggers on the items and conversations tables, and an FTS5 table over it, kept
  by triggers as long-term memory's is (schema.MEMORY_SEARCH). Its own INTEGER PRIMARY KEY is FTS5's rowid, which
  VACUUM never renumbers (the items table's implicit rowid it may).
- PostgreSQL: GIN indexes on the 'simple' text search vectors of the items' `words` and the conversations' titles.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from agent_server.json_body import hides_text

MAX_WORDS_CHARS = 50_000  # of one item: PostgreSQL's text search vector holds at most 1 MB
TEXT_PARTS = ("input_text", "output_text", "text")

SEARCH = {
    "sqlite": [
        "CREATE TABLE IF NOT EXISTS agent_conversation_words (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        "owner VARCHAR(320) NOT NULL, conversation_id VARCHAR(200) NOT NULL, seq INTEGER NOT NULL, "
        "words TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS agent_conversation_words_item "
        "ON agent_conversation_words (owner, conversation_id, seq)",
        "CREATE VIRTUAL TABLE IF NOT EXISTS agent_conversation_search USING fts5(words, "
        "content='agent_conversation_words', content_rowid='id', tokenize='unicode61 remove_diacritics 0')",
        "CREATE TRIGGER IF NOT EXISTS agent_conversation_words_added AFTER INSERT ON agent_conversation_words BEGIN "
        "INSERT INTO agent_conversation_search(rowid, words) VALUES (new.id, new.words); END",
        "CREATE TRIGGER IF NOT EXISTS agent_conversation_words_removed AFTER DELETE ON agent_conversation_words BEGIN "
        "INSERT INTO agent_conversation_search(agent_conversation_search, rowid, words) "
        "VALUES ('delete', old.id, old.words); END",
        "CREATE TRIGGER IF NOT EXISTS agent_conversation_items_indexed AFTER INSERT ON agent_conversation_items "
        "WHEN new.words IS NOT NULL AND new.words <> '' BEGIN "
        "INSERT INTO agent_conversation_words(owner, conversation_id, seq, words) "
        "VALUES (new.owner, new.conversation_id, new.seq, new.words); END",
        "CREATE TRIGGER IF NOT EXISTS agent_conversation_items_unindexed AFTER DELETE ON agent_conversation_items "
        "WHEN old.words IS NOT NULL BEGIN DELETE FROM agent_conversation_words "
        "WHERE owner = old.owner AND conversation_id = old.conversation_id AND seq = old.seq; END",
        "CREATE TRIGGER IF NOT EXISTS agent_conversation_items_reindexed AFTER UPDATE OF words "
        "ON agent_conversation_items BEGIN DELETE FROM agent_conversation_words "
        "WHERE owner = old.owner AND conversation_id = old.conversation_id AND seq = old.seq; "
        "INSERT INTO agent_conversation_words(owner, conversation_id, seq, words) "
        "SELECT new.owner, new.conversation_id, new.seq, new.words "
        "WHERE new.words IS NOT NULL AND new.words <> ''; END",
        "CREATE TRIGGER IF NOT EXISTS agent_conversations_created AFTER INSERT ON agent_conversations "
        "WHEN new.title <> '' BEGIN INSERT INTO agent_conversation_words(owner, conversation_id, seq, words) "
        "VALUES (new.owner, new.id, -1, new.title); END",
        "CREATE TRIGGER IF NOT EXISTS agent_conversations_titled AFTER UPDATE OF title ON agent_conversations BEGIN "
        "DELETE FROM agent_conversation_words WHERE owner = old.owner AND conversation_id = old.id AND seq = -1; "
        "INSERT INTO agent_conversation_words(owner, conversation_id, seq, words) "
        "SELECT new.owner, new.id, -1, new.title WHERE new.title <> ''; END",
        "CREATE TRIGGER IF NOT EXISTS agent_conversations_unindexed AFTER DELETE ON agent_conversations BEGIN "
        "DELETE FROM agent_conversation_words WHERE owner = old.owner AND conversation_id = old.id; END",
    ],
    "postgresql": [
        "CREATE INDEX IF NOT EXISTS agent_conversation_items_search ON agent_conversation_items "
        "USING GIN (to_tsvector('simple', words))",
        "CREATE INDEX IF NOT EXISTS agent_conversations_search ON agent_conversations "
        "USING GIN (to_tsvector('simple', title))",
    ],
}


def words_of(item: dict[str, Any]) -> str | None:
    """What a user or the assistant wrote in `item` (a stored item), as search indexes it; None: nothing to find."""
    if item.get("role") not in ("user", "assistant") or item.get("type", "message") != "message":
        return None
    content = item.get("content")
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list):
        texts = [str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") in TEXT_PARTS]
    else:
        return None
    # No control character (PostgreSQL's text holds no NUL); the words and their order are what search needs.
    text = "".join(" " if hides_text(c) else c for c in "\n".join(texts))
    text = " ".join(text.split())[:MAX_WORDS_CHARS]
    return text or None


def add_search(connection: sa.Connection) -> None:
    """Schema 10: the items' `words` (schema.items declares it, so a new database has it already), their index, and
    the words of the items stored before."""
    if "words" not in {column["name"] for column in sa.inspect(connection).get_columns("agent_conversation_items")}:
        connection.execute(sa.text("ALTER TABLE agent_conversation_items ADD COLUMN words TEXT"))
    for statement in SEARCH[connection.dialect.name]:
        connection.execute(sa.text(statement))
    # Only messages of a user or the assistant have words (json.dumps writes `"role": "user"`): tool calls, their
    # outputs and reasoning, most of a large database, are not read.
    rows = connection.execute(sa.text(
        "SELECT owner, conversation_id, seq, item FROM agent_conversation_items WHERE words IS NULL "
        """AND (item LIKE '%"role": "user"%' OR item LIKE '%"role": "assistant"%')"""
    )).all()  # fmt: skip
    found = [
        {"o": owner, "c": conversation, "s": seq, "w": words}
        for owner, conversation, seq, item in rows
        if (words := words_of(json.loads(item))) is not None
    ]
    if found:  # indexed as they are updated (SQLite: a trigger)
        update = "UPDATE agent_conversation_items SET words = :w WHERE owner = :o AND conversation_id = :c AND seq = :s"
        connection.execute(sa.text(update), found)
    if connection.dialect.name == "sqlite":  # the titles there were
        connection.execute(sa.text(
            "INSERT INTO agent_conversation_words(owner, conversation_id, seq, words) "
            "SELECT owner, id, -1, title FROM agent_conversations AS c WHERE title <> '' AND NOT EXISTS "
            "(SELECT 1 FROM agent_conversation_words AS w WHERE w.owner = c.owner AND w.conversation_id = c.id "
            "AND w.seq = -1)"
        ))  # fmt: skip
