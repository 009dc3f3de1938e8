"""Deploying a generated app to Databricks Apps: the files the platform reads, checked as it reads them.

- Schema: every render's databricks.yml reads cleanly into the official databricks-bundles models,
  and a broken one does not.
- app.yaml: a command list and env entries as the runtime reads them; the app's own
  tests/test_deploy_config.py (app.yaml and the bundle agree) passes in every render.
- The deploy workflow and docs/deploy.md name the same commands and variables (no secret); docs/mcp.md's grants for
  MCP servers are valid app resources.
(tests/test_deploy_rehearsal.py runs what the platform runs.)
"""

from __future__ import annotations

import re

import pytest
import yaml
from bundle_schema import BundleError, validate
from renders import MATRIX, load_module, render

ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


# --------------------------------------------------------------------------------------------
# Schema: databricks.yml
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MATRIX)
def test_databricks_yml_reads_into_the_official_bundle_models(renders, name):
    app = renders[name]
    answers = yaml.safe_load((app / ".copier-answers.yml").read_text())
    targets = validate((app / "databricks.yml").read_text())
    assert set(targets) == {"dev", "prod"}
    assert targets["prod"]["apps"]["agent"].name == answers["app_name"]
    assert targets["dev"]["apps"]["agent"].name.endswith("-dev")
    for target in targets.values():
        agent = target["apps"]["agent"]
        [experiment] = [resource.experiment for resource in agent.resources if resource.experiment]
        assert experiment.experiment_id.path == "resources.experiments.traces.id"  # the bundle's own experiment
        assert experiment.permission.value == "CAN_EDIT"  # the app's service principal writes traces
        assert agent.source_code_path == "."
        if answers["llm_provider"] == "openai":
            [secret] = [resource.secret for resource in agent.resources if resource.secret]
            assert (secret.key, secret.permission.value) == ("openai-api-key", "READ")
        else:  # each model users may pick (llm_model, then llm_models) granted to the app
            endpoints = [resource.serving_endpoint for resource in agent.resources if resource.serving_endpoint]
            offered = [name.strip() for name in answers.get("llm_models", "").split(",") if name.strip()]
            assert [str(endpoint.name) for endpoint in endpoints] == ["${var.serving_endpoint}", *offered]
            assert {endpoint.permission.value for endpoint in endpoints} == {"CAN_QUERY"}


BROKEN = {
    "misspelt key": ("source_code_path: .", "source_code_pth: ."),
    "unknown permission level": ("permission: CAN_EDIT", "permission: CAN_WRITE"),
    "unknown app permission level": (
        "      # permissions:\n      #   - level: CAN_USE\n      #     group_name: users",
        "      permissions:\n        - level: CAN_VIEW\n          group_name: users",
    ),
    "misspelt target key": ("default: true", "defualt: true"),
    "unknown mode": ("mode: production", "mode: prod"),
    "reference to nothing": ("${resources.experiments.traces.id}", "${resources.experiments.trace.id}"),
    "invalid app name": ("      name: my-agent\n", "      name: My_Agent\n"),
}


@pytest.mark.parametrize("change", BROKEN, ids=list(BROKEN))
def test_a_broken_databricks_yml_is_refused(renders, change):
    text = (renders["defaults"] / "databricks.yml").read_text()
    old, new = BROKEN[change]
    assert text.count(old) == 1, f"the test's anchor {old!r} is not in databricks.yml once"
    with pytest.raises(BundleError):
        validate(text.replace(old, new))


def test_the_schema_check_accepts_an_added_permission(renders):
    """The negative cases above fail for what they break, not for touching the file."""
    text = (renders["defaults"] / "databricks.yml").read_text()
    old, new = BROKEN["unknown app permission level"]
    validate(text.replace(old, new.replace("CAN_VIEW", "CAN_USE")))


@pytest.mark.parametrize("app_name", ["a-thirty-character-agent-name1", "abcdefghijklmnopqrstuvwxy-z12"])
def test_the_dev_copy_of_a_long_app_name_is_still_a_valid_app_name(tmp_path, app_name):
    """App names are at most 30 characters, and development mode does not prefix them: dev gets '-dev'."""
    targets = validate((render(tmp_path / "app", {"app_name": app_name}) / "databricks.yml").read_text())
    assert targets["prod"]["apps"]["agent"].name == app_name
    dev = targets["dev"]["apps"]["agent"].name
    assert dev.endswith("-dev") and len(dev) <= 30 and dev != app_name


