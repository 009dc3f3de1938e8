# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Every setting is declared once (agent_server/config/), documented in docs/configuration.md, and read only there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_server import config

APP = Path(__file__).resolve().parents[2]
# Read by the libraries the app configures, not by the app: named in the table so owners know to set them.
LIBRARY_VARIABLES = {
    "DATABRICKS_HOST", "DATABRICKS_TOKEN", "DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET",
    "DATABRICKS_CONFIG_PROFILE",  # databricks-sdk
    "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID",  # MLflow, which tracing.py points at its store
}  # fmt: skip
# The modules that may read the environment themselves, and why.
READS_THE_ENVIRONMENT = {
    "config/__init__.py": "the one reader of the app's settings",
    "__init__.py": "sets MLflow's telemetry default before MLflow loads",
    "observability/tracing.py": "sets MLflow's own variables (where traces go, bounded export) before MLflow reads"
    " them, and marks the processes start-app serves in, which flush their traces as they stop",
    "start_server.py": "puts MCP_APPROVAL_SECRET in the environment for uvicorn's worker processes",
    "evaluation/cli.py": "sets up the process `uv run evaluate` runs in: every turn traced, the judges' server",
}


def configuration_table() -> str:
    """The table of docs/configuration.md, up to its next section."""
    return (APP / "docs" / "configuration.md").read_text().split("\n## ", 1)[0]


def test_every_declared_setting_is_in_the_configuration_table_and_the_table_names_no_other():
    declared = {variable for variable, _doc, _default in config.variables()}
    first_column = " ".join(line.split(" | ")[0] for line in configuration_table().splitlines() if line.startswith("|"))
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", first_column))
    assert sorted(declared - documented) == [], "declared in config/, missing from docs/configuration.md's table"
    assert sorted(documented - declared - LIBRARY_VARIABLES) == [], "in docs/configuration.md's table, not declared"


def test_each_variable_is_declared_once():
    variables = [variable for variable, _doc, _default in config.variables()]
    assert len(variables) == len(set(variables)), sorted(v for v in variables if variables.count(v) > 1)


def test_no_other_module_reads_the_environment():
    readers = []
    for path in sorted((APP / "agent_server").rglob("*.py")):
        relative = path.relative_to(APP / "agent_server").as_posix()
        if relative not in READS_THE_ENVIRONMENT and re.search(r"\bos\.(environ|getenv)\b", path.read_text()):
            readers.append(relative)
    assert readers == [], "read settings through agent_server/config/"


def test_settings_are_read_once_and_again_only_on_reload(app_settings):
    app_settings.setenv("MAX_INPUT_ITEMS", "7")
    first = config.settings()
    assert first is config.settings() and first.limits.max_input_items == 7
    app_settings.monkeypatch.setenv("MAX_INPUT_ITEMS", "8")  # behind config's back: not seen
    assert config.settings().limits.max_input_items == 7
    assert config.reload().limits.max_input_items == 8


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MAX_BODY_BYTES": "lots"}, "MAX_BODY_BYTES='lots' must be a positive number"),
        ({"MEMORY_MAX_ITEMS": "-1"}, "MEMORY_MAX_ITEMS='-1' must be a non-negative number"),
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL='LOUD' is not one of DEBUG, INFO, WARNING, ERROR"),
        ({"LLM_API": "assistants"}, "LLM_API='assistants' is not one of chat_completions, responses"),
        (
            {"ATTACHMENTS_MAX_FILE_BYTES": "3000", "ATTACHMENTS_MAX_TURN_BYTES": "2000"},
            "ATTACHMENTS_MAX_FILE_BYTES must not be over ATTACHMENTS_MAX_TURN_BYTES",
        ),
        ({"MAX_INPUT_CHARS": "3000000"}, "ATTACHMENTS_MAX_TURN_BYTES=2621440 does not fit MAX_INPUT_CHARS=3000000"),
        (
            {"MEMORY_BACKEND": "sqlite", "MEMORY_MAX_TURN_BYTES": "3000000"},
            "ATTACHMENTS_MAX_TURN_BYTES=2621440 does not fit MEMORY_MAX_TURN_BYTES=3000000: in base64",
        ),
    ],
)
def test_check_names_the_first_bad_variable(env, message):
    with pytest.raises(config.ConfigurationError, match=re.escape(message)):
        config.Settings(env).check()


def test_unset_or_blank_is_the_default():
    assert config.Settings({}).limits == config.Settings({"MAX_BODY_BYTES": "  "}).limits == config.RequestLimits()


def test_the_default_attachment_limits_fit_the_body_and_memory_and_memory_off_does_not_bound_them():
    config.Settings({"MEMORY_BACKEND": "postgres"}).check()
    limits = config.Settings({"MEMORY_BACKEND": "none", "MEMORY_MAX_TURN_BYTES": "1000"}).attachments
    assert limits == config.AttachmentLimits()
    assert config.Settings({"MAX_INPUT_CHARS": "1000", "ATTACHMENTS_MAX_FILES": "0"}).attachments.max_files == 0
