"""What the update tests (tests/test_update*.py) share: the template versions they update between, an owner's
customisations, and the checks of an updated app. tests/conftest.py loads it as a plugin, for `versions`.

The versions are built by `versions` below, in a temporary repo, from the working tree, once per worker (the tests
that use it share the xdist group "update"; tests/test_update_readme.py and tests/test_update_regrouping.py build
versions of their own under the same name):
- 0.0.1: an app from before the render step and the update tooling: its turn passes MLflow's
  items straight to Runner, and its agent.py has no hooks;
- 0.1.0: the working tree as it is (the repo's HEAD);
- 0.2.0, on a branch: 0.1.0 plus a template change to the render step (history.py, turn/serve.py,
  a test for the new rule) and to the README.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import yaml
from renders import ROOT, assert_all_passed, clean_env, uv
from template_versions import append, git, new_repo, release, replace_once

CONFIG = yaml.safe_load((ROOT / "copier.yml").read_text())
OWNER_FILES = set(CONFIG["_skip_if_exists"])
COPIER = str(Path(sys.executable).with_name("copier"))
GITHUB = "{% if github_ci %}.github{% endif %}"


# The turn as agent apps wrote it before the render step existed: MLflow's request items straight to the SDK.
PRE_RENDER_MODEL_INPUT = """def model_input(context: TurnContext) -> list[dict[str, Any]]:
    from mlflow.types.responses import ResponsesAgentRequest

    return [item.model_dump() for item in ResponsesAgentRequest(input=context.body["input"]).input]


"""
TURN = "template/agent_server/turn/serve.py"  # where the turn's model input is made
# Files the update tooling added; an app from before it has none of them.
UPDATE_TOOLING = [
    "template/scripts/check_update_leftovers.py",
    "template/.pre-commit-config.yaml",
    "template/tests/template/test_update_leftovers.py",
    "template/tests/template/test_owner_hooks.py",
    f"template/{GITHUB}/workflows/template-update.yml",
]


def before_the_render_step(repo: Path) -> None:
    replace_once(repo / TURN, r"def model_input\(.*?\n\n\n", PRE_RENDER_MODEL_INPUT)
    replace_once(repo / "template/agent_server/agent.py.jinja", r"\n\n\ndef customize_history\(.*", "\n")
    for name in UPDATE_TOOLING:
        (repo / name).unlink()


def template_change(repo: Path) -> None:
    """What a template release typically does: a new render rule, wired into the turn, with a test."""
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
    turn = repo / TURN
    assert "def model_input(" in turn.read_text(), "turn/serve.py has no model_input: update this synthetic edit"
    append(
        turn,
        textwrap.dedent("""

            from agent_server.history.render import strip_byte_order_marks  # noqa: E402

            _model_input_without_the_new_rule = model_input


            def model_input(context: TurnContext) -> list[dict[str, Any]]:
                return strip_byte_order_marks(_model_input_without_the_new_rule(context))
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


@pytest.fixture(scope="session")
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


def app_env() -> dict[str, str]:
    return clean_env(LLM_PROVIDER="offline", LLM_MODEL="offline", LLM_API="chat_completions")


def relock_and_test(app: Path, *tests: str) -> str:
    """The closing message's steps: `uv lock`, `uv sync --locked`, `uv run pytest`; returns pytest's output."""
    uv_from_cache("lock", "--no-config", cwd=app)
    uv("sync", "--locked", "--dev", "--no-config", cwd=app)
    # In one process (-n 0): for a few files, each of `uv run pytest`'s parallel processes would import and collect
    # them again, for twice the CPU and no sooner an end.
    pytest_args = ["pytest", "-v", "-p", "no:cacheprovider", "-n", "0", *tests]
    result = uv("run", "--locked", "--no-config", *pytest_args, cwd=app, env=app_env())
    assert_all_passed(result)
    return result.stdout


# --- an owner's customisations --------------------------------------------------------------------


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
