"""A competing workload: any probe, run by a second engine on other CPUs
while something is measured, so "alone" and "with competition" compare."""
from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from . import engine
from .errors import UsageError
from .plan import parse_probes

_CPULIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
# The competitor runs until stopped; this only bounds a forgotten one.
COMPETITOR_LIMIT_S = 6 * 3600


@dataclass(frozen=True)
class CompeteSpec:
    probe: str
    variant: str
    cpus: tuple[int, ...] | None  # None: every CPU the measurement leaves free

    @property
    def label(self) -> str:
        return f"{self.probe}:{self.variant}"


def parse_compete(text: str) -> CompeteSpec:
    """PROBE[:VARIANT][:CPUS], e.g. 'fork', 'mmap:private', 'fork:2-3'."""
    parts = text.split(":")
    cpus = None
    if len(parts) > 1 and _CPULIST.match(parts[-1]):
        cpus = tuple(_expand(parts.pop()))
    (probe, variant), = parse_probes(":".join(parts))
    return CompeteSpec(probe, variant, cpus)


def _expand(cpulist: str) -> list[int]:
    out: list[int] = []
    for part in cpulist.split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def competitor_cpus(spec: CompeteSpec, measured: list[int]) -> list[int]:
    available = [c["cpu"] for c in engine.topology()["cpus"]]
    if spec.cpus is not None:
        missing = sorted(set(spec.cpus) - set(available))
        if missing:
            raise UsageError(f"--compete: CPU {missing[0]} is not available to this process")
        return list(spec.cpus)
    free = [c for c in available if c not in measured]
    if not free:
        raise UsageError("--compete: the measurement uses every CPU; lower --workers or name the "
                         "competitor's CPUs (e.g. --compete fork:0)")
    return free


@contextmanager
def competing(spec: CompeteSpec, measured: list[int]) -> Iterator[dict]:
    """Runs the competitor for the duration of the block; yields the context
    record (what ran where) stored before the measurement's records."""
    cpus = competitor_cpus(spec, measured)
    run = engine.EngineRun(["run", "--probe", spec.label, "--cpus", ",".join(map(str, cpus)),
                            "--duration", str(COMPETITOR_LIMIT_S), "--warmup", "0",
                            "--time-limit", str(COMPETITOR_LIMIT_S + 60)], confine_to=cpus)
    try:
        started = None
        for rec in run:
            if rec["type"] == "started":
                started = rec
                break
        if started is None:
            run.close()
            raise UsageError(f"--compete {spec.label}: {run.failure()}")
        yield {"type": "context", "competition": {"probe": spec.probe, "variant": spec.variant,
                                                  "cpus": cpus, "workers": started["workers"]}}
    finally:
        run.close()
