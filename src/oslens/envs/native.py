"""The host itself: the engine as it is installed."""

from __future__ import annotations

from .. import engine
from ..errors import UsageError

KEYS: dict[str, str] = {}


class Native:
    name = "native"

    def __enter__(self) -> "Native":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def engine_argv(self) -> list[str]:
        return [str(engine.engine_path())]

    def describe(self) -> dict:
        return {"name": "native"}


def make(opts: dict[str, str]) -> Native:
    if opts:
        raise UsageError("--in native takes no options")
    return Native()
