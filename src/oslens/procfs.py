"""The system-wide procfs counters the engine snapshots around a profile:
/proc/stat, /proc/interrupts, /proc/softirqs and /proc/vmstat, parsed from
their text, and the difference between two snapshots.

Only what both snapshots hold is differenced: a CPU that went offline, an IRQ
whose device went away or a field one kernel lacks is left out rather than
counted from zero."""

from __future__ import annotations

from dataclasses import dataclass, field

# /proc/stat columns after the "cpuN" label, in USER_HZ ticks. guest and
# guest_nice are already counted inside user and nice (see TIME_FIELDS).
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
# The fields that partition a CPU's time: summing these gives its elapsed ticks.
TIME_FIELDS = STAT_FIELDS[:8]


@dataclass(frozen=True)
class ProcStat:
    total: dict[str, int]  # the "cpu" line, field -> ticks
    cpus: dict[int, dict[str, int]]  # online CPUs only: offline ones have no line
    counters: dict[str, int] = field(default_factory=dict)  # ctxt, processes, intr and softirq totals, ...


@dataclass(frozen=True)
class IrqRow:
    """One line of /proc/interrupts. `name` is its label without the colon:
    an IRQ number ("24") or an architecture row ("LOC", "NMI", "ERR")."""

    name: str
    counts: dict[int, int]  # per CPU; empty for a single-value row (ERR, MIS)
    total: int
    description: str  # chip, hwirq and device for an IRQ; the meaning of an architecture row

    @property
    def numbered(self) -> bool:
        """A device IRQ (what irq:irq_handler_entry sees), not an architecture vector."""
        return self.name.isdigit()


def _cpu_header(line: str) -> list[int]:
    """ "CPU0 CPU2 CPU3" -> [0, 2, 3]: offline CPUs have no column."""
    return [int(tok[3:]) for tok in line.split() if tok.startswith("CPU") and tok[3:].isdigit()]


def _leading_ints(tokens: list[str], limit: int) -> list[int]:
    values = []
    for tok in tokens[:limit]:
        if not tok.isdigit():
            break
        values.append(int(tok))
    return values


def parse_stat(text: str) -> ProcStat:
    total: dict[str, int] = {}
    cpus: dict[int, dict[str, int]] = {}
    counters: dict[str, int] = {}
    for line in text.splitlines():
        label, *values = line.split() or [""]
        if not values or not values[0].isdigit():
            continue
        if label.startswith("cpu"):
            # Older kernels print fewer columns: keep only the fields present.
            ticks = dict(zip(STAT_FIELDS, (int(v) for v in values)))
            if label == "cpu":
                total = ticks
            elif label[3:].isdigit():
                cpus[int(label[3:])] = ticks
        else:
            # "intr" and "softirq" are followed by per-source counts: the first is the total.
            counters[label] = int(values[0])
    return ProcStat(total, cpus, counters)


def parse_interrupts(text: str) -> dict[str, IrqRow]:
    lines = text.splitlines()
    if not lines:
        return {}
    cpus = _cpu_header(lines[0])
    rows: dict[str, IrqRow] = {}
    for line in lines[1:]:
        label, _, rest = line.partition(":")
        tokens = rest.split()
        values = _leading_ints(tokens, len(cpus))
        if len(values) == len(cpus) and cpus:
            counts = dict(zip(cpus, values))
        elif len(values) == 1:
            counts = {}  # ERR and MIS: one machine-wide count
        else:
            continue  # not a line of counts we understand: no guessing which CPU is which
        rows[label.strip()] = IrqRow(label.strip(), counts, sum(values), " ".join(tokens[len(values) :]))
    return rows


def parse_softirqs(text: str) -> dict[str, dict[int, int]]:
    """{"TIMER": {cpu: count, ...}, ...}"""
    lines = text.splitlines()
    if not lines:
        return {}
    cpus = _cpu_header(lines[0])
    vectors = {}
    for line in lines[1:]:
        label, _, rest = line.partition(":")
        values = _leading_ints(rest.split(), len(cpus))
        if len(values) == len(cpus):
            vectors[label.strip()] = dict(zip(cpus, values))
    return vectors


def parse_vmstat(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def _diff_counts(begin: dict, end: dict) -> dict:
    return {k: end[k] - begin[k] for k in end if k in begin}


def diff_stat(begin: ProcStat, end: ProcStat) -> ProcStat:
    cpus = {cpu: _diff_counts(begin.cpus[cpu], ticks) for cpu, ticks in end.cpus.items() if cpu in begin.cpus}
    return ProcStat(_diff_counts(begin.total, end.total), cpus, _diff_counts(begin.counters, end.counters))


def diff_interrupts(begin: dict[str, IrqRow], end: dict[str, IrqRow]) -> dict[str, IrqRow]:
    out = {}
    for name, row in end.items():
        if name not in begin:
            continue
        counts = _diff_counts(begin[name].counts, row.counts)
        # A per-CPU row's total is over the CPUs online at both ends.
        total = sum(counts.values()) if row.counts else row.total - begin[name].total
        out[name] = IrqRow(name, counts, total, row.description)
    return out


def diff_softirqs(begin: dict[str, dict[int, int]], end: dict[str, dict[int, int]]) -> dict[str, dict[int, int]]:
    return {vec: _diff_counts(begin[vec], counts) for vec, counts in end.items() if vec in begin}


def diff_vmstat(begin: dict[str, int], end: dict[str, int]) -> dict[str, int]:
    return _diff_counts(begin, end)


@dataclass(frozen=True)
class ProcSnapshot:
    """The parsed files of one procfs record, or the difference of two. A file
    that could not be read (at either end, for a difference) is None."""

    stat: ProcStat | None = None
    interrupts: dict[str, IrqRow] | None = None
    softirqs: dict[str, dict[int, int]] | None = None
    vmstat: dict[str, int] | None = None

    @classmethod
    def from_files(cls, files: dict[str, str]) -> "ProcSnapshot":
        return cls(**{attr: parse(files[path]) if path in files else None for attr, (path, parse, _) in FILES.items()})


# attribute of ProcSnapshot -> (the file, its parser, its difference)
FILES = {
    "stat": ("/proc/stat", parse_stat, diff_stat),
    "interrupts": ("/proc/interrupts", parse_interrupts, diff_interrupts),
    "softirqs": ("/proc/softirqs", parse_softirqs, diff_softirqs),
    "vmstat": ("/proc/vmstat", parse_vmstat, diff_vmstat),
}


def diff(begin: ProcSnapshot, end: ProcSnapshot) -> ProcSnapshot:
    parts = {}
    for attr, (_, _, differ) in FILES.items():
        a, b = getattr(begin, attr), getattr(end, attr)
        parts[attr] = differ(a, b) if a is not None and b is not None else None
    return ProcSnapshot(**parts)
