"""copier.yml stays a safe template with validated answers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from renders import ROOT, render, run

CONFIG = yaml.safe_load((ROOT / "copier.yml").read_text())


def test_needs_no_trust():
    # _tasks, Jinja extensions and version-less migrations are what make copier ask for --trust;
    # there are no migrations yet (tests/test_update_trust.py shows one that needs --trust only across its release).
    assert "_tasks" not in CONFIG
    assert "_jinja_extensions" not in CONFIG
    # A migration needs a version, a `_stage == 'before'` condition and a CHANGELOG entry that says
    # --trust (README.md, **Migrations**; tests/test_update_trust.py checks the documented example).
    assert "_migrations" not in CONFIG


def test_every_question_has_one_short_line_of_help():
    """copier cuts a prompt at the terminal's width: each help fits 80 columns beside copier's own marks."""
    questions = {name: spec for name, spec in CONFIG.items() if not name.startswith("_")}
    assert {"app_name", "description", "llm_provider", "llm_model", "llm_api", "github_ci"} <= questions.keys()
    for name, spec in questions.items():
        assert spec.get("help"), f"question {name} has no help text"
        assert "\n" not in spec["help"] and len(spec["help"]) <= 70, f"{name}: {spec['help']!r}"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("My-Agent", "only lowercase letters, digits and hyphens"),
        ("my_agent", "only lowercase letters, digits and hyphens"),
        ("a", "2 to 30 characters"),
        ("a" * 31, "2 to 30 characters"),
        ("1agent", "must start with a lowercase letter"),
        ("agent-", "must not end with a hyphen"),
        ("my--agent", "two hyphens in a row"),
    ],
)
def test_bad_app_names_are_rejected(tmp_path, name, message):
    with pytest.raises(ValueError, match=message):
        render(tmp_path / "app", {"app_name": name})
    assert not (tmp_path / "app" / "pyproject.toml").exists()


@pytest.mark.parametrize(
    "answers", [{"description": "  "}, {"llm_model": "two words"}, {"llm_models": "a b"}, {"llm_models": "a, a"}]
)
def test_other_validators(tmp_path, answers):
    with pytest.raises(ValueError):
        render(tmp_path / "app", answers)


def test_long_term_memory_without_memory_is_refused(tmp_path):
    """Not asked when memory is none, but a `-d` answer still reaches the render: refused, not an app that cannot
    start. (An answers file that holds both is answered again with the default, false: `when` hides it.)"""
    with pytest.raises(ValueError, match="Long-term memory keeps its facts in memory's store"):
        render(tmp_path / "app", {"long_term_memory": True, "memory": "none"})
    assert not (tmp_path / "app").exists()


def test_bad_choice_is_rejected(tmp_path):
    with pytest.raises(ValueError):
        render(tmp_path / "app", {"llm_provider": "anthropic"})


@pytest.mark.parametrize(
    ("provider", "needed"), [("offline", None), ("openai", "OPENAI_API_KEY"), ("databricks", "DATABRICKS_HOST")]
)
def test_the_message_after_copy_fits_the_answers(tmp_path, provider, needed):
    """It says to commit first (copier update refuses an app outside git) and what start-app needs to run."""
    copier = str(Path(sys.executable).with_name("copier"))
    args = [copier, "copy", "--defaults", "--vcs-ref", "HEAD", "--data", f"llm_provider={provider}", str(ROOT)]
    message = run([*args, str(tmp_path / "app")], cwd=tmp_path).stderr
    assert "git init && git add -A && git commit" in message
    if needed is None:
        assert "export " not in message
    else:
        assert message.index(f"export {needed}") < message.index("uv run start-app"), message
