# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The `start-app` command: check the configuration, then serve agent_server.app on a port.

It reads `.env` in the current folder first, if there is one; a variable already set in the
environment wins over the file. The configuration is checked before the app is imported, so a
missing credential fails in a moment with a message that names what to set.

`--reload` restarts the app when a file under agent_server/ changes (for local development).

It serves with one process locally, and deployed (on Databricks Apps, or with APP_ENV=production, as the
Dockerfile sets) with one per CPU the instance grants: its CPU affinity, bounded by its cgroup's CPU quota,
not the host's CPU count. `--workers` or WEB_CONCURRENCY (a number, or `auto`) says otherwise. The workers
sign approval requests with one key: MCP_APPROVAL_SECRET, else conversation memory's, else one made here for them.
Logs go to stderr as agent_server/observability/logs.py sets them up: LOG_LEVEL, and JSON lines when deployed.

It listens on loopback (127.0.0.1) unless told otherwise (--host or HOST) or deployed
(Databricks Apps sets DATABRICKS_APP_PORT): the app has no login of its own, so it is not
offered to the network by default. Wherever it listens, the app itself answers only to the
loopback host names unless ALLOWED_HOSTS names others (agent_server/middleware/browser_guard.py), as it
does under any server. Every setting is declared and checked in agent_server/config/.
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from agent_server import config, llm
from agent_server.config import LOOPBACK_HOSTS, is_loopback
from agent_server.observability import logs, tracing


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="start-app", description="Serve the agent on /invocations.")
    parser.add_argument("--host", default=default_host(), help="default: $HOST; 0.0.0.0 on Databricks Apps; 127.0.0.1")
    parser.add_argument("--port", type=port_number, default=None, help="default: $DATABRICKS_APP_PORT, $PORT or 8000")
    parser.add_argument(
        "--workers", type=worker_count, default=None, help="a number, or auto (one per CPU the instance grants); "
        "default: $WEB_CONCURRENCY, else auto when deployed, else 1"
    )  # fmt: skip
    parser.add_argument("--reload", action="store_true", help="restart when a file under agent_server/ changes")
    args = parser.parse_args(argv)
    if args.workers is None:
        deployment = config.settings().deployment
        try:
            args.workers = worker_count(deployment.workers or ("auto" if deployment.deployed else "1"))
        except argparse.ArgumentTypeError as error:
            sys.exit(f"start-app: WEB_CONCURRENCY: {error}")
    if args.reload and args.workers != 1:
        parser.error("--reload serves with one worker")
    if args.port is None:
        _, port, name = config.settings().deployment.listen_on
        try:
            args.port = port_number(port)
        except argparse.ArgumentTypeError as error:
            sys.exit(f"start-app: {name}: {error}")
    return args


def default_host() -> str:
    return config.settings().deployment.listen_on[0]


def port_number(text: str) -> int:
    if not text.strip().isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1 to 65535)")
    return int(text)


def worker_count(text: str) -> int:
    """`auto` (cpus_granted) or a whole number from 1."""
    if text.strip().lower() == "auto":
        return cpus_granted()
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not auto or a number of processes (1 or more)")
    return int(text)


def cpus_granted(cgroup: Path = Path("/sys/fs/cgroup"), own: Path = Path("/proc/self/cgroup")) -> int:
    """The CPUs this process may use: its CPU affinity, bounded by its cgroup's CPU quota (a container's limit,
    which the host's CPU count does not show); at least 1."""
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = _cpu_quota(cgroup, own)
    return max(1, min(count, math.ceil(quota)) if quota else count)


