"""The README's first command, run as written: it generates an app and serves it on the offline model, or, when its
port is taken, says so at once and generates nothing. And the generated app's README and docs/: every `uv run`,
`curl` and `scripts/` command of their bash blocks runs as written (on a free port), or names the test that runs it.

(The second command, scripts/test, is what runs this suite: .ci/run calls it.)
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import time
from pathlib import Path

import pytest
from renders import API_MODES, ROOT, clean_env, render, uv, uv_binary
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
    env = clean_env(PORT=str(port), LLM_API=api, HOME=os.environ.get("HOME", str(tmp_path)), PATH=PATH_WITHOUT_UV)
    demo = [str(ROOT / "scripts" / "demo"), str(tmp_path / "my-agent")]
    # The first run installs the app; scripts/demo starts it as a child, so the group is stopped.
    with ServerProcess(demo, env, f"http://127.0.0.1:{port}/health", cwd=ROOT, timeout=300, group=True) as served:
        url = served.url
        # Its closing message names the port it serves and where uv is (not copier's, which says 8000 and uv).
        said = served.output
        assert f"on http://localhost:{port}" in said and f"uv run start-app --port {port}" in said, said
        assert f'export PATH="{ROOT}/.tools/bin:$PATH"' in said and "port 8000 (" not in said, said
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


# An owner's shell without uv (the demo installs it into .tools/, and says so).
PATH_WITHOUT_UV = os.pathsep.join(
    part for part in os.environ.get("PATH", "").split(os.pathsep) if part and not (Path(part) / "uv").exists()
)


def test_demo_refuses_contradictory_answers_in_one_line_and_generates_nothing(tmp_path):
    """Copier prints a refused `-d` answer as a traceback of about 30 lines; the demo prints its last line alone."""
    dest = tmp_path / "my-agent"
    demo = [str(ROOT / "scripts" / "demo"), str(dest), "-d", "long_term_memory=true", "-d", "memory=none"]
    env = clean_env(PORT=str(free_port()), HOME=os.environ.get("HOME", str(tmp_path)))
    result = subprocess.run(demo, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1 and result.stdout == "", result
    assert result.stderr.startswith("scripts/demo: Validation error for question 'long_term_memory': Long-term memory")
    assert result.stderr.count("\n") == 1 and "Nothing was generated." in result.stderr, result.stderr
    assert not dest.exists()


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


# --- The generated app's README and docs/: every `uv run`, `curl` and `scripts/` command their bash blocks hold ---

IN_SCOPE = re.compile(r"\buv run\b|\bcurl\b|\bscripts/")
SERVES = "uv run start-app"  # the README's: it serves every other block's commands
STARTS_THE_APP = re.compile(r"^(?:[A-Z_]+=\S+ )*uv run (?:--locked )?start-app\b")
# Commands not run here, each with the test that runs it or why none can. Any other command in a bash block runs.
NOT_RUN_HERE = {
    "uv run pytest": "tests/test_app_suite.py runs the app's suite in a render",
    "uv run ruff check . && uv run ruff format --check . && uv run mypy": "tests/test_render.py (ruff), test_app_suite",
    "LLM_PROVIDER=offline uv run evaluate --judge offline": "tests/test_app_suite.py, as written",
    "uv run evaluate": "tests/test_app_suite.py runs it with --judge offline (the same, plus the judges)",
    "uv run evaluate --judge offline": "tests/test_app_suite.py, as written (LLM_PROVIDER=offline in its environment)",
    "uv run evaluate --judge openai:/gpt-4.1-mini --simulate 2": "needs a real judge model",
    "uv run evaluate --url http://127.0.0.1:8000": "the app's tests/template/test_evaluation.py, on an app it starts",
    "APP_ENV=production MEMORY_BACKEND=none ALLOWED_HOSTS=agent.example.com uv run --locked start-app --port 8000 "
    "--host 0.0.0.0": "a deployed app refuses the offline model: needs a model provider's credentials",
    """curl -s https://<your-app-url>/invocations -H "Authorization: Bearer $TOKEN" """
    """-H 'content-type: application/json' -d '{"input": [{"role": "user", "content": "What time is it?"}]}'""": (
        "needs a deployed app and a token"
    ),
}


def one_line(command: str) -> str:
    """The command with its continued lines joined and its spaces collapsed, as NOT_RUN_HERE names it."""
    return " ".join(command.replace("\\\n", " ").split())


def not_run_here(command: str) -> bool:
    return one_line(command) in NOT_RUN_HERE


