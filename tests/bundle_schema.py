"""Reads a databricks.yml the way the bundle's own typed models do, and says what is wrong with it.

The official `databricks-bundles` package models each resource kind (apps, experiments, ...) as a
dataclass whose `from_dict` rejects an unknown key and a value outside its enums (a permission
level, say). It has no model for the top-level sections (bundle, variables, targets, workspace),
so those are checked here against the keys the bundle reference documents. Every target is checked
as the CLI deploys it: its overrides merged into the top-level resources. `${...}` references must
name a variable or resource the file defines.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from databricks.bundles.apps import App
from databricks.bundles.experiments import MlflowExperiment

# The resource kinds this template deploys; another kind fails until it is added here.
RESOURCE_MODELS: dict[str, type] = {"apps": App, "experiments": MlflowExperiment}

# Documented keys of the sections the package does not model.
TOP_LEVEL_KEYS = {
    "artifacts", "bundle", "experimental", "include", "permissions", "presets", "python",
    "resources", "run_as", "scripts", "sync", "targets", "variables", "workspace",
}  # fmt: skip
BUNDLE_KEYS = {"cluster_id", "compute_id", "databricks_cli_version", "deployment", "git", "name", "uuid"}
VARIABLE_KEYS = {"default", "description", "lookup", "type"}
TARGET_KEYS = {
    "artifacts", "bundle", "cluster_id", "compute_id", "default", "git", "mode", "permissions",
    "presets", "resources", "run_as", "sync", "variables", "workspace",
}  # fmt: skip
WORKSPACE_KEYS = {
    "artifact_path", "auth_type", "azure_client_id", "azure_environment", "azure_login_app_id",
    "azure_tenant_id", "azure_use_msi", "azure_workload_identity_audience", "client_id", "file_path",
    "google_service_account", "host", "profile", "resource_path", "root_path", "state_path",
}  # fmt: skip
MODES = {"development", "production"}
# Databricks app names: lowercase letters, digits and hyphens, 2 to 30 characters.
APP_NAME = re.compile(r"^[a-z][a-z0-9-]{0,28}[a-z0-9]$")
REFERENCE = re.compile(r"\$\{([^}]*)\}")
BUILT_IN_REFERENCES = ("bundle.", "workspace.")


class BundleError(ValueError):
    """The file would not deploy; the message names where and why."""


def load(text: str) -> dict[str, Any]:
    config = yaml.safe_load(text)
    if not isinstance(config, dict):
        raise BundleError("databricks.yml must be a mapping")
    return config


def validate(text: str) -> dict[str, dict[str, dict[str, Any]]]:
    """The typed resources of every target, {target: {kind: {key: model}}}; raises BundleError."""
    config = load(text)
    _keys(config, TOP_LEVEL_KEYS, "the top level")
    _keys(config.get("bundle") or {}, BUNDLE_KEYS, "bundle")
    if not (config.get("bundle") or {}).get("name"):
        raise BundleError("bundle.name is required")
    _keys(config.get("workspace") or {}, WORKSPACE_KEYS, "workspace")
    for name, variable in (config.get("variables") or {}).items():
        _keys(variable, VARIABLE_KEYS, f"variables.{name}")
    _references(config)
    targets = config.get("targets") or {"default": {}}
    if sum(1 for target in targets.values() if target.get("default")) > 1:
        raise BundleError("more than one target has default: true")
    return {name: _target(config, name, target) for name, target in targets.items()}


def _target(config: dict[str, Any], name: str, target: dict[str, Any]) -> dict[str, dict[str, Any]]:
    where = f"targets.{name}"
    _keys(target, TARGET_KEYS, where)
    _keys(target.get("workspace") or {}, WORKSPACE_KEYS, f"{where}.workspace")
    if "mode" in target and target["mode"] not in MODES:
        raise BundleError(f"{where}.mode: {target['mode']!r} is not one of {sorted(MODES)}")
    resources = _merged(config.get("resources") or {}, target.get("resources") or {})
    typed: dict[str, dict[str, Any]] = {}
    for kind, items in resources.items():
        model = RESOURCE_MODELS.get(kind)
        if model is None:
            raise BundleError(f"{where}: resources.{kind} is not a resource kind this check knows")
        typed[kind] = {}
        for key, value in (items or {}).items():
            try:
                typed[kind][key] = model.from_dict(dict(value))
            except (TypeError, ValueError) as error:
                raise BundleError(f"{where}: resources.{kind}.{key}: {error}") from None
    for key, app in typed.get("apps", {}).items():
        if not APP_NAME.match(app.name) or "--" in app.name:
            raise BundleError(f"{where}: resources.apps.{key}.name {app.name!r} is not a valid app name")
    return typed


def _merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A target's override merged into the top level, mappings key by key, as the CLI does."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def _keys(section: Any, allowed: set[str], where: str) -> None:
    if not isinstance(section, dict):
        raise BundleError(f"{where} must be a mapping, not {section!r}")
    unknown = sorted(set(section) - allowed)
    if unknown:
        raise BundleError(f"{where}: unknown key(s) {unknown}")


def _references(config: dict[str, Any]) -> None:
    variables = set(config.get("variables") or {})
    resources = {f"{kind}.{key}" for kind, items in (config.get("resources") or {}).items() for key in items or {}}
    for reference in REFERENCE.findall(yaml.safe_dump(config)):
        if reference.startswith("var."):
            if reference.removeprefix("var.") not in variables:
                raise BundleError(f"${{{reference}}} names no variable in `variables`")
        elif reference.startswith("resources."):
            kind, key = reference.split(".")[1:3]
            if f"{kind}.{key}" not in resources:
                raise BundleError(f"${{{reference}}} names no resource in `resources`")
        elif not reference.startswith(BUILT_IN_REFERENCES):
            raise BundleError(f"${{{reference}}} is not a reference the bundle resolves")
