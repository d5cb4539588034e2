"""The `io` section: per series, IOPS against submitting CPUs with the
ideal line's efficiency, latency per I/O, CPU per I/O by kind, where the
I/Os completed, and the device's count beside the engine's."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.io import CPU_KINDS, IoPoint, IoSeries, IoSummary
from ..blockdev.target import SECTOR
from ..format import ns, pct, si, sig, size


def target_line(t: dict) -> str:
    """One line on what was measured: the device, how it was made, its queue."""
    what = t.get("path", "?")
    if t.get("made"):
        what += f" (a {t['made']} device made for the run" + (f", on {t['backing']}" if t.get("backing") else "") + ")"
    parts = [what, size(t.get("size_bytes"))]
    if t.get("compressor"):
        parts.append(f"compressor {t['compressor']}")
    if t.get("device") is None:
        parts.append(t.get("note", "no block device"))
    else:
        parts.append(
            "blk-mq" + (f", {t['hw_queues']} hardware queues" if t.get("hw_queues") else "")
            if t.get("blk_mq")
            else "bio-based (no request queue, no scheduler)"
        )
        if t.get("scheduler"):
            parts.append(f"scheduler {t['scheduler']}")
        if t.get("model") or t.get("driver"):
            parts.append(" ".join(x for x in (t.get("model"), t.get("driver")) if x))
    return " · ".join(parts)


def _cpu(p: IoPoint) -> str:
    c = p.cpu_us_per_io
    if not c:
        return "–"
    return " / ".join("n/a" if c[k] is None else f"{c[k]:.2f}" for k in CPU_KINDS)


def efficiency_cell(p: IoPoint) -> str:
    """vs ideal: ↑ on a point scale's rule finds superlinear."""
    return "–" if p.efficiency is None else pct(p.efficiency) + (" ↑" if p.superlinear else "")


def _completions(p: IoPoint) -> str:
    c = p.completions
    if c is None:
        return "–"
    where = ",".join(f"{cpu}:{n}" for cpu, n in sorted(c.completed.items()) if n)
    return f"{pct(c.local_share)} local · on {where or '–'}"


def _device(p: IoPoint) -> str:
    d = p.device
    if not d:
        return "–"
    flushes = d.get("flushes", 0)  # counted among the writes too, with no sectors (blockdev.target)
    writes = d["writes"] - flushes
    ios = d["reads"] + writes
    sectors = d["read_sectors"] + d["write_sectors"]
    if not ios:
        return "0 I/Os" + (f", {flushes:,} flushes" if flushes else "")
    split = f" ({d['reads']:,} reads)" if d["reads"] and writes else ""
    return f"{ios:,} I/Os{split}, {sectors * SECTOR / ios / 1024:.0f} KiB each" + (
        f", {flushes:,} flushes" if flushes else ""
    )


def _series_table(s: IoSeries) -> Table:
    t = Table(title=f"[bold]{s.label}[/]", title_justify="left")
    for name in (
        "CPUs",
        "IOPS",
        "per CPU",
        "vs ideal",
        "MB/s",
        "p50",
        "p99",
        "p99.9",
        "CPU µs/I/O usr/sys/irq/soft",
        "completions",
        "device counted",
    ):
        t.add_column(name, justify="left" if name in ("completions", "device counted") else "right")
    for p in s.points:
        lat = [ns(p.latency[q]) if q in p.latency else "–" for q in ("p50", "p99", "p99.9")]
        iops = f"{si(p.median_iops)} [{si(min(p.iops))}–{si(max(p.iops))}]" if p.timed else "–"
        t.add_row(
            str(p.workers),
            Text(iops),
            si(p.per_cpu),
            Text(efficiency_cell(p), style="bold yellow" if p.superlinear else ""),
            f"{p.bandwidth / 1e6:.1f}" if p.bandwidth is not None else "–",
            *lat,
            _cpu(p),
            Text(_completions(p)),
            Text(_device(p)),
        )
    return t


