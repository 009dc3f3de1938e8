"""Every answer set renders into a clean, valid, locked, lint-free app."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from renders import MATRIX, TEMPLATE, rendered_defaults, rendered_files, run, uv

# Jinja left in the output; GitHub expressions `${{ ... }}` are not Jinja.
STRAY_JINJA = re.compile(r"(?<!\$)\{\{|\{%|%\}|\{#")

pytestmark = pytest.mark.parametrize("name", MATRIX)


def test_no_stray_jinja(renders, name):
    app = renders[name]
    for path in rendered_files(app):
        assert not path.name.endswith(".jinja"), path
        assert not STRAY_JINJA.search(str(path.relative_to(app))), path
        text = path.read_text(errors="replace")
        assert not STRAY_JINJA.search(text), f"{path}: {STRAY_JINJA.search(text).group()!r}"


def test_toml_and_yaml_are_valid(renders, name):
    app = renders[name]
    for path in rendered_files(app):
        if path.suffix == ".toml" or path.name == "uv.lock":
            tomllib.loads(path.read_text())
        elif path.suffix in (".yml", ".yaml"):
            assert yaml.safe_load(path.read_text()) is not None, path


def test_answers_are_recorded_and_used(renders, name):
    app = renders[name]
    answers = yaml.safe_load((app / ".copier-answers.yml").read_text())
    expected = MATRIX[name]
    assert {key: answers[key] for key in expected} == expected
    assert answers["_src_path"]
    defaults = rendered_defaults(app)
    assert (defaults["LLM_PROVIDER"], defaults["LLM_API"]) == (answers["llm_provider"], answers["llm_api"])
    assert answers["app_name"] in (app / "README.md").read_text()
    assert (app / ".github" / "workflows" / "ci.yml").exists() == answers["github_ci"]


def test_answers_never_change_dependencies(renders, name):
    app = renders[name]
    assert (app / "pyproject.toml").read_text() == (TEMPLATE / "pyproject.toml").read_text()
    assert (app / "uv.lock").read_text() == (TEMPLATE / "uv.lock").read_text()


def test_lock_is_current(renders, name):
    uv("lock", "--check", "--no-config", cwd=renders[name])


def test_ruff(renders, name):
    ruff = str(Path(sys.executable).with_name("ruff"))  # the template's own locked ruff
    for args in (["check", "."], ["format", "--check", "."]):
        run([ruff, *args], cwd=renders[name])
