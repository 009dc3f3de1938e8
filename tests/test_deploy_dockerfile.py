"""Deploying a generated app to other hosts than Databricks Apps: the Dockerfile, linted, then its install and
start steps run as plain commands in a clean folder (Docker cannot run here), with the runtime's uv.
(tests/test_deploy_rehearsal.py rehearses what the Databricks Apps runtime does.)
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from deploy_support import RUNTIME_UV_VERSION, through_the_proxy
from renders import clean_env, run
from servers import ServerProcess, chat_with, free_port, reply_text


def dockerfile(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with line continuations joined and comments dropped."""
    lines = re.sub(r"\\\n", " ", path.read_text()).splitlines()
    steps = []
    for line in lines:
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, arguments = line.partition(" ")
            steps.append((instruction.upper(), " ".join(arguments.split())))
    return steps


def test_the_dockerfile_lints_clean(renders):
    hadolint = str(Path(sys.executable).with_name("hadolint"))
    run([hadolint, "Dockerfile"], cwd=renders["defaults"])


@pytest.mark.xdist_group("deploy")
def test_the_dockerfile_installs_and_starts_as_plain_commands(renders, tmp_path, uv_of_the_runtime):
    """Docker cannot run here: each step runs as a plain command, with /app a clean folder."""
    render = renders["defaults"]
    folder = tmp_path / "app"
    env = clean_env(HOME=str(tmp_path))

    def here(value: str) -> str:
        return value.replace("/app", str(folder)).replace("$PATH", env["PATH"])

    python = (render / ".python-version").read_text().strip()
    cache = tmp_path / "uv-cache"  # what the build's cache mount holds: outside the image
    skipped, health, command, user, copied_before_install, installs = [], None, None, None, [], 0
    for instruction, arguments in dockerfile(render / "Dockerfile"):
        if instruction == "RUN" and arguments.startswith("--mount="):
            mount, arguments = arguments.split(" ", 1)
            assert mount == "--mount=type=cache,target=/root/.cache/uv", "the uv cache stays out of the image"
            env["UV_CACHE_DIR"] = str(cache)
        if instruction == "FROM":
            assert re.fullmatch(rf"python:{re.escape(python)}-slim(-\w+)?", arguments), (arguments, python)
        elif instruction == "COPY" and arguments.startswith("--from="):
            assert arguments.split()[0] == f"--from=ghcr.io/astral-sh/uv:{RUNTIME_UV_VERSION}"
        elif instruction == "COPY":
            *sources, dest = arguments.split()
            copied_before_install += sources if not installs else []
            for source in sources:
                target = folder / dest / (source if dest.endswith("/") or dest == "." else "")
                copy = shutil.copytree if (render / source).is_dir() else shutil.copy
                copy(render / source, target)
        elif instruction == "WORKDIR":
            assert arguments == "/app"
            folder.mkdir()
        elif instruction == "ENV":
            env.update(here(pair).split("=", 1) for pair in shlex.split(arguments))
        elif instruction == "RUN" and arguments.startswith("uv "):
            # Without the mount, uv's cache would be a layer of the image, in /root/.cache/uv.
            assert env.pop("UV_CACHE_DIR", None) == str(cache), f"{arguments}: no cache mount"
            run(
                [str(uv_of_the_runtime), *shlex.split(here(arguments))[1:]],
                cwd=folder,
                env={**env, "UV_CACHE_DIR": str(cache)},
            )
            installs += 1
        elif instruction == "RUN":
            skipped.append(arguments)
        elif instruction == "USER":
            user = arguments
        elif instruction == "HEALTHCHECK":
            health = json.loads(arguments.split(" CMD ", 1)[1])
        elif instruction == "CMD":
            command = json.loads(arguments)
    assert skipped == [next(step for kind, step in dockerfile(render / "Dockerfile") if "useradd" in step)]
    assert user and user.split(":")[0].isdigit() and int(user.split(":")[0]) > 0, "runs as a non-root user"
    assert (folder / ".venv" / "bin" / "start-app").exists()
    assert not (folder / ".venv" / "bin" / "pytest").exists(), "the image has no dev tools"
    # The dependency layer is rebuilt only when what it copies changes: not for an edit of the README or the code.
    assert sorted(copied_before_install) == [".python-version", "pyproject.toml", "uv.lock"], copied_before_install
    assert installs == 2 and any(cache.iterdir()), "both installs used the cache mount"
    [site] = (folder / ".venv" / "lib").glob("python3.*")
    assert site.name == f"python{python}", "the image's environment runs .python-version's Python"
    assert env["APP_ENV"] == "production"

    port = free_port()
    env = {**env, "PORT": str(port), "LLM_PROVIDER": "offline"}
    health_url = f"http://127.0.0.1:{port}/health"
    refused = ServerProcess(command, env, health_url, cwd=folder, log=tmp_path / "refused.log", timeout=300)
    assert refused.run_to_exit() != 0 and "APP_ENV=production" in refused.output, refused.output
    env["LLM_ALLOW_OFFLINE"] = "true"
    with ServerProcess(command, env, health_url, cwd=folder, log=tmp_path / "served.log", timeout=300):
        run(health, cwd=folder, env=env)  # the HEALTHCHECK command exits 0
        chat = chat_with(f"http://127.0.0.1:{port}", stream=True, headers=through_the_proxy())
        assert reply_text(chat.send("Hello")).startswith("Offline model:")
