"""What users type, checked against what the engine and the machine offer:
probes, worker and CPU counts, CPU lists, competitors. One home for each,
below the planners (plan/) and the competitor runner (compete.py), so that
every command reads a CPU list or a probe the same way."""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import engine
from .cpulist import expand
from .errors import UsageError

OSMARK_PROBES = ("fork", "mmap", "dup", "socket", "sem")

_COUNT = re.compile(r"^[0-9]+$")  # ASCII digits: str.isdigit() accepts '²', which int() refuses


def whole_number(text: str) -> int | None:
    """A non-negative whole number written in ASCII digits, or None."""
    text = text.strip()
    return int(text) if _COUNT.match(text) else None


def default_worker_counts(ncpus: int) -> list[int]:
    """1, 2, 4, … below the CPU count, then the CPU count itself."""
    counts, n = [], 1
    while n < ncpus:
        counts.append(n)
        n *= 2
    counts.append(ncpus)
    return counts


def parse_worker_counts(text: str | None, ncpus: int, option: str = "--workers") -> list[int]:
    """'1,2,max' -> sorted distinct counts, none above the CPUs we may use."""
    if not text:
        return default_worker_counts(ncpus)
    counts = []
    for part in text.split(","):
        part = part.strip()
        n = ncpus if part == "max" else whole_number(part)
        if not n:
            raise UsageError(f"{option}: '{part}' is not a positive whole number or 'max'")
        if n > ncpus:
            what = "workers" if option == "--workers" else "CPUs"
            raise UsageError(f"{option}: {n} {what} but this machine gives us {ncpus} CPUs")
        if n not in counts:
            counts.append(n)
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


def parse_probes(text: str | None) -> list[tuple[str, str]]:
    """'mmap,mmap:private,all' -> [(probe, variant)], checked against the engine."""
    known = engine.probes()
    specs = [s.strip() for s in (text.split(",") if text else OSMARK_PROBES) if s.strip()]
    if not specs:
        raise UsageError("--probe: no probe named")
    out: list[tuple[str, str]] = []
    for spec in specs:
        if spec == "all":
            out += [(p.name, v) for p in known.values() for v in p.variants]
            continue
        name, _, variant = spec.partition(":")
        info = known.get(name)
        if info is None:
            raise UsageError(f"unknown probe '{name}' (known: {', '.join(sorted(known))})")
        if variant and variant not in info.variants:
            raise UsageError(f"probe {name} has no variant '{variant}' (has: {', '.join(info.variants)})")
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
    """PROBE[:VARIANT][:CPUS], e.g. 'fork', 'mmap:private', 'fork:2-3'."""
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
