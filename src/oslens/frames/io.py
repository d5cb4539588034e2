"""The frames of an `io` run.

`points` (main): one row per series (engine and queue depth), submitting
CPU count and repetition: IOPS, bandwidth. `summary`: one row per series
and CPU count: median IOPS, per CPU, efficiency, latency percentiles, CPU
µs per I/O by kind, completions' local share. `completions`: one row per
series, CPU count and CPU: I/Os submitted and completed there."""

from __future__ import annotations

from ..analysis.io import CPU_KINDS, QUANTILES, analyze
from . import describe, table

_KEY = {
    "series": (
        "str",
        "I/O engine and queue depth, and the pattern, size and rate where not the default "
        "(psync, uring qd16, libaio qd4 randrw 70/30, …)",
    ),
    "workers": ("int64", "submitting CPUs, one pinned worker each"),
}
COLUMNS = {
    "points": {
        **_KEY,
        "rep": ("int64", "repetition"),
        "iops": ("float64", "I/Os per second, all workers"),
        "bytes_per_s": ("float64", "bandwidth, bytes per second"),
    },
    "summary": {
        **_KEY,
        "reps": ("int64", "complete repetitions"),
        "iops": ("float64", "median IOPS over the repetitions"),
        "iops_per_cpu": ("float64", "median IOPS per submitting CPU"),
        "efficiency": ("float64", "IOPS per CPU over the fewest CPUs' (1: the ideal line)"),
        "superlinear": ("bool", "the efficiency's interval lies wholly above 1 (scale's rule): more than noise"),
        **{f"{q}_ns": ("float64", f"{q[1:]}th percentile of an I/O's latency, ns") for q in QUANTILES},
        **{f"cpu_{k}_us_per_io": ("float64", f"{k} time of every CPU per I/O, µs") for k in CPU_KINDS},
        "cpu_irq_us_per_io": (
            "float64",
            "irq time of every CPU per I/O, µs (missing on a kernel that does not "
            "account it: show's irq_unavailable says why)",
        ),
        "local_share": ("float64", "share of the I/Os completed on the CPU that submitted them"),
        "bs": ("int64", "bytes per I/O"),
        "rate_per_cpu": ("int64", "I/Os per second asked of each worker (0: as fast as it could)"),
        "read_share": ("float64", "share of the I/Os that read, as the workers counted them (warm-up included)"),
        "syncs": ("Int64", "fsync or fdatasync calls of the workers (warm-up included)"),
        "sync_mean_ns": ("float64", "the mean time of one, ns"),
        "uring_enters_per_io": ("float64", "io_uring: io_uring_enter calls per I/O (warm-up included)"),
        "uring_waits_per_io": ("float64", "io_uring: enters that waited for a completion, per I/O"),
        "aio_submits_per_io": ("float64", "libaio: io_submit calls per I/O (warm-up included)"),
        "aio_getevents_per_io": ("float64", "libaio: io_getevents calls per I/O"),
    },
    "completions": {
        **_KEY,
        "cpu": ("int64", "CPU"),
        "submitted": ("int64", "I/Os that entered the block layer there"),
        "completed": ("int64", "I/Os completed there"),
    },
}
__doc__ = (__doc__ or "") + describe(COLUMNS)


def _books(books: dict | None) -> dict:
    b = books or {}
    return {"read_share": b.get("read_share"), "syncs": b.get("syncs"),
            "sync_mean_ns": b.get("sync_mean_ns")}  # fmt: skip


def frames(run, records: list[dict]) -> dict:
    s = analyze(run, records)
    points, summary, comps = [], [], []
    for se in s.series:
        for p in se.points:
            key = {"series": se.label, "workers": p.workers}
            points += [key | {"rep": i, "iops": x, "bytes_per_s": x * p.bs} for i, x in enumerate(p.iops)]
            cpu = p.cpu_us_per_io or {}
            summary.append(
                key
                | {"reps": p.reps, "iops": p.median_iops, "iops_per_cpu": p.per_cpu, "efficiency": p.efficiency}
                | {"superlinear": p.superlinear}
                | {f"{q}_ns": p.latency.get(q) for q in QUANTILES}
                | {f"cpu_{k}_us_per_io": cpu.get(k) for k in CPU_KINDS}
                | {"local_share": p.completions.local_share if p.completions else None}
                | {"bs": p.bs, "rate_per_cpu": p.rate} | _books(p.books)
                | {f"uring_{k}": (p.uring or {}).get(k) for k in ("enters_per_io", "waits_per_io")}
                | {f"aio_{k}": (p.aio or {}).get(k) for k in ("submits_per_io", "getevents_per_io")}
            )  # fmt: skip
            if p.completions:
                c = p.completions
                comps += [
                    key | {"cpu": cpu_, "submitted": c.submitted.get(cpu_, 0), "completed": c.completed.get(cpu_, 0)}
                    for cpu_ in sorted(set(c.submitted) | set(c.completed))
                ]
    return {
        "points": table(run.id, points, COLUMNS["points"]),
        "summary": table(run.id, summary, COLUMNS["summary"]),
        "completions": table(run.id, comps, COLUMNS["completions"]),
    }
