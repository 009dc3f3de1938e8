"""The README's first command, run as written: it generates an app and serves it on the offline model.

(The second command, scripts/test, is what runs this suite: .ci/run calls it.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request

import pytest
from renders import ROOT, clean_env
from servers import free_port, wait_for_health

README = (ROOT / "README.md").read_text()


def test_readme_names_the_two_commands():
    assert "scripts/demo ../my-agent" in README
    assert "scripts/test" in README
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("exec scripts/test")


def post(url: str, body: dict) -> tuple[int, str]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.mark.xdist_group("demo")
@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_demo_serves_second_and_third_prompts(tmp_path, api):
    port = free_port()
    env = clean_env(PORT=str(port), LLM_API=api, HOME=os.environ.get("HOME", str(tmp_path)))
    process = subprocess.Popen(
        [str(ROOT / "scripts" / "demo"), str(tmp_path / "my-agent")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_health(url, process, timeout=300)  # the first run installs the app
        history = [{"role": "user", "content": "Hello"}]
        for turn in (1, 2, 3):
            for stream in (False, True):
                status, body = post(f"{url}/invocations", {"input": history, "stream": stream})
                assert status == 200, body
                assert f"I saw {turn} user, {turn - 1} assistant and 0 tool turns" in body
            # Replay the answer the way chat UIs do: an id-less output_text message.
            reply = json.loads(post(f"{url}/invocations", {"input": history})[1])["output"][-1]["content"][0]["text"]
            history += [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": reply}]},
                {"role": "user", "content": f"Turn {turn + 1}"},
            ]
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
