"""What users type, checked against what the engine and the machine offer:
probes, worker and CPU counts, CPU lists, competitors. One home for each,
below the planners (plan/) and the competitor runner (compete.py), so that
every command reads a CPU list or a probe the same way."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from . import engine
from .cpulist import expand
from .errors import UsageError
from .format import plural

OSMARK_PROBES = ("fork", "mmap", "dup", "socket", "sem")

_COUNT = re.compile(r"^[0-9]+$")  # ASCII digits: str.isdigit() accepts '²', which int() refuses


def whole_number(text: str) -> int | None:
    """A non-negative whole number written in ASCII digits, or None."""
    text = text.strip()
    return int(text) if _COUNT.match(text) else None


def placement_order(ncpus: int, placement: str) -> list[dict]:
    """The engine's CPUs for ncpus workers under `placement`, in the order it
    gives them out, each with its place in the topology (package, core, smt…).
    Both policies are prefixes of this order: n workers get its first n."""
    where = {c["cpu"]: c for c in engine.topology()["cpus"]}
    return [where[c] for c in engine.placement(ncpus, placement)]


def landmarks(order: list[dict], placement: str) -> dict[int, str]:
    """The worker counts at which a placement reaches a boundary of the
    machine, each with what it completes: every physical core (both policies
    use all of them before any SMT sibling), all CPUs, and each count whose
    CPUs are whole sockets at one SMT level (compact: socket after socket,
    first their cores, then their siblings); spread also marks the first
    count that has a worker on every socket."""
    n = len(order)
    if not n:
        return {}
    group = [(c["package"], c["smt"]) for c in order]
    size: dict[tuple, int] = {}
    for g in group:
        size[g] = size.get(g, 0) + 1
    threads = max(c["smt"] for c in order) + 1

    def name(pkg: int, smt: int) -> str:
        if smt == 0:
            return f"socket {pkg}'s cores"
        return f"socket {pkg}'s SMT siblings" if threads == 2 else f"socket {pkg}'s SMT thread {smt + 1}"

    marks: dict[int, str] = {}
    seen: dict[tuple, int] = {}
    open_groups, last = 0, 0
    for i, g in enumerate(group, 1):
        seen[g] = seen.get(g, 0) + 1
        open_groups += (seen[g] == 1) - (seen[g] == size[g])
        if open_groups == 0:  # order[:i] is whole groups: name those completed since the last mark
            marks[i] = " + ".join(name(*h) for h in dict.fromkeys(group[last:i]))
            last = i
    physical = sum(c["smt"] == 0 for c in order)
    packages = {c["package"] for c in order}
    if 0 < physical < n:
        marks[physical] = "all physical cores"
    marks[n] = "all CPUs"
    if placement == "spread" and len(packages) > 1:
        spanned: set[int] = set()
        for i, c in enumerate(order, 1):
            spanned.add(c["package"])
            if len(spanned) == len(packages):
                marks.setdefault(i, "a worker on every socket")
                break
    return dict(sorted(marks.items()))


def default_worker_counts(ncpus: int, placement: str = "compact") -> list[int]:
    """1, 2, 4, … below the CPU count, then every landmark of the machine
    under `placement` (see `landmarks`): on 2 sockets × 24 cores × SMT2,
    compact gives 1, 2, 4, 8, 16, 24, 32, 48, 64, 72, 96."""
    counts, n = set(), 1
    while n < ncpus:
        counts.add(n)
        n *= 2
    counts |= set(landmarks(placement_order(ncpus, placement), placement))
    counts.add(ncpus)
    return sorted(counts)


_RANGE = re.compile(r"^([0-9]+)-([0-9]+|max)(?::([0-9]+))?$")


def _counts_of(part: str, ncpus: int, option: str) -> list[int]:
    """One comma-separated part: N, max, A-B (every count) or A-B:S (A, A+S, … and B)."""
    if part == "max":
        return [ncpus]
    n = whole_number(part)
    if n is not None:
        if not n:
            raise UsageError(
                f"{option}: '{part}' is not a positive whole number, a range like 1-48 or 1-96:8, or 'max'"
            )
        return [n]
    m = _RANGE.match(part)
    if not m:
        raise UsageError(f"{option}: '{part}' is not a positive whole number, a range like 1-48 or 1-96:8, or 'max'")
    lo = int(m.group(1))
    hi = ncpus if m.group(2) == "max" else int(m.group(2))
    step = int(m.group(3)) if m.group(3) is not None else 1
    if lo < 1 or hi < lo:
        raise UsageError(f"{option}: range '{part}' must go up from 1 or more (like 1-48)")
    if step < 1:
        raise UsageError(f"{option}: range '{part}' has a step of 0 (like 1-96:8)")
    if hi > ncpus:  # refused before the range is made (1-99999999999 would fill memory first)
        what = "workers" if option == "--workers" else "CPUs"
        raise UsageError(f"{option}: {hi:,} {what} but this machine gives us {plural(ncpus, 'CPU')}")
    return sorted({*range(lo, hi + 1, step), hi})


def parse_worker_counts(
    text: str | None, ncpus: int, option: str = "--workers", placement: str = "compact"
) -> list[int]:
    """'1,2,max', '1-48', '1-96:8,max' -> sorted distinct counts, none above
    the CPUs we may use; none given: the machine's default under `placement`."""
    if not text:
        return default_worker_counts(ncpus, placement)
    counts: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        got = _counts_of(part, ncpus, option)
        if got[-1] > ncpus:
            what = "workers" if option == "--workers" else "CPUs"
            raise UsageError(f"{option}: {got[-1]:,} {what} but this machine gives us {plural(ncpus, 'CPU')}")
        counts.update(got)
    return sorted(counts)


