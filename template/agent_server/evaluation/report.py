# Owned by the template: changes here are overwritten by `copier update`. Put your own cases in evals/cases.yaml.
"""The evaluation's result: per case and scorer, pass or fail with why; per scorer, its pass rate against its
threshold; and the verdict, as a terminal table and as JSON for CI.

A case passes a scorer when every turn the scorer had something to check passes (a session judge scores the
case as a whole). A scorer passes when its pass rate (passing cases over cases it scored) reaches its threshold
in the cases file, 1.0 (every case) unless the file says less. The run passes when every scorer does: the exit
status is 0, else 1. A case whose turn failed has its later turns unsent, and fails turn_succeeded.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_server.evaluation.conversation import TurnResult
from agent_server.evaluation.scorers import TURN_ATTRIBUTE, passed, root_attribute

DEFAULT_THRESHOLD = 1.0


@dataclass
class Score:
    passed: bool
    rationale: str


@dataclass
class CaseResult:
    name: str
    turns: list[TurnResult]
    planned_turns: int
    scores: dict[str, Score] = field(default_factory=dict)
    model: str | None = None  # the model it was played on (`evaluate --model`); None: the app's default

    @property
    def shown_name(self) -> str:
        return self.name if self.model is None else f"{self.name} @{self.model}"

    @property
    def passed(self) -> bool:
        return all(score.passed for score in self.scores.values())


@dataclass
class Report:
    cases: list[CaseResult]
    rates: dict[str, tuple[int, int]]  # scorer: (cases passed, cases scored)
    thresholds: dict[str, float]
    run_id: str
    experiment_id: str

    def threshold(self, scorer: str) -> float:
        """A scorer's threshold; a rate of one model's (`scorer @model`) has the scorer's."""
        return self.thresholds.get(scorer.split(" @", 1)[0], DEFAULT_THRESHOLD)

    def scorer_passes(self, scorer: str) -> bool:
        good, scored = self.rates[scorer]
        return scored == 0 or good / scored >= self.threshold(scorer) - 1e-9

    @property
    def passed(self) -> bool:
        return all(self.scorer_passes(scorer) for scorer in self.rates)

    def failures(self) -> list[str]:
        """One line per scorer below its threshold, naming the cases that failed it and why."""
        lines = []
        for scorer, (good, scored) in self.rates.items():
            if not self.scorer_passes(scorer):
                name, _, model = scorer.partition(" @")
                failing = [c for c in self.cases if name in c.scores and not c.scores[name].passed
                           and (not model or c.model == model)]  # fmt: skip
                named = "; ".join(f"{case.shown_name}: {case.scores[name].rationale}" for case in failing)
                lines.append(f"{scorer} passed {good} of {scored} (threshold {self.threshold(scorer):g}): {named}")
        return lines


def build(
    cases: list[CaseResult],
    rows: list[dict[str, Any]],
    scorers: list[str],
    thresholds: dict[str, float],
    run_id: str,
    experiment_id: str,
) -> Report:
    """The report of `cases` from MLflow's result rows: one per turn's (scored) trace, with each scorer's value
    and rationale in the columns `NAME/value` and `NAME/rationale`."""
    by_turn = {_turn_of(row): row for row in rows}
    for case in cases:
        for turn in case.turns:
            turn.trace_id = by_turn.get(turn.turn_id, {}).get("trace_id") or turn.trace_id
    rates: dict[str, tuple[int, int]] = {}
    for scorer in scorers:
        good = scored = 0
        for case in cases:
            turns = [(number, by_turn.get(turn.turn_id, {})) for number, turn in enumerate(case.turns, 1)]
            verdicts = [(n, passed(row.get(f"{scorer}/value")), row.get(f"{scorer}/rationale")) for n, row in turns]
            checked = [(n, ok, why) for n, ok, why in verdicts if ok is not None]
            if not checked:
                continue
            failed = [(n, why) for n, ok, why in checked if not ok]
            where = "" if len(case.turns) == 1 else f"turn {failed[0][0]}: " if failed else ""
            case.scores[scorer] = Score(not failed, where + _text(failed[0][1] if failed else checked[0][2]))
            good, scored = good + (not failed), scored + 1
        rates[scorer] = (good, scored)
    models = list(dict.fromkeys(case.model for case in cases if case.model is not None))
    if len(models) > 1:  # each model's rate, so that an owner compares them: `scorer @model`
        rates = {
            f"{scorer} @{model}": (
                sum(c.scores[scorer].passed for c in cases if c.model == model and scorer in c.scores),
                sum(scorer in c.scores for c in cases if c.model == model),
            )
            for scorer in rates
            for model in models
        }
    for case in cases:
        if len(case.turns) < case.planned_turns:
            first, last = len(case.turns) + 1, case.planned_turns
            unsent = f"; turn {first} was not sent" if first == last else f"; turns {first} to {last} were not sent"
            score = case.scores.get("turn_succeeded")
            if score is not None:
                score.rationale += unsent
    return Report(cases, rates, thresholds, run_id, experiment_id)


