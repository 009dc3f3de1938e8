# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Long-term memory's facts and their search (agent_server/memory/facts.py): hostile facts kept as plain text or
refused, no query breaking a search, and both stores (SQLite's FTS5, PostgreSQL's text search) finding the same
facts in the same order; on SQLite, and on PostgreSQL too when MEMORY_TEST_POSTGRES_URL names one (test_memory.py's
`backend`)."""

# ruff: noqa: F811  (the fixtures imported below are the tests' arguments)
from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa

from agent_server import memory
from agent_server.memory import facts

from .test_long_term_memory import in_database, remembering, someone  # noqa: F401
from .test_memory import backend  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)

HOSTILE = [
    'a " quote', "star * and prefix*", "NEAR(ada tea)", "ada OR tea", "ada AND NOT tea",
    "'; DROP TABLE agent_memories; --", "1) OR 1=1 --", "\x00\x1b[31mred\x1b[0m", "col:ada", "^ada", "ada -tea",
    "!!!", "", "   ", "\u202eevil\u202c",
    "x" * 10_000, "ada " * 3000, "(ada", "{ada tea}", "ada & tea | !x <-> y", "ada:* ", "\\", "%", "_",
]  # fmt: skip


def test_hostile_facts_are_kept_as_plain_text_or_refused_and_no_query_breaks_a_search(remembering):
    ada = someone("ada")
    current = memory.memory_settings()

    def keep(text: str) -> Any:
        try:
            return in_database(functools.partial(facts.remember, ada, text, 200, current.max_fact_bytes))
        except facts.FactRefused as refused:
            return str(refused)

    assert "at most 500" in keep("x" * 10_000), "too long: a clear refusal"
    assert "empty" in keep("\x00\x01 \u202e \n")
    kept = keep("My name is \x1b[31mAda\u202e\u200f\r\n  Lovelace\x00")
    assert kept.fact.text == "My name is [31mAda Lovelace", "control and direction characters go; no ESC is left"
    for text in HOSTILE:
        keep(text)  # each is kept as text, or refused: none raises anything else
    stored = [f.text for f in in_database(functools.partial(facts.newest, ada, 100))]
    assert "'; DROP TABLE agent_memories; --" in stored and 'a " quote' in stored and "NEAR(ada tea)" in stored
    for query in HOSTILE:
        found = in_database(functools.partial(facts.recall, ada, query))
        assert all(isinstance(fact, facts.Fact) for fact in found)
    assert [f.text for f in in_database(functools.partial(facts.recall, ada, "'; DROP TABLE"))][0].startswith("';")
    assert in_database(functools.partial(facts.recall, ada, "*")) == [], "no words, no search"
    assert in_database(functools.partial(facts.recall, someone("bob"), "ada OR tea")) == []


SAME_FACTS = [
    "My name is Ada Lovelace", "I like green tea, not coffee", "My cat is called Ada", "Café au lait on Sundays",
    "I work at example.com as an engineer", "ada@example.com is my e-mail address", "Über-fast trains: Zürich",
    "Numbers: 3.14 and 42 and 007", "snake_case and kebab-case words",
]  # fmt: skip
SAME_QUERIES = {
    "what is my name": ["My name is Ada Lovelace", "ada@example.com is my e-mail address", "My cat is called Ada"],
    "ada": ["ada@example.com is my e-mail address", "My cat is called Ada", "My name is Ada Lovelace"],
    "ADA's tea?": ["ada@example.com is my e-mail address", "My cat is called Ada", "I like green tea, not coffee",
                   "My name is Ada Lovelace"],
    "cafe": [], "café": ["Café au lait on Sundays"], "zürich über": ["Über-fast trains: Zürich"],
    "example": ["ada@example.com is my e-mail address", "I work at example.com as an engineer"],
    "42 007": ["Numbers: 3.14 and 42 and 007"], "kebab snake": ["snake_case and kebab-case words"],
    "e-mail": ["ada@example.com is my e-mail address"], "tea*": ["I like green tea, not coffee"],
    '"green" NEAR(tea)': ["I like green tea, not coffee"], "nothing here": [],
}  # fmt: skip


def test_both_stores_find_the_same_facts_in_the_same_order(remembering):
    """The expectations are the same on SQLite (FTS5) and PostgreSQL (text search): the test runs on both."""
    ada = someone("ada")

    def keep_all(connection: sa.Connection) -> None:
        for text in SAME_FACTS:
            facts.remember(ada, text, 200, 65536, connection)

    in_database(keep_all)
    found = {q: [f.text for f in in_database(functools.partial(facts.recall, ada, q))] for q in SAME_QUERIES}
    assert found == SAME_QUERIES
