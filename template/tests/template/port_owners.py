# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Which processes listen on a loopback port (Linux's /proc): a server the tests start is ready only once the
server answering its port is its own.

A test picks a free port (app_servers.free_port), then starts a server that binds it once it has loaded, which
takes a minute on a loaded machine. Meanwhile another process may bind the same port (the kernel hands a closed
port out again): its answers would pass for the test's server, and a browser sent there waits for requests that never
come (the chat page's first GET /conversations, for 30 s). ServerProcess asks here whose the port is.
"""

from __future__ import annotations

import os
from pathlib import Path

LISTEN = "0A"  # the TCP state in /proc/net/tcp


def listening_inodes(port: int) -> set[str] | None:
    """The socket inodes listening on `port`; None where /proc cannot tell (not Linux)."""
    found: set[str] = set()
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        return None
    for table in tables:
        for line in table.read_text().splitlines()[1:] if table.exists() else []:
            fields = line.split()
            if fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found


def family(root: int) -> set[int]:
    """`root` and every process descended from it."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    members, grew = {root}, True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in members and pid not in members:
                members.add(pid)
                grew = True
    return members


def sockets_of(pids: set[int]) -> set[str]:
    """The socket inodes these processes hold. A server opens and closes files all the time: an fd gone between the
    listing and its read is skipped, never the process's others (that read the server's own port as another's)."""
    inodes = set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[len("socket:[") : -1])
    return inodes


def someone_elses(port: int, root: int) -> bool:
    """Does a process outside `root`'s family listen on `port` (and none of the family)?"""
    listening = listening_inodes(port)
    if not listening:
        return False  # nobody yet, or /proc cannot tell
    return not listening & sockets_of(family(root))
