"""`copier update` of an app its owner customised (their instructions and a tool, a test, a dependency, README and
.env edits: `customise` in tests/update_support.py) keeps their changes and brings the template's; the app's weekly
template-update job, run here with the tested copier, says when a newer release is out.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import copier
import httpx
import pytest
import yaml
from renders import ROOT, clean_env, passed, uv_binary
from servers import ServerProcess, free_port
from template_versions import commit, generate, update
from update_support import (
    COPIER,
    GITHUB,
    OWNER_ENV,
    OWNER_LOOK,
    OWNER_README,
    answers,
    app_env,
    assert_no_leftovers,
    customise,
    files,
    relock_and_test,
)

pytestmark = pytest.mark.xdist_group("update")


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


# --- a customised app -----------------------------------------------------------------------------


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
    assert "_model_input_without_the_new_rule(context)" in now["agent_server/turn/serve.py"].decode()
    assert "tests/template/test_byte_order_marks.py" in now
    assert now["README.md"].decode().endswith("## Support\n\nAsk the platform team.\n")
    assert answers(app)["_commit"] == "0.2.0"

    # The owner's tests, and the template's that run the owner's agent end to end (test_app_suite.py runs
    # the whole suite on this template's renders).
    output = relock_and_test(
        app, "tests/template/test_byte_order_marks.py", "tests/test_my_agent.py",
        "tests/template/test_multiturn.py", "tests/template/test_owner_hooks.py", "tests/template/test_memory.py",
    )  # fmt: skip
    for test in ("test_byte_order_marks.py::test_the_rule", "test_my_agent.py::test_my_agent"):
        assert passed(test, output), test
    commit(app, "Update from the template")
    assert weekly_check(app, tmp_path) == (0, ""), "up to date: the weekly job passes"
    assert (app / ".env").read_text() == OWNER_LOOK
    look = page_look(app)
    assert look.pop("attachments").keys() == {"max_files", "max_file_bytes", "max_turn_bytes"}  # the page's own
    assert look == {"title": "Acme support", "greeting": "Ask about your Acme order.",
                    "prompts": ["Where is it?", "Return it"], "accent": "", "logo": ""}  # fmt: skip


def page_look(app: Path) -> dict:
    """The look the updated app's page carries, served by `start-app` (which reads the owner's .env)."""
    port = free_port()
    command = [uv_binary(), "run", "--locked", "--no-config", "start-app", "--port", str(port)]
    with ServerProcess(command, app_env(), f"http://127.0.0.1:{port}/health", cwd=app) as server:
        page = httpx.get(f"{server.url}/", timeout=30).text
    [block] = re.findall(r'<script type="application/json" id="look">(.*?)</script>', page, re.DOTALL)
    return json.loads(block)
