# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Loopback ports for the servers the tests start: which port to hand out, and whose a port is once it answers.

A test picks a free port (app_servers.free_port), then starts a server that binds it once it has loaded, which
takes a minute on a loaded machine. The kernel's free port (a bind to port 0) is free only at that moment: it hands
the same port to two pytest workers that ask within that minute, and both servers then meet on it. So the test
processes of a machine take ports in turn from a counter they share (a file, locked while it is read and written),
in a range below the kernel's own ephemeral ports, which the kernel hands to nobody.

Something else may still take a port meanwhile (a process that binds it by number): its answers would pass for the
test's server, and a browser sent there waits for requests that never come (the chat page's first GET
/conversations, for 30 s). ServerProcess asks here whose the port is (Linux's /proc).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
from pathlib import Path

# Ports below the ephemeral range of Linux (32768-60999 by default) and macOS (49152-65535).
HANDED_OUT = range(20000, 32000)
COUNTER = Path(tempfile.gettempdir()) / f"app-tests-next-port-{os.getuid()}"

LISTEN = "0A"  # the TCP state in /proc/net/tcp


def free_ports(count: int) -> list[int]:
    """`count` loopback ports, free now and handed to no other test process on this machine for the next
    11,999 asks (the counter's range, once round). A port something holds is passed over."""
    if _ephemeral_overlap():
        return _kernel_ports(count)
    ports: list[int] = []
    with COUNTER.open("a+") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)  # released as the file closes
        counter.seek(0)
        stored = counter.read().strip()
        port = int(stored) if stored.isdigit() and int(stored) in HANDED_OUT else HANDED_OUT.start
        for _ in HANDED_OUT:
            if _bindable(port):
                ports.append(port)
                if len(ports) == count:
                    break
            port = _after(port)
        else:
            raise RuntimeError(f"no {count} free loopback ports in {HANDED_OUT}")
        counter.seek(0)
        counter.truncate()
        counter.write(str(_after(port)))
    return ports


def _after(port: int) -> int:
    """The counter's next port: round to the range's start after its end."""
    return port + 1 if port + 1 in HANDED_OUT else HANDED_OUT.start


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral_overlap() -> bool:
    """Does this machine's kernel hand out ports of HANDED_OUT itself (a widened ephemeral range)?"""
    with contextlib.suppress(OSError, ValueError):
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low < HANDED_OUT.stop and high >= HANDED_OUT.start
    return False


def _kernel_ports(count: int) -> list[int]:
    """The kernel's free ports, none twice: each is held while the next is chosen."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


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
