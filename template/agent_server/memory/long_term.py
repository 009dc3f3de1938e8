# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Long-term memory's tools, `remember(fact)` and `recall(query)`: added by the template to the owner's agent on
every request while LONG_TERM_MEMORY is on (turn/serve.for_this_request), never by an edit to agent.py. An agent that
already has a tool of either name keeps its own.

Each acts for the turn's caller alone: the identity identity.owner_of read from its headers, which the SDK hands each
tool in the turn's run context (turn_context.TurnContext.owner; a background run's carries it as well). A request
that names no one remembers and recalls nothing. The facts and their bounds are facts.py's. Each read and write is a
span of the turn's trace, `memory.remember` and `memory.recall`; a failed store is told to the model, never a failed
turn.

Memories are not put before the model at the start of each turn: the model recalls when it needs to. Measured on
SQLite with 200 facts (README, "Long-term memory"), a recall takes 0.3 ms (no fact matches) to 7 ms (all 200 do),
about 10 ms on PostgreSQL on loopback; what it costs is tokens. Given on every turn, RECALLED facts would add up to
1,250 tokens to every model call of every turn, mostly unrelated to what was asked, chosen by words of the turn that
often match badly; a recall costs one more model call, only in the turns that need it.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import logging
from collections.abc import Iterator
from typing import Any

from agents import Agent, RunContextWrapper, function_tool

from agent_server.memory import database, facts
from agent_server.memory.store import Unavailable
from agent_server.store.settings import memory_settings

logger = logging.getLogger("agent_server.memory")

UNAVAILABLE = "Long-term memory is unavailable right now ({why}); nothing was {done}. Tell the user if it matters."


def enabled() -> bool:
    """LONG_TERM_MEMORY is on (store/settings.py refuses it without a store, or without users on a shared host)."""
    current = memory_settings()
    return current.backend != "none" and current.long_term


def with_memory_tools(agent: Agent) -> Agent:
    """The owner's agent with remember and recall, when long-term memory is on."""
    if not enabled():
        return agent
    own = {getattr(tool, "name", None) for tool in agent.tools}
    added = [tool for tool in (remember, recall) if tool.name not in own]
    return agent.clone(tools=[*agent.tools, *added]) if added else agent


@function_tool(name_override="remember")
async def remember(wrapper: RunContextWrapper[Any], fact: str) -> str:
    """Remember one short fact about the user you are talking with (their name, a preference, something they ask you
    to keep in mind), to recall in later conversations. Only what the user would want remembered.

    Args:
        fact: The fact, in one short sentence (at most 500 characters).
    """
    owner = _owner(wrapper)
    if owner is None:
        return "Nothing was remembered: this request names no user."
    current = memory_settings()
    with _span("memory.remember", {"fact": fact}) as span:
        keep = functools.partial(facts.remember, owner, fact, current.max_facts, current.max_fact_bytes)
        try:
            kept = await (await database.store()).run(keep, write=True)
        except facts.FactRefused as refused:
            said = f"Not remembered: {refused}"
        except Unavailable as error:
            said = UNAVAILABLE.format(why=error, done="remembered")
        else:
            said = f"Remembered: {kept.fact.text}"
            if kept.dropped:
                said += (
                    f" To make room, the {kept.dropped} oldest facts about the user were forgotten: this app keeps at "
                    f"most {current.max_facts} facts ({current.max_fact_bytes} bytes) a user."
                )
        _outputs(span, said)
    return said


@function_tool(name_override="recall")
async def recall(wrapper: RunContextWrapper[Any], query: str) -> str:
    """Find what you remember about the user you are talking with: the facts that share words with the query, best
    first; if none does, the newest facts. Use it when knowing the user would help (their name, their preferences).

    Args:
        query: Words to look for, such as "name" or "favourite food".
    """
    owner = _owner(wrapper)
    if owner is None:
        return "Nothing was recalled: this request names no user."
    with _span("memory.recall", {"query": query}) as span:
        try:
            found = await (await database.store()).run(functools.partial(_recall, owner, query))
        except Unavailable as error:
            said = UNAVAILABLE.format(why=error, done="recalled")
        else:
            said = _told(*found)
        _outputs(span, said)
    return said


def _recall(owner: str, query: str, connection: Any) -> tuple[list[facts.Fact], bool]:
    """The facts that match `query`, or, if none does, the newest ones; and whether they matched."""
    matched = facts.recall(owner, query, connection)
    return (matched, True) if matched else (facts.newest(owner, facts.RECALLED, connection), False)


def _told(found: list[facts.Fact], matched: bool) -> str:
    if not found:
        return "You remember nothing about this user yet."
    lines = [f"- {_day(fact.created_at)}: {fact.text}" for fact in found]
    said = "Facts you remember about the user" if matched else "No fact matches; the newest facts about the user"
    return f"{said} (kept on):\n" + "\n".join(lines)


def _day(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).date().isoformat()


def _owner(wrapper: RunContextWrapper[Any]) -> str | None:
    """The turn's caller, from its run context (turn_context.py); None: the turn names no one."""
    return getattr(wrapper.context, "owner", None)


@contextlib.contextmanager
def _span(name: str, inputs: dict[str, Any]) -> Iterator[Any]:
    """A span of the turn's trace; None when the turn is not traced."""
    import mlflow  # the server that runs the tools has imported it already
    from mlflow.entities import SpanType

    if mlflow.get_current_active_span() is None:
        yield None
        return
    with mlflow.start_span(name=name, span_type=SpanType.MEMORY) as span:
        span.set_inputs(inputs)
        yield span


def _outputs(span: Any, said: str) -> None:
    if span is not None:
        span.set_outputs(said)
