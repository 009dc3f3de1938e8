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
from dataclasses import dataclass
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


class TurnContext:
    """What one turn runs on, from its prepared request to its stored answer.

    Not a dataclass: MLflow's tracing writes a dataclass's every field into the trace (the run's context is among the
    SDK call's arguments), and a turn's headers hold the user's token. A trace shows it by its repr, which names the
    route, the caller and the conversation only.
    """

    def __init__(
        self,
        path: str,
        headers: Mapping[str, str],
        body: dict[str, Any],
        history: list[dict[str, Any]] | None = None,
        sources: list[int | None] | None = None,
        turn: Turn | None = None,
    ) -> None:
        self.path = path  # the route the client posted to (INVOCATIONS or RESPONSES): the shapes its answer takes
        self.headers = headers  # the request's (a run's: its first request's), for identity and the user's token
        self.body = body  # the request, parsed once and checked; its `input`, the history as the agent runs it
        # The history as the agent runs it: rendered, calls paired with outputs, only the approvals the app signed
        # honoured (the owner's customize_history is applied on top, turn/serve.py).
        self.history = history if history is not None else []
        # For each item of `history`, the index of the client's item it stands for (None: an item of the stored
        # conversation), so that an error about an item names the one the client sent.
        self.sources = sources if sources is not None else []
        self.turn = turn  # with conversation memory on: the stored conversation's turn, ended by the turn's end
        self.owner: str | None = None  # the caller's identity (identity.owner_of); None: none given, memory off
        self.model = ModelFailure()  # the model's failure, and the input it ran on
        self.model_name = ""  # the model the turn runs on: one of LLM_MODELS (prepare.py); "": the default
        self.run: RunAttempt | None = None  # a background run's attempt; None: a client's own request
        self.return_trace_id = False  # `x-mlflow-return-trace-id: true`: the answer's metadata names its trace
        self.custom_outputs: dict[str, str] | None = None  # what every answer carries beside its items (serve.py)
        self.trace_id: str | None = None  # the turn's trace, for the answer's metadata (None: untraced, not asked)

    def __repr__(self) -> str:
        conversation = self.turn.conversation_id if self.turn is not None else None
        return f"TurnContext(path={self.path!r}, owner={self.owner!r}, conversation={conversation!r})"

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream", False))

    def call_named(self, call_id: str) -> dict[str, Any] | None:
        """The `function_call` of the history with this call id (an approved call's), for /responses' `mcp_call`."""
        for item in self.history:
            if item.get("type") == "function_call" and item.get("call_id") == call_id:
                return dict(item)
        return None
