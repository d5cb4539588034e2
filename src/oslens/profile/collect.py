"""Runs `oslens-engine profile` on a command or a running process and
collects its records.

The command keeps the terminal: it inherits our stdin, stdout and stderr,
and stays in our process group, so a terminal's Ctrl-C reaches it (and the
engine, which then reports what it measured so far). The records come back
on a pipe of their own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from .. import engine, stopsignals
from ..errors import Interrupted, MeasurementError, UsageError
from ..invocation import Invocation
from ..kallsyms import resolve_locks, resolve_samples


@dataclass
class Profile:
    records: list[dict] = field(default_factory=list)
    engine_status: int = 0
    interrupted_by: int | None = None  # a signal we were sent

    def first(self, type_: str) -> dict | None:
        return next((r for r in self.records if r.get("type") == type_), None)

    @property
    def complete(self) -> bool:
        end = self.first("end")
        return bool(end) and end.get("status") == "ok"

    def exit_status(self) -> int:
        """The command's own exit status, as a shell would give it."""
        t = self.first("end_target") or {}
        if t.get("code") is not None:
            return int(t["code"])
        if t.get("signal") is not None:
            return 128 + int(t["signal"])
        return 0


def _terminal_delivers_sigint() -> bool:
    """True when a Ctrl-C here goes to our whole process group (we are the
    terminal's foreground job): then the engine and the command get it
    from the terminal, and passing it on would deliver it twice."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError):
        return False


@contextmanager
def _signals_passed_to(proc: subprocess.Popen):
    """While the engine runs, signals sent to us are passed on to it; it
    ends the profile in order (and passes them on to the command)."""
    caught: list[int] = []

    def forward(signum, frame):
        caught.append(signum)
        if proc.poll() is None:
            proc.send_signal(signum)

    sigint = signal.SIG_IGN if _terminal_delivers_sigint() else forward
    old = stopsignals.install({signal.SIGINT: sigint, signal.SIGTERM: forward, signal.SIGHUP: forward})
    try:
        yield caught
    finally:
        stopsignals.restore(old)


@dataclass
class Profiling(Invocation):
    """A profile run's one step, as runner.execute takes it: the engine
    profiles the command (or the process), its records stored once it has
    ended; a stop signal it passed on leaves the run incomplete, with them.
    The Profile stays here for the command's exit status."""

    command: list[str] | None
    pid: int | None
    duration: float | None
    time_limit: float | None
    bpf: bool
    syscalls: bool
    profile: Profile | None = None
    check_args = None  # the engine checks its argv as it starts; a refusal stores nothing

    @property
    def label(self) -> str:
        return f"pid {self.pid}" if self.pid is not None else " ".join(self.command or [])

    def measure(self) -> Iterator[list[dict]]:
        self.profile = run(self.command, self.pid, self.duration, self.time_limit, bpf=self.bpf, syscalls=self.syscalls)
        yield self.profile.records
        if not self.profile.complete:
            end = self.profile.first("end") or {}
            raise Interrupted(self.profile.interrupted_by or end.get("signal") or signal.SIGINT)


def run(
    command: list[str] | None = None,
    pid: int | None = None,
    duration: float | None = None,
    time_limit: float | None = None,
    bpf: bool = True,
    syscalls: bool = True,
    on_record=None,
) -> Profile:
    """Profiles the command (or attaches to pid) and returns every record,
    with the lock stacks resolved. Raises UsageError for what the engine
    found unusable (a command that cannot be executed) and MeasurementError
    if it failed."""
    read_fd, write_fd = os.pipe()
    args = engine.profile_argv(
        command=command, pid=pid, duration=duration, time_limit=time_limit, bpf=bpf, syscalls=syscalls, out_fd=write_fd
    )
    try:
        proc = engine.spawn(args, pass_fds=(write_fd,))
    finally:
        os.close(write_fd)
    prof = Profile()
    with _signals_passed_to(proc) as caught, os.fdopen(read_fd, "r") as records:
        try:
            for line in records:
                if not line.strip():
                    continue
                rec = json.loads(line)
                if on_record:
                    on_record(rec)
                prof.records.append(rec)
        except BaseException:
            # whatever broke the reading (a caller's on_record, a record cut short): the engine is
            # stopped and read to its end, never left writing into a pipe no one reads
            proc.terminate()
            for _ in records:
                pass
            raise
        finally:
            prof.engine_status = proc.wait()
    prof.interrupted_by = caught[0] if caught else None

    errors = [r["message"] for r in prof.records if r.get("type") == "error"]
    if prof.engine_status == engine.USAGE_STATUS:
        raise UsageError(errors[0] if errors else "the engine refused the profile's arguments")
    if prof.engine_status != 0 or not prof.first("end"):
        raise MeasurementError("; ".join(errors) or f"the engine exited with status {prof.engine_status}")
    syms = engine.kernel_symbols()
    locks = prof.first("locks")
    if locks and locks.get("rows"):
        resolve_locks(locks, syms)
    samples = prof.first("samples")
    if samples:
        resolve_samples(samples.get("samples", []), syms)
    # what this kernel's build lets /proc/stat say, kept with the run (a report may be read elsewhere)
    from ..collectors import kernel as kernel_config

    prof.records.append(
        {"type": "kernel_config", "irq_time": kernel_config.irq_time_unavailable(), "hz": _config_hz(kernel_config)}
    )
    return prof


def _config_hz(kernel_config) -> int | None:
    """The kernel's tick rate, which sets the resolution of utime and stime;
    None when its build configuration cannot be read."""
    hz = (kernel_config.build_config().get("options") or {}).get("CONFIG_HZ", "")
    return int(hz) if hz.isdigit() else None
