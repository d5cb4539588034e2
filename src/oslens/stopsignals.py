"""The signals that stop a command (SIGINT, SIGTERM, SIGHUP), handled in
one way wherever oslens catches them. A signal the caller ignores stays
ignored, as every Unix program leaves it: nohup ignores SIGHUP so that a
closed terminal does not end the run, and a shell without job control
starts background jobs with SIGINT ignored. The engine does the same with
what it inherits from us (engine/stopsig.c)."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Callable, Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def ignored_by_caller() -> set[int]:
    """The stop signals this process was started with ignored."""
    return {s for s in STOP_SIGNALS if signal.getsignal(s) == signal.SIG_IGN}


def install(handlers: dict[int, Callable]) -> dict[int, object]:
    """Installs each handler, except for a signal the caller ignores;
    returns what was there, for restore()."""
    return {s: signal.signal(s, h) for s, h in handlers.items() if signal.getsignal(s) != signal.SIG_IGN}


def restore(old: dict[int, object]) -> None:
    for s, h in old.items():
        signal.signal(s, h)


@contextmanager
def handled_by(handler: Callable) -> Iterator[None]:
    """`handler` for every stop signal the caller does not ignore, while inside."""
    old = install(dict.fromkeys(STOP_SIGNALS, handler))
    try:
        yield
    finally:
        restore(old)
