"""A real PostgreSQL server for tests and benchmarks: Debian's `postgresql` package (scripts/test
installs it), started in a temporary data directory on a free loopback port, as a non-root user
(PostgreSQL refuses to run as root), and stopped by its own process id. Stdlib only."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

USER, PASSWORD, DATABASE = "agent", "agent-test-password", "agent"


def binaries() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name))
    if not found:
        raise RuntimeError("PostgreSQL is not installed: scripts/test installs Debian's postgresql package")
    return found[-1].parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    def __init__(self) -> None:
        self.bin = binaries()
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="agent-postgres-"))
        self.data = self.root / "data"
        self.process: subprocess.Popen | None = None
        # As root, run as Debian's postgres user; otherwise as ourselves.
        self.user = "postgres" if os.geteuid() == 0 else None

    @property
    def url(self) -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{DATABASE}"

    def __enter__(self) -> PostgresServer:
        if self.user:
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        password_file = self.root / "password"
        password_file.write_text(PASSWORD)
        if self.user:
            os.chown(password_file, pwd.getpwnam(self.user).pw_uid, -1)
        self._run(
            self.bin / "initdb", "-D", str(self.data), "-U", USER, "--pwfile", str(password_file),
            "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        self.start()
        self.psql(f"CREATE DATABASE {DATABASE}", database="postgres")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def start(self) -> None:
        """Start the server (again, after stop: the data directory stays)."""
        self.process = subprocess.Popen(
            [
                str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port), "-k", str(self.root),
                "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200",
            ],
            user=self.user, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while subprocess.run(
            [str(self.bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)], check=False
        ).returncode:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start on port {self.port}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            # SIGINT is PostgreSQL's fast shutdown; SIGTERM's would wait for the apps' pooled connections.
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=60)
        self.process = None

    def psql(self, sql: str, database: str = DATABASE) -> str:
        """Run `sql` as the superuser, over the Unix socket in the server's folder."""
        return self._run(
            self.bin / "psql", "-h", str(self.root), "-p", str(self.port), "-U", USER, "-d", database,
            "-v", "ON_ERROR_STOP=1", "-At", "-c", sql,
        )  # fmt: skip

    def _run(self, *args: object) -> str:
        done = subprocess.run([str(a) for a in args], user=self.user, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"{Path(str(args[0])).name} failed: {done.stderr.strip()}")
        return done.stdout.strip()
