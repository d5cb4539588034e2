"""`oslens export`: a stored run written from its tidy frames (oslens.frames),
one module per format.

    json     one document: {"run": the run's metadata, "frames": {name: [row,
             …]} (every frame, rows as objects, NaN/NA as null), "records":
             every raw record, in order}. To stdout, to -o FILE, or to
             -o DIR/ as DIR/run-<id>.json.
    csv      one frame, the kind's main one (or --frame NAME), to stdout or
             to -o FILE; with -o DIR/ every frame (or the --frame one) to
             DIR/run-<id>-<frame>.csv. Floats are written in full (they
             read back bit-exact); give pandas.read_csv the text columns'
             dtype ("str") so that a name like "true" stays text.
    parquet  one frame, the main one (or --frame NAME), to -o FILE; with
             -o DIR/ every frame (or the --frame one) to
             DIR/run-<id>-<frame>.parquet. Column dtypes are kept.
    folded   the sampled kernel stacks of each explained point, Brendan
             Gregg's folded format (flamegraph.pl, inferno, speedscope):
             -o DIR/, a file per point (export/folded.py).

An -o path is a directory when it ends with "/" or already is one (a
missing last component is made; a missing parent is an error).

Each writer returns what it wrote, [{"path" (None: stdout), "frame",
"rows", "columns"}], which `export --json` prints on stdout."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from ..errors import UsageError

FORMATS = ("json", "csv", "parquet", "folded")


def output_dir(output: str | os.PathLike | None) -> Path | None:
    """The directory an -o path names, made if only its last part is
    missing; None when it names a file (or stdout)."""
    if output is None:
        return None
    text = os.fspath(output)
    path = Path(text)
    if not (text.endswith(os.sep) or path.is_dir()):
        return None
    try:
        path.mkdir(exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot make directory {path}: {e.strerror or e}") from None
    return path


def pick(frames: dict, frame: str | None, kind: str) -> dict:
    """The frames asked for: all of them, or the one named (a usage error
    when the kind has no such frame)."""
    if frame is None:
        return frames
    if frame not in frames:
        raise UsageError(f"a {kind} run has no frame '{frame}' (its frames: {', '.join(frames)})")
    return {frame: frames[frame]}


def opened(path: Path, mode: str = "w"):
    """A file opened to write, or a one-line usage error naming it."""
    try:
        return open(path, mode, newline="" if "b" not in mode else None)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None


def written(path: Path | None, name: str, frame) -> dict:
    return {
        "path": str(path) if path is not None else None,
        "frame": name,
        "rows": int(len(frame)),
        "columns": [str(c) for c in frame.columns],
    }


def export(
    run: Any, fmt: str, output: str | os.PathLike | None = None, frame: str | None = None, stdout: TextIO | None = None
) -> list[dict]:
    """Writes a run (an oslens.api.Run) in `fmt` to `output` (a file, a
    directory, or None: `stdout`). Returns what was written."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format '{fmt}' (expected {', '.join(FORMATS)})")
    writer = importlib.import_module(f".{fmt}", __name__)
    return writer.write(run, output, frame, stdout if stdout is not None else sys.stdout)


def export_run(store: Any, run_ref: int | str, fmt: str, out: TextIO, frame: str | None = None) -> list[dict]:
    """Writes the run `run_ref` of an open oslens.store.Store to the text
    stream `out` (json, or csv of one frame). Parquet is binary: it goes to
    a file, through export()."""
    if fmt == "parquet":
        raise ValueError("parquet is written to a file: use export(run, 'parquet', path)")
    from ..api import Run

    return export(Run(store.run(run_ref), store), fmt, None, frame, out)
