"""Rehearse what the Databricks Apps runtime does with a rendered app, on loopback and with no network
but the package registries: install with the runtime's uv, run app.yaml's command with the platform's
environment, against a fake workspace (fake_workspace.py) that serves OAuth and the model endpoints.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from renders import ROOT, clean_env, run, uv
from servers import ServerProcess

# The uv of the Databricks Apps runtime, as its "system environment" page lists it.
RUNTIME_UV_VERSION = "0.10.2"
CLIENT_ID = "rehearsal-service-principal"
CLIENT_SECRET = "rehearsal-secret"
USER_TOKEN = "rehearsal-user-token"
EXPERIMENT_ID = "4242"  # what the bundle's experiment resource resolves to
WORKSPACE_ID = "1234567890123456"
# databricks-sdk treats a token as expired 40 s before it does: 42 s leaves it about 2 s of use.
TOKEN_LIFETIME = 42
SDK_EXPIRY_MARGIN = 40


def runtime_uv(dest: Path) -> Path:
    """The runtime's uv, installed from the package registry into a virtual environment of its own."""
    uv("venv", "--quiet", str(dest), cwd=dest.parent)
    uv("pip", "install", "--quiet", "--python", str(dest / "bin" / "python"), f"uv=={RUNTIME_UV_VERSION}", cwd=dest)
    binary = dest / "bin" / "uv"
    assert run([str(binary), "--version"], cwd=dest).stdout.split()[1] == RUNTIME_UV_VERSION
    return binary


def clean_copy(render: Path, dest: Path) -> Path:
    """The rendered app as a deploy uploads it: no environment, caches or traces from earlier runs."""
    junk = shutil.ignore_patterns(".venv", "mlruns", "__pycache__", ".pytest_cache", ".ruff_cache")
    shutil.copytree(render, dest, ignore=junk)
    return dest


def sync_env(config_home: Path) -> dict[str, str]:
    """For `uv sync` as the runtime runs it: the project's own uv settings ([tool.uv] in pyproject.toml), but none
    of this machine's (no UV_* variable such as a caller's UV_COMPILE_BYTECODE, no user uv.toml)."""
    env = {name: value for name, value in clean_env().items() if not name.startswith("UV_")}
    return {**env, "XDG_CONFIG_HOME": str(config_home)}


def uv_cache_dir() -> str:
    return uv("cache", "dir", cwd=ROOT).stdout.strip()


def platform_env(uv_binary: Path, home: Path, port: int, workspace: str, app_name: str) -> dict[str, str]:
    """The variables Databricks Apps sets for every app, and a PATH whose uv is the runtime's."""
    return {
        "PATH": f"{uv_binary.parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),  # no ~/.databrickscfg: credentials come from the variables below
        "UV_CACHE_DIR": uv_cache_dir(),  # only so the rehearsal downloads nothing twice
        "DATABRICKS_APP_NAME": app_name,
        "DATABRICKS_APP_PORT": str(port),
        "DATABRICKS_HOST": workspace,
        "DATABRICKS_WORKSPACE_ID": WORKSPACE_ID,
        "DATABRICKS_CLIENT_ID": CLIENT_ID,
        "DATABRICKS_CLIENT_SECRET": CLIENT_SECRET,
    }


def app_yaml_env(app: Path) -> dict[str, str]:
    """app.yaml's env as the runtime passes it: `value` as is, `valueFrom` resolved from the app's resources."""
    resolved = resource_values(app)
    env = {}
    for item in yaml.safe_load((app / "app.yaml").read_text())["env"]:
        env[item["name"]] = str(item["value"]) if "value" in item else resolved[item["valueFrom"]]
    return env


