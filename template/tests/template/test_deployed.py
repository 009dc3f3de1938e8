# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""A deployed app never serves the offline model by accident (README: "Deploy")."""

from __future__ import annotations

import pytest

from agent_server import config, llm

OFFLINE = {"LLM_PROVIDER": "offline", "LLM_MODEL": "offline", "LLM_API": "chat_completions"}


@pytest.mark.parametrize(
    "where", [{"DATABRICKS_APP_NAME": "my-agent"}, {"APP_ENV": "production"}], ids=["databricks-apps", "app-env"]
)
def test_a_deployed_app_refuses_the_offline_model(where):
    with pytest.raises(llm.ConfigurationError) as refused:
        llm.check_configuration(config.Settings({**OFFLINE, **where}))
    message = str(refused.value)
    assert "LLM_ALLOW_OFFLINE=true" in message and "LLM_PROVIDER" in message
    assert next(iter(where)) in message  # says why it thinks it is deployed


@pytest.mark.parametrize("value", ["true", "TRUE", "1", "yes"])
def test_unless_told_to_serve_it(value):
    env = {**OFFLINE, "DATABRICKS_APP_NAME": "my-agent", "LLM_ALLOW_OFFLINE": value}
    assert llm.check_configuration(config.Settings(env)).provider == "offline"


@pytest.mark.parametrize("env", [{}, {"APP_ENV": "development"}, {"LLM_ALLOW_OFFLINE": "false"}])
def test_locally_the_offline_model_needs_no_flag(env):
    assert llm.check_configuration(config.Settings({**OFFLINE, **env})).provider == "offline"


def test_a_wrong_flag_value_does_not_count_as_permission():
    with pytest.raises(llm.ConfigurationError):
        llm.check_configuration(config.Settings({**OFFLINE, "APP_ENV": "production", "LLM_ALLOW_OFFLINE": "false"}))
