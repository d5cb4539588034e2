"""Tidy tables (pandas DataFrames) of a stored run: the frames of the Python
API (`oslens.Store().run(N).frame()`) and of `oslens export`.

Each kind of run has one module here, `frames/<kind>.py`, named by the
registry (kinds.py), with `frames(run, records) -> {name: DataFrame}`. Its
first frame is the kind's main one: one row per measured thing, one column
per variable. Every frame's values are those `oslens show RUN --json`
reports (the same analysis computes them), and every column is declared
once, with its dtype and meaning, in the module's `COLUMNS`; the module's
docstring lists them, `columns(kind)` returns them, and
`documentation()` is the text documenting every column of every kind
(`python -c 'import oslens.frames as f; print(f.documentation())'`).

Every frame starts with `run_id`, so that frames of several runs can be
concatenated. Columns that may be unknown use pandas' nullable dtypes
(`Int64`, `boolean`) or NaN."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from .. import kinds

if TYPE_CHECKING:  # pandas is imported only when a frame is built
    import pandas as pd

# A frame's columns: name -> (dtype, meaning).
Spec = dict[str, tuple[str, str]]

RUN_ID: Spec = {"run_id": ("int64", "the run's id in the store")}


def frames(run: Any, records: list[dict]) -> dict[str, "pd.DataFrame"]:
    """Every frame of a run, main frame first, through the registry of kinds.
    `run` is a stored run (store.Run or api.Run: it needs .id, .kind and
    .params), `records` its engine records in order."""
    return kinds.get(run.kind, run.id).load("frames")(run, records)


def columns(kind: str) -> dict[str, Spec]:
    """The declared frames of a kind and their columns: {frame: {column:
    (dtype, meaning)}}, the main frame first. Profile frames beyond
    `threads`, `sections`, `figures` and `crosschecks` follow the profile
    summary's tables and are not declared (see frames/profile.py)."""
    return kinds.get(kind).load("columns")


def documentation() -> str:
    """Every kind's frames and the meaning and dtype of each column: the
    docstrings of frames/<kind>.py, one after another."""
    import importlib

    out = []
    for name, kind in kinds.KINDS.items():
        module = importlib.import_module(kind.frames.partition(":")[0], kinds.__package__)
        out.append(f"# {name}\n\n{(module.__doc__ or '').strip()}\n")
    return "\n".join(out)


def table(run_id: int, rows: Iterable[dict], spec: Spec) -> "pd.DataFrame":
    """A frame with exactly the declared columns, in order, of the declared
    dtypes (also when there are no rows), `run_id` first."""
    import pandas as pd

    spec = {**RUN_ID, **spec}
    rows = [{"run_id": run_id, **r} for r in rows]
    names = list(spec)
    frame = pd.DataFrame.from_records(rows, columns=names) if rows else pd.DataFrame({c: [] for c in names})
    return frame.astype({c: dtype for c, (dtype, _) in spec.items()})


def describe(spec_by_frame: dict[str, Spec]) -> str:
    """The text documenting frames and their columns (appended to each
    kind module's docstring, so that it is written once)."""
    out = []
    for name, spec in spec_by_frame.items():
        out.append(f"\n`{name}`:\n")
        width = max(len(c) for c in {**RUN_ID, **spec})
        for col, (dtype, meaning) in {**RUN_ID, **spec}.items():
            out.append(f"    {col:<{width}}  {dtype:<8} {meaning}")
    return "\n".join(out) + "\n"


def joined(items: Iterable[Any], sep: str = "; ") -> str:
    """A list (warnings, CPUs) as one text cell."""
    return sep.join(map(str, items))
