"""Parquet export: one frame per file, dtypes kept (pandas + pyarrow). The
kind's main frame, or --frame NAME, to -o FILE; with -o DIR/, every frame
(or the --frame one) to DIR/run-<id>-<frame>.parquet."""

from __future__ import annotations

from typing import TextIO

from ..errors import UsageError
from . import opened, output_dir, pick, written


def _write(frame, path) -> None:
    with opened(path, "wb") as out:
        frame.to_parquet(out, index=False)


def write(run, output, frame: str | None, stdout: TextIO) -> list[dict]:
    if output is None:
        raise UsageError("--format parquet writes a file: give -o FILE.parquet (or -o DIR/ for every frame)")
    frames = run.frames()
    directory = output_dir(output)
    if directory is None:
        name = frame if frame is not None else next(iter(frames))
        f = pick(frames, name, run.kind)[name]
        _write(f, output)
        return [written(output, name, f)]
    done = []
    for name, f in pick(frames, frame, run.kind).items():
        path = directory / f"run-{run.id}-{name}.parquet"
        _write(f, path)
        done.append(written(path, name, f))
    return done
