"""`copier update` brings template fixes into existing apps and keeps their owners' changes.

The versions are built by `versions` below, in a temporary repo, from the working tree:
- 0.0.1: an app from before the render step and the update tooling: its handlers pass MLflow's
  items straight to Runner, and its agent.py has no hooks;
- 0.1.0: the working tree as it is (the repo's HEAD);
- 0.2.0, on a branch: 0.1.0 plus a template change to the render step (history.py, handlers.py,
  a test for the new rule) and to the README.
Updates run without --trust (unsafe=False); only the one across a migration needs it.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import copier
import httpx
import pytest
import yaml
from copier.errors import UnsafeTemplateError
from renders import ROOT, assert_all_passed, clean_env, passed, render, rendered_defaults, uv, uv_binary
from servers import ServerProcess, free_port
from template_versions import append, commit, generate, git, new_repo, release, replace_once, update

pytestmark = pytest.mark.xdist_group("update")

CONFIG = yaml.safe_load((ROOT / "copier.yml").read_text())
OWNER_FILES = set(CONFIG["_skip_if_exists"])
COPIER = str(Path(sys.executable).with_name("copier"))
GITHUB = "{% if github_ci %}.github{% endif %}"

# The handler as agent apps wrote it before the render step existed.
PRE_RENDER_MODEL_INPUT = """def model_input(request: ResponsesAgentRequest) -> list[dict[str, Any]]:
    return [item.model_dump() for item in request.input]


