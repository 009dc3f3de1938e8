"""`copier update` across the releases that regrouped the template's own files. An owner's file moves nowhere in
either, so neither needs a migration: the template's own files are replaced, the old ones removed.

- 0.0.9, this repo's last commit with the flat layout (FLAT_LAYOUT): agent_server/ grouped into packages
  (history/, memory/, config.py);
- 0.0.10, this repo's last commit before the second regrouping (SPREAD_LAYOUT): agent_server/'s 26 top-level
  modules grouped again (middleware/, scheduling/, tools/, identity.py), and the template's tests moved to
  tests/template/, leaving tests/ to the owner;
- 0.0.11, this repo's last commit before the third regrouping (GROUPED_LAYOUT): agent_server/'s 18 top-level
  modules down to 12 (config/, observability/), and tests/template/ a package, so an owner's test may share a
  name with one of the template's;
- 0.1.0, the working tree.
Each old version is tagged in a temporary repo.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from renders import passed, render
from template_versions import append, commit, generate, git, new_repo, release, update
from update_support import (
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
# The last commit of this repo with agent_server/'s 26 top-level modules and the template's tests in tests/.
SPREAD_LAYOUT = "f6231f3e5df6254300ad842e3d9b908f97f71826"
SPREAD_MODULES = [
    "asgi.py", "request_guard.py", "request_state.py", "browser_guard.py", "error_responses.py", "head_deadline.py",
    "health.py", "rate_limits.py", "responses_dialect.py", "responses_shapes.py", "fair_steps.py", "turn_starts.py",
    "offload.py", "garbage_collection.py", "mcp_connections.py", "approved_calls.py", "approval_answers.py",
]  # fmt: skip
# The last commit of this repo with agent_server/'s 18 top-level modules (config.py, tracing.py, ...).
GROUPED_LAYOUT = "8f5b76f54045908f9b6abe833dfc49b734569d86"
GROUPED_MODULES = ["config.py", "setting_types.py", "defaults.py", "tracing.py", "logs.py", "feedback.py"]
# The last commit of this repo whose turn was MLflow's agent server route behind eight middlewares (handlers.py,
# middleware/request_guard.py, ...): the turn is turn/ and routes.py since.
MIDDLEWARE_LAYOUT = "4930628ef4711eadacca6363712ce5c6a9a18105"
MIDDLEWARE_MODULES = [
    "handlers.py", "middleware/request_guard.py", "middleware/request_state.py", "middleware/responses_dialect.py",
    "middleware/responses_shapes.py", "middleware/rate_limits.py",
]  # fmt: skip
# Each old layout: its tag, and a file only it has.
LAYOUTS = {"flat": ("0.0.9", "agent_server/memory.py"), "spread": ("0.0.10", "agent_server/request_guard.py")}
LAYOUTS |= {"grouped": ("0.0.11", "agent_server/tracing.py"), "middleware": ("0.0.12", "agent_server/handlers.py")}


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
    release(repo, "0.0.10", lambda repo: copy_commit(repo, SPREAD_LAYOUT), from_working_tree=False)
    release(repo, "0.0.11", lambda repo: copy_commit(repo, GROUPED_LAYOUT), from_working_tree=False)
    release(repo, "0.0.12", lambda repo: copy_commit(repo, MIDDLEWARE_LAYOUT), from_working_tree=False)
    release(repo, "0.1.0")
    return repo


# Each layout with the default answers, and the older two with others too (the later layouts' moves do not depend
# on the answers, and each case takes about 12 s).
ANSWERS = {"defaults": {}, "custom": {"app_name": "support-bot", "memory": "none"}}
CASES = [
    pytest.param(data, layout, id=f"{name}-{layout}")
    for name, data in ANSWERS.items()
    for layout in LAYOUTS
    if name == "defaults" or layout not in ("grouped", "middleware")
]


@pytest.mark.parametrize(("data", "layout"), CASES)
def test_an_old_layout_updates_to_what_head_renders(versions, tmp_path, data, layout):
    tag, only_there = LAYOUTS[layout]
    app = generate(tmp_path / "app", versions, tag, data)
    assert (app / only_there).is_file(), f"{tag} has the {layout} layout"
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
    assert updated.keys() == fresh.keys(), f"no file of the {layout} layout is left, and every new one is there"
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
        app, "tests/test_my_agent.py", "tests/template/test_multiturn.py", "tests/template/test_owner_hooks.py",
        "tests/template/test_memory.py",
    )  # fmt: skip
    assert passed("test_my_agent.py::test_my_agent", output)


# An owner's test of the spread layout that leans on the template's test helpers: its fixtures (conftest.py) and
# its client (support.py), both in tests/ then. It keeps working once they are the template's, in tests/template/.
OWNER_CHAT_TEST = '''"""The owner's chat test, through the real server."""

from support import Chat, reply_text


def test_my_chat(app_client):
    assert reply_text(Chat(app_client, stream=False).send("Hello")).endswith("You said: Hello")
'''
OWNER_CASE = """  - name: counts-words
    turns:
      - user: How many words are in "one two three"?
        expect: {tools: [count_words]}
"""


def test_a_customised_app_of_the_spread_layout_keeps_its_changes_and_works(versions, tmp_path):
    app = generate(tmp_path / "app", versions, "0.0.10")
    assert (app / "tests/support.py").is_file() and (app / "agent_server/request_guard.py").is_file()
    customise(app)
    (app / "tests/test_my_chat.py").write_text(OWNER_CHAT_TEST)
    append(app / "evals/cases.yaml", OWNER_CASE)
    commit(app, "My agent")
    mine = files(app)

    update(app, "0.1.0")

    assert_no_leftovers(app)
    now = files(app)
    for name in ("agent_server/agent.py", "tests/test_my_agent.py", "tests/test_my_chat.py", "evals/cases.yaml"):
        assert now[name] == mine[name], name
    assert now["uv.lock"] == mine["uv.lock"]
    assert OWNER_README in now["README.md"].decode() and '"funcy==' in now["pyproject.toml"].decode()
    # The template's old copies are gone: its modules, now in packages, and its tests, now in tests/template/.
    gone = SPREAD_MODULES + GROUPED_MODULES + MIDDLEWARE_MODULES
    assert [name for name in gone if f"agent_server/{name}" in now] == []
    assert "agent_server/config/__init__.py" in now and "agent_server/observability/tracing.py" in now
    assert sorted(name for name in now if name.startswith("tests/") and not name.startswith("tests/template/")) == [
        "tests/conftest.py", "tests/test_my_agent.py", "tests/test_my_chat.py",
    ]  # fmt: skip
    assert "agent_server/turn/prepare.py" in now and "tests/template/support.py" in now
    output = relock_and_test(
        app, "tests/test_my_agent.py", "tests/test_my_chat.py", "tests/template/test_multiturn.py",
        "tests/template/test_owner_hooks.py", "tests/template/test_config.py",
    )  # fmt: skip
    for test in ("test_my_agent.py::test_my_agent", "test_my_chat.py::test_my_chat"):
        assert passed(test, output), test
