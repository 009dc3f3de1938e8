"""What an update asks of the app's owner: --trust only for an update across a migration (the README's example,
which follows the policy), the files an update never touches, and the steps of copier's closing message.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from copier.errors import UnsafeTemplateError
from renders import ROOT
from template_versions import append, commit, generate, git, new_repo, release, replace_once, update
from update_support import CONFIG, OWNER_FILES, OWNER_INSTRUCTIONS, assert_no_leftovers

pytestmark = pytest.mark.xdist_group("update")


# --- trust: only an update across a migration needs it --------------------------------------------


def readme_migration() -> dict:
    """The migration example in README.md, which this test runs."""
    block = re.search(r"```yaml\n(_migrations:\n.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert block, "README.md has no _migrations example"
    (migration,) = yaml.safe_load(block.group(1))["_migrations"]
    return migration


def rename_the_agent_module(repo: Path) -> None:
    """A release that renames the owner's agent.py, with the README's migration."""
    git("mv", "template/agent_server/agent.py.jinja", "template/agent_server/my_agent.py.jinja", cwd=repo)
    migration = readme_migration() | {"version": "0.2.0"}
    append(repo / "copier.yml", f"\n_migrations:\n  - {json.dumps(migration)}\n")
    replace_once(
        repo / "copier.yml",
        r"\n  - agent_server/agent\.py\n",
        "\n  - agent_server/agent.py\n  - agent_server/my_agent.py\n",
    )


def test_only_an_update_across_a_migration_needs_trust(tmp_path):
    repo = new_repo(tmp_path / "template")
    release(repo, "0.1.0")
    release(repo, "0.2.0", rename_the_agent_module, from_working_tree=False)
    app = generate(tmp_path / "app", repo, "0.1.0")
    replace_once(app / "agent_server/agent.py", r'INSTRUCTIONS = """.*?"""', OWNER_INSTRUCTIONS)
    commit(app, "My agent")
    mine = (app / "agent_server/agent.py").read_text()

    with pytest.raises(UnsafeTemplateError, match="migrations"):
        update(app, "0.2.0")
    assert git("status", "--porcelain", cwd=app) == "", "a refused update changes nothing"

    update(app, "0.2.0", unsafe=True)
    assert_no_leftovers(app)
    assert not (app / "agent_server/agent.py").exists()
    assert (app / "agent_server/my_agent.py").read_text() == mine, "the owner's code moved with the file"
    assert "R  agent_server/agent.py -> agent_server/my_agent.py" in git("status", "--porcelain", cwd=app)


def test_the_documented_migration_follows_the_policy():
    """A migration has a version, so only updates across it need --trust, and runs before the update.

    copier.yml has no migration yet (tests/test_copier_yml.py fails when one appears, pointing here);
    the README's example is the one users copy, and the trust test above runs it.
    """
    migration = readme_migration()
    assert migration.get("version"), migration
    assert "_stage == 'before'" in migration.get("when", ""), migration


def test_owner_files_and_the_closing_message():
    assert {"uv.lock", "agent_server/agent.py"} <= OWNER_FILES
    message = CONFIG["_message_after_update"]
    steps = ["git status", "check_update_leftovers.py", "uv lock", "uv sync --locked --dev", "uv run pytest"]
    steps.append("git commit")
    positions = [message.find(step) for step in steps]
    assert -1 not in positions and positions == sorted(positions), message