def _turn_of(row: dict[str, Any]) -> str | None:
    """The id of the turn a result row scored, read from its trace (which result_df holds as JSON text)."""
    from mlflow.entities import Trace

    trace = row.get("trace")
    turn = root_attribute(Trace.from_json(trace) if isinstance(trace, str) else trace, TURN_ATTRIBUTE)
    return str(turn) if turn is not None else None


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return " ".join(str(value).split())


def table(report: Report) -> str:
    """One row per case and scorer, then one per scorer with its rate, then the verdict."""
    width = max(60, min(shutil.get_terminal_size((120, 24)).columns, 160))
    name_width = min(max([len(case.shown_name) for case in report.cases] + [4]), 48)
    scorer_width = max([len(scorer) for scorer in report.rates] + [6])
    why_width = max(20, width - name_width - scorer_width - 12)
    lines = [f"{'case':<{name_width}}  {'scorer':<{scorer_width}}  result  why", "-" * width]
    for case in report.cases:
        for scorer, score in case.scores.items():
            why = score.rationale if len(score.rationale) <= why_width else score.rationale[: why_width - 1] + "…"
            result = "pass" if score.passed else "FAIL"
            lines.append(f"{case.shown_name[:name_width]:<{name_width}}  {scorer:<{scorer_width}}  {result:<6}  {why}")
    lines += ["-" * width, f"{'scorer':<{scorer_width}}  passed  threshold"]
    for scorer, (good, scored) in report.rates.items():
        verdict = "" if report.scorer_passes(scorer) else "  BELOW THRESHOLD"
        lines.append(f"{scorer:<{scorer_width}}  {good:>2}/{scored:<3}  {report.threshold(scorer):g}{verdict}")
    failed = sum(not case.passed for case in report.cases)
    verdict = "PASSED" if report.passed else "FAILED"
    lines.append(f"{verdict}: {len(report.cases)} cases, {failed} failed. MLflow run {report.run_id}.")
    return "\n".join(lines)


def as_json(report: Report) -> dict[str, Any]:
    return {
        "passed": report.passed,
        "run_id": report.run_id,
        "experiment_id": report.experiment_id,
        "scorers": {
            scorer: {
                "passed": good,
                "scored": scored,
                "threshold": report.threshold(scorer),
                "ok": report.scorer_passes(scorer),
            }
            for scorer, (good, scored) in report.rates.items()
        },
        "cases": [
            {
                "name": case.name,
                "model": case.model,
                "passed": case.passed,
                "scores": {scorer: {"passed": s.passed, "rationale": s.rationale} for scorer, s in case.scores.items()},
                "turns": [
                    {
                        "user": t.user,
                        "seconds": round(t.seconds, 3),
                        "error": t.error,
                        "trace_id": t.trace_id,
                        "model": t.model,
                    }  # fmt: skip
                    for t in case.turns
                ],
            }
            for case in report.cases
        ],
        "failures": report.failures(),
    }


def write_json(report: Report, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(as_json(report), indent=2) + "\n", encoding="utf-8")
