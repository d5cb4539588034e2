"""A network namespace for one server and its load generator: the server's
child makes it (its loopback up, nothing else in it), the generator's child
joins it. No other process of the machine can reach a port inside it — a
port on the machine's own 127.0.0.1 is open to every local user — and it
goes when the last process in it does: nothing to remove.

All of this runs in a child between fork and exec (a preexec_fn): only
system calls, through the C library."""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
from pathlib import Path
from typing import Callable

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
IFF_UP = 0x1
IFREQ = "16sh22x"  # struct ifreq: the name, then ifr_flags in its 24-byte union
LISTEN = "0A"  # a socket's state in /proc/net/tcp


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def enter_new() -> None:
    """The calling process moves to a network namespace of its own, whose loopback it brings up."""
    if _libc().unshare(CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"unshare(CLONE_NEWNET): {os.strerror(e)}")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack(IFREQ, fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))


def joiner(pid: int) -> Callable[[], None]:
    """A preexec_fn moving the child into process pid's network namespace.
    The namespace is opened now, in the parent: a server that dies before
    the child runs then fails the child, never lets it run outside."""
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)

    def enter() -> None:
        if _libc().setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"setns into the server's network namespace: {os.strerror(e)}")

    enter.fd = fd  # the caller closes it once the child is started
    return enter


def listening(pid: int, port: int) -> bool:
    """Whether a socket of pid's network namespace listens on TCP port
    (its /proc/PID/net/tcp: the namespace's view, not the machine's)."""
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False
