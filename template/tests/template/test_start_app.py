# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The `start-app` command as a platform runs it: a real process on a real port."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import app_fork_server
import httpx
import loopback
import pytest
from support import START_APP, StartedApp, app_env, free_port, free_ports

from agent_server import start_server


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
    result = app_fork_server.run([START_APP, "--port", str(free_port())], app_env(**env, HOME=str(tmp_path)))
    assert result.returncode != 0
    for name in names:
        assert name in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("env", "argv", "host"),
    [
        ({}, [], "127.0.0.1"),
        ({"DATABRICKS_APP_PORT": "8080"}, [], "0.0.0.0"),
        ({"HOST": "0.0.0.0"}, [], "0.0.0.0"),
        ({"DATABRICKS_APP_PORT": "8080"}, ["--host", "127.0.0.1"], "127.0.0.1"),
    ],
    ids=["local", "databricks-apps", "HOST", "--host"],
)
def test_listens_on_loopback_unless_deployed_or_told(app_settings, env, argv, host):
    for name in ("HOST", "DATABRICKS_APP_PORT", "PORT"):
        app_settings.delenv(name)
    for name, value in env.items():
        app_settings.setenv(name, value)
    assert start_server.parse_args(argv).host == host


def test_ports_asked_for_in_turn_by_two_test_processes_are_never_the_same():
    """Two pytest workers each start an app on a port they asked for; the app binds it only once it has loaded. A
    port the kernel chose (a bind to port 0) is free only as it is chosen, and the kernel hands it out again: 300
    asks here gave 6 ports twice, and two apps then met on one port (app_servers.PortTaken). Ports come from a
    counter the test processes share (port_owners.free_ports)."""
    asks = 300
    other = subprocess.run(
        [sys.executable, "-c", f"import json, port_owners; print(json.dumps(port_owners.free_ports({asks})))"],
        capture_output=True, text=True, check=True, cwd=Path(__file__).parent,
    )  # fmt: skip
    ours = [port for _ in range(asks // 3) for port in free_ports(3)]
    ports = json.loads(other.stdout) + ours
    assert len(set(ports)) == len(ports) == 2 * asks


def test_listening_beyond_loopback_the_app_answers_only_to_the_names_allowed():
    """Exposed means allow-listed, by the app itself (browser_guard.py): with HOST=0.0.0.0 and no ALLOWED_HOSTS it
    answers only to the loopback names, and start-app says what to set."""
    app = StartedApp(app_env(LLM_PROVIDER="offline", HOST="0.0.0.0"))
    with app as url:
        assert loopback.get(f"{url}/").status_code == 200
        assert loopback.get(f"{url}/", headers={"host": "evil.example"}).status_code == 400
        assert "set ALLOWED_HOSTS" in app.output, app.output
    allowed = app_env(LLM_PROVIDER="offline", HOST="0.0.0.0", ALLOWED_HOSTS="127.0.0.1,agent.example.com")
    with StartedApp(allowed) as url:
        assert loopback.get(f"{url}/", headers={"host": "agent.example.com"}).status_code == 200
        assert loopback.get(f"{url}/", headers={"host": "evil.example"}).status_code == 400


@pytest.mark.parametrize(("name", "value"), [("PORT", "abc"), ("DATABRICKS_APP_PORT", "70000"), ("PORT", "-1")])
def test_a_bad_port_is_a_one_line_error(name, value):
    env = app_env(LLM_PROVIDER="offline", **{name: value})
    result = app_fork_server.run([START_APP], env)
    assert result.returncode != 0
    assert result.stderr.strip() == f"start-app: {name}: {value!r} is not a port number (1 to 65535)"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MAX_INPUT_ITEMS", "many"),
        ("TRACES_MAX_MB", "-1"),
        ("LLM_TIMEOUT_SECONDS", "0"),
        ("MEMORY_MAX_TURN_BYTES", "0"),
    ],
)
def test_a_bad_number_setting_is_a_one_line_error(name, value):
    """Every number variable is parsed by agent_server/config/: never a silent fall back to the default."""
    env = app_env(LLM_PROVIDER="offline", **{name: value})
    result = app_fork_server.run([START_APP, "--port", str(free_port())], env)
    assert result.returncode != 0
    assert result.stderr.strip() == f"start-app: {name}={value!r} must be a positive number"


