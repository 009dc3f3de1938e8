"""The README's first command, run as written: it generates an app and serves it on the offline model, or, when its
port is taken, says so at once and generates nothing.

(The second command, scripts/test, is what runs this suite: .ci/run calls it.)
"""

from __future__ import annotations

import os
import socket
import subprocess
import time

import pytest
from renders import API_MODES, ROOT, clean_env
from servers import ServerProcess, app_support, free_port, http_client, post, replayed, reply_text

README = (ROOT / "README.md").read_text()


def test_readme_names_the_two_commands():
    assert "scripts/demo ../my-agent" in README
    assert "scripts/test" in README
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("exec scripts/test")


@pytest.mark.xdist_group("demo")
@pytest.mark.parametrize("api", API_MODES)
def test_demo_serves_second_and_third_prompts(tmp_path, api):
    port = free_port()
    env = clean_env(PORT=str(port), LLM_API=api, HOME=os.environ.get("HOME", str(tmp_path)))
    demo = [str(ROOT / "scripts" / "demo"), str(tmp_path / "my-agent")]
    # The first run installs the app; scripts/demo starts it as a child, so the group is stopped.
    with ServerProcess(demo, env, f"http://127.0.0.1:{port}/health", cwd=ROOT, timeout=300, group=True) as served:
        url = served.url
        history = [{"role": "user", "content": "Hello"}]
        with http_client(url) as client:
            for turn in (1, 2, 3):
                for stream in (False, True):
                    items = post(client, history, stream)
                    assert f"I saw {turn} user, {turn - 1} assistant and 0 tool turns" in reply_text(items)
                history += [*replayed(items, "chat_ui"), {"role": "user", "content": f"Turn {turn + 1}"}]
            # The app keeps conversations (SQLite, the default): a second turn may be the new message alone.
            chat = app_support.Conversation(client, stream=False)
            chat.send("My name is Ada")
            assert "I saw 2 user, 1 assistant and 0 tool turns" in reply_text(chat.send("What is my name?"))
            # A background run (README, "Long-running turns"), as the chat page sends every turn.
            run = client.post("/responses", json={"input": "Hello", "background": True}).json()
            assert run["status"] in ("queued", "in_progress") and run["id"].startswith("resp_")
            for _ in range(200):
                if (read := client.get(f"/responses/{run['id']}").json())["status"] == "completed":
                    break
                time.sleep(0.05)
            assert "I saw 1 user, 0 assistant and 0 tool turns" in reply_text(read["output"])


@pytest.mark.parametrize("how", ["PORT", "--port"])
def test_demo_on_a_taken_port_exits_at_once_saying_how_to_choose_another_and_generates_nothing(tmp_path, how):
    dest = tmp_path / "my-agent"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # --port wins over PORT, which names a free port then.
        env = clean_env(PORT=str(port) if how == "PORT" else str(free_port()))
        flag = ["--port", str(port)] if how == "--port" else []
        started = time.monotonic()
        result = subprocess.run(
            [str(ROOT / "scripts" / "demo"), *flag, str(dest)], env=env, capture_output=True, text=True, timeout=120
        )
    assert result.returncode == 1 and time.monotonic() - started < 10, result
    assert f"port {port} is taken" in result.stderr, result.stderr
    assert f"PORT={port + 1} scripts/demo {dest}, or scripts/demo --port {port + 1} {dest}" in result.stderr
    assert not dest.exists() and result.stdout == ""  # nothing rendered, nothing installed
