"""A profile's records indexed by type, with the figures several sections
need computed once: the layer below both the summary and the sections."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from functools import cached_property

from .. import procfs


@dataclass(frozen=True)
class ThreadTime:
    """One thread's share of the profile: its exit or end figures minus its
    figures when the profile began (a thread that existed before --pid attached)."""

    tid: int
    tgid: int
    comm: str
    user_ns: int
    system_ns: int
    runtime_ns: int
    nvcsw: int
    nivcsw: int
    min_flt: int
    maj_flt: int
    ended: str  # "exit": exited during the profile; "end": still alive at its end
    since_begin: bool  # True when a baseline taken at attach time was subtracted

    def to_dict(self) -> dict:
        return asdict(self)


# Where switches and faults come from when nothing finer counted them.
RUSAGE_SOURCE = "rusage (wait4): the command and the descendants it waited for"
_THREAD_COUNTS = ("runtime_ns", "nvcsw", "nivcsw", "min_flt", "maj_flt")


def user_system_ns(utime_ns: int, stime_ns: int, runtime_ns: int) -> tuple[int, int]:
    """Tick-sampled utime/stime scaled to the precise runtime, as the kernel's
    cputime_adjust() does for /proc (a thread never sampled in user mode is
    all system time, and the other way round)."""
    if stime_ns == 0:
        return runtime_ns, 0
    if utime_ns == 0:
        return 0, runtime_ns
    system = stime_ns * runtime_ns // (utime_ns + stime_ns)
    return runtime_ns - system, system


def _thread_user_system(rec: dict) -> tuple[int, int]:
    if rec["source"] == "proc":  # /proc already adjusted them
        return rec["utime_ns"], rec["stime_ns"]
    return user_system_ns(rec["utime_ns"], rec["stime_ns"], rec["runtime_ns"])


def thread_times(thread_records: list[dict]) -> list[ThreadTime]:
    """One ThreadTime per exit or end record (the engine writes one per thread
    lifetime), minus that thread's begin record if any. A begin baseline
    belongs to the first lifetime of its tid: a later thread with a reused tid
    started after the profile began."""
    baselines = {r["tid"]: r for r in thread_records if r["when"] == "begin"}
    out = []
    for rec in thread_records:
        if rec["when"] not in ("exit", "end"):
            continue
        user, system = _thread_user_system(rec)
        counts = {k: rec[k] for k in _THREAD_COUNTS}
        base = baselines.pop(rec["tid"], None)
        if base is not None:
            base_user, base_system = _thread_user_system(base)
            user, system = user - base_user, system - base_system
            counts = {k: v - base[k] for k, v in counts.items()}
        out.append(
            ThreadTime(
                rec["tid"],
                rec["tgid"],
                rec["comm"],
                user,
                system,
                ended=rec["when"],
                since_begin=base is not None,
                **counts,
            )
        )
    return out


class Records:
    """The records of one profile, indexed by type, with the figures several
    sections need computed once."""

    def __init__(self, records: list[dict]):
        self.records = list(records)
        self._by_type: dict[str, list[dict]] = defaultdict(list)
        for rec in self.records:
            self._by_type[rec.get("type")].append(rec)

    def all(self, kind: str) -> list[dict]:
        return self._by_type.get(kind, [])

    def last(self, kind: str) -> dict | None:
        found = self.all(kind)
        return found[-1] if found else None

    @property
    def header(self) -> dict:
        return self.last("header") or {}

    @property
    def bpf(self) -> dict:
        return self.last("bpf") or {"loaded": False, "why": "the engine wrote no bpf record", "missing": []}

    @property
    def bpf_loaded(self) -> bool:
        return bool(self.bpf.get("loaded"))

    @property
    def bpf_why(self) -> str:
        return self.bpf.get("why") or "no reason given"

    @property
    def threads_complete(self) -> bool:
        """With BPF every thread of the tree has an exit or end record; without
        it only the threads still alive at the end could be read from /proc."""
        return self.bpf_loaded

    @property
    def bpf_missing(self) -> list[str]:
        return list(self.bpf.get("missing") or [])

    @property
    def bpf_skipped(self) -> list[str]:
        """Parts left out on request (e.g. --no-syscalls), not for lack of support."""
        return list(self.bpf.get("skipped") or [])

    @property
    def end_target(self) -> dict | None:
        return self.last("end_target")

    @property
    def wall_s(self) -> float | None:
        """The target's wall time: every per-second rate divides by it."""
        end = self.end_target
        return end["wall_ns"] / 1e9 if end and end.get("wall_ns") else None

    @property
    def status(self) -> str | None:
        end = self.last("end")
        return end["status"] if end else None

    @property
    def error(self) -> str | None:
        err = self.last("error")
        return err.get("message") if err else None

    @property
    def online_cpus(self) -> list[int]:
        return list(self.header.get("cpus_online") or [])

    @property
    def clk_tck(self) -> int:
        return int(self.header.get("clk_tck") or 100)

    @property
    def tick(self) -> tuple[float, str]:
        """(ns, what it is) of the scheduler tick at which utime and stime are
        sampled: 1/CONFIG_HZ, from the kernel's build configuration kept with
        the run, or 1/USER_HZ when that was not known, no shorter than any
        kernel's tick (HZ is never below USER_HZ)."""
        hz = (self.last("kernel_config") or {}).get("hz")
        if hz:
            return 1e9 / hz, f"the tick at CONFIG_HZ={hz}"
        return 1e9 / self.clk_tck, f"USER_HZ={self.clk_tck}: the kernel's CONFIG_HZ is unknown, its tick is no longer"

    def bpf_aggregate(self, kind: str, parts: tuple[str, ...] = ()) -> tuple[dict | None, str | None]:
        """(the BPF record of `kind`, None) or (None, why it is not there).
        `parts` are the names under which bpf.missing lists what this record needs."""
        rec = self.last(kind)
        if rec is not None:
            return rec, None
        if not self.bpf_loaded:
            return None, f"not measured without BPF: {self.bpf_why}"
        why = self.bpf_parts_why((*parts, kind))
        if why:
            return None, why
        return None, f"not measured: the engine wrote no {kind} record (run {self.status or 'ended early'})"

    def bpf_parts_why(self, parts: tuple[str, ...], every: bool = False) -> str | None:
        """Why the BPF parts named were not traced: left out on request, or
        lacking in this kernel (with `every`, only when all of them are: a
        figure any one of them can give); None when they were."""
        skipped = [p for p in self.bpf_skipped if p in parts]
        if skipped and (not every or len(skipped) == len(parts)):
            return f"not traced: left out on request (--no-{skipped[0].replace('_', '-')})"
        lacking = [p for p in self.bpf_missing if p in parts]
        if lacking and (not every or len(lacking) == len(parts)):
            return f"not measured: this kernel lacks {', '.join(lacking)}"
        return None

    def bpf_parts_lacking(self, parts: tuple[str, ...]) -> list[str]:
        return [p for p in self.bpf_missing if p in parts]

    def counter(self, name: str, scope: str = "all") -> dict | None:
        rec = self.last("counters")
        for event in (rec or {}).get("events", []):
            if event["name"] == name and event["scope"] == scope:
                return event
        return None

    def counter_value(self, name: str, scope: str = "all", user_only_ok: bool = False) -> float | None:
        """None too for a counter perf_event_paranoid limited to user mode
        (`scope_limited`), unless `user_only_ok`: its value then means
        something else (sections/counters.py says what)."""
        event = self.counter(name, scope)
        if not event or (event.get("scope_limited") and not user_only_ok):
            return None
        return event.get("value")

    @property
    def rusage(self) -> dict | None:
        """The command's rusage from wait4 (null with --pid or when it was not waited for)."""
        return (self.end_target or {}).get("rusage")

    def _procfs_record(self, when: str) -> dict | None:
        return next((r for r in self.all("procfs") if r.get("when") == when), None)

    @cached_property
    def proc_begin(self) -> procfs.ProcSnapshot:
        return procfs.ProcSnapshot.from_files((self._procfs_record("begin") or {}).get("files", {}))

    @cached_property
    def proc_end(self) -> procfs.ProcSnapshot:
        return procfs.ProcSnapshot.from_files((self._procfs_record("end") or {}).get("files", {}))

    @cached_property
    def proc_delta(self) -> procfs.ProcSnapshot:
        """What the system-wide procfs counters advanced by during the profile."""
        return procfs.diff(self.proc_begin, self.proc_end)

    def procfs_missing(self, path: str) -> str | None:
        """Why `path` has no begin-to-end difference, or None if it has one."""
        for when in ("begin", "end"):
            rec = self._procfs_record(when)
            if rec is None:
                return f"no procfs snapshot at the {when}"
            if path not in rec.get("files", {}):
                return f"{path} could not be read at the {when}"
        return None

    @cached_property
    def threads(self) -> list[ThreadTime]:
        return thread_times(self.all("thread"))

    @property
    def threads_dropped(self) -> int:
        return sum(r.get("count", 0) for r in self.all("threads_dropped"))

    @property
    def lost_events(self) -> int:
        return sum(r.get("lost", 0) for r in self.all("bpf_stats"))
