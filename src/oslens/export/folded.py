"""Folded stacks (Brendan Gregg's format, which flamegraph.pl, inferno and
speedscope read): one file per explained point, one line per sampled stack,
`cause;outermost;…;innermost SAMPLES`, from the run's `stacks` frame. The
cause is the root frame, so that a flame graph splits the point's time by
system call, fault, lock wait and interrupt first. Samples, not ns: the
tools count integers; ns per operation is samples × the period /
operations, in the frame. Written to -o DIR/ as
DIR/run-<id>-<probe>-<variant>-<mode>-<N>w.folded (a run with one point
may go to -o FILE)."""

from __future__ import annotations

import re
from typing import TextIO

from ..errors import UsageError
from . import opened, output_dir

POINT = ("probe", "variant", "mode", "placement", "fixed", "workers")


def _name(run_id: int, point: tuple) -> str:
    probe, variant, mode, placement, _, workers = point
    text = f"run-{run_id}-{probe}-{variant}-{mode}-{placement}-{workers}w"
    return re.sub(r"[^\w.-]+", "_", text) + ".folded"


def write(run, output, frame: str | None, stdout: TextIO) -> list[dict]:
    frames = run.frames()
    if frame is not None:
        raise UsageError("--frame: folded writes the sampled stacks, one file per explained point")
    stacks = frames.get("stacks")
    if stacks is None or stacks.empty:
        raise UsageError(f"run {run.id} ({run.kind}) has no sampled kernel stacks: `scale --explain` samples them")
    points = list(stacks.groupby(list(POINT), sort=True))
    directory = output_dir(output)
    if directory is None and len(points) > 1:
        raise UsageError(f"run {run.id} has {len(points)} explained points: give -o DIR/ (a file each)")
    done = []
    for point, rows in points:
        path = directory / _name(run.id, point) if directory is not None else output
        lines = "".join(f"{s} {n}\n" for s, n in zip(rows["stack"], rows["samples"]) if n > 0)
        if path is None:
            stdout.write(lines)
        else:
            with opened(path) as out:
                out.write(lines)
        done.append({"path": str(path) if path is not None else None, "frame": "stacks", "rows": int(len(rows)),
                     "columns": ["stack", "samples"], "point": dict(zip(POINT, map(str, point)))})  # fmt: skip
    return done
