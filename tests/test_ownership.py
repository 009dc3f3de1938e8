"""Who owns each file of a generated app, and the header line that tells the owner so."""

from __future__ import annotations

import re

import pytest
import yaml
from renders import MATRIX, ROOT, render, rendered_files

CONFIG = yaml.safe_load((ROOT / "copier.yml").read_text())

# Rendered once, never touched by `copier update`.
OWNER_FILES = set(CONFIG["_skip_if_exists"])
# Edited by both: update merges the owner's changes with the template's. No header: the owner edits them.
SHARED_FILES = {"README.md", "pyproject.toml", ".env.example", ".gitignore", ".pre-commit-config.yaml"}
SHARED_FILES |= {".python-version", "AGENTS.md"}  # the one Python of uv, CI and the Dockerfile; notes for coding agents
SHARED_FILES |= {"CLAUDE.md"}  # `@AGENTS.md`, for coding agents that read CLAUDE.md
SHARED_FILES |= {"app.yaml", "databricks.yml"}  # deploy settings the owner adds to
# Written by copier itself, with its own header.
COPIER_FILES = {".copier-answers.yml"}
# Formats with comments, and how a comment starts in each.
COMMENT_STARTS = {".py": "#", ".yml": "#", ".yaml": "#", ".toml": "#", ".sh": "#", ".cfg": "#", ".html": "<!--"}
COMMENT_STARTS |= {".md": "<!--"}  # docs/: the reference, one topic a file
# The header: the template owns the file, and where the owner's own code goes instead.
HEADER = re.compile(r"Owned by the template: changes here are overwritten by `copier update`\. \S.*")


@pytest.mark.parametrize("name", ["defaults", "no-ci"])
def test_every_template_owned_file_starts_with_the_header(tmp_path, name):
    # A render of its own: the shared ones also hold what running the app's tests writes (mlruns/, ...).
    app = render(tmp_path / "app", MATRIX[name])
    checked = []
    for path in rendered_files(app):
        relative = str(path.relative_to(app))
        start = COMMENT_STARTS.get(path.suffix)
        if relative in OWNER_FILES | SHARED_FILES | COPIER_FILES or start is None:
            continue
        lines = path.read_text().splitlines()
        first = lines[1] if lines and lines[0].startswith("#!") else (lines[0] if lines else "")
        assert first.startswith(f"{start} ") and HEADER.fullmatch(first[len(start) + 1 :].removesuffix(" -->")), (
            f"{relative} must start with the template's header, got: {first!r}"
        )
        checked.append(relative)
    expected = {"agent_server/turn/serve.py", "agent_server/history/render.py", "scripts/check_update_leftovers.py"}
    expected |= {"docs/configuration.md", "docs/history-shapes.md"}
    assert expected <= set(checked)


def test_owner_files_are_rendered_without_the_header(renders):
    app = renders["defaults"]
    for name in OWNER_FILES:
        assert "Owned by the template" not in (app / name).read_text(), name
    assert "This file is yours" in (app / "agent_server/agent.py").read_text()


def test_the_app_readme_names_every_owner_and_shared_file(renders):
    readme = (renders["defaults"] / "README.md").read_text()
    ownership = readme.split("## Your code", 1)[1].split("\n## ", 1)[0]
    for name in OWNER_FILES | SHARED_FILES:
        assert f"`{name}`" in ownership, name


def test_the_app_docs_name_every_module_of_the_app(renders):
    """Each module of agent_server/ has its row in docs/files.md's table, and each package's row names its modules."""
    app = renders["defaults"]
    files = (app / "docs" / "files.md").read_text()
    rows = {row.split(" | ")[0]: row for row in files.split("\n## ", 1)[0].splitlines()}
    listed = " ".join(rows)
    for module in sorted((app / "agent_server").glob("*.py")):
        assert f"`agent_server/{module.name}`" in listed, module.name
    for package in sorted(path.parent for path in (app / "agent_server").glob("*/__init__.py")):
        (row,) = [row for first, row in rows.items() if f"`agent_server/{package.name}/`" in first]
        if package.name != "offline":  # one concern per module, listed in its own docstring
            for module in sorted(package.glob("*.py")):
                assert module.name == "__init__.py" or f"`{module.name}`" in row, f"{package.name}/{module.name}"
