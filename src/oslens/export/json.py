"""JSON export: the run's metadata, every frame as rows, every raw record.

    {"run": {id, kind, status, reason, started, finished, host, pid, argv,
             params, machine, n_records},
     "frames": {name: [{column: value, …}, …], …},   main frame first
     "records": [record, …]}

Missing values (NaN, NA) are null; `pandas.DataFrame(doc["frames"][name])`
gives the frame back."""

from __future__ import annotations

import json
import math
from typing import Any, TextIO

from . import opened, output_dir, pick, written


def _plain(v: Any) -> Any:
    if v is None:
        return None
    if hasattr(v, "item") and not isinstance(v, (list, dict, str)):
        v = v.item()  # numpy scalars
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else v
    try:
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return None
    except ImportError:  # pragma: no cover
        pass
    return v


def rows(frame) -> list[dict]:
    """A frame's rows as JSON-able dicts."""
    cols = [str(c) for c in frame.columns]
    return [{c: _plain(v) for c, v in zip(cols, row)} for row in frame.itertuples(index=False, name=None)]


def write(run, output, frame: str | None, stdout: TextIO) -> list[dict]:
    frames = pick(run.frames(), frame, run.kind)
    doc = {"run": run.metadata(), "frames": {name: rows(f) for name, f in frames.items()}, "records": run.records()}
    directory = output_dir(output)
    path = directory / f"run-{run.id}.json" if directory is not None else output
    if path is None:
        json.dump(doc, stdout, indent=1)
        stdout.write("\n")
    else:
        with opened(path) as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return [written(path, name, f) for name, f in frames.items()]
