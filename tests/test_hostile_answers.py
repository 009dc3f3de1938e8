"""Hostile copier answers: each is refused by its validator, or renders an app that holds it as plain data.

An answer lands in Python, YAML, TOML, Markdown and .env files, and `.copier-answers.yml` can be
edited by anyone who can open a pull request, then re-rendered by `copier update --defaults`. So
every question that takes free input gets every value below. A value its validator lets through
must come out of every file as the same string: Python that parses and reads back the value, YAML
and TOML that parse to it, and no command run (nothing named PWNED appears).
"""

from __future__ import annotations

import ast
import tomllib

import pytest
import yaml
from renders import render, rendered_defaults, rendered_files
from template_versions import append, commit, generate, new_repo, release, update

INJECTION = 'x"+str(__import__("os").system("touch PWNED"))+"'
HOSTILE = {
    "injection": INJECTION,
    "double-quote": 'gpt"4',
    "single-quote": "it's",
    "backslash": "back\\slash",
    "newline": "one\ntwo",
    "carriage-return": "one\rtwo",
    "tab": "a\tb",
    "nul": "a\x00b",
    "jinja": "{{ 7 * 7 }}{% raw %}",
    "shell-and-bundle-variable": "${HOME}",
    "yaml-flow": "[a, {b: c}] # x",
    "toml-close": '"""\nx = 1',
    "unicode": "ünïcødé ✓ 模型",
    "line-separator": "a\u2028b",
    "right-to-left-override": "a\u202eb",
    "html": "<script>alert(1)</script>",
}
QUESTIONS = ["app_name", "description", "llm_model", "llm_models"]
# llm_models takes llm_model's characters and commas, and refuses any other: one value of each kind is enough.
SOME = {"llm_models": ("injection", "newline", "jinja", "shell-and-bundle-variable", "yaml-flow", "unicode")}


def hostile_cases():
    for question in QUESTIONS:
        for label, value in HOSTILE.items():
            if label in SOME.get(question, HOSTILE):
                yield pytest.param(question, value, id=f"{question}-{label}")


@pytest.mark.parametrize(("question", "value"), list(hostile_cases()))
def test_a_hostile_answer_is_refused_or_stays_data(tmp_path, question, value):
    app = tmp_path / "app"
    try:
        render(app, {question: value})
    except ValueError as error:
        assert f"Validation error for question '{question}'" in str(error)
        assert not (app / "pyproject.toml").exists()
        return
    assert not list(tmp_path.rglob("PWNED"))
    for path in rendered_files(app):
        if path.suffix == ".py":
            ast.parse(path.read_text(), str(path))
        elif path.suffix in (".yml", ".yaml"):
            yaml.safe_load(path.read_text())
        elif path.suffix == ".toml":
            tomllib.loads(path.read_text())
    if question == "llm_model":
        assert rendered_defaults(app)["LLM_MODEL"] == value
        app_yaml = yaml.safe_load((app / "app.yaml").read_text())
        assert {"name": "LLM_MODEL", "value": value} in app_yaml["env"]
    if question == "description":
        bundle = yaml.safe_load((app / "databricks.yml").read_text())
        assert bundle["resources"]["apps"]["agent"]["description"] == value
        assert value in (app / "README.md").read_text()


def test_an_edited_answers_file_is_validated_again_on_update(tmp_path):
    """A pull request that edits .copier-answers.yml cannot smuggle code in through `copier update --defaults`."""
    repo = new_repo(tmp_path / "template")
    release(repo, "0.1.0")
    release(repo, "0.1.1", lambda root: append(root / "CHANGELOG.md", "\n- A later release.\n"))
    app = generate(tmp_path / "app", repo, "0.1.0")
    answers = app / ".copier-answers.yml"
    answers.write_text(answers.read_text().replace("llm_model: offline", f"llm_model: '{INJECTION}'"))
    commit(app, "Edit the answers")
    with pytest.raises(ValueError, match="Validation error for question 'llm_model'"):
        update(app, "0.1.1")
    assert "__import__" not in (app / "agent_server" / "config" / "defaults.py").read_text()
