# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""One turn's state, in one object, handed to each step of the turn as an argument.

The route (routes.py) makes it once a request's body is read and parsed (turn/prepare.py), a background run makes
it from its stored request (runs/execute.py), and the SDK carries it to every tool as its run context
(`Runner.run_streamed(..., context=turn)`; a tool reads it as `wrapper.context`), the way openai-agents hands
per-run state to tools (`RunContextWrapper`). Nothing else carries a turn's state: no ContextVar, no scope key, no
module global.

An owner's function tool can read the caller from it:

    @function_tool
    def whoami(wrapper: RunContextWrapper[TurnContext]) -> str:
        return wrapper.context.owner or "nobody in particular"
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_server.errors import ModelFailure

if TYPE_CHECKING:
    from agent_server.memory import Turn

INVOCATIONS, RESPONSES = "/invocations", "/responses"  # the two turn routes: each answers in its own shapes


@dataclass(frozen=True)
class RunAttempt:
    """A background run's attempt at its request (runs/execute.py), which serves the turn on a task of its own."""

    # Told of each tool call as it starts, before its output exists: after a crash it is not made again unasked.
    on_tool_call: Callable[[dict[str, Any]], Awaitable[None]]
    # `input[continues_from:]` are the items earlier attempts of the run finished, which continue the run's own
    # turn: they are appended to the conversation, never merged with it (memory/merge.py). None: the first attempt.
    continues_from: int | None
    # What this attempt produced if its client cancelled the run (each call it left running answered as
    # interrupted), for the conversation to keep after the turns before it; None: not cancelled, nothing to keep.
    stopped_output: Callable[[], list[dict[str, Any]] | None]
    # The output_index its first /responses item gets: after the items its run's earlier attempts announced.
    first_output_index: int = 0


@dataclass
class TurnContext:
    """What one turn runs on, from its prepared request to its stored answer."""

    path: str  # the route the client posted to (INVOCATIONS or RESPONSES): the shapes its answer takes
    headers: Mapping[str, str]  # the request's (a run's: its first request's), for identity and the user's token
    body: dict[str, Any]  # the request, parsed once, checked, and its `input` the history as the client sent it
    # The history as the agent runs it: rendered, calls paired with outputs, only the approvals the app signed
    # honoured (the owner's customize_history is applied on top, turn/serve.py).
    history: list[dict[str, Any]] = field(default_factory=list)
    # For each item of `history`, the index of the client's item it stands for (None: an item of the stored
    # conversation), so that an error about an item names the one the client sent.
    sources: list[int | None] = field(default_factory=list)
    turn: Turn | None = None  # with conversation memory on: the stored conversation's turn, ended by the turn's end
    owner: str | None = None  # the caller's identity (identity.owner_of); None: none given, memory off
    model: ModelFailure = field(default_factory=ModelFailure)  # the model's failure, and the input it ran on
    run: RunAttempt | None = None  # a background run's attempt; None: a client's own request
    return_trace_id: bool = False  # `x-mlflow-return-trace-id: true`: the answer's metadata names its trace
    custom_outputs: dict[str, str] | None = None  # what every answer carries beside its items (turn/serve.py)
    trace_id: str | None = None  # the turn's trace, for the answer's metadata (with return_trace_id; None: untraced)

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream", False))

    def call_named(self, call_id: str) -> dict[str, Any] | None:
        """The `function_call` of the history with this call id (an approved call's), for /responses' `mcp_call`."""
        for item in self.history:
            if item.get("type") == "function_call" and item.get("call_id") == call_id:
                return dict(item)
        return None
