"""From command-line choices to the engine invocations of a run: one module
per kind of run (kinds.py names each kind's planner), the checks they share
here.

Everything a user can get wrong is checked in the planners, against what
the engine publishes (its probes and its limits) and what the machine
offers, before anything is measured or stored."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Iterator

from .. import engine
from ..errors import UsageError
from ..format import seconds, sig
from ..invocation import Context, Invocation


@dataclass(frozen=True)
class Point(Invocation):
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
class MeasuredPoint(Invocation):
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

    @contextlib.contextmanager
    def surroundings(self) -> Iterator[Context]:
        if not self.compete:
            yield Context()
            return
        from ..compete import competing  # the competitor's engine starts only when measuring

        with competing(self.compete, list(self.cpus)) as record:
            yield Context(record)


@dataclass
class Plan:
    """Engine invocations, each run `reps` times, and the run's parameters."""

    points: list
    reps: int
    params: dict

    @property
    def total_reps(self) -> int:
        """What the progress bar counts: a point may run fewer (its `reps`)."""
        return sum(p.reps or self.reps for p in self.points)


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
    if duration is not None:
        check_seconds("--duration", duration, _bound("--duration")["max"], zero_allowed=False)
    most = int(_bound("--ops")["max"])  # published as a JSON number: 2^63 reads back as a float
    if ops is not None and not 0 < ops <= most:
        raise UsageError(f"--ops: {ops:,} is not a number of operations from 1 to {most:,}")
    check_reps(reps)
    check_seconds("--warmup", warmup, _bound("--warmup")["max"], zero_allowed=True)
    check_seconds("--interval", interval, _bound("--interval")["max"], zero_allowed=False)
    return duration


def check_seconds(name: str, value: float, most: float | None = None, zero_allowed: bool = False) -> None:
    """A number of seconds within the engine's bound (--duration's unless
    given), refused in words a person reads (a huge value is said to be too
    large, not echoed as 1e+19)."""
    most = _bound("--duration")["max"] if most is None else most
    if not math.isfinite(value):
        raise UsageError(f"{name}: {value} is not a finite number of seconds")
    low = "[0" if zero_allowed else "(0"
    if value > most:
        raise UsageError(f"{name}: more than the {sig(most, 9)} s the engine allows")
    if value < 0 or (value == 0 and not zero_allowed):
        raise UsageError(f"{name}: {sig(value, 6)} is not a number of seconds in {low}, {sig(most, 9)}]")


def check_reps(reps: int) -> None:
    """--reps within the engine's bound, which every kind of run shares."""
    most = _bound("--reps")["max"]
    if not 1 <= reps <= most:
        raise UsageError(f"--reps: {reps:,} is not a number of repetitions from 1 to {most:,}")


def time_limit(reps: int, seconds_per_rep: float) -> float:
    """A generous wall-clock limit for one invocation (a hung worker must end
    the run, a slow machine must not), refused here, in the user's words,
    when it is beyond what the engine allows."""
    limit = 120.0 + reps * (seconds_per_rep * 3 + 30.0)
    most = _bound("--time-limit")["max"]
    if limit > most:
        raise UsageError(
            f"--duration/--warmup × --reps: {reps:,} × {seconds(seconds_per_rep)} in one invocation "
            f"needs a time limit of {seconds(limit)}; the engine allows at most {seconds(most)} "
            f"(measure less per repetition or use fewer repetitions)"
        )
    return limit
