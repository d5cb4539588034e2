"""One step of a run, as runner.execute takes it: the base every planner's
points derive from, each part written out with its default.

    label         what the progress bar shows while it runs
    args          the engine's argv; the default `measure` runs the engine
                  with it and stores its records as they come
    launcher()    a launcher's argv put before the engine's (mpirun …), or None
    check_args    what the engine's --dry-run validates before anything is
                  stored (default: args; None: nothing, e.g. the argv is
                  checked inside an environment instead)
    reps          the repetitions it advances the progress by (None: the plan's)
    surroundings  a context manager around the measurement (a competitor, a
                  device's counters, an environment) yielding the Context
                  stored just before the engine's records
    measure       None to run the engine with `args`; or the records it
                  measured its own way, batch by batch (a profiled command,
                  an application's repetition): each batch is stored when it
                  is yielded, and an exception raised after (Interrupted,
                  MeasurementError) ends the run with what was stored

Points are frozen dataclasses deriving from Invocation: a field or a
property of the subclass overrides the default here. The base gives no
value to a name a subclass may declare as a field without one (`label`,
`args`): a dataclass takes an inherited class attribute for a default."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Iterator


def _nothing() -> list[dict]:
    return []


@dataclass
class Context:
    """What surrounded one measurement: `record` (a `context` record) is
    stored before the engine's records; `after` reads what only the end can
    tell (a device's counters since the start), stored after them."""

    record: dict = field(default_factory=lambda: {"type": "context", "competition": None})
    after: Callable[[], list[dict]] = _nothing


class Invocation:
    label: str
    args: tuple[str, ...]
    reps: int | None = None

    @property
    def check_args(self) -> tuple[str, ...] | None:
        return self.args

    def launcher(self) -> tuple[str, ...] | None:
        return None

    def surroundings(self) -> ContextManager[Context]:
        return contextlib.nullcontext(Context())

    def measure(self) -> Iterator[list[dict]] | None:
        return None
