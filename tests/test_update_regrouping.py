"""`copier update` across the release that regrouped agent_server/ into packages (history/, memory/, config.py).

The version before it is this repo's own last commit with the flat layout (FLAT_LAYOUT), tagged 0.0.9 in a
temporary repo; the version after it is the working tree, tagged 0.1.0. An owner's agent.py moves nowhere,
so the update needs no migration: the template's own modules are replaced, the old ones removed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from renders import passed, render
from template_versions import commit, generate, git, new_repo, release, update
from test_update import (
    COPIER,
    OWNER_FILES,
    OWNER_README,
    answers,
    assert_no_leftovers,
    customise,
    files,
    relock_and_test,
)

pytestmark = pytest.mark.xdist_group("update-regrouping")

# The last commit of this repo with agent_server/'s 24 flat modules (memory.py, approvals.py, ...).
FLAT_LAYOUT = "a86c91c55a95c3dc56bee7ea03869a9a3475c68e"
FLAT_MODULES = [
    "history.py", "content_parts.py", "tool_pairs.py", "history_errors.py", "approvals.py", "memory.py",
    "memory_settings.py", "memory_merge.py", "memory_store.py", "memory_schema.py", "memory_lakebase.py",
    "conversations_api.py",
]  # fmt: skip


def copy_commit(repo: Path, commit_id: str) -> None:
    """Make `repo` hold exactly this checkout's files at `commit_id`."""
    root = Path(__file__).resolve().parent.parent
    kind = subprocess.run(["git", "cat-file", "-t", commit_id], cwd=root, capture_output=True, text=True)
    assert kind.stdout.strip() == "commit", f"{commit_id} is not in this clone: a full clone of the repo is needed"
    for child in repo.iterdir():
        if child.name != ".git":
            subprocess.run(["rm", "-rf", str(child)], check=True)
    archive = subprocess.run(["git", "archive", commit_id], cwd=root, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(repo)], input=archive, check=True)


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = new_repo(tmp_path_factory.mktemp("template") / "repo")
    release(repo, "0.0.9", lambda repo: copy_commit(repo, FLAT_LAYOUT), from_working_tree=False)
    release(repo, "0.1.0")
    return repo


@pytest.mark.parametrize("data", [{}, {"app_name": "support-bot", "memory": "none"}], ids=["defaults", "custom"])
def test_the_flat_layout_updates_to_what_head_renders(versions, tmp_path, data):
    app = generate(tmp_path / "app", versions, "0.0.9", data)
    assert (app / "agent_server" / "memory.py").is_file(), "0.0.9 has the flat layout"
    old = files(app)

    result = subprocess.run(
        [COPIER, "update", "--defaults", "--vcs-ref", "HEAD", str(app)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr

    assert_no_leftovers(app)
    updated = files(app)
    fresh = files(render(tmp_path / "fresh", data, src=versions, vcs_ref="HEAD"))
    assert answers(app) == answers(tmp_path / "fresh")
    for owned in OWNER_FILES & old.keys():  # an owner's file new since 0.0.9 arrives as a fresh render has it
        assert updated.pop(owned) == old[owned], owned
        fresh.pop(owned)
    assert updated.keys() == fresh.keys(), "no module of the flat layout is left, and every new one is there"
    assert [name for name in updated if updated[name] != fresh[name]] == []


def test_a_customised_app_of_the_flat_layout_keeps_its_changes_and_works(versions, tmp_path):
    app = generate(tmp_path / "app", versions, "0.0.9")
    customise(app)
    commit(app, "My agent")
    mine = files(app)

    update(app, "0.1.0")

    assert_no_leftovers(app)
    assert git("status", "--porcelain", "--", "agent_server/agent.py", cwd=app) == "", "the owner's agent.py stays"
    now = files(app)
    for name in ("agent_server/agent.py", "tests/test_my_agent.py", "uv.lock"):
        assert now[name] == mine[name], name
    assert OWNER_README in now["README.md"].decode() and '"funcy==' in now["pyproject.toml"].decode()
    assert [name for name in FLAT_MODULES if f"agent_server/{name}" in now] == []
    assert "agent_server/history/render.py" in now and "agent_server/memory/turns.py" in now
    output = relock_and_test(
        app, "tests/test_my_agent.py", "tests/test_multiturn.py", "tests/test_owner_hooks.py", "tests/test_memory.py",
        "tests/test_config.py",
    )  # fmt: skip
    assert passed("test_my_agent.py::test_my_agent", output)