"""
# Files the update tooling added; an app from before it has none of them.
UPDATE_TOOLING = [
    "template/scripts/check_update_leftovers.py",
    "template/.pre-commit-config.yaml",
    "template/tests/template/test_update_leftovers.py",
    "template/tests/template/test_owner_hooks.py",
    f"template/{GITHUB}/workflows/template-update.yml",
]


def before_the_render_step(repo: Path) -> None:
    replace_once(repo / "template/agent_server/handlers.py", r"def model_input\(.*?\n\n\n", PRE_RENDER_MODEL_INPUT)
    replace_once(repo / "template/agent_server/agent.py.jinja", r"\n\n\ndef customize_history\(.*", "\n")
    for name in UPDATE_TOOLING:
        (repo / name).unlink()


def template_change(repo: Path) -> None:
    """What a template release typically does: a new render rule, wired into the handlers, with a test."""
    append(
        repo / "template/agent_server/history/render.py",
        textwrap.dedent('''

            def strip_byte_order_marks(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
                """A byte order mark at the start of a user's text is dropped."""
                return [
                    {**item, "content": item["content"].lstrip("\\ufeff")}
                    if item.get("role") == "user" and isinstance(item.get("content"), str)
                    else item
                    for item in items
                ]
            '''),
    )
    handlers = repo / "template/agent_server/handlers.py"
    assert "def model_input(" in handlers.read_text(), "handlers.py has no model_input: update this synthetic edit"
    append(
        handlers,
        textwrap.dedent("""

            from agent_server.history.render import strip_byte_order_marks  # noqa: E402

            _model_input_without_the_new_rule = model_input


            def model_input(request: ResponsesAgentRequest) -> list[dict[str, Any]]:
                return strip_byte_order_marks(_model_input_without_the_new_rule(request))
            """),
    )
    (repo / "template/tests/template/test_byte_order_marks.py").write_text(
        textwrap.dedent('''\
            # Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
            """The rule added by the template's release 0.2.0."""

            from support import Chat, reply_text

            from agent_server.history.render import strip_byte_order_marks


            def test_the_rule():
                items = [{"role": "user", "content": "\\ufeffHi"}, {"role": "assistant", "content": "\\ufeffHo"}]
                assert strip_byte_order_marks(items) == [items[0] | {"content": "Hi"}, items[1]]


            def test_the_model_never_sees_a_byte_order_mark(app_client):  # in both API modes (conftest)
                assert reply_text(Chat(app_client, stream=False).send("\\ufeffHello")).endswith("You said: Hello")
            '''),
    )
    append(repo / "template/README.md.jinja", "\n## Support\n\nAsk the platform team.\n")


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = new_repo(tmp_path_factory.mktemp("template") / "repo")
    release(repo, "0.0.1", before_the_render_step)
    release(repo, "0.1.0")
    git("switch", "-q", "-c", "next", cwd=repo)
    release(repo, "0.2.0", template_change, from_working_tree=False)
    git("switch", "-q", "main", cwd=repo)  # HEAD is 0.1.0, the working tree
    return repo


# --- helpers ------------------------------------------------------------------------------------


def assert_no_leftovers(app: Path) -> None:
    assert not list(app.rglob("*.rej"))
    assert git("ls-files", "-u", cwd=app) == "", "files left unmerged"
    # The app's own check, as its CI and pre-commit hook run it.
    result = subprocess.run(
        [sys.executable, "scripts/check_update_leftovers.py"], cwd=app, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def files(app: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(app)): path.read_bytes()
        for path in sorted(app.rglob("*"))
        if path.is_file() and not {".git", ".venv"} & set(path.relative_to(app).parts)
    }


def answers(app: Path) -> dict:
    return yaml.safe_load((app / ".copier-answers.yml").read_text())


WEEKLY_WORKFLOW = ROOT / "template" / GITHUB / "workflows" / "template-update.yml"


def weekly_check(app: Path, tmp_path: Path) -> tuple[int, str]:
    """The app's weekly template-update job, run here: its script, with `uvx` running the tested copier.

    Returns the job's exit code and what it wrote to the run summary.
    """
    (step,) = yaml.safe_load(WEEKLY_WORKFLOW.read_text())["jobs"]["check"]["steps"][2:]
    shims = tmp_path / "shims"
    shims.mkdir(exist_ok=True)
    uvx = shims / "uvx"  # `uvx --from SPEC copier ARGS...` -> `copier ARGS...`
    uvx.write_text(f'#!/bin/sh\nshift 3\nexec "{COPIER}" "$@"\n')
    uvx.chmod(0o755)
    summary = tmp_path / "summary.md"
    summary.write_text("")
    env = clean_env(PATH=f"{shims}:{clean_env()['PATH']}", GITHUB_STEP_SUMMARY=str(summary))
    # As GitHub runs a `run:` step: bash -e -o pipefail, in the checkout.
    result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", step["run"]], cwd=app, env=env, capture_output=True)
    return result.returncode, summary.read_text()


def test_the_weekly_workflow_runs_the_tested_copier():
    pins = re.findall(r"--from 'copier==([\d.]+)' copier check-update", WEEKLY_WORKFLOW.read_text())
    assert pins and set(pins) == {copier.__version__}, f"pin copier=={copier.__version__}, the version tested here"


def app_env() -> dict[str, str]:
    return clean_env(LLM_PROVIDER="offline", LLM_MODEL="offline", LLM_API="chat_completions")


def relock_and_test(app: Path, *tests: str) -> str:
    """The closing message's steps: `uv lock`, `uv sync --locked`, `uv run pytest`; returns pytest's output."""
    uv_from_cache("lock", "--no-config", cwd=app)
    uv("sync", "--locked", "--dev", "--no-config", cwd=app)
    pytest_args = ["pytest", "-v", "-p", "no:cacheprovider", *tests]
    result = uv("run", "--locked", "--no-config", *pytest_args, cwd=app, env=app_env())
    assert_all_passed(result)
    return result.stdout


# --- 1. the previous version updates to HEAD ----------------------------------------------------


@pytest.mark.parametrize(
    "data", [{}, {"app_name": "support-bot", "llm_api": "responses", "github_ci": False}], ids=["defaults", "custom"]
)
def test_previous_version_updates_to_what_head_renders(versions, tmp_path, data):
    app = generate(tmp_path / "app", versions, "0.0.1", data)
    old = files(app)

    result = subprocess.run(
        [COPIER, "update", "--defaults", "--vcs-ref", "HEAD", str(app)], capture_output=True, text=True
    )  # the CLI, as an owner runs it: no --trust
    assert result.returncode == 0, result.stderr

    assert_no_leftovers(app)
    updated = files(app)
    fresh = files(render(tmp_path / "fresh", data, src=versions, vcs_ref="HEAD"))
    assert answers(app) == answers(tmp_path / "fresh")
    assert answers(app)["_commit"] == "0.1.0"
    for owned in OWNER_FILES:  # rendered once and never touched again
        assert updated.pop(owned) == old[owned], owned
        fresh.pop(owned)
    assert updated.keys() == fresh.keys()
    assert [name for name in updated if updated[name] != fresh[name]] == []


# --- 2. a customised app ------------------------------------------------------------------------

OWNER_INSTRUCTIONS = 'INSTRUCTIONS = """You are the support bot for Acme. Use count_words for word counts."""'
OWNER_TOOL = '''@function_tool
def count_words(text: str) -> int:
    """Count the words in a text."""
    return len(funcy.re_all(r"\\w+", text))