def available_cpus() -> list[int]:
    return [c["cpu"] for c in engine.topology()["cpus"]]


def parse_cpus(text: str | None, option: str = "--cpus") -> tuple[int, ...]:
    """A CPU list (0-3,8) checked against the CPUs this process may use; all of them by default."""
    available = available_cpus()
    if not text:
        return tuple(available)
    try:
        cpus = expand(text)
    except ValueError as e:
        raise UsageError(f"{option}: '{e}' is not a CPU or a range like 0-3") from None
    if not cpus:
        raise UsageError(f"{option}: no CPU named")
    for c in cpus:
        if c not in available:
            raise UsageError(f"{option}: CPU {c} is not online or not available to this process")
    if len(set(cpus)) != len(cpus):
        raise UsageError(f"{option}: a CPU is listed twice")
    return tuple(cpus)


# Old variant names still taken, each with a warning naming its new one:
# mmap:private was one file per worker, mapped MAP_SHARED like mmap:shared.
RENAMED_VARIANTS = {("mmap", "private"): "own-file"}


def parse_probes(text: str | None) -> list[tuple[str, str]]:
    """'mmap,mmap:own-file,all' -> [(probe, variant)], checked against the engine."""
    known = engine.probes()
    specs = [s.strip() for s in (text.split(",") if text else OSMARK_PROBES) if s.strip()]
    if not specs:
        raise UsageError("--probe: no probe named")
    out: list[tuple[str, str]] = []
    for spec in specs:
        if spec == "all":  # the operations; a device's I/O is `oslens io`'s
            out += [(p.name, v) for p in known.values() if not p.needs_target for v in p.variants]
            continue
        name, colon, variant = spec.partition(":")
        if colon and not variant:
            raise UsageError(f"probe '{spec}': an empty variant (name one, or leave out the ':')")
        if (name, variant) in RENAMED_VARIANTS:
            new_name = RENAMED_VARIANTS[name, variant]
            help_ = known[name].variant_help.get(new_name, "") if name in known else ""
            print(f"oslens: {spec} is deprecated; use {name}:{new_name} ({help_})", file=sys.stderr)
            variant = new_name
        info = known.get(name)
        if info is None:
            raise UsageError(f"unknown probe '{name}' (known: {', '.join(sorted(known))})")
        if variant and variant not in info.variants:
            raise UsageError(f"probe {name} has no variant '{variant}' (has: {', '.join(info.variants)})")
        if info.needs_target:
            raise UsageError(f"probe {name} works on a block device or file: use 'oslens io'")
        out.append((name, variant or info.variants[0]))
    return list(dict.fromkeys(out))


def parse_opts(pairs: tuple[str, ...], probes: list[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """--opt KEY=VALUE pairs, per probe that has the option; a key no chosen
    probe understands is an error rather than silently ignored."""
    known = engine.probes()
    per_probe: dict[str, dict[str, int]] = {name: {} for name, _ in probes}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise UsageError(f"--opt: '{pair}' is not KEY=VALUE")
        takers = [n for n in per_probe if key in known[n].options]
        if not takers:
            raise UsageError(f"--opt: no chosen probe has an option '{key}'")
        sign, digits = (-1, value[1:]) if value.startswith("-") else (1, value)
        num = whole_number(digits)
        if num is None:
            raise UsageError(f"--opt {key}: '{value}' is not a whole number")
        num *= sign
        for n in takers:
            o = known[n].options[key]
            if not o["min"] <= num <= o["max"]:
                raise UsageError(f"--opt {key}: {num} is outside {o['min']}..{o['max']} for probe {n}")
            per_probe[n][key] = num
    return per_probe


@dataclass(frozen=True)
class CompeteSpec:
    """A competing workload: a probe run on other CPUs while something is measured."""

    probe: str
    variant: str
    cpus: tuple[int, ...] | None  # None: every CPU the measurement leaves free

    @property
    def label(self) -> str:
        return f"{self.probe}:{self.variant}"


_CPULIST = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")


def parse_compete(text: str) -> CompeteSpec:
    """PROBE[:VARIANT][:CPUS], e.g. 'fork', 'mmap:own-file', 'fork:2-3'."""
    parts = text.split(":")
    cpus = None
    if len(parts) > 1 and _CPULIST.match(parts[-1]):
        cpus = parse_cpus(parts.pop(), option="--compete")
    ((probe, variant),) = parse_probes(":".join(parts))
    return CompeteSpec(probe, variant, cpus)


def competitor_cpus(spec: CompeteSpec, measured: list[int]) -> list[int]:
    """The CPUs the competitor gets: those named, or every one the measurement leaves free."""
    if spec.cpus is not None:
        return list(spec.cpus)
    free = [c for c in available_cpus() if c not in measured]
    if not free:
        raise UsageError(
            "--compete: the measurement uses every CPU; lower --workers or name the "
            "competitor's CPUs (e.g. --compete fork:0)"
        )
    return free