def resource_values(app: Path) -> dict[str, str]:
    """What each app resource in databricks.yml hands to `valueFrom`: an ID, a name or a secret's value."""
    bundle = yaml.safe_load((app / "databricks.yml").read_text())
    variables = {name: spec.get("default") for name, spec in (bundle.get("variables") or {}).items()}
    [app_resource] = bundle["resources"]["apps"].values()
    values = {}
    for resource in app_resource.get("resources", []):
        if "experiment" in resource:
            values[resource["name"]] = EXPERIMENT_ID
        elif "serving_endpoint" in resource:
            name = resource["serving_endpoint"]["name"]
            if name.startswith("${var."):
                name = variables[name[len("${var.") : -1]]
            values[resource["name"]] = name
        elif "secret" in resource:
            values[resource["name"]] = "rehearsal-secret-value"
    return values


def dev_only_packages(app: Path) -> set[str]:
    """The packages uv.lock installs only for the dev group: its members and what only they depend on."""
    packages = {package["name"]: package for package in tomllib.loads((app / "uv.lock").read_text())["package"]}
    [project] = [package for package in packages.values() if package.get("source", {}).get("editable") == "."]

    def closure(names: list[str]) -> set[str]:
        seen: set[str] = set()
        while names:
            name = names.pop()
            if name not in seen:
                seen.add(name)
                names += [dependency["name"] for dependency in packages[name].get("dependencies", [])]
        return seen

    runtime = closure([dependency["name"] for dependency in project["dependencies"]])
    dev = closure([dependency["name"] for dependency in project["dev-dependencies"]["dev"]])
    return dev - runtime


def installed_packages(app: Path) -> dict[str, str]:
    """Name -> version of what the app's .venv holds, from its dist-info folders."""
    [site] = (app / ".venv" / "lib").glob("python3.*/site-packages")
    installed = {}
    for info in site.glob("*.dist-info"):
        name, version = info.name.removesuffix(".dist-info").rsplit("-", 1)
        installed[name.lower().replace("_", "-")] = version
    return installed


def app_command(app: Path) -> list[str]:
    return list(yaml.safe_load((app / "app.yaml").read_text())["command"])


def http(method: str, url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, str]:
    """The repo tests' one plain HTTP call: (status, body text), whatever the status."""
    response = httpx.request(method, url, json=body, headers=headers, timeout=120)
    return response.status_code, response.text


def fake_workspace(app: Path, port: int, log: Path) -> ServerProcess:
    """fake_workspace.py, run with the app's own Python so it can answer with the app's offline model."""
    args = [str(app / ".venv" / "bin" / "python"), str(ROOT / "tests" / "fake_workspace.py"), "--port", str(port)]
    args += ["--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET, "--expires-in", str(TOKEN_LIFETIME)]
    args += ["--user-token", USER_TOKEN, "--experiment-id", EXPERIMENT_ID]
    url = f"http://127.0.0.1:{port}"
    return ServerProcess(args, clean_env(), f"{url}/.well-known/databricks-config", cwd=app, log=log, timeout=300)


def workspace_log(workspace: str) -> list[dict[str, Any]]:
    status, body = http("GET", f"{workspace}/fake/log")
    assert status == 200, body
    return json.loads(body)


# The runtime's uv, for the rehearsal (tests/test_deploy_rehearsal.py) and the Dockerfile's installs
# (tests/test_deploy_dockerfile.py): a session fixture, so that it is installed once per worker (xdist group "deploy").
@pytest.fixture(scope="session")
def uv_of_the_runtime(tmp_path_factory) -> Path:
    return runtime_uv(tmp_path_factory.mktemp("uv") / "venv")


# What the Databricks Apps proxy adds to every request it lets through: who is calling. Memory keeps
# conversations per user (agent_server/memory/), so a deployed app refuses a request without them.
FORWARDED_USER = {"x-forwarded-user": "4242424242@1234567890123456", "x-forwarded-email": "dev@example.com"}


def through_the_proxy(headers: dict[str, str] | None = None) -> dict[str, str]:
    return {**FORWARDED_USER, **(headers or {})}