def create_agent('''
OWNER_TEST = '''"""The owner's own test: kept by every update."""

from agent_server.agent import create_agent


def test_my_agent():
    agent = create_agent()
    assert "Acme" in agent.instructions
    assert [tool.name for tool in agent.tools][:2] == ["count_words", "get_current_time"]
'''
OWNER_README = "Questions about this bot go to the Acme support team.\n\n"
OWNER_ENV = "\n# Acme's search service, used by the search tool.\nACME_SEARCH_URL=http://localhost:9200\n"
# The page's look, in the owner's .env (README, Your code): no update touches it.
OWNER_LOOK = (
    'CHAT_TITLE="Acme support"\nCHAT_GREETING="Ask about your Acme order."\nCHAT_PROMPTS="Where is it?|Return it"\n'
)


def customise(app: Path) -> None:
    """What an owner does: their instructions and a tool, a test, a dependency, README and .env.example edits."""
    agent = app / "agent_server/agent.py"
    replace_once(agent, r'INSTRUCTIONS = """.*?"""', OWNER_INSTRUCTIONS)
    replace_once(agent, r"def create_agent\(", OWNER_TOOL)
    # The owner's tool joins the starter's (get_current_time, and send_summary since the release that added it).
    replace_once(agent, r"tools=\[get_current_time", "tools=[count_words, get_current_time")
    replace_once(agent, r"\nfrom agents import ", "\nimport funcy\nfrom agents import ")
    (app / "tests/test_my_agent.py").write_text(OWNER_TEST)
    replace_once(app / "README.md", r"## Quick start\n\n", "## Quick start\n\n" + OWNER_README)
    append(app / ".env.example", OWNER_ENV)
    (app / ".env").write_text(OWNER_LOOK)
    add_dependency(app, f"funcy=={locked_version(ROOT / 'uv.lock', 'funcy')}")


def add_dependency(app: Path, requirement: str) -> None:
    """`uv add`: changes pyproject.toml and uv.lock.

    funcy is small, pure Python, not in the app's lock, and in this repo's own lock, so the uv
    cache holds it once `scripts/test` has synced.
    """
    uv_from_cache("add", "--no-config", "--no-sync", requirement, cwd=app)


def uv_from_cache(*args: str, cwd: Path) -> None:
    """Offline when the uv cache holds the index pages too; on a cold cache, ask the registry as `uv sync` does."""
    try:
        uv(*args, "--offline", cwd=cwd)
    except AssertionError:
        uv(*args, cwd=cwd)


def locked_version(lock: Path, name: str) -> str:
    packages = tomllib.loads(lock.read_text())["package"]
    return next(package["version"] for package in packages if package["name"] == name)


def test_customised_app_keeps_its_changes_and_gets_the_template_change(versions, tmp_path):
    app = generate(tmp_path / "app", versions, "0.1.0")
    customise(app)
    commit(app, "My agent")
    mine = files(app)
    assert "funcy" in mine["pyproject.toml"].decode() and "funcy" in mine["uv.lock"].decode()
    status, summary = weekly_check(app, tmp_path)
    assert status == 1, "the weekly job fails when a newer release is out"
    assert "Current version is 0.1.0, latest version is 0.2.0." in summary

    update(app, "0.2.0")

    assert_no_leftovers(app)
    now = files(app)
    # The owner's changes are all there.
    for name in ("agent_server/agent.py", "tests/test_my_agent.py", "uv.lock"):
        assert now[name] == mine[name], name
    assert '"funcy==' in now["pyproject.toml"].decode()
    assert OWNER_README in now["README.md"].decode()
    assert now[".env.example"].decode().endswith(OWNER_ENV)
    # The template's change arrived, in the files it owns and in the shared README.
    assert "def strip_byte_order_marks(" in now["agent_server/history/render.py"].decode()
    assert "_model_input_without_the_new_rule(request)" in now["agent_server/handlers.py"].decode()
    assert "tests/template/test_byte_order_marks.py" in now
    assert now["README.md"].decode().endswith("## Support\n\nAsk the platform team.\n")
    assert answers(app)["_commit"] == "0.2.0"

    # The owner's tests, and the template's that run the owner's agent end to end (test_app_suite.py runs
    # the whole suite on this template's renders).
    output = relock_and_test(
        app, "tests/template/test_byte_order_marks.py", "tests/test_my_agent.py",
        "tests/template/test_multiturn.py", "tests/template/test_owner_hooks.py", "tests/template/test_memory.py",
        "tests/template/test_memory_failures.py", "tests/template/test_memory_limits.py",
        "tests/template/test_memory_schema.py",
    )  # fmt: skip
    for test in ("test_byte_order_marks.py::test_the_rule", "test_my_agent.py::test_my_agent"):
        assert passed(test, output), test
    commit(app, "Update from the template")
    assert weekly_check(app, tmp_path) == (0, ""), "up to date: the weekly job passes"
    assert (app / ".env").read_text() == OWNER_LOOK
    assert page_look(app) == {"title": "Acme support", "greeting": "Ask about your Acme order.",
                              "prompts": ["Where is it?", "Return it"], "accent": "", "logo": ""}  # fmt: skip


def page_look(app: Path) -> dict:
    """The look the updated app's page carries, served by `start-app` (which reads the owner's .env)."""
    port = free_port()
    command = [uv_binary(), "run", "--locked", "--no-config", "start-app", "--port", str(port)]
    with ServerProcess(command, app_env(), f"http://127.0.0.1:{port}/health", cwd=app) as server:
        page = httpx.get(f"{server.url}/", timeout=30).text
    [block] = re.findall(r'<script type="application/json" id="look">(.*?)</script>', page, re.DOTALL)
    return json.loads(block)


# --- 3. the retrofit: an app from before the render step ----------------------------------------

SECOND_PROMPT = '''"""Two prompts through the app; the second replays the first answer the way chat UIs do."""
import json
import sys

from fastapi.testclient import TestClient

sys.path.insert(0, "tests/template")
from support import replayed  # noqa: E402

from agent_server.app import app  # noqa: E402

with TestClient(app, base_url="http://localhost") as client:  # a loopback name: the app answers no other
    history = [{"role": "user", "content": "Hello"}]
    first = client.post("/invocations", json={"input": history})
    history += [*replayed(first.json()["output"], "chat_ui"), {"role": "user", "content": "And again"}]
    second = client.post("/invocations", json={"input": history})
print(json.dumps({"first": first.status_code, "second": second.status_code, "body": second.text}))
'''


# With the app's conversation memory (SQLite): `write` keeps a conversation; `read ID` gives it back, and the tools the
# agent calls for "My name is Ada" (long-term memory's `remember` when it is on).
CONVERSATION = '''"""A conversation kept in the app's database, and read back."""
import json
import sys

from fastapi.testclient import TestClient

from agent_server.app import app

with TestClient(app, base_url="http://localhost") as client:
    said = client.post("/invocations", json={"input": [{"role": "user", "content": "My name is Ada"}]}).json()
    conversation = said["custom_outputs"]["session_id"] if sys.argv[1] == "write" else sys.argv[2]
    read = client.get(f"/conversations/{conversation}")
    calls = [item["name"] for item in said["output"] if item["type"] == "function_call"]
    kept = {"conversation": conversation, "status": read.status_code, "items": read.json()["items"], "calls": calls}
print(json.dumps(kept))
'''


def kept_conversation(app: Path, probe: Path, database: Path, *args: str) -> dict:
    env = app_env() | {"MEMORY_BACKEND": "sqlite", "MEMORY_DATABASE_URL": str(database)}
    result = uv("run", "--locked", "--no-config", "python", str(probe), *args, cwd=app, env=env)
    return json.loads(result.stdout.strip().splitlines()[-1])


def as_before_long_term_memory(database: Path) -> None:
    """The database as the release before long-term memory left it: schema version 5, no facts' tables."""
    with sqlite3.connect(database) as connection:
        for trigger in ("agent_memories_added", "agent_memories_removed"):
            connection.execute(f"DROP TRIGGER {trigger}")
        connection.execute("DROP TABLE agent_memories_search")
        connection.execute("DROP TABLE agent_memories")
        connection.execute("DELETE FROM agent_memory_schema WHERE version > 5")
        connection.execute("INSERT INTO agent_memory_schema (version) VALUES (5)")
    connection.close()


def schema_of(database: Path) -> tuple[int, list[str]]:
    with sqlite3.connect(database) as connection:
        version = connection.execute("SELECT max(version) FROM agent_memory_schema").fetchone()[0]
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE name = 'agent_memories'")]
    connection.close()
    return version, tables


def second_prompt(app: Path, probe: Path) -> dict:
    result = uv("run", "--locked", "--no-config", "python", str(probe), cwd=app, env=app_env())
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_app_from_before_the_render_step_gets_it_and_its_second_prompt_works(versions, tmp_path):
    """Also: an app with answers and a database from before long-term memory keeps it off, and its conversations."""
    probe = tmp_path / "second_prompt.py"
    probe.write_text(SECOND_PROMPT)
    app = generate(tmp_path / "app", versions, "0.0.1")
    uv("sync", "--locked", "--no-config", cwd=app)

    before = second_prompt(app, probe)
    assert (before["first"], before["second"]) == (200, 500)
    assert "Unhandled item type or structure" in before["body"]
    # A conversation kept in the old app's SQLite database, with that database's schema from before long-term
    # memory; and answers from before its copier question (absent: an update keeps it off).
    kept, database = tmp_path / "kept_conversation.py", tmp_path / "conversations.db"
    kept.write_text(CONVERSATION)
    written = kept_conversation(app, kept, database, "write")
    assert written["status"] == 200 and [item.get("role") for item in written["items"]] == ["user", "assistant"]
    as_before_long_term_memory(database)
    answered = (app / ".copier-answers.yml").read_text()
    (app / ".copier-answers.yml").write_text(re.sub(r"(?m)^long_term_memory: .*\n", "", answered))
    assert "long_term_memory" not in answers(app)
    commit(app, "Answers from before long-term memory")

    update(app, "HEAD")
    assert_no_leftovers(app)
    assert "render_history(" in (app / "agent_server/handlers.py").read_text()
    assert "customize_history" not in (app / "agent_server/agent.py").read_text(), "the owner's agent.py is kept"

    # The template's tests that lean on agent.py, with an agent.py that predates the hooks.
    # (The customised app above runs the whole suite.)
    output = relock_and_test(
        app, "tests/template/test_owner_hooks.py", "tests/template/test_multiturn.py",
        "tests/template/test_regression.py",
    )  # fmt: skip
    assert "test_owner_hooks.py" in output
    after = second_prompt(app, probe)
    assert (after["first"], after["second"]) == (200, 200), after["body"]
    assert "I saw 2 user, 1 assistant and 0 tool turns. You said: And again" in after["body"]
    # Long-term memory stays off, and the kept conversation is there, intact, on the schema migrated at start-up.
    assert answers(app)["long_term_memory"] is False
    assert rendered_defaults(app)["LONG_TERM_MEMORY"] is False
    read = kept_conversation(app, kept, database, "read", written["conversation"])
    assert (read["status"], read["items"]) == (200, written["items"])
    assert read["calls"] == [], "no remember tool: long-term memory is off"
    version, tables = schema_of(database)
    assert version >= 6 and tables == ["agent_memories"], (version, tables)


# --- 4. trust: only an update across a migration needs it ---------------------------------------


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
