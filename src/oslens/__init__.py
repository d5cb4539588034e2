"""oslens: measure how a Linux kernel behaves and scales on the machine it runs
on, and explain what it finds.

The Python API (oslens.api) reads stored runs as pandas DataFrames:

    import oslens
    run = oslens.Store().run(12)
    run.frame()

`Store`, `Run` and `StoreError` are imported on first use, so that
`import oslens` stays light."""

from __future__ import annotations

from typing import Any

from .version import __version__

__all__ = ["Store", "Run", "StoreError", "__version__"]

_API = ("Store", "Run", "StoreError")


def __getattr__(name: str) -> Any:
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'oslens' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
