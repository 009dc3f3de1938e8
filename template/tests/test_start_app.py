# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The `start-app` command as a platform runs it: a real process on a real port."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from support import free_port, wait_for_health

START_APP = str(Path(sys.executable).with_name("start-app"))


def app_env(**values: str) -> dict[str, str]:
    keep = {key: value for key, value in os.environ.items() if not key.startswith(("LLM_", "OPENAI_", "DATABRICKS_"))}
    return {**keep, "HOME": os.environ.get("HOME", "/tmp"), **values}


@pytest.mark.parametrize("how", ["--port", "DATABRICKS_APP_PORT"])
def test_serves_a_multi_turn_chat(how):
    port = free_port()
    args, env = [START_APP], app_env(LLM_PROVIDER="offline")
    if how == "--port":
        args += ["--port", str(port)]
    else:
        env["DATABRICKS_APP_PORT"] = str(port)
    process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_health(url, process)
        history = [
            {"role": "user", "content": "Hello"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi!"}]},
            {"role": "user", "content": "And again"},
        ]
        for stream in (False, True):
            response = httpx.post(f"{url}/invocations", json={"input": history, "stream": stream}, timeout=60)
            assert response.status_code == 200, response.text
            assert "I saw 2 user, 1 assistant and 0 tool turns" in response.text
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"LLM_PROVIDER": "openai"}, ["OPENAI_API_KEY"]),
        ({"LLM_PROVIDER": "databricks"}, ["DATABRICKS_HOST", "DATABRICKS_TOKEN", "DATABRICKS_CLIENT_ID"]),
        ({"LLM_PROVIDER": "anthropic"}, ["LLM_PROVIDER"]),
        ({"LLM_PROVIDER": "offline", "LLM_API": "assistants"}, ["LLM_API"]),
    ],
    ids=["openai", "databricks", "bad-provider", "bad-api"],
)
def test_missing_or_bad_configuration_stops_with_a_clear_error(tmp_path, env, names):
    # An empty HOME so no ~/.databrickscfg profile can supply credentials.
    result = subprocess.run(
        [START_APP, "--port", str(free_port())],
        env=app_env(**env, HOME=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    for name in names:
        assert name in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
