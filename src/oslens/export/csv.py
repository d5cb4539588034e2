"""CSV export: one frame per file, a header row then one row per frame row
(missing values empty). The kind's main frame, or --frame NAME, to stdout
or a file; with a directory, every frame (or the --frame one) to
DIR/run-<id>-<frame>.csv."""

from __future__ import annotations

from typing import TextIO

from . import opened, output_dir, pick, written


def write(run, output, frame: str | None, stdout: TextIO) -> list[dict]:
    frames = run.frames()
    directory = output_dir(output)
    if directory is None:
        name = frame if frame is not None else next(iter(frames))
        f = pick(frames, name, run.kind)[name]
        if output is None:
            f.to_csv(stdout, index=False)
        else:
            with opened(output) as out:
                f.to_csv(out, index=False)
        return [written(output, name, f)]
    done = []
    for name, f in pick(frames, frame, run.kind).items():
        path = directory / f"run-{run.id}-{name}.csv"
        with opened(path) as out:
            f.to_csv(out, index=False)
        done.append(written(path, name, f))
    return done
