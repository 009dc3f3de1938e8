# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""app.yaml and databricks.yml describe the same deployed app: keep them equal when you edit either.

Databricks Apps runs app.yaml's command and environment; a bundle deploy (databricks.yml) sends the
app's `config` instead. The two must agree, or the app behaves differently depending on how it was
deployed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
APP_YAML = yaml.safe_load((ROOT / "app.yaml").read_text())
BUNDLE = yaml.safe_load((ROOT / "databricks.yml").read_text())


def bundle_apps(target: str | None = None) -> list[dict]:
    """The bundle's apps as `target` deploys them: its overrides over the top-level settings."""
    apps = dict(BUNDLE["resources"]["apps"])
    overrides = (BUNDLE["targets"][target].get("resources") or {}).get("apps", {}) if target else {}
    for key, override in overrides.items():
        apps[key] = {**apps[key], **override}
    return list(apps.values())


def test_app_yaml_and_the_bundle_config_agree():
    expected = {
        "command": APP_YAML["command"],
        "env": [
            {("value_from" if key == "valueFrom" else key): value for key, value in item.items()}
            for item in APP_YAML["env"]
        ],
    }
    for target in [None, *BUNDLE["targets"]]:
        [app] = bundle_apps(target)
        assert app["config"] == expected, f"target {target}: databricks.yml's app config differs from app.yaml"


def test_the_command_starts_this_app_and_every_value_from_names_a_resource():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert APP_YAML["command"][-1] in scripts
    [app] = bundle_apps()
    resources = {resource["name"] for resource in app.get("resources", [])}
    for item in APP_YAML["env"]:
        assert ("value" in item) != ("valueFrom" in item), item
        if "valueFrom" in item:
            assert item["valueFrom"] in resources, f"{item['name']}: no app resource named {item['valueFrom']!r}"


def test_the_deployed_app_names_its_model_provider():
    """Never the copier default: a deployed app that falls back to it could be the offline model."""
    names = {item["name"] for item in APP_YAML["env"]}
    assert {"LLM_PROVIDER", "LLM_MODEL", "LLM_API"} <= names