def test_health_keeps_answering_while_the_largest_allowed_request_is_served():
    """No request stalls the server: /health answers, every time, while the largest body is parsed,
    rendered and answered. How fast it answers is a benchmark figure, not a test (a loaded CI machine
    made a 0.5 s bound flaky)."""
    from agent_server.config import RequestLimits

    MAX_INPUT_CHARS, MAX_INPUT_ITEMS = RequestLimits().max_input_chars, RequestLimits().max_input_items  # defaults
    with StartedApp(app_env(LLM_PROVIDER="offline")) as url:
        text = "x" * (MAX_INPUT_CHARS // MAX_INPUT_ITEMS - 40)  # leaves room for the keys
        items = [{"role": ("user", "assistant")[i % 2], "content": text} for i in range(MAX_INPUT_ITEMS - 1)]
        largest = json.dumps({"input": [*items, {"role": "user", "content": "Hello"}]}).encode()
        results: list[httpx.Response] = []
        asked_enough = threading.Event()

        def send() -> None:  # one request after another until /health has been asked a few times meanwhile
            headers = {"content-type": "application/json"}
            while not asked_enough.is_set() and len(results) < 50:
                results.append(loopback.post(f"{url}/invocations", content=largest, headers=headers, timeout=120))

        sender = threading.Thread(target=send)
        answered = 0
        with loopback.Client(base_url=url, timeout=10) as client:  # a stalled server fails here
            sender.start()
            while sender.is_alive():
                assert client.get("/health").status_code == 200
                answered += 1
                if answered == 5:
                    asked_enough.set()
                time.sleep(0.05)
        sender.join()
    assert results and {result.status_code for result in results} == {200}, results[-1].text
    assert answered >= 5, "the requests were over before /health could be asked"


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"MEMORY_BACKEND": "redis"}, "MEMORY_BACKEND='redis' is not one of none, sqlite, postgres"),
        (
            {"MEMORY_DATABASE_URL": "/proc/no-such-folder/conversations.db"},
            "conversation memory (sqlite, sqlite+pysqlite:",
        ),
        ({"MEMORY_BACKEND": "postgres", "MEMORY_DATABASE_URL": "mysql://db/x"}, "must be a postgresql:// URL"),
        ({"MEMORY_BACKEND": "postgres", "MEMORY_DATABASE_URL": ""}, "needs MEMORY_DATABASE_URL, or PGHOST"),
        ({"APP_ENV": "production", "LLM_ALLOW_OFFLINE": "true"}, "needs MEMORY_USER_HEADER"),
    ],
    ids=["bad-backend", "sqlite-unusable", "not-postgres", "postgres-unnamed", "deployed-without-identity"],
)
def test_memory_that_cannot_work_stops_start_app_with_the_reason(env, says):
    result = app_fork_server.run([START_APP, "--port", str(free_port())], app_env(LLM_PROVIDER="offline", **env))
    assert result.returncode != 0
    assert result.stderr.startswith("start-app: ") and says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_the_settings_are_checked_before_the_sdk_openai_or_mlflow_loads():
    """start-app checks every setting before it imports what serving needs (seconds of imports), so a bad one
    says so at once. The database is checked last of all: when it fails, none of those is loaded yet."""
    check = (
        "import sys\n"
        "from agent_server import start_server\n"
        "try:\n    start_server.main(['--port', '1'])\n"
        "except SystemExit as stop:\n    print(stop)\n"
        "print(sorted({name.partition('.')[0] for name in sys.modules} & {'agents', 'openai', 'mlflow', 'fastapi'}))\n"
    )
    env = app_env(LLM_PROVIDER="offline", MEMORY_DATABASE_URL="/proc/no-such-folder/conversations.db")
    result = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=60)
    said, loaded = result.stdout.strip().splitlines()
    assert said.startswith("start-app: conversation memory (sqlite,"), result.stdout + result.stderr
    assert loaded == "[]", f"loaded before the settings were checked: {loaded}"


