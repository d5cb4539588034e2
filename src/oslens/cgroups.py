"""Confining a process tree to a set of CPUs it cannot leave, and
accounting its CPU time, with whatever cgroups this machine has.

Affinity alone is inherited by every child but any of them may widen it
again (a build tool, an OpenMP runtime); a cpuset cgroup cannot be left.
cgroup v2 gives both the cpuset and the accounting (cpu.stat) in one
group; a v1 or hybrid machine has them in separate hierarchies (cpuset,
cpuacct), and a process sits in one group of each. Where none can be
made (no cgroupfs, not root, a container without the controller), the
confinement falls back to affinity and says why.

Groups are named oslens.<pid>.<label> and written down before they are
made: an owned resource (oslens.owned), `CGROUP`, that one left by an oslens
that was killed is removed by the next, even unwritten (found by its name)."""

from __future__ import annotations

import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from . import owned, runtime

PREFIX = "oslens."


@dataclass(frozen=True)
class Mounts:
    v2: Path | None  # the unified hierarchy
    v1_cpuset: Path | None
    v1_cpuacct: Path | None


def mounts(mountinfo: str = "/proc/self/mountinfo") -> Mounts:
    v2 = cpuset = cpuacct = None
    try:
        lines = Path(mountinfo).read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        point, fstype, options = Path(fields[4]), tail[0], tail[2].split(",")
        if fstype == "cgroup2" and v2 is None:
            v2 = point
        elif fstype == "cgroup":
            if "cpuset" in options and cpuset is None:
                cpuset = point
            if "cpuacct" in options and cpuacct is None:
                cpuacct = point
    return Mounts(v2, cpuset, cpuacct)


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _cpulist(cpus: list[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _empty_and_remove(group: Path, timeout: float = 5.0) -> None:
    """Kills whatever is left in the group (a command's daemonised child),
    waits for it to go, and removes the group."""
    deadline = time.monotonic() + timeout
    kill_file = group / "cgroup.kill"
    while True:
        try:
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except OSError:
            pids = []
        if not pids:
            break
        if kill_file.exists():
            try:
                _write(kill_file, "1")
            except OSError:
                pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    try:
        group.rmdir()
    except OSError:
        pass


def stale(m: Mounts | None = None) -> list[Path]:
    """Groups left by an oslens that did not live to remove them."""
    m = m or mounts()
    found = []
    for root in (m.v2, m.v1_cpuset, m.v1_cpuacct):
        if root is None:
            continue
        try:
            entries = list(root.iterdir())
        except OSError:
            continue
        for d in entries:
            parts = d.name.split(".")
            if (
                d.is_dir()
                and d.name.startswith(PREFIX)
                and len(parts) >= 2
                and parts[1].isdigit()
                and not _pid_alive(int(parts[1]))
            ):
                found.append(d)
    return found


def remove_stale(m: Mounts | None = None) -> None:
    """Removes the groups left by an oslens that did not live to remove them."""
    for d in stale(m):
        _empty_and_remove(d)


@dataclass
class CpuTimes:
    user_ns: int
    system_ns: int
    usage_ns: int | None  # precise total where the kernel gives it


_swept = False


class Confinement:
    """One CPU set for one measured run. Use as a context manager; pass
    `enter` as the child's preexec_fn."""

    def __init__(self, cpus: list[int], label: str, m: Mounts | None = None):
        global _swept
        self.cpus = sorted(cpus)
        self.groups: list[Path] = []
        self.cpuset_how: str | None = None  # "cgroup v2" / "cgroup v1", or None
        self.cpuset_why: str | None = None  # why there is no cpuset
        self._acct: tuple[str, Path] | None = None
        m = m or mounts()
        if not _swept:  # once per process: what a killed oslens left
            remove_stale(m)
            _swept = True
        name = f"{PREFIX}{os.getpid()}.{label}"
        self._make_cpuset(m, name)
        self._make_accounting(m, name)

    # -- set-up

    def _mkdir(self, root: Path, name: str) -> Path:
        group = root / name
        runtime.note("cgroup", group)  # first: found even if we are killed the next instant
        group.mkdir()
        self.groups.append(group)
        return group

    def _make_cpuset(self, m: Mounts, name: str) -> None:
        errors = []
        if m.v2 is not None:
            try:
                controllers = (m.v2 / "cgroup.controllers").read_text().split()
                if "cpuset" not in controllers:
                    raise OSError(errno.ENOENT, "the cpuset controller is not available in cgroup v2")
                if "cpuset" not in (m.v2 / "cgroup.subtree_control").read_text().split():
                    _write(m.v2 / "cgroup.subtree_control", "+cpuset")
                group = self._mkdir(m.v2, name)
                _write(group / "cpuset.cpus", _cpulist(self.cpus))
                self.cpuset_how = "cgroup v2"
                self._acct = ("v2", group)
                return
            except OSError as e:
                errors.append(f"cgroup v2: {e.strerror or e}")
        if m.v1_cpuset is not None:
            try:
                group = self._mkdir(m.v1_cpuset, name)
                # v1 refuses tasks until both are set; memory nodes as the parent's
                _write(group / "cpuset.mems", (m.v1_cpuset / "cpuset.mems").read_text().strip())
                _write(group / "cpuset.cpus", _cpulist(self.cpus))
                self.cpuset_how = "cgroup v1"
                return
            except OSError as e:
                errors.append(f"cgroup v1: {e.strerror or e}")
        self.cpuset_why = "; ".join(errors) or "no cgroup file system mounted"

    def _make_accounting(self, m: Mounts, name: str) -> None:
        if self._acct is not None:
            return
        try:
            if m.v2 is not None:
                self._acct = ("v2", self._mkdir(m.v2, name))
            elif m.v1_cpuacct is not None:
                self._acct = ("v1", self._mkdir(m.v1_cpuacct, name))
        except OSError:
            self._acct = None

    # -- in the child, between fork and exec

    def enter(self) -> None:
        for group in self.groups:
            _write(group / "cgroup.procs", str(os.getpid()))
        os.sched_setaffinity(0, self.cpus)

    # -- after

    @property
    def method(self) -> str:
        if self.cpuset_how:
            return f"{self.cpuset_how} cpuset and affinity"
        return f"affinity only ({self.cpuset_why}): a child may widen its own affinity"

    @property
    def accounting(self) -> str | None:
        return {"v2": "cgroup v2 cpu.stat", "v1": "cgroup v1 cpuacct"}.get(self._acct[0]) if self._acct else None

    def cpu_times(self) -> CpuTimes | None:
        """The group's CPU time since it was made: every process that was in
        it, waited for or not."""
        if self._acct is None:
            return None
        kind, group = self._acct
        try:
            if kind == "v2":
                stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
                return CpuTimes(
                    int(stat["user_usec"]) * 1000, int(stat["system_usec"]) * 1000, int(stat["usage_usec"]) * 1000
                )
            stat = dict(line.split() for line in (group / "cpuacct.stat").read_text().splitlines())
            tick = 1e9 / os.sysconf("SC_CLK_TCK")
            usage = int((group / "cpuacct.usage").read_text())
            return CpuTimes(int(int(stat["user"]) * tick), int(int(stat["system"]) * tick), usage)
        except (OSError, KeyError, ValueError):
            return None

    def close(self) -> None:
        for group in reversed(self.groups):
            _empty_and_remove(group)
        self.groups = []

    def __enter__(self) -> "Confinement":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---- an owned resource


def _remove(what: str) -> str:
    group = Path(what)
    if not group.name.startswith(PREFIX):
        return "left alone"
    if not group.is_dir():
        return "gone"
    _empty_and_remove(group)
    return "failed" if group.exists() else "removed"


def _roots() -> list[Path]:
    m = mounts()
    return [r for r in (m.v2, m.v1_cpuset, m.v1_cpuacct) if r]


CGROUP = owned.Resource(
    remove=_remove,
    present=lambda paths, same_boot: [p for p in paths if Path(p).is_dir()],
    stale=lambda: [(g.name.split(".")[1], str(g)) for g in stale()],
    existing=lambda: [str(d) for r in _roots() for d in r.glob(f"{PREFIX}*")],
)
