"""A competing workload: any probe, run by a second engine on other CPUs
while something is measured, so "alone" and "with competition" compare.
Its specification is parsed in parse.py."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from . import engine
from .errors import MeasurementError, UsageError
from .parse import CompeteSpec, competitor_cpus

# The competitor runs until stopped; this only bounds a forgotten one.
COMPETITOR_LIMIT_S = 6 * 3600


@contextmanager
def competing(spec: CompeteSpec, measured: list[int]) -> Iterator[dict]:
    """Runs the competitor for the duration of the block; yields the context
    record (what ran where) stored before the measurement's records."""
    cpus = competitor_cpus(spec, measured)
    run = engine.EngineRun(
        engine.run_argv(
            probe=spec.label, cpus=cpus, duration=COMPETITOR_LIMIT_S, warmup=0, time_limit=COMPETITOR_LIMIT_S + 60
        ),
        confine_to=cpus,
    )
    try:
        started = None
        for rec in run:
            if rec["type"] == "started":
                started = rec
                break
        if started is None:
            run.close()
            raise UsageError(f"--compete {spec.label}: {run.failure()}")
        yield {
            "type": "context",
            "competition": {"probe": spec.probe, "variant": spec.variant, "cpus": cpus, "workers": started["workers"]},
        }
        # it runs until stopped: ended already, it did not compete the whole time
        died = run.proc.poll() is not None
    finally:
        run.close()
    if died:
        raise MeasurementError(f"--compete {spec.label}: the competitor ended during the measurement: {run.failure()}")
