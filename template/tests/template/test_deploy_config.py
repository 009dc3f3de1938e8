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


def as_bundle_config(app_yaml: dict) -> dict:
    """app.yaml's command and env as databricks.yml's app `config` spells them (value_from for valueFrom)."""
    env = [
        {("value_from" if key == "valueFrom" else key): value for key, value in item.items()}
        for item in app_yaml["env"]
    ]
    return {"command": app_yaml["command"], "env": env}


def differences(app_yaml: dict, config: dict) -> list[str]:
    """What an owner must copy from one file to the other, one line each, naming the variable."""
    found = [] if config.get("command") == app_yaml["command"] else ["command: not the same in both files"]
    expected = as_bundle_config(app_yaml)["env"]
    named = {item["name"]: item for item in config.get("env", [])}
    for item in expected:
        if item["name"] not in named:
            found.append(f"{item['name']}: in app.yaml's env, missing from databricks.yml's config env")
        elif named[item["name"]] != item:
            found.append(f"{item['name']}: {named[item['name']]} in databricks.yml, {item} in app.yaml")
    found += [f"{name}: in databricks.yml's config env, missing from app.yaml's env" for name in named.keys()
              - {item["name"] for item in expected}]  # fmt: skip
    if not found and config.get("env") != expected:
        found.append("env: the same variables in another order")
    return found


def test_app_yaml_and_the_bundle_config_agree():
    """A setting you add (the page's CHAT_* look, OPENAI_BASE_URL) goes into both files' env."""
    for target in [None, *BUNDLE["targets"]]:
        [app] = bundle_apps(target)
        assert not (found := differences(APP_YAML, app["config"])), f"target {target}: " + "; ".join(found)


def test_a_setting_in_one_file_only_is_named_with_the_file_it_is_missing_from():
    added = {**APP_YAML, "env": [*APP_YAML["env"], {"name": "CHAT_TITLE", "value": "Support bot"}]}
    [app] = bundle_apps()
    assert differences(added, app["config"]) == [
        "CHAT_TITLE: in app.yaml's env, missing from databricks.yml's config env"
    ]
    assert differences(APP_YAML, as_bundle_config(added)) == [
        "CHAT_TITLE: in databricks.yml's config env, missing from app.yaml's env"
    ]


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
