# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""`start-app` with several worker processes: how many it runs, and one app across them (start_server.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from support import TRACED, StartedApp, app_env, reply_text

from agent_server import start_server


def spawned_workers(parent: int) -> list[int]:
    """The worker processes uvicorn started for `parent` (multiprocessing's spawn; not its resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                command = (entry / "cmdline").read_bytes()
            except (OSError, IndexError, ValueError):
                continue
            if ppid == parent and b"spawn_main" in command:
                found.append(int(entry.name))
    return found


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime and stime


@pytest.mark.waits
def test_two_workers_answer_each_others_approvals_and_continue_each_others_conversations():
    """send_summary asks first; each approval is sent on a new connection, 8 at a time, so the two processes
    answer approvals that the other signed, in conversations the other stored. With a secret per process, about
    half of them would be refused. Each process traces its requests and logs JSON lines. SIGTERM stops both."""
    env = app_env(LLM_PROVIDER="offline", LOG_FORMAT="json", **TRACED)
    app = StartedApp(env, options=("--workers", "2"), preloaded=False)  # the script itself, as deployed
    with app as url:
        workers = spawned_workers(app.pid)
        assert len(workers) == 2, app.output
        before = {pid: cpu_ticks(pid) for pid in workers}

        def approved(_: int) -> str:
            with httpx.Client(base_url=url, timeout=120) as client:
                asked = client.post("/invocations", json={"input": "Use send_summary"}).json()
            [request] = [item for item in asked["output"] if item["type"] == "mcp_approval_request"]
            answer = {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}
            body = {"input": [answer], "context": {"conversation_id": asked["custom_outputs"]["session_id"]}}
            with httpx.Client(base_url=url, timeout=120) as client:
                done = client.post("/invocations", json=body)
            assert done.status_code == 200, done.text
            return reply_text(done.json()["output"])

        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(approved, range(24)))
        assert all(reply.startswith("The tool returned: An example tool") for reply in replies), replies
        assert all(cpu_ticks(pid) > before[pid] for pid in workers), "both processes served"
        assert "2 worker processes" in app.output
        stopping_refuses_new_connections(app, url)
    assert app.process is not None and app.process.returncode == 0, app.output
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()], "SIGTERM stopped the workers too"
    logged = [json.loads(line) for line in app.output.splitlines() if line.startswith("{")]
    posts = [line for line in logged if line["logger"] == "uvicorn.access" and "POST /invocations" in line["message"]]
    assert len(posts) == 48, "each request, as JSON"
    traces = Path(env["MLFLOW_TRACKING_URI"].removeprefix("file:")).glob("*/traces/*")
    assert len([folder for folder in traces if folder.is_dir()]) == 48, "each request traced, and flushed on stop"


def stopping_refuses_new_connections(app: StartedApp, url: str) -> None:
    """SIGTERM while a request is open (a worker waits for its body): new connections are refused within a moment,
    while that request keeps the app running (a load balancer sends them to another instance meanwhile)."""
    address = ("127.0.0.1", int(url.rsplit(":", 1)[1]))
    head = f"POST /invocations HTTP/1.1\r\nHost: {address[0]}\r\nContent-Type: application/json\r\n"
    head += "Content-Length: 100\r\nExpect: 100-continue\r\n\r\n"
    with socket.create_connection(address, timeout=30) as held:
        held.sendall(head.encode())
        assert held.recv(100).startswith(b"HTTP/1.1 100"), "a worker reads the request's body"
        app.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 4  # before the open request's share of the grace period (5 s) ends
        while True:
            try:
                socket.create_connection(address, timeout=1).close()
            except ConnectionRefusedError:
                break
            assert time.monotonic() < deadline, "a stopping app still takes connections"
            time.sleep(0.05)
        assert app.process.poll() is None, "refused while it still stops"


@pytest.mark.parametrize(
    ("env", "argv", "workers"),
    [
        ({}, [], 1),
        ({"APP_ENV": "production"}, [], "granted"),
        ({"DATABRICKS_APP_NAME": "my-agent"}, [], "granted"),
        ({"WEB_CONCURRENCY": "3"}, [], 3),
        ({"APP_ENV": "production", "WEB_CONCURRENCY": "1"}, [], 1),
        ({"WEB_CONCURRENCY": "auto"}, [], "granted"),
        ({"WEB_CONCURRENCY": "3"}, ["--workers", "2"], 2),
        ({}, ["--workers", "auto"], "granted"),
    ],
    ids=["local", "docker", "databricks-apps", "WEB_CONCURRENCY", "one-deployed", "auto", "--workers", "--auto"],
)
def test_one_worker_locally_and_one_per_granted_cpu_deployed(app_settings, env, argv, workers):
    for name in ("APP_ENV", "DATABRICKS_APP_NAME", "WEB_CONCURRENCY"):
        app_settings.delenv(name)
    for name, value in env.items():
        app_settings.setenv(name, value)
    expected = start_server.cpus_granted() if workers == "granted" else workers
    assert start_server.parse_args(argv).workers == expected


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_a_bad_worker_count_is_a_one_line_error(app_settings, value, capsys):
    app_settings.setenv("WEB_CONCURRENCY", value)
    with pytest.raises(SystemExit) as stopped:
        start_server.parse_args([])
    says = f"{value!r} is not auto or a number of processes (1 or more)"
    assert str(stopped.value) == f"start-app: WEB_CONCURRENCY: {says}"
    with pytest.raises(SystemExit):
        start_server.parse_args(["--workers", value])
    assert "is not auto or a number of processes" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("files", "granted"),
    [
        ({"cpu.max": "150000 100000\n"}, 2),  # a quota of 1.5 CPUs: two processes
        ({"cpu.max": "50000 100000\n"}, 1),
        ({"cpu.max": "max 100000\n"}, None),  # no quota: the affinity
        ({"app.slice/cpu.max": "100000 100000\n", "cpu.max": "max 100000\n"}, 1),  # this process's own cgroup
        ({"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 2),  # cgroup v1
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
    ids=["v2-1.5", "v2-half", "v2-none", "v2-nested", "v1", "v1-none", "no-cgroup"],
)
def test_the_cpus_granted_are_the_affinity_bounded_by_the_cgroup_quota(tmp_path, files, granted):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    own = tmp_path / "self-cgroup"
    own.write_text("0::/app.slice\n")
    affinity = len(os.sched_getaffinity(0))
    assert start_server.cpus_granted(tmp_path, own) == (affinity if granted is None else min(granted, affinity))
