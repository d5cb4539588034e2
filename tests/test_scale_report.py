"""The `scale` table, terminal and HTML alike: each row carries its own
interval, confidence and repetitions; an efficiency whose interval lies
wholly above 100 % is flagged with its likely causes; the HTML report shows
the terminal's very cells and draws total throughput and efficiency from
zero; the USL line (shared with `appscale`) has standard errors and calls
its peak extrapolated only when it lies outside the counts measured; each
row says how many sockets and SMT pairs its workers span."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import numpy as np
import pytest
from rich.console import Console

from oslens.analysis.appscale import summarize as app_summarize
from oslens.analysis.scale import SUPERLINEAR_NOTE, confidence_note, summarize
from oslens.analysis.scaling import usl
from oslens.report import scale as scale_report
from oslens.report.appscale import fit_lines
from oslens.report.html import scale as html_scale
from oslens.report.html.page import Page, Table
from test_appscale import synthetic as app_records

from conftest import oslens


def cpu(c: int, package: int = 0, core: int | None = None, smt: int = 0) -> dict:
    return {"cpu": c, "package": package, "die": 0, "core": c if core is None else core, "node": 0, "smt": smt}


def point(n: int, rates: list[float], late: int = 0, placement: list[dict] | None = None) -> list[dict]:
    """The records of one point of dup:default: every worker of repetition
    r runs at rates[r]; `late` more repetitions the sampler ran late in."""
    recs = [
        {"type": "context", "competition": None},
        {
            "type": "header",
            "probe": {"name": "dup"},
            "variant": "default",
            "mode": "process",
            "placement": {"policy": "compact", "workers": placement or [cpu(c) for c in range(n)]},
            "fixed": "time",
            "workers": n,
        },
    ]
    for rep, rate in enumerate(list(rates) + [rates[0]] * late):
        recs += [
            {
                "type": "worker",
                "rep": rep,
                "worker": w,
                "cpu": w,
                "cpu_seen": w,
                "ops": int(rate),
                "seconds": 1.0,
                "ops_per_sec": rate,
                "rusage": {"user_s": 0.2, "sys_s": 0.8, "nvcsw": 0, "nivcsw": 0},
            }
            for w in range(n)
        ]
        recs.append({"type": "rep", "rep": rep, "status": "ok" if rep < len(rates) else "late"})
    return recs + [{"type": "end", "status": "ok"}]


def around(x: float, reps: int = 6, spread: float = 0.002) -> list[float]:
    """`reps` values within ±spread of x (so their interval is that narrow)."""
    return list(x * (1 + np.linspace(-spread, spread, reps)))


def series_of(*points: list[dict]):
    (s,) = summarize([r for p in points for r in p])
    return s


def terminal(s) -> str:
    out = io.StringIO()
    scale_report.render(Console(file=out, width=250, color_system=None), [s], {})
    return out.getvalue()


# --- item 6: confidence per row -------------------------------------------------


def test_a_point_short_of_repetitions_is_labelled_alone():
    # 6 repetitions everywhere, but one left out (late) at 2 workers: that
    # row alone shows 5 repetitions and less than 95 %, the others 6 and 97 %.
    s = series_of(point(1, around(1.5e6)), point(2, around(1.4e6)[:5], late=1), point(4, around(1.3e6)))
    cols, rows, _ = scale_report.table_cells(s)
    assert not any("%" in c for c in cols), "no confidence level in a header: it is per row"
    per_worker = {r[0]: r[cols.index("per worker ops/s")] for r in rows}
    assert "6 reps" in per_worker["1"] and "6 reps" in per_worker["4"]
    assert "5 reps" in per_worker["2"]
    cov = {p.workers: p.per_worker.coverage for p in s.points}
    assert f"{cov[1]:.0%}" in per_worker["1"] and f"{cov[2]:.0%}" in per_worker["2"] and cov[2] < 0.95 <= cov[1]
    note = confidence_note(s)
    assert note is not None and "2 workers" in note and "1 worker" not in note and "4 workers" not in note
    text = terminal(s)
    assert "CI]" not in text and "repetition(s) per point" not in text
    assert note in " ".join(text.split())


def test_no_confidence_note_when_every_row_reaches_it():
    s = series_of(point(1, around(1.5e6)), point(2, around(1.4e6)))
    assert confidence_note(s) is None


# --- item 7: superlinear efficiency ---------------------------------------------


def test_efficiency_wholly_above_100_percent_is_flagged_with_its_causes():
    s = series_of(point(1, around(1.0e6)), point(2, around(1.1e6)))
    base, two = s.points
    assert two.efficiency_ci.low > 1.0 and two.superlinear and not base.superlinear
    assert SUPERLINEAR_NOTE in two.warnings
    for cause in ("frequency", "idle", "SMT", "cache", "baseline", "interrupts"):
        assert cause in SUPERLINEAR_NOTE
    cols, rows, notes = scale_report.table_cells(s)
    eff = cols.index("efficiency vs 1")
    assert "↑" in rows[1][eff] and "↑" not in rows[0][eff]
    assert rows[1][-1] == str(notes.index(SUPERLINEAR_NOTE) + 1)
    assert "superlinear" in terminal(s)


def test_efficiency_above_100_percent_within_its_interval_says_nothing():
    # The median is 2 % above, but the repetitions spread ±5 %: noise.
    s = series_of(point(1, around(1.0e6, spread=0.05)), point(2, around(1.02e6, spread=0.05)))
    two = s.points[1]
    assert two.efficiency > 1.0 and two.efficiency_ci.low <= 1.0 <= two.efficiency_ci.high
    assert not two.superlinear and SUPERLINEAR_NOTE not in two.warnings
    cols, rows, _ = scale_report.table_cells(s)
    assert "↑" not in rows[1][cols.index("efficiency vs 1")]
    assert "superlinear" not in terminal(s)


def test_one_repetition_gives_no_interval_and_no_flag():
    s = series_of(point(1, [1.0e6]), point(2, [1.2e6]))
    assert not s.points[1].superlinear
    cols, rows, _ = scale_report.table_cells(s)
    assert "no interval" in rows[1][cols.index("per worker ops/s")]


def test_an_efficiency_interval_whose_confidence_would_be_zero_is_not_printed():
    # with two repetitions each median's interval has a low confidence; the ratio's bound
    # (their sum less 100 %) fell to 0 and printed '[99%–101%, ≥0%]'
    s = series_of(point(1, [1.0e6, 1.01e6]), point(2, [1.0e6, 1.01e6]))
    iv = s.points[1].efficiency_ci
    assert iv is not None and iv.n >= 2 and iv.coverage <= 0
    cols, rows, _ = scale_report.table_cells(s)
    cell = rows[1][cols.index("efficiency vs 1")]
    assert "≥0%" not in cell and "no interval: too few repetitions" in cell


# --- item 16: the HTML table is the terminal's ------------------------------------


def run_data(records: list[dict], n: int = 1):
    return SimpleNamespace(short=f"run {n}", records=records, run=SimpleNamespace(id=n, params={}))


def test_html_table_has_the_terminal_cells_and_no_raw_values():
    recs = [r for p in (point(1, around(1.533e6)), point(2, around(1.4e6))) for r in p]
    (section,) = html_scale.sections([run_data(recs)])
    tables = [b for b in section.blocks if isinstance(b, Table)]
    (s,) = summarize(recs)
    cols, rows, _ = scale_report.table_cells(s)
    (t,) = tables
    assert t.columns == cols and [[str(c) for c in r] for r in t.rows] == rows
    assert {"imbalance", "per worker ops/s", "efficiency vs 1"} <= set(t.columns)
    page = "".join(Page._block(b) for b in section.blocks if not hasattr(b, "chart"))
    assert "e+0" not in page and "False" not in page and "True" not in page
    assert "[" in page and "reps" in page  # the intervals are there


def test_html_charts_total_and_efficiency_from_zero():
    recs = [r for p in (point(1, around(1.0e6)), point(2, around(0.9e6))) for r in p]
    (section,) = html_scale.sections([run_data(recs)])
    figures = {b.id: b for b in section.blocks if hasattr(b, "chart")}
    assert {"scale-per-worker", "scale-total", "scale-efficiency"} <= set(figures)
    for f in figures.values():
        spec = json.dumps(f.spec())
        assert '"zero": false' not in spec
        assert '"zero": true' in spec


# --- item 17: one USL line for scale and appscale ---------------------------------


def usl_series(sigma: float, kappa: float, counts=(1, 2, 4, 8)):
    pts = [point(n, around(float(usl(n, 1e6, sigma, kappa)) / n, reps=3, spread=0.01)) for n in counts]
    return series_of(*pts)


def test_scale_usl_line_has_standard_errors_and_a_measured_peak_is_not_extrapolated():
    s = usl_series(0.05, 0.02)  # peak near sqrt(0.95 / 0.02) ≈ 7 workers, within 1–8
    assert s.usl is not None and 1 <= s.usl.peak_n <= 8
    line = scale_report.usl_text(s)
    assert line.count("±") >= 2 and "extrapolated" not in line and "within" in line
    assert line in " ".join(terminal(s).split())


def test_scale_usl_peak_beyond_the_counts_is_extrapolated():
    s = usl_series(0.05, 0.0005)  # peak near 44 workers
    assert s.usl.peak_n > 8
    assert "extrapolated" in scale_report.usl_text(s)


def test_appscale_usl_line_is_the_same_rendering():
    counts = [1, 2, 4, 8]
    summary = app_summarize(app_records(0.05, 0.02, counts), available_cpus=8)
    u = summary["fits"]["usl"]
    assert u["fitted"] and 1 <= u["peak_n"] <= 8 and not u["peak_is_extrapolated"]
    (line,) = [x for x in fit_lines(summary["fits"], counts) if x.startswith("USL:")]
    assert line.count("±") >= 2 and "extrapolated" not in line
    s = usl_series(0.05, 0.02)
    # Same wording, the unit aside.
    assert line.split("=")[0] == scale_report.usl_text(s).split("=")[0] == "USL: contention σ "
    (section,) = html_scale.sections(
        [run_data([r for n in counts for r in point(n, around(float(usl(n, 1e6, 0.05, 0.02)) / n, reps=3))])]
    )
    notes = [b.text for b in section.blocks if type(b).__name__ == "Note"]
    assert any("USL: contention σ" in t and "±" in t for t in notes)


# --- item 12: the sockets and SMT pairs a point spans -----------------------------


@pytest.mark.parametrize(
    "placement, expected",
    [
        ([cpu(0)], "1 socket, no SMT"),
        ([cpu(0, 0), cpu(1, 1)], "2 sockets, no SMT"),
        ([cpu(0, 0, 0), cpu(1, 0, 0, smt=1), cpu(2, 1, 0), cpu(3, 1, 0, smt=1)], "2 sockets, 2 SMT pairs"),
        ([{"cpu": 0, "smt": 0}], "–"),  # a header without topology
    ],
)
def test_span_column(placement, expected):
    s = series_of(point(len(placement), around(1e6), placement=placement))
    cols, rows, _ = scale_report.table_cells(s)
    assert rows[0][cols.index("CPUs span")] == expected


def test_a_real_short_scale_run(tmp_path):
    p = oslens(
        "scale", "--probe", "dup", "--workers", "1", "--duration", "0.1", "--reps", "2", "--warmup", "0.02",
        db=tmp_path / "s.db",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "CPUs span" in text and "1 socket, no SMT" in text  # one worker: one CPU
    assert "2 reps" in text and "CI]" not in text


def test_a_stored_scale_run_is_shown_and_reported_without_the_engine(tmp_path):
    """Showing a stored run reads the store only: the probes' words are kept
    with the run (the table once asked the engine for them), so a store
    copied to a machine without the engine, or read after the engine is
    gone, is shown whole."""
    import os
    import shutil
    import subprocess
    import sys

    import oslens as package

    db = tmp_path / "s.db"
    made = oslens("-q", "scale", "--probe", "dup", "--workers", "1", "--duration", "0.05", "--reps", "1", db=db)
    assert made.returncode == 0, made.stderr
    # the package without any engine: no _bin, no source tree beside it, no OSLENS_ENGINE
    copy = tmp_path / "no-engine"
    shutil.copytree(os.path.dirname(package.__file__), copy / "oslens", ignore=shutil.ignore_patterns("_bin"))
    env = {k: v for k, v in os.environ.items() if k != "OSLENS_ENGINE"} | {
        "PYTHONPATH": str(copy),
        "OSLENS_DB": str(db),
    }
    run = [sys.executable, "-m", "oslens"]
    assert "not found" in subprocess.run([*run, "workloads"], capture_output=True, text=True, env=env).stderr
    shown = subprocess.run([*run, "show", "last"], capture_output=True, text=True, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "dup:default" in shown.stdout and "OSMark dupbench" in shown.stdout  # the probe's words, from the store
    page = tmp_path / "r.html"
    reported = subprocess.run([*run, "report", "last", "-o", str(page)], capture_output=True, text=True, env=env)
    assert reported.returncode == 0, reported.stderr
    assert page.stat().st_size > 0


# ------------------------------------------- an explained point's own lines


def test_an_operations_latency_gives_only_the_percentiles_its_timed_operations_tell():
    from oslens.report.scale import _op_latency

    few = {"p50": 170.0, "p99": 240.0, "p99.9": None, "timed": 500, "every": 45}
    assert _op_latency(few) == "op p50 170 ns p99 240 ns (500 timed, 1 in 45)"
    apart = {"p50": 170.0, "p99": 240.0, "p99.9": 380.0, "timed": 373_712, "every": (45, 47)}
    assert _op_latency(apart).endswith("(373,712 timed, 1 in 45 to 47)")
    every_one = {"p50": 90_000.0, "p99": None, "p99.9": None, "timed": 40, "every": 1}
    assert _op_latency(every_one) == "op p50 90 µs (40 timed)"


def test_a_twin_that_cost_more_than_five_percent_says_its_causes_understate_the_contention():
    from types import SimpleNamespace

    from oslens.analysis.explain import Cause
    from oslens.report.scale import OBSERVER_COST, _observer_effect

    lock = Cause("lock:mmap_lock:rwsem:W", "mmap_lock", "lock", 120.0, 0.5)

    def point(cost, low, causes=(lock,)):
        return SimpleNamespace(cost=cost, cost_low=low, causes=list(causes))

    assert _observer_effect(point(OBSERVER_COST, 0.01)) is None
    assert _observer_effect(point(None, None)) is None
    surely = _observer_effect(point(0.12, 0.08))
    assert "slowed this point by 12%" in surely and " understate" in surely and "120 ns/op" in surely
    assert "may understate" in _observer_effect(point(0.07, 0.02))
    assert "lock wait" not in _observer_effect(point(0.12, 0.08, causes=()))
