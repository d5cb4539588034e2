"""OSMark re-run: each primitive's verdict on this kernel, next to what the
paper found on a 32-core AMD machine with Linux 2.6.26 (studies/osmark.csv)."""

from __future__ import annotations

from ..studies import findings
from .explain import KNEE_EFFICIENCY

# A lock is worth naming in a verdict when it costs this share of the time per op.
LOCK_WORTH = 0.01


def verdicts(series: list, kernel: str) -> list[dict]:
    """One row per probe of the paper: what it found, what this run found,
    and a one-line verdict."""
    by_probe = {(s.probe, s.variant): s for s in series if s.points}
    rows = []
    for f in findings("osmark"):
        s = by_probe.get((f["probe"], f["variant"]))
        paper = "scaled" if f["paper_scaled"] == "yes" else f"did not scale; the authors blamed {f['paper_cause']}"
        row = {"probe": f"{f['probe']}:{f['variant']}", "paper_benchmark": f["paper_benchmark"], "paper": paper}
        if s is None:
            row.update(scaled=None, today="not measured", verdict=f"{f['probe']}: not measured in this run")
            rows.append(row)
            continue
        last = s.points[-1]
        eff = last.efficiency if last.efficiency is not None else 1.0
        scaled = eff >= KNEE_EFFICIENCY
        today = f"efficiency {eff:.0%} at {last.workers} workers"
        if s.knee and s.knee.ranked:
            label, _, share = s.knee.ranked[0]
            k = s.knee
            cause = (
                f"the top cause of the drop from {k.from_workers} to {k.to_workers} workers is {label} ({share:.0%})"
            )
        elif s.explained and s.explained[-1]:
            e = s.explained[-1]
            locks = [c for c in e.causes if c.group == "lock" and c.ns_per_op >= LOCK_WORTH * e.ns_per_op]
            cause = (
                f"the costliest lock at {last.workers} workers is {locks[0].label} "
                f"({locks[0].ns_per_op / e.ns_per_op:.0%} of the time per op)"
                if locks
                else f"no lock costs {LOCK_WORTH:.0%} of the time per op up to {last.workers} workers"
            )
        elif s.explanation:
            cause = s.explanation
        else:
            cause = "not explained (run with --explain)"
        row.update(scaled=scaled, today=f"{'scales' if scaled else 'does not scale'}: {today}; {cause}")
        then = "found it scaled" if f["paper_scaled"] == "yes" else f"blamed {f['paper_cause']}"
        row["verdict"] = f"{f['probe']}: the paper {then}; on {kernel} it {row['today']}"
        rows.append(row)
    return rows
