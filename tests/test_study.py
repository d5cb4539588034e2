"""`study osmark`: a verdict is a finding only where the run's own evidence
holds it up (its workers ran together, with their CPUs to themselves, and
the efficiency's interval on one side of the line), and carries its
confidence; the HTML report has the paper beside this kernel."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from oslens.analysis.explain import Cause, ExplainedStats, Knee
from oslens.analysis.osmark import CANNOT_TELL, DOES_NOT_SCALE, SCALES, WAITING, verdicts
from oslens.analysis.scale import PointStats, Series
from oslens.analysis.stats import Interval

from conftest import TWO, one_line_error, oslens

REPO = Path(__file__).resolve().parents[1]


def point(workers: int, eff: float, low: float, high: float, skew: float = 0.0, reps: int = 3) -> PointStats:
    rate = Interval(1e6 * eff, 1e6 * low, 1e6 * high, reps, 0.75)
    ci = None if workers == 1 else Interval(eff, low, high, reps, 0.5)
    return PointStats(workers, reps, rate, rate, 1.0, 0.5, 0.0, eff, ci, start_skew=skew)


def explained(workers: int, ns_per_op: float, runq: float) -> ExplainedStats:
    causes = [Cause("runq", WAITING, "runq", runq, 0.1), Cause("user", "user", "user", ns_per_op - runq, 1.0)]
    return ExplainedStats(workers, 1, ns_per_op, causes, 0.0, 0.0, 0.0, {}, None, None, [])


def series(probe: str, variant: str, points: list[PointStats], knee: Knee | None = None) -> Series:
    return Series(probe, variant, "process", "compact", "ops", points, knee=knee)


def row(rows: list[dict], probe: str) -> dict:
    return next(r for r in rows if r["probe"] == probe)


def test_workers_that_did_not_run_together_give_no_finding():
    # Issue 28, item 6: "dup scales: efficiency 97 %" beside "workers started
    # up to 448 % of the run apart" — one after another, not together.
    s = series("dup", "default", [point(1, 1.0, 1.0, 1.0), point(8, 0.97, 0.95, 0.99, skew=4.48)])
    r = row(verdicts([s], "6.x"), "dup:default")
    assert r["finding"] == CANNOT_TELL and r["scaled"] is None and r["confidence"] is None
    assert r["cannot_tell"] == ["the 8 workers did not run together (started up to 448% of the run apart)"]
    assert r["today"].startswith("cannot tell here: ")
    # The same point with its workers together is a finding, with its confidence.
    s.points[-1].start_skew = 0.001
    r = row(verdicts([s], "6.x"), "dup:default")
    assert (r["finding"], r["scaled"], r["confidence"]) == (SCALES, True, 0.5)
    assert "(95%–99%, 50% confidence)" in r["today"]


def test_a_knee_of_waiting_for_a_cpu_gives_no_finding_and_a_share_over_all_of_the_rise_is_explained():
    # "mmap does not scale … top cause waiting for a CPU (107 %)" when another
    # program had the CPUs. The share is of the rise in time per op: 1.07 µs
    # of a 1 µs rise, because user space fell 0.1 µs meanwhile (0.03 µs
    # unexplained): 1.07 − 0.1 + 0.03 = 1.
    knee = Knee(1, 2, 1.0, 0.5, 1000.0, [(WAITING, 1070.0, 1.07)], 30.0, "")
    s = series("mmap", "shared", [point(1, 1.0, 1.0, 1.0), point(2, 0.5, 0.45, 0.55)], knee)
    s.explained = [explained(1, 1000.0, runq=0.0), explained(2, 2000.0, runq=1070.0)]
    r = row(verdicts([s], "6.x"), "mmap:shared")
    assert r["finding"] == CANNOT_TELL and r["scaled"] is None
    assert r["cannot_tell"] == [
        f"at 2 workers, 54% of the time per op was {WAITING}",
        f"107% of the knee's rise was {WAITING}: another task had the workers' CPUs, "
        "a shared machine rather than the primitive",
    ]
    assert f"is {WAITING} (107% of the rise: other causes fell 100 ns)" in r["today"]
    # A lock's knee on CPUs of their own is a finding.
    s.knee = Knee(1, 2, 1.0, 0.5, 1000.0, [("i_mmap_rwsem (rwsem)", 900.0, 0.9)], 100.0, "")
    s.explained = [explained(1, 1000.0, runq=0.0), explained(2, 2000.0, runq=10.0)]
    r = row(verdicts([s], "6.x"), "mmap:shared")
    assert (r["finding"], r["scaled"], r["cannot_tell"]) == (DOES_NOT_SCALE, False, [])
    assert "is i_mmap_rwsem (rwsem) (90% of the rise)" in r["today"]
    # ... unless the points themselves waited for their CPUs (the baseline
    # too: the knee's rise is then no measure of the primitive).
    s.explained = [explained(1, 1000.0, runq=840.0), explained(2, 2000.0, runq=200.0)]
    r = row(verdicts([s], "6.x"), "mmap:shared")
    assert r["cannot_tell"] == [f"at 1 worker, 84% of the time per op was {WAITING}"]  # 2 workers: 10 %, tolerated
    # The baseline counts without a knee too: every efficiency is over its rate.
    s.knee = None
    assert row(verdicts([s], "6.x"), "mmap:shared")["cannot_tell"] == r["cannot_tell"]


def test_an_interval_across_the_line_or_none_at_all_cannot_tell():
    across = series("sem", "default", [point(1, 1.0, 1.0, 1.0), point(4, 0.92, 0.8, 1.05)])
    once = series("socket", "inet", [point(1, 1.0, 1.0, 1.0, reps=1), point(4, 0.5, 0.5, 0.5, reps=1)])
    rows = verdicts([across, once], "6.x")
    assert row(rows, "sem:default")["cannot_tell"] == ["the efficiency's interval 80%–105% spans the 90% line"]
    assert row(rows, "socket:inet")["cannot_tell"] == [
        "one repetition: no interval for the efficiency (use --reps 3 or more)"
    ]


def test_study_help_points_to_files_in_the_clone(tmp_path):
    # It pointed to shared/STUDIES.md, which is not in a clone.
    text = " ".join(oslens("study", "--help", db=tmp_path / "s.db").stdout.split())
    named = re.findall(r"[\w./-]+\.(?:md|csv)|src/[\w./-]+/", text)
    assert named and all((REPO / n).exists() for n in named), named


def test_study_report_has_the_paper_beside_this_kernel(tmp_path, no_leaks):
    db = tmp_path / "s.db"
    args = ["--workers", f"1,{TWO}", "--ops", "50", "--reps", "1", "--warmup", "0", "--no-explain"]
    p = oslens("study", "osmark", *args, "--json", db=db)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["study"]
    # One repetition gives no interval: no finding, and each row says so.
    assert {r["finding"] for r in rows} == {CANNOT_TELL} and all(r["confidence"] is None for r in rows)
    assert all(any(d.startswith("one repetition") for d in r["cannot_tell"]) for r in rows)
    page = tmp_path / "r.html"
    assert oslens("report", "last", "-o", str(page), db=db).returncode == 0
    html = page.read_text()
    assert "OSMark: the paper and this kernel" in html and "the paper (32-core AMD, Linux 2.6.26)" in html
    assert all(r["paper"].split(";")[0] in html for r in rows)


@pytest.mark.parametrize("value, says", [("0", "is not a number of seconds"), ("nan", "not a finite number")])
def test_an_explain_duration_that_is_no_duration_is_refused_before_anything_runs(tmp_path, value, says):
    db = tmp_path / "s.db"
    p = oslens("study", "osmark", "--explain-duration", value, "--workers", "1", "--ops", "10", db=db)
    assert p.returncode == 2 and says in one_line_error(p.stderr)
    assert not db.exists()


# ---- study codesign: Table 2.4's calls, each timed in the kernel here


def test_codesign_gives_every_call_of_the_table_a_cost_and_every_finding_a_verdict(tmp_path, no_leaks):
    from oslens.analysis.codesign import calls
    from oslens.studies import load
    from oslens.studies.verdict import AGREES, DIFFERS

    db = tmp_path / "c.db"
    p = oslens("study", "codesign", "--reps", "2", "--duration", "0.05", "--json", db=db)
    assert p.returncode == 0, p.stderr
    rows = {r["id"]: r for r in json.loads(p.stdout)["study"]}
    assert set(rows) == {f.id for f in load("nellans-codesign")}  # a verdict for every finding shipped
    table = [rows[i] for i in calls()]
    if all(r["here"] == "not measured" for r in table):
        pytest.skip(table[0]["reason"])  # no BPF here: each row says why
    # every call of the table measured, or said why not; a measured one in µs, with its cycles
    for r in table:
        assert r["verdict"] in (AGREES, DIFFERS, CANNOT_TELL) and r["reason"]
        assert r["here"] == "not measured" or ("µs" in r["here"] and "ns" in r["here"]), r
    assert sum(r["here"] != "not measured" for r in table) >= len(table) - 2, [r for r in table if "not" in r["here"]]
    # getpid is under its tracer's 1 µs resolution in the paper, and well under it here
    assert rows["syscall_getpid"]["verdict"] == AGREES, rows["syscall_getpid"]
    # a context switch in cycles, from pingpong on one CPU; the kernel's tick from its build
    assert "cycles" in rows["cs_cycles_p4"]["here"] or rows["cs_cycles_p4"]["verdict"] == CANNOT_TELL
    ticks = ("not measured", "1 ms", "2 ms", "3.33 ms", "4 ms", "10 ms")  # CONFIG_HZ 1000, 500, 300, 250, 100
    assert rows["timer_interval_default"]["here"].startswith(ticks)
    shown = oslens("show", "last", db=db).stdout
    assert "codesign: the paper and this kernel" in shown and "mitigations" in shown
    page = tmp_path / "c.html"
    assert oslens("report", "last", "-o", str(page), db=db).returncode == 0
    assert "the paper and Linux" in page.read_text()


def test_study_alone_lists_every_study_with_its_paper(tmp_path):
    from oslens import kinds

    p = oslens("study", db=tmp_path / "s.db")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    studies = [s for k in kinds.KINDS.values() for s in k.studies]
    assert len(lines) == len(studies)
    for s in studies:
        (line,) = [ln for ln in lines if ln.startswith(f"oslens study {s.name} ")]
        assert s.paper and s.paper in line


# ---- study variability: the catalogue mixed on every CPU, the paper's tables


def test_variability_gives_the_native_tables_and_says_why_for_the_rest(tmp_path, no_leaks):
    from oslens.studies import load
    from oslens.studies.verdict import AGREES, DIFFERS

    db = tmp_path / "v.db"
    p = oslens("study", "variability", "--reps", "2", "--duration", "0.1", "--json", db=db)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    rows = {r["id"]: r for r in doc["study"]}
    assert set(rows) == {f.id for f in load("kocoloski-variability")}
    native = [r for i, r in rows.items() if i.endswith("_native") and i.startswith(("median_", "p99_"))]
    assert len(native) == 12 and all(r["verdict"] in (AGREES, DIFFERS, CANNOT_TELL) for r in native)
    # the bucket shares are the stored tables', cumulative, and sum with the rest to 100 %; a
    # percentile the runs are too short to tell (p99 needs 1,000 values an operation) says so
    for q in ("p50", "p99"):
        table = doc["variability"]["alone"][q]
        if not table["operations"]:
            name = "median" if q == "p50" else "p99"
            told = [r for i, r in rows.items() if i.startswith(f"{name}_") and i.endswith("_native")]
            assert all(r["verdict"] == CANNOT_TELL and f"{q} could be told" in r["reason"] for r in told)
            continue
        shares = [table[b] for b in ("≤1µs", "≤10µs", "≤100µs", "≤1ms", "≤10ms")]
        assert shares == sorted(shares) and table["≤10ms"] + table[">10ms"] == pytest.approx(1)
        name = "median" if q == "p50" else "p99"
        here = float(rows[f"{name}_lt10us_native"]["here"].split("%")[0])
        assert here == pytest.approx(100 * table["≤10µs"], abs=0.5)
    kvm = [r for i, r in rows.items() if i.endswith("_kvm")]
    assert all(r["verdict"] == CANNOT_TELL and "kvm column" in r["reason"] for r in kvm)
    assert rows["tail_at_scale"]["verdict"] == AGREES
    assert "variability: the paper and this kernel" in oslens("show", "last", db=db).stdout


def test_compare_of_two_study_runs_sets_their_findings_side_by_side(tmp_path):
    """Two re-runs of one study (two kernels, two machines: here two runs)
    compared finding by finding: each finding once, each run's figure and
    verdict from its own summary, the changed ones first; a run of the kind
    that re-ran no study sets no finding beside it."""
    from oslens.studies import load

    db = tmp_path / "c.db"
    for _ in range(2):
        p = oslens("study", "variability", "--reps", "2", "--duration", "0.05", "-q", db=db)
        assert p.returncode == 0, p.stderr
    for _ in range(2):
        p = oslens("latency", "--probe", "getppid", "--duration", "0.05", "--reps", "2", "-q", db=db)
        assert p.returncode == 0, p.stderr
    doc = json.loads(oslens("compare", "1", "2", "--json", db=db).stdout)
    found = doc["findings"]
    assert sorted(f["id"] for f in found) == sorted(f.id for f in load("kocoloski-variability"))
    a, b = ({r["id"]: r for r in json.loads(oslens("show", n, "--json", db=db).stdout)["study"]} for n in "12")
    for f in found:
        assert f["changed"] == (f["a_verdict"] != f["b_verdict"])
        assert (f["a_verdict"], f["a_here"]) == (a[f["id"]]["verdict"], a[f["id"]]["here"])
        assert (f["b_verdict"], f["b_here"]) == (b[f["id"]]["verdict"], b[f["id"]]["here"])
    flags = [f["changed"] for f in found]
    assert flags == sorted(flags, reverse=True)  # the changed ones first
    assert "finding by finding" in oslens("compare", "1", "2", db=db).stdout
    assert json.loads(oslens("compare", "3", "4", "--json", db=db).stdout)["findings"] == []  # no study
    # a study run and a plain one share no finding, and here no metric either: nothing to set side by side
    p = oslens("compare", "1", "3", db=db)
    assert p.returncode == 2 and "no metric in common" in one_line_error(p.stderr)


def test_osmark_paper_sizes_each_probes_work_and_runs_exactly_it(tmp_path, no_leaks):
    """--paper: each probe's fixed work per worker is what one worker does
    alone in PAPER_WORK_S here (the paper gives mmapbench's size in pages,
    not the others' counts), then every worker does exactly that much."""
    from oslens.commands.study import PAPER_PAGES

    db = tmp_path / "p.db"
    p = oslens("study", "osmark", "--paper", "--workers", "1", "--reps", "1", "--no-explain", "--json", db=db)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    params = doc["params"]
    sized = params["ops_per_probe"]
    assert set(sized) == {"fork", "fork-static", "mmap", "dup", "socket", "sem"} and all(n >= 1 for n in sized.values())
    assert params["opts"]["mmap"] == {"pages": PAPER_PAGES}
    import oslens as api

    workers = api.Store(db).last(kind="scale").frame("workers")
    done = workers.groupby("probe")["ops"].first().to_dict()
    assert {p.split(":")[0]: n for p, n in done.items()} == sized, (done, sized)
