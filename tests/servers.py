"""Start-and-wait helpers for tests that run an app as a real process on a loopback port."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_health(url: str, process: subprocess.Popen, timeout: float = 120) -> None:
    """Wait until `url`/health answers; fail with the process's output if it exits first."""
    wait_until_answering(f"{url}/health", process, timeout)


def wait_until_answering(
    url: str, process: subprocess.Popen, timeout: float = 120, output: Callable[[], str] | None = None
) -> None:
    """Wait until a GET of `url` answers at all; fail with the process's output if it exits first.

    `output` reads that output when the process writes it to a file rather than a pipe.
    """
    read_output = output or (lambda: process.communicate()[0])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"{process.args} exited ({process.returncode}):\n{read_output()}"
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.3)
    raise AssertionError(f"{process.args} did not answer on {url} within {timeout}s:\n{output() if output else ''}")
