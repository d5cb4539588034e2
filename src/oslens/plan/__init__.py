"""From command-line choices to the engine invocations of a run: one module
per kind of run (scale, latency, noise, profile, appscale), the checks they
share here.

Everything a user can get wrong is checked in the planners, against what
the engine publishes (its probes and its limits) and what the machine
offers, before anything is measured or stored."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import engine
from ..errors import UsageError


@dataclass(frozen=True)
class Point:
    """One engine invocation: a probe at a worker count, all repetitions."""

    probe: str
    variant: str
    mode: str
    workers: int
    args: tuple[str, ...] = field(compare=False)
    explained: bool = False  # the paired repetitions of `scale --explain`

    @property
    def series(self) -> tuple[str, str, str]:
        return (self.probe, self.variant, self.mode)

    @property
    def label(self) -> str:
        return f"{self.probe}:{self.variant} {self.mode} ×{self.workers}" + (" explained" if self.explained else "")


@dataclass(frozen=True)
class MeasuredPoint:
    """One engine invocation on a fixed set of CPUs, optionally with a
    competing workload on others around it (latency, noise)."""

    probe: str
    variant: str
    mode: str
    cpus: tuple[int, ...]
    args: tuple[str, ...] = field(compare=False)
    compete: object = field(default=None, compare=False)  # parse.CompeteSpec or None

    @property
    def label(self) -> str:
        where = f" vs {self.compete.label}" if self.compete else ""
        return f"{self.probe}:{self.variant}{where}"

    def surroundings(self):
        from ..compete import competing  # the competitor's engine starts only when measuring

        return competing(self.compete, list(self.cpus)) if self.compete else None


@dataclass
class Plan:
    """Engine invocations, each run `reps` times, and the run's parameters."""

    points: list
    reps: int
    params: dict

    @property
    def total_reps(self) -> int:
        """What the progress bar counts: a point may run fewer (its `reps`)."""
        return sum(getattr(p, "reps", None) or self.reps for p in self.points)


def _bound(option: str) -> dict:
    return engine.limit("run", option)


def check_amounts(
    duration: float | None, ops: int | None, reps: int, warmup: float, interval: float, default_duration: float
) -> float | None:
    """The numbers every measuring command takes, checked against the
    engine's published limits; returns the duration (None for fixed work)."""
    if duration is not None and ops is not None:
        raise UsageError("--duration and --ops are exclusive: fixed time or fixed work")
    if duration is None and ops is None:
        duration = default_duration
    for name, value in (("--duration", duration), ("--warmup", warmup), ("--interval", interval)):
        if value is not None and not math.isfinite(value):
            raise UsageError(f"{name}: {value} is not a finite number of seconds")
    most = _bound("--duration")["max"]
    if duration is not None and not 0 < duration <= most:
        raise UsageError(f"--duration: {duration:g} is not a number of seconds in (0, {most:g}]")
    most = _bound("--ops")["max"]
    if ops is not None and not 0 < ops <= most:
        raise UsageError(f"--ops: {ops} is not a number of operations from 1 to {most}")
    check_reps(reps)
    most = _bound("--warmup")["max"]
    if not 0 <= warmup <= most:
        raise UsageError(f"--warmup: {warmup:g} is not a number of seconds in [0, {most:g}]")
    most = _bound("--interval")["max"]
    if not 0 < interval <= most:
        raise UsageError(f"--interval: {interval:g} is not a number of seconds in (0, {most:g}]")
    return duration


def check_reps(reps: int) -> None:
    """--reps within the engine's bound, which every kind of run shares."""
    most = _bound("--reps")["max"]
    if not 1 <= reps <= most:
        raise UsageError(f"--reps: {reps} is not a number of repetitions from 1 to {most}")


def time_limit(reps: int, seconds_per_rep: float) -> float:
    """A generous wall-clock limit for one invocation (a hung worker must end
    the run, a slow machine must not), refused here, in the user's words,
    when it is beyond what the engine allows."""
    limit = 120.0 + reps * (seconds_per_rep * 3 + 30.0)
    most = _bound("--time-limit")["max"]
    if limit > most:
        raise UsageError(
            f"--duration/--warmup × --reps: {reps} × {seconds_per_rep:g} s in one invocation "
            f"needs a time limit of {limit:g} s; the engine allows at most {most:g} s "
            f"(measure less per repetition or use fewer repetitions)"
        )
    return limit
