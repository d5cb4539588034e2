"""Kernel addresses to names, through /proc/kallsyms, at collection time:
a stored profile keeps the names, since the addresses mean nothing on
another boot (KASLR) or another machine."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

from .locknames import NO_DATA_SYMBOLS

# Frames that are the waiting itself, not who waited: skipped to find the
# caller of a contended lock (the same idea as perf lock contention's
# list of lock functions, by prefix).
LOCK_INTERNAL_PREFIXES = (
    "_raw_",
    "__raw_",
    "raw_spin",
    "queued_",
    "native_queued",
    "__pv_queued",
    "pv_queued",
    "do_raw_",
    "mutex_",
    "__mutex_",
    "rwsem_",
    "__rwsem_",
    "down_",
    "__down",
    "up_",
    "percpu_down",
    "percpu_rwsem",
    "__percpu_down",
    "rt_mutex",
    "__rt_mutex",
    "rt_spin",
    "rtlock",
    "osq_",
    "schedule",
    "__schedule",
    "preempt_schedule",
    "io_schedule",
    "bit_wait",
    "__wait_on_bit",
    "out_of_line_wait_on_bit",
    "__lock_",
    "lock_acquire",
    "_cond_resched",
    "__cond_resched",
    "mmap_read_lock",
    "mmap_write_lock",
    "__mmap_lock",
    "lock_mm_and_find_vma",
    "read_lock",
    "write_lock",
    "spin_lock",
    # the tracing program that took the stack, and its callers
    "bpf_",
    "__bpf_",
    "__traceiter_",
    "trace_contention",
)


@dataclass(frozen=True)
class Symbol:
    name: str
    offset: int
    module: str | None
    kind: str  # nm's letter: t/T text, d/D/b/B/r/R data

    @property
    def is_data(self) -> bool:
        return self.kind in "dDbBrR"

    def __str__(self) -> str:
        where = f" [{self.module}]" if self.module else ""
        return f"{self.name}+{self.offset:#x}{where}" if self.offset else f"{self.name}{where}"


class Kallsyms:
    def __init__(self, path: str | Path = "/proc/kallsyms", text: str | None = None):
        """The symbols of a kallsyms file, or of its text as read elsewhere
        (a guest's kernel, see engine.kernel_symbols)."""
        self.addrs: list[int] = []
        self.names: list[tuple[str, str, str | None]] = []  # name, type letter, module
        if text is None:
            try:
                text = Path(path).read_text()
            except OSError:
                text = ""
        rows = []
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 3:
                continue
            addr = int(parts[0], 16)
            if addr == 0:
                continue
            module = parts[3].strip("[]") if len(parts) > 3 else None
            rows.append((addr, parts[2], parts[1], module))
        rows.sort()
        self.addrs = [r[0] for r in rows]
        self.names = [(r[1], r[2], r[3]) for r in rows]

    @property
    def has_data_symbols(self) -> bool:
        """Whether kallsyms lists variables (CONFIG_KALLSYMS_ALL), so that a
        static lock's address can be named."""
        # without CONFIG_KALLSYMS_ALL a few section markers remain, never
        # the variables themselves: tasklist_lock is one every kernel has
        return any(name == "tasklist_lock" for name, _, _ in self.names)

    @property
    def usable(self) -> bool:
        """False when kptr_restrict hides the addresses (all zero) or the file is unreadable."""
        return bool(self.addrs)

    def lookup(self, addr: int, max_offset: int = 1 << 20) -> Symbol | None:
        i = bisect.bisect_right(self.addrs, addr) - 1
        if i < 0 or addr - self.addrs[i] > max_offset:
            return None
        name, kind, module = self.names[i]
        return Symbol(name, addr - self.addrs[i], module, kind)


def is_lock_internal(name: str) -> bool:
    """A function of the locking code itself (a spin lock's slow path, the
    contention tracepoint), not one that waited for a lock."""
    return name.startswith(LOCK_INTERNAL_PREFIXES) or "contention" in name


def _resolvable(record: dict, syms: Kallsyms) -> bool:
    """False, with why in the record, when kallsyms gives no addresses; notes
    in the record why static locks stay unnamed where it has no data symbols."""
    if not syms.usable:
        record["unresolved_because"] = (
            "/proc/kallsyms gives no addresses here (unreadable, or hidden by kernel.kptr_restrict)"
        )
        return False
    if not syms.has_data_symbols:
        record["lock_symbols_unavailable"] = NO_DATA_SYMBOLS
    return True


def _lock_symbol(address: str, syms: Kallsyms) -> str | None:
    """A lock that is a kernel variable: its symbol. A heap object's address
    may follow some unrelated symbol: only a data symbol close by names it."""
    lock = syms.lookup(int(address, 16), max_offset=4096)
    return str(lock) if lock and lock.is_data else None


def callers(frames: list[Symbol | None], depth: int = 3) -> list[str]:
    """Who waited: the first `depth` frames outside the locking code (the
    caller, then its caller, …), the chain a lock name alone does not give."""
    return [str(f) for f in frames if f and not is_lock_internal(f.name)][:depth]


def resolve_locks(record: dict, syms: Kallsyms) -> dict:
    """Adds to a `locks` record's rows: the resolved stack, the callers (the
    first frames outside the locking code) and, for a lock that is a kernel
    variable, its name; or says why nothing could be resolved."""
    if not _resolvable(record, syms):
        return record
    for row in record.get("rows", []):
        frames = [syms.lookup(int(a, 16)) for a in row.get("stack", [])]
        # unresolved frames are the BPF program itself (JIT code outside kallsyms)
        row["stack_symbols"] = [str(f) if f else a for f, a in zip(frames, row.get("stack", []))]
        row["callers"] = callers(frames)
        row["caller"] = row["callers"][0] if row["callers"] else None
        row["lock_symbol"] = _lock_symbol(row["lock"], syms)
    return record


def resolve_charges(record: dict, syms: Kallsyms) -> dict:
    """Adds to an `explain` record's lock charges their callers (the chain
    outside the locking code) and, for a lock that is a kernel variable, its
    symbol; or says why nothing could be resolved."""
    if not _resolvable(record, syms):
        return record
    for c in record.get("charges", []):
        if c.get("kind") != "lock":
            continue
        c["callers"] = callers([syms.lookup(int(a, 16)) for a in c.get("stack", [])])
        c["lock_symbol"] = _lock_symbol(c["id"], syms)
    resolve_samples(record.get("samples", []), syms)
    return record


def resolve_samples(samples: list[dict], syms: Kallsyms) -> None:
    """Each sampled stack's addresses replaced by its functions' names
    (`frames`, innermost first): a name is what is kept, an address means
    nothing on another boot (KASLR). Left as addresses where kallsyms
    gives none."""
    if not syms.usable:
        return
    for sample in samples:
        sample["frames"] = [function(syms.lookup(int(a, 16)), a) for a in sample.pop("stack", [])]


def function(sym: Symbol | None, address: str) -> str:
    """A sampled frame's function, 'name' or 'name [module]'; the address
    where kallsyms has none (BPF programs' JIT code)."""
    if sym is None:
        return address
    return f"{sym.name} [{sym.module}]" if sym.module else sym.name