def _cpu_quota(cgroup: Path, own: Path) -> float | None:
    """CPUs' worth of time per period that the cgroup allows (v2's cpu.max, else v1's CFS quota); None: no limit."""
    try:
        where = own.read_text().splitlines()[0].split(":", 2)[2].lstrip("/") if own.exists() else ""
    except (OSError, IndexError):
        where = ""
    for folder in dict.fromkeys([cgroup / where, cgroup]):  # this process's cgroup; in a container, the root
        try:
            quota, period = (folder / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        except (OSError, ValueError):
            continue
    try:
        quota_us = int((cgroup / "cpu" / "cpu.cfs_quota_us").read_text())
        return quota_us / int((cgroup / "cpu" / "cpu.cfs_period_us").read_text()) if quota_us > 0 else None
    except (OSError, ValueError):
        return None


def main(argv: list[str] | None = None) -> None:
    read_env_file = load_env_file(Path(".env"))
    settings = config.reload()  # the environment with .env in it
    args = parse_args(argv)
    try:
        settings.check()  # every setting, parsed against its limits: a bad one stops start-app here, in one line
        log_config = logs.log_config(settings)
        current = llm.check_configuration(settings)
        # None of these loads the SDK, the openai client or MLflow (seconds of imports), so a bad setting says so
        # at once.
        from agent_server import mcp_servers, memory

        mcp_servers.from_env()
        kept = memory.check_database()  # a database that is down or too new stops start-app here, in one line
    except config.ConfigurationError as error:
        sys.exit(f"start-app: {error}")
    from agent_server.middleware.browser_guard import allowed_hosts  # starlette's, which serving loads anyway

    if not is_loopback(args.host) and allowed_hosts() == LOOPBACK_HOSTS:
        # The app answers only to those names whatever it listens on (DNS rebinding: browser_guard.py); said here, so
        # that the 400s other clients get are no surprise.
        print(
            f"start-app: listening on {args.host}, the app answers only to the host names {', '.join(LOOPBACK_HOSTS)}: "
            "set ALLOWED_HOSTS to the names clients use to reach it (comma-separated, such as agent.example.com)",
            flush=True,
        )
    if args.workers > 1 and not settings.mcp.approval_secret and not memory.enabled():
        # An approval one worker signs is answered to another: all of them sign with one secret. With memory on it is
        # the store's (shared by every instance on it, across restarts: memory/approval_store.py); without, made here.
        os.environ["MCP_APPROVAL_SECRET"] = secrets.token_hex(32)
        config.reload()
    if read_env_file:
        print("start-app: read .env (variables already set in the environment win)", flush=True)
    where = f"http://{args.host}:{args.port}"
    print(f"start-app: {current.provider} model {current.model!r} over {current.api} on {where}", flush=True)
    print(f"start-app: conversations kept in {kept}", flush=True)
    print(f"start-app: {args.workers} worker process{'es' if args.workers > 1 else ''}", flush=True)

    import uvicorn

    from agent_server.middleware.head_deadline import HTTP_PROTOCOL

    # Each process serving the app sends the traces it still holds as it stops (app.py's lifespan): uvicorn stops on
    # SIGINT or SIGTERM by raising the signal again, which skips atexit, and so MLflow's own flush.
    tracing.flush_on_stop()
    options = dict(
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_config=log_config,
        http=HTTP_PROTOCOL,  # a request's head is due within BODY_TIMEOUT_SECONDS too
        # On SIGTERM, open connections get half the grace period, background runs the rest (runs/recovery.py).
        timeout_graceful_shutdown=math.ceil(config.settings().runs.grace_seconds / 2),
        reload=args.reload,
        reload_dirs=[str(Path(__file__).parent)] if args.reload else None,
    )
    if args.workers > 1 and not args.reload:
        serve_workers(uvicorn.Config("agent_server.app:app", **options))
    else:
        uvicorn.run("agent_server.app:app", **options)


def serve_workers(server_config: Any) -> None:
    """uvicorn's supervisor of several workers (as `uvicorn.run` starts it), but on SIGTERM it closes its own copy
    of the listening socket before it stops them, so that new connections are refused as soon as the workers close
    theirs, and a load balancer sends them to another instance while the running turns finish here. uvicorn's
    keeps it open until it exits: new connections waited unanswered in the socket's queue the whole grace period."""
    from uvicorn.supervisors import Multiprocess

    class Supervisor(Multiprocess):
        def terminate_all(self) -> None:  # called once, as the supervisor stops
            for listening in self.sockets:
                listening.close()
            super().terminate_all()

    Supervisor(server_config, sockets=[server_config.bind_socket()]).run()


def load_env_file(path: Path) -> bool:
    """Add the variables in `path` (a .env file) that the environment does not set already; True if it exists."""
    if not path.is_file():
        return False
    from dotenv import load_dotenv

    load_dotenv(path, override=False)
    return True


if __name__ == "__main__":
    main()
