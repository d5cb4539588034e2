"""The Python API: stored runs as tidy pandas DataFrames, for notebooks.

    import oslens
    store = oslens.Store()              # OSLENS_DB or the user data directory; or Store(path)
    run = store.run(12)                 # or store.last(kind="scale"), store.runs(kind=None)
    run.kind, run.id, run.machine, run.params, run.status
    df = run.frame()                    # the kind's main tidy DataFrame
    run.frames()                        # every frame of the kind, by name
    run.records()                       # the raw engine records
    run.summary()                       # what `oslens show RUN --json` prints

Read-only: it never creates a store, never measures, and never writes a run.
The frames and their columns are documented in oslens.frames (and each
kind's module, e.g. help(oslens.frames.scale))."""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import kinds
from .store import Run as _StoredRun
from .store import Store as _Store
from .store import StoreError, default_path, parse_tag

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Store", "Run", "StoreError"]


class Run:
    """One stored run: its metadata as attributes, its data through methods.
    Records, frames and the summary are read and computed once, on first use."""

    def __init__(self, stored: _StoredRun, store: _Store):
        """Made by Store.run/runs/last (and by `export` from the CLI's open
        store): `stored` is the store's row, `store` the oslens.store.Store
        it came from."""
        self._stored = stored
        self._source = store

    # ---------------------------------------------------------- metadata
    @property
    def id(self) -> int:
        return self._stored.id

    @property
    def kind(self) -> str:
        """The kind of run: a name of oslens.kinds.KINDS."""
        return self._stored.kind

    @property
    def status(self) -> str:
        """complete, incomplete (interrupted, or its process died), failed or running."""
        return self._stored.status

    @property
    def reason(self) -> str | None:
        """Why the run is not complete, when it is not."""
        return self._stored.reason

    @property
    def started(self) -> str:
        return self._stored.started

    @property
    def finished(self) -> str | None:
        return self._stored.finished

    @property
    def host(self) -> str:
        return self._stored.host

    @property
    def argv(self) -> list[str]:
        """The command line that made the run."""
        return list(self._stored.argv)

    @property
    def params(self) -> dict:
        """The run's parameters, as the command planned them."""
        return self._stored.params

    @property
    def tags(self) -> dict[str, str]:
        """The labels its command was given (--tag KEY=VALUE)."""
        return dict(self._stored.tags)

    @property
    def machine(self) -> dict:
        """The machine and kernel it ran on (kernel, cpu, topology, …)."""
        return self._stored.machine

    def metadata(self) -> dict:
        """Every stored field but the summary, as one JSON-able dict."""
        s = self._stored
        return {
            "id": s.id,
            "kind": s.kind,
            "status": s.status,
            "reason": s.reason,
            "started": s.started,
            "finished": s.finished,
            "host": s.host,
            "pid": s.pid,
            "argv": s.argv,
            "params": s.params,
            "machine": s.machine,
            "n_records": s.n_records,
        }

    # -------------------------------------------------------------- data
    def records(self) -> list[dict]:
        """The raw records of the run, in order: the engine's (engine/README.md)
        and those oslens stored beside them (context, point)."""
        return list(self._records)

    @cached_property
    def _records(self) -> list[dict]:
        return self._source.records(self.id)

    @cached_property
    def _frames(self) -> dict[str, "pd.DataFrame"]:
        from .frames import frames

        return frames(self, self._records)

    def frames(self) -> dict[str, "pd.DataFrame"]:
        """Every tidy frame of the run's kind, by name, the main one first
        (copies: changing them changes nothing here)."""
        return {name: f.copy() for name, f in self._frames.items()}

    def frame(self, name: str | None = None) -> "pd.DataFrame":
        """The kind's main tidy frame, or the frame of that name."""
        frames = self._frames
        if name is None:
            name = next(iter(frames))
        if name not in frames:
            raise KeyError(f"a {self.kind} run has no frame {name!r} (it has {', '.join(frames)})")
        return frames[name].copy()

    @cached_property
    def _analysis(self) -> Any:
        return kinds.get(self.kind, self.id).load("analyze")(self, self._records)

    def summary(self) -> dict:
        """The analysis of the run: the data `oslens show RUN --json` prints
        besides the run's metadata (for a noise run, every detour too)."""
        a = self._analysis
        extra = a.json_extra() if hasattr(a, "json_extra") else {}
        return {**a.to_dict(), **extra}

    def __repr__(self) -> str:
        return f"<oslens run {self.id}: {self.kind} {self.status}, {self.started}, {self.host}>"


class Store:
    """A results store, opened to read. `path` defaults to OSLENS_DB or the
    user data directory; a store that does not exist is an error
    (StoreError), never a new empty file."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path).expanduser() if path is not None else default_path()
        self._store = _Store(self.path, read_only=True)

    def run(self, ref: int | str) -> Run:
        """The run of that id (or 'last')."""
        return Run(self._store.run(ref), self._store)

    def runs(self, kind: str | None = None, tag: str | dict[str, str] | None = None) -> list[Run]:
        """Every run, newest first; only those of `kind`, and only those with
        every tag of `tag` ("KEY=VALUE", or a dict of them), when given."""
        if kind is not None and kind not in kinds.KINDS:
            raise ValueError(f"no kind of run {kind!r} (the kinds are {', '.join(kinds.KINDS)})")
        wanted = dict([parse_tag(tag)]) if isinstance(tag, str) else dict(tag or {})
        return [
            Run(r, self._store)
            for r in self._store.runs()
            if (kind is None or r.kind == kind) and all(r.tags.get(k) == v for k, v in wanted.items())
        ]

    def last(self, kind: str | None = None) -> Run:
        """The newest run (of `kind`, when given)."""
        runs = self.runs(kind)
        if not runs:
            raise StoreError(f"no {kind + ' ' if kind else ''}runs yet in {self.path}")
        return runs[0]

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<oslens store {self.path}>"