def test_start_app_reads_dot_env_and_the_environment_wins(tmp_path):
    """A bad value in .env stops start-app (so the file was read); the same variable set in the environment wins."""
    (tmp_path / ".env").write_text("LLM_PROVIDER=offline\nMAX_INPUT_ITEMS=from-the-file\n")
    args = [START_APP, "--port", str(free_port())]

    def start(**env: str) -> str:
        done = app_fork_server.run(args, app_env(**env), cwd=tmp_path)
        assert done.returncode != 0
        return done.stderr.strip()

    assert start() == "start-app: MAX_INPUT_ITEMS='from-the-file' must be a positive number"
    assert (
        start(MAX_INPUT_ITEMS="from-the-env") == "start-app: MAX_INPUT_ITEMS='from-the-env' must be a positive number"
    )


def test_a_deployed_app_logs_json_lines_at_the_level_asked(tmp_path):
    env = app_env(LLM_PROVIDER="offline", DATABRICKS_APP_NAME="my-agent", LLM_ALLOW_OFFLINE="true", LOG_LEVEL="DEBUG")
    started = StartedApp({**env, "WEB_CONCURRENCY": "1"})  # one process: test_workers.py logs JSON from two
    with started as url:
        assert loopback.get(f"{url}/health").status_code == 200
    logged = [line for line in started.output.splitlines() if line.startswith("{")]
    entries = [json.loads(line) for line in logged]
    assert any(entry["logger"].startswith("uvicorn") and "Uvicorn running" in entry["message"] for entry in entries)
    assert any(entry["level"] == "DEBUG" for entry in entries), "LOG_LEVEL=DEBUG lets debug lines through"
    assert set(entries[0]) == {"time", "level", "logger", "message"}


@pytest.mark.parametrize(("name", "value"), [("LOG_LEVEL", "LOUD"), ("LOG_FORMAT", "xml")])
def test_a_bad_log_setting_is_a_one_line_error(name, value):
    env = app_env(LLM_PROVIDER="offline", **{name: value})
    result = app_fork_server.run([START_APP, "--port", str(free_port())], env)
    assert result.returncode != 0
    assert result.stderr.strip().lower().startswith(f"start-app: {name}={value!r}".lower())


@pytest.mark.waits
def test_reload_serves_and_watches_the_app_code():
    started = StartedApp(app_env(LLM_PROVIDER="offline"))
    started.args.append("--reload")
    with started as url:
        assert loopback.get(f"{url}/health").status_code == 200
    assert "Started reloader process" in started.output
    assert "agent_server" in started.output.split("Will watch for changes in these directories:")[1].splitlines()[0]


def test_what_start_up_made_is_frozen_out_of_the_collectors_way(app_client):
    """gc.freeze() after start-up: a full collection walks only what requests made since, so it no longer
    pauses a request for the hundreds of thousands of objects that imports and set-up left."""
    import gc

    assert app_client.get("/health").status_code == 200
    assert gc.get_freeze_count() > 100_000, gc.get_freeze_count()


@pytest.mark.parametrize(("level", "clients"), [("INFO", "WARNING"), ("WARNING", "WARNING"), ("DEBUG", "DEBUG")])
def test_the_http_clients_say_each_model_call_only_at_debug(level, clients):
    from agent_server.config import Settings
    from agent_server.observability.logs import log_config

    loggers = log_config(Settings({"LOG_LEVEL": level}))["loggers"]
    assert loggers["httpx"]["level"] == loggers["httpx2"]["level"] == clients
