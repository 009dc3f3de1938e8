# Owned by the template: changes here are overwritten by `copier update`. Put your own cases in evals/cases.yaml.
"""`--simulate N`: N more conversations for each case with a `goal`, the user played by the judge model.

MLflow's ConversationSimulator writes each user message (from the case's goal and persona) and decides when
the goal is met; the app answers through the same client as every case (conversation.py), so each simulated
turn is traced and scored like a written one. One fix to the simulator's loop (mlflow-skinny 3.17,
mlflow/genai/simulators/simulator.py): it ends a conversation silently on a turn that raises, dropping that
turn's trace, so a broken turn would score as a short, successful conversation. Here a turn never raises: a
failed turn answers nothing, which ends the conversation with the turn's trace kept, and its error fails
turn_succeeded like any case's.
"""

from __future__ import annotations

import threading
from typing import Any

from agent_server.evaluation.cases import Case
from agent_server.evaluation.conversation import AppUnderTest, Chat, TurnResult
from agent_server.evaluation.report import CaseResult

MAX_TURNS = 5


def conversations(app: AppUnderTest, cases: tuple[Case, ...], count: int, judge: str, label: str) -> list[CaseResult]:
    """`count` simulated conversations per case with a goal, as results to score beside the written cases."""
    from mlflow.genai.simulators import ConversationSimulator

    wanted = [(case, copy) for case in cases if case.goal for copy in range(1, count + 1)]
    if not wanted:
        return []
    played: dict[str, list[TurnResult]] = {}
    chats: dict[str, Chat] = {}
    names: dict[str, str] = {}
    lock = threading.Lock()  # the simulator runs its conversations in threads; each one's turns, in order

    def predict_fn(input: list[dict[str, Any]], mlflow_session_id: str, case: str, copy: int) -> dict[str, Any]:
        with lock:
            turns = played.setdefault(mlflow_session_id, [])
            chat = chats.setdefault(mlflow_session_id, Chat(session=mlflow_session_id))
            names[mlflow_session_id] = f"{case} (simulated {copy})"
        result = app.turn(chat, last_user_text(input))
        with lock:
            turns.append(result)
        return {"output": [] if result.error else result.items}  # nothing: the simulator stops, the trace is kept

    simulator = ConversationSimulator(
        test_cases=[
            {"goal": case.goal, "persona": case.persona, "context": {"case": case.name, "copy": copy}}
            if case.persona
            else {"goal": case.goal, "context": {"case": case.name, "copy": copy}}
            for case, copy in wanted
        ],
        max_turns=MAX_TURNS,
        user_model=judge,
    )
    simulator.simulate(predict_fn)
    return sorted(
        (CaseResult(names[session], turns, len(turns)) for session, turns in played.items()), key=lambda c: c.name
    )


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """The simulated user's new message: the last user message of the history the simulator passes."""
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else str(content)
    return ""
