# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The tests' fork server (fork_server.py, asked through app_fork_server.py): one for all the test processes of a
run, and a process it forked goes when the test process that asked for it goes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import app_fork_server
import fork_server
from support import START_APP, app_env, free_port


def forked_from() -> int:
    """In a process the fork server forked: the server's pid (the parent of its watcher, this process's parent)."""
    return int(Path(f"/proc/{os.getppid()}/stat").read_text().rsplit(")", 1)[1].split()[1])


def asking(code: str) -> list[str]:
    """A test process of the run's own (it inherits the server's folder), running `code`."""
    return [sys.executable, "-c", f"import sys; sys.path[:0] = {json.dumps(sys.path)}\n{code}"]


def test_the_test_processes_of_a_run_share_one_fork_server():
    code = "import app_fork_server\nfrom template.test_fork_server import forked_from\n"
    code += "print(app_fork_server.call(forked_from, env={}))"
    others = [subprocess.Popen(asking(code), stdout=subprocess.PIPE, text=True) for _ in range(2)]
    servers = {app_fork_server.call(forked_from, env={})}
    servers |= {int(other.communicate(timeout=120)[0]) for other in others}
    assert servers == {int(Path(os.environ[app_fork_server.FOLDER], "pid").read_text())}


def test_a_process_whose_test_process_went_away_is_killed(tmp_path):
    start = [START_APP, "--port", str(free_port())], app_env(LLM_PROVIDER="offline"), None, str(tmp_path / "app.log")
    code = f"import app_fork_server, time\nprocess = app_fork_server.start(*{start!r}, False)\n"
    code += "print(process.pid, flush=True)\ntime.sleep(120)"
    test_process = subprocess.Popen(asking(code), stdout=subprocess.PIPE, text=True)
    assert test_process.stdout is not None
    app = int(test_process.stdout.readline())
    os.kill(app, 0)  # it runs
    test_process.kill()
    test_process.wait()
    deadline = time.monotonic() + 30
    while Path(f"/proc/{app}").exists():
        assert time.monotonic() < deadline, "the app outlived the test process that asked for it"
        time.sleep(0.05)


def telemetry_setting() -> str | None:
    return os.environ.get("MLFLOW_DISABLE_TELEMETRY")


def test_the_template_modules_the_server_imports_read_nothing_of_the_environment_but_the_apps_defaults():
    """The fork server imports the template's modules once for all the processes it forks (fork_server.py). That is
    only right while none of them reads a setting as it is imported: each process would have the server's. The one
    that does, agent_server/__init__.py (MLflow's telemetry off, unless the environment says otherwise), runs again
    in each process, with that process's environment."""
    assert app_fork_server.call(telemetry_setting, env={}) == "true"
    assert app_fork_server.call(telemetry_setting, env={"MLFLOW_DISABLE_TELEMETRY": "false"}) == "false"
    preloaded = json.loads(Path(os.environ[app_fork_server.FOLDER], fork_server.PRELOADED).read_text())
    assert preloaded["read"] == [["MLFLOW_DISABLE_TELEMETRY", "__init__.py"]]
    # The owner's agent.py, and what imports it, each process imports itself.
    assert {"agent_server.config", "agent_server.memory", "agent_server.history"} <= set(preloaded["imported"])
    assert not {"agent_server.agent", "agent_server.app", "agent_server.turn.serve"} & set(preloaded["imported"])