def statements(block: str) -> list[str]:
    """A bash block's commands, each whole: continued lines and multi-line quotes joined, comments dropped."""
    found, pending = [], ""
    for line in block.splitlines():
        pending += line + "\n"
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the command goes on
            continue
        if pending.rstrip().endswith("\\"):
            continue
        if words:
            found.append(without_comment(pending.strip()))
        pending = ""
    return found


def without_comment(command: str) -> str:
    """The command without its trailing `# comment` (a # outside quotes, after a space)."""
    quote = ""
    for at, char in enumerate(command):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and at and command[at - 1].isspace():
            return command[:at].rstrip()
    return command


def bash_blocks(app: Path) -> dict[str, list[list[str]]]:
    """Each page's bash blocks, as the in-scope commands of each block."""
    pages = [app / "README.md", *sorted((app / "docs").glob("*.md"))]
    blocks = {}
    for page in pages:
        found = [statements(block) for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.DOTALL)]
        blocks[str(page.relative_to(app))] = [[line for line in block if IN_SCOPE.search(line)] for block in found]
    return blocks


def as_written_on(command: str, port: int) -> str:
    """The command on the test's port: the docs say 8000, which another program may hold."""
    return re.sub(r"\b(localhost|127\.0\.0\.1):8000\b", rf"\1:{port}", command)


def test_the_statement_splitter_keeps_quotes_and_continuations_whole():
    block = "curl -s x -d '{\n  \"a\": 1}'  # the app's\nA=$(curl -s y \\\n  | python3 -c 'print(1)')\n# only\n"
    assert statements(block) == ["curl -s x -d '{\n  \"a\": 1}'", "A=$(curl -s y \\\n  | python3 -c 'print(1)')"]


def test_every_command_of_the_app_readme_and_docs_runs_as_written(tmp_path):
    app = render(tmp_path / "app", {})
    blocks = bash_blocks(app)
    commands = [command for page in blocks.values() for block in page for command in block]
    assert sum(command.startswith("curl") for command in commands) >= 5, commands
    assert {"README.md", "docs/memory.md", "docs/long-running-turns.md"} <= {p for p, b in blocks.items() if any(b)}
    uv("sync", "--locked", "--no-config", cwd=app)
    port = free_port()
    # As an owner's shell runs them: uv on PATH, the app's own defaults (offline model, SQLite memory), traced.
    env = clean_env(PATH=f"{Path(uv_binary()).parent}:{clean_env()['PATH']}", UV_NO_CONFIG="1", PORT=str(port))
    env |= {"HOME": os.environ.get("HOME", str(tmp_path))}
    ran = [SERVES]
    with ServerProcess(["bash", "-c", SERVES], env, f"http://127.0.0.1:{port}/health", cwd=app, group=True):
        for page, page_blocks in blocks.items():
            for block in page_blocks:
                own = [c for c in block if STARTS_THE_APP.match(c) and c != SERVES and not not_run_here(c)]
                assert len(own) <= 1, own
                rest = [c for c in block if c != SERVES and not not_run_here(c) and c not in own]
                if own:  # a block that starts the app its own way: on another port, while the first one runs
                    other = free_port()
                    with ServerProcess(["bash", "-c", own[0]], env | {"PORT": str(other)},
                                       f"http://127.0.0.1:{other}/health", cwd=app, group=True):  # fmt: skip
                        ran += [own[0], *run_commands(rest, other, env, app, page)]
                else:
                    ran += run_commands(rest, port, env, app, page)
    assert SERVES in commands
    assert sorted(set(NOT_RUN_HERE) - {one_line(command) for command in commands}) == [], "no longer in the docs"
    assert any(command.startswith("LONG_TERM_MEMORY=true uv run start-app") for command in ran), ran


def run_commands(commands: list[str], port: int, env: dict[str, str], app: Path, page: str) -> list[str]:
    """A block's commands, in one shell (a command may set a variable the next one uses), each one checked."""
    if not commands:
        return []
    script = "set -e -o pipefail\n" + "\n".join(f"{as_written_on(command, port)}\necho" for command in commands)
    result = subprocess.run(["bash", "-c", script], cwd=app, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{page}: {commands}\n{result.stdout}\n{result.stderr}"
    # Every answer is a success: no error in the app's shape ({"error": {"message": ...}}), no error event.
    assert not re.search(r'"error": ?\{|"type": ?"error"', result.stdout), f"{page}: {commands}\n{result.stdout}"
    return commands