def _ring_line(rings: list[dict]) -> str:
    """How a series drove io_uring, over its points."""
    setup = sorted({f for r in rings for f in r["setup"]}) or ["no IORING_SETUP_ flags"]
    how = "submits all, waits in the same enter" if rings[0]["wait"] else "an enter per I/O, waits only when full"
    enters = [r["enters_per_io"] for r in rings]
    waits = [r["waits_per_io"] for r in rings]

    def span(v: list[float]) -> str:
        return f"{min(v):.2f}" if max(v) - min(v) < 0.005 else f"{min(v):.2f}–{max(v):.2f}"

    return f"ring {'|'.join(setup)}, {how}: {span(enters)} enters and {span(waits)} waits per I/O"


def _books_line(points: list[IoPoint]) -> str | None:
    """What the workers of a series counted themselves: the share of reads
    of a mixed pattern, and the syncs (a rate not held is a warning)."""
    books = [p.books for p in points if p.books]
    if not books:
        return None
    parts = []
    reads, writes = sum(b["reads"] for b in books), sum(b["writes"] for b in books)
    if reads and writes:
        parts.append(f"{pct(reads / (reads + writes))} of the I/Os read")
    syncs = sum(b["syncs"] for b in books)
    if syncs:
        mean = sum(b["sync_ns"] for b in books) / syncs
        parts.append(f"{syncs:,} syncs, one per {writes / syncs:.1f} writes, {ns(mean)} each (not in the latencies)")
    return "; ".join(parts) or None


def _aio_line(aios: list[dict]) -> str:
    sub = [a["submits_per_io"] for a in aios]
    get = [a["getevents_per_io"] for a in aios]
    return f"Linux AIO: {min(sub):.2f}–{max(sub):.2f} io_submit and {min(get):.2f}–{max(get):.2f} io_getevents per I/O"


def show(console: Console, run, s: IoSummary) -> None:
    console.print(Text("target: " + target_line(s.target)), highlight=False)
    if not s.series:
        console.print("no complete point in this run")
        return
    notes: dict[str, bool] = {}  # note -> a warning (yellow), in order, each once
    if s.irq_unavailable:
        notes[f"CPU µs per I/O, irq: {s.irq_unavailable}"] = True
    for series in s.series:
        console.print(_series_table(series))
        rings = [p.uring for p in series.points if p.uring]
        if rings:
            notes[f"{series.label}: {_ring_line(rings)}"] = False
        if aios := [p.aio for p in series.points if p.aio]:
            notes[f"{series.label}: {_aio_line(aios)}"] = False
        if line := _books_line(series.points):
            notes[f"{series.label}: {line}"] = False
        for p in series.points:
            for w in p.warnings:
                notes[f"{series.label} ×{p.workers}: {w}"] = True
            if p.completions is None and p.completions_unavailable:
                notes[f"completions not followed: {p.completions_unavailable}"] = True
            if p.explained:
                top = sorted(p.explained.causes, key=lambda c: -c.ns_per_op)[:4]
                causes = ", ".join(f"{c.label} {ns(c.ns_per_op)}" for c in top)
                notes[f"{series.label} ×{p.workers} per I/O: {causes}"] = False
    res = [p.cpu_resolution_us for se in s.series for p in se.points if p.cpu_resolution_us]
    console.print(
        Text(
            "IOPS: median of the repetitions [min–max]; vs ideal: IOPS per CPU over the fewest CPUs' (↑: "
            "superlinear, more than noise). CPU µs per I/O: every CPU's time in /proc/stat over the window, "
            "whoever ran it (the kernel accounts it by tick sampling unless it was built with IRQ time accounting"
            + (f": ±{sig(max(res), 2)} µs per I/O here" if res else "")
            + (", the irq column aside" if s.irq_unavailable else "")
            + "). completions: the share completed on the CPU that submitted them, and CPU:count where they "
            "completed, from one more repetition with each I/O followed by BPF (kept out of the others: the "
            "tracing slows each I/O). device counted: the kernel's /sys/block stat over the whole invocation "
            "(warm-up included).",
            style="dim",
        )
    )
    for n, warning in notes.items():
        console.print(Text(n), style="yellow" if warning else None)
