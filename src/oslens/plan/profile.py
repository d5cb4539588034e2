"""`oslens profile`: one target, a command or a running process, checked
before anything is loaded or stored."""

from __future__ import annotations

import math
import os
import shutil

from .. import engine
from ..errors import UsageError
from ..format import sig

PID_MAX = 2**22  # the kernel's largest pid_max (PID_MAX_LIMIT on 64-bit)


def check_target(command: list[str], pid: int | None, duration: float | None, time_limit: float | None) -> None:
    """A profile needs exactly one target, one that exists, before anything
    is loaded or stored."""
    if command and command[0] == "--":
        command = command[1:]
    if bool(command) == (pid is not None):
        raise UsageError("give either --pid PID or -- CMD ARGS… (one target)")
    for name, v in (("--duration", duration), ("--time-limit", time_limit)):
        most = engine.limit("profile", name)["max"]
        if v is not None and not (math.isfinite(v) and 0 < v <= most):
            raise UsageError(f"{name} must be a number of seconds in (0, {sig(most, 9)}], not {sig(v, 6)}")
    if command:
        if duration is not None:
            raise UsageError("--duration is for --pid; a command is profiled until it exits (see --time-limit)")
        exe = command[0]
        if "/" in exe:
            if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
                raise UsageError(f"cannot run '{exe}': not an executable file")
        elif shutil.which(exe) is None:
            raise UsageError(f"cannot run '{exe}': not found in PATH")
        return
    if pid <= 0:
        raise UsageError(f"--pid: {pid} is not a process id")
    if pid > PID_MAX:  # os.kill would overflow; no kernel hands out such a pid
        raise UsageError(f"--pid: no process {pid}")
    if pid == os.getpid():
        raise UsageError("--pid: cannot profile oslens itself")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise UsageError(f"--pid: no process {pid}") from None
    except PermissionError:
        pass