# --------------------------------------------------------------------------------------------
# app.yaml
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MATRIX)
def test_app_yaml_is_what_the_runtime_reads(renders, name):
    app = renders[name]
    app_yaml = yaml.safe_load((app / "app.yaml").read_text())
    assert set(app_yaml) == {"command", "env"}
    assert app_yaml["command"] == ["uv", "run", "--locked", "start-app"]
    for item in app_yaml["env"]:
        assert set(item) in ({"name", "value"}, {"name", "valueFrom"}), item
        assert ENV_NAME.match(item["name"]), item
        assert isinstance(item.get("value", ""), str), f"{item['name']}: a value must be a string"
    env = {item["name"]: item for item in app_yaml["env"]}
    assert env["LLM_PROVIDER"]["value"] in ("databricks", "openai")  # set explicitly, never offline
    assert env["MLFLOW_TRACKING_URI"]["value"] == "databricks"
    assert env["MLFLOW_EXPERIMENT_ID"]["valueFrom"] == "experiment"


@pytest.mark.parametrize("name", MATRIX)
def test_every_render_passes_the_apps_own_deploy_config_checks(renders, name):
    """app.yaml and databricks.yml agree (the app's tests/test_deploy_config.py, which owners keep), in every render."""
    checks_file = renders[name] / "tests" / "template" / "test_deploy_config.py"
    checks = load_module(f"deploy_config_{name.replace('-', '_')}", checks_file)
    tests = [test for test_name, test in vars(checks).items() if test_name.startswith("test_")]
    assert len(tests) >= 3
    for test in tests:
        test()


# --------------------------------------------------------------------------------------------
# The GitHub workflow and the README
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["defaults", "openai-chat_completions", "no-ci"])
def test_the_deploy_workflow_and_the_readme_name_the_same_commands_and_variables(renders, name):
    app = renders[name]
    deploy = (app / "docs" / "deploy.md").read_text()
    for command in ("databricks auth login", "databricks bundle validate", "databricks bundle deploy"):
        assert command in deploy, command
    assert "databricks bundle run agent" in deploy
    workflow = app / ".github" / "workflows" / "deploy.yml"
    assert workflow.exists() == MATRIX[name].get("github_ci", True)
    if not workflow.exists():
        return
    steps = yaml.safe_load(workflow.read_text())["jobs"]["deploy"]["steps"]
    runs = [step["run"] for step in steps if "run" in step]
    assert runs[-3:] == [
        "databricks bundle validate --target prod",
        "databricks bundle deploy --target prod",
        "databricks bundle run agent --target prod",
    ]
    # GitHub OIDC: two repository variables, no secret (tests/test_workflows.py checks the sign-in); two more,
    # optional, for the evaluation on the workspace's model.
    assert not re.findall(r"\$\{\{ secrets\.", workflow.read_text())
    needed = set(re.findall(r"\$\{\{ vars\.([A-Z_]+) \}\}", workflow.read_text()))
    assert needed == {"DATABRICKS_HOST", "DATABRICKS_CLIENT_ID", "EVALUATE_MODEL", "EVALUATE_JUDGE_MODEL"}
    for variable in needed:
        assert variable in deploy, f"docs/deploy.md must name {variable}"
    # How to set it up: the federation policy (issuer, audience and subject as the workflow asks for them),
    # the protected environment, and no secret to store.
    for fact in (
        "service-principal-federation-policy create",
        '"issuer": "https://token.actions.githubusercontent.com"',
        '"audiences": ["https://github.com/<owner>"]',
        '"subject": "repo:<owner>/<repo>:environment:prod"',
        "Settings > Environments",
        "DATABRICKS_CLIENT_SECRET",  # ... is no longer needed: the README says to delete it
    ):
        assert fact in deploy, f"docs/deploy.md must say {fact}"
    assert "DATABRICKS_CLIENT_SECRET" not in workflow.read_text()


@pytest.mark.parametrize("name", ["defaults", "openai-responses"])
def test_the_readmes_mcp_grants_are_valid_app_resources(renders, name):
    """docs/mcp.md's grants for MCP servers, added to the app's resources, read into the bundle models."""
    app = renders[name]
    mcp = (app / "docs" / "mcp.md").read_text()
    block = re.search(r"\*\*Grants\.\*\*.*?```yaml\n(.*?)```", mcp, re.DOTALL)
    assert block, "docs/mcp.md has no MCP grants example"
    grants = yaml.safe_load(block.group(1))
    assert {resource["name"] for resource in grants} == {"uc-function", "vector-index", "genie-space", "mcp-connection"}
    bundle = yaml.safe_load((app / "databricks.yml").read_text())
    bundle["resources"]["apps"]["agent"]["resources"] += grants
    for target in validate(yaml.safe_dump(bundle)).values():
        resources = target["apps"]["agent"].resources
        kinds = {
            (r.uc_securable.securable_type.value, r.uc_securable.permission.value) for r in resources if r.uc_securable
        }
        assert kinds == {("FUNCTION", "EXECUTE"), ("TABLE", "SELECT"), ("CONNECTION", "USE_CONNECTION")}
        [genie] = [r.genie_space for r in resources if r.genie_space]
        assert genie.permission.value == "CAN_RUN"
