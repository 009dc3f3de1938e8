# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""What one /invocations or /responses request carries from the request guard to the handlers, in one object.

    request guard (request_guard.py)   begin(RequestState(...))   once the body is checked and rendered
    handlers (handlers.py)              current()                  the history, the memory turn, the approvals,
                                                                   the caller's identity
    handlers                            record_input, record_failure   what the model ran on, and how it failed
    UpstreamErrors (error_responses.py) current().model            the failure's status, naming the client's item

It is set in one place and read through `current()`; nothing else carries a request's state between them.
A request that the guard does not see (a handler called directly, as the owner's tests may) has none, and
the handlers render its history themselves.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_server.errors import ModelFailure

if TYPE_CHECKING:
    from agent_server.memory import Turn

__all__ = [
    "ModelFailure", "RequestState", "RunAttempt", "begin", "current", "record_failure", "record_input", "tool_call_hook"
]  # fmt: skip


@dataclass(frozen=True)
class RunAttempt:
    """A background run's attempt at its request (runs/execute.py), which goes through the app as a request of its
    own: the request guard reads this from the request's scope (RUN_ATTEMPT_KEY) and keeps it in the state."""

    # Told of each tool call as it starts, before its output exists: after a crash it is not made again unasked.
    on_tool_call: Callable[[dict[str, Any]], Awaitable[None]]
    # `input[continues_from:]` are the items earlier attempts of the run finished, which continue the run's own
    # turn: they are appended to the conversation, never merged with it (memory/merge.py). None: the first attempt.
    continues_from: int | None
    # What this attempt produced if its client cancelled the run (each call it left running answered as
    # interrupted), for the conversation to keep after the turns before it; None: not cancelled, nothing to keep.
    stopped_output: Callable[[], list[dict[str, Any]] | None]


@dataclass
class RequestState:
    # The history as the handlers run it: rendered, calls paired with outputs, only the approvals the app signed
    # honoured. It is what MLflow was given, so it is never rendered twice.
    history: list[dict[str, Any]]
    # For each item of `history`, the index of the client's item it stands for (None: an item of the stored
    # conversation), so that an error about an item names the one the client sent.
    sources: list[int | None]
    turn: Turn | None = None  # with conversation memory on: the turn, started by the guard and ended by it
    owner: str | None = None  # the caller's identity (identity.owner_of), which the trace records; None: none given
    refused_approvals: list[int] = field(default_factory=list)  # client items: approvals the app did not sign
    model: ModelFailure = field(default_factory=ModelFailure)
    run: RunAttempt | None = None  # a background run's attempt (runs/execute.py); None: a client's own request


_current: contextvars.ContextVar[RequestState | None] = contextvars.ContextVar("agent_server.request", default=None)


def begin(state: RequestState) -> None:
    """The request guard's, once per request, before the app sees the request."""
    _current.set(state)


def current() -> RequestState | None:
    return _current.get()


def record_input(items: list[Any], has_instructions: bool) -> None:
    """Called by a handler with the items it runs the agent on, to map the model's `param` back."""
    state = _current.get()
    if state is not None:
        state.model.model_input, state.model.system_messages = items, int(has_instructions)


def tool_call_hook() -> Callable[[dict[str, Any]], Awaitable[None]] | None:
    """What the stream handler tells of each tool call as it starts (its item goes out only with its output):
    a background run's recorder, or None."""
    state = _current.get()
    return state.run.on_tool_call if state is not None and state.run is not None else None


def record_failure(error: BaseException) -> None:
    """Called by a handler with the model's failure (or memory's), before it re-raises it."""
    state = _current.get()
    if state is not None:
        state.model.error = error
