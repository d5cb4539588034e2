"""`oslens compare`: synthetic runs with known differences, and an A/A
comparison of two real runs of the same thing."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from rich.console import Console

from oslens import compare as cmp
from oslens import engine
from oslens.errors import UsageError
from oslens.report.compare import render
from oslens.store import Store
from test_scale_report import point

from conftest import oslens

MACHINE = {
    "kernel": {"release": "6.1.0", "cmdline": "quiet"},
    "cpu": {"model_name": "Test CPU"},
    "load": {"busy_share": 0.01, "loadavg": {"1min": 0.1}},
}


def _machine(**kernel) -> dict:
    return {**MACHINE, "kernel": {**MACHINE["kernel"], **kernel}}


def scale_run(store: Store, per_worker: dict[int, list[float]], machine: dict = MACHINE) -> int:
    """A scale run of dup:default whose per-worker rate at n workers is
    per_worker[n][rep] (every worker of a repetition at that rate)."""
    params = {"probes": ["dup:default"], "workers": sorted(per_worker), "reps": len(next(iter(per_worker.values())))}
    run_id = store.begin_run("scale", ["oslens", "scale"], params, machine)
    records = [r for n, rates in sorted(per_worker.items()) for r in point(n, rates)]
    store.add_records(run_id, records)
    store.finish_run(run_id, "complete")
    return run_id


def appscale_run(store: Store, walls_s: list[float]) -> int:
    """An appscale run on 1 CPU with these wall times, 5 % of CPU time in the kernel."""
    run_id = store.begin_run("appscale", ["oslens", "appscale"], {"workload": "kmeans", "cpus": [1]}, MACHINE)
    store.add_records(
        run_id,
        [
            {
                "type": "point",
                "n": 1,
                "cpus": [0],
                "rep": rep,
                "status": "ok",
                "wall_ns": int(w * 1e9),
                "user_ns": int(w * 0.95e9),
                "system_ns": int(w * 0.05e9),
            }
            for rep, w in enumerate(walls_s)
        ],
    )
    store.finish_run(run_id, "complete")
    return run_id


def noisy(center: float, n: int, seed: int, spread: float = 0.02) -> list[float]:
    return list(center * (1 + np.random.default_rng(seed).uniform(-spread, spread, n)))


def rendered(c: cmp.Comparison) -> str:
    out = io.StringIO()
    render(Console(file=out, width=200), c)
    return out.getvalue()


def json_roundtrip(c: cmp.Comparison) -> dict:
    return json.loads(json.dumps(c.to_dict(), allow_nan=False))


PER_WORKER_2 = "scale/dup:default/process/2 workers/ops per s per worker"
PER_WORKER_1 = "scale/dup:default/process/1 workers/ops per s per worker"


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "cmp.db") as s:
        yield s


def test_synthetic_20_percent_regression_is_flagged(store):
    a = scale_run(store, {1: noisy(1e6, 8, 1), 2: noisy(8e5, 8, 2)})
    b = scale_run(store, {1: noisy(1e6, 8, 3), 2: noisy(8e5 * 0.8, 8, 4)}, _machine(release="6.2.0"))
    c = cmp.compare(store, a, b)
    by_name = {m.name: m for m in c.metrics}
    reg = by_name[PER_WORKER_2]
    assert reg.verdict == cmp.REGRESSION and reg.significant
    assert reg.change == pytest.approx(-0.2, abs=0.03)
    assert reg.p < 0.001 and reg.method == "exact"
    lo, hi = reg.ratio_ci
    assert lo <= reg.b.median / reg.a.median <= hi < 0.95
    assert by_name[PER_WORKER_1].verdict not in (cmp.REGRESSION, cmp.IMPROVEMENT)
    assert [m.name for m in c.regressions] == [PER_WORKER_2]
    assert cmp.exit_status(c, fail_on_regression=True) == 1
    assert cmp.exit_status(c, fail_on_regression=False) == 0
    # The kernels differ, and that is the first thing said about the machines.
    assert c.machine_diff[0] == {"key": "kernel.release", "a": "6.1.0", "b": "6.2.0"}
    doc = json_roundtrip(c)
    assert doc["summary"]["regressed"] == [PER_WORKER_2]
    assert doc["test"]["name"] == "Mann-Whitney U" and doc["test"]["alternative"] == "two-sided"
    text = rendered(c)
    assert "Mann-Whitney U" in text and "regression" in text and "6.2.0" in text
    # Regressions come first: the flagged table precedes the per-series one.
    assert text.index("1 regression,") < text.index("dup:default (processes)")
    # A 20 % regression is within a 25 % threshold: significant, not a regression.
    loose = cmp.compare(store, a, b, threshold=0.25)
    within = {m.name: m for m in loose.metrics}[PER_WORKER_2]
    assert within.verdict == cmp.WITHIN
    assert within.reason.startswith("significant (adjusted p ") and "within the 25% threshold" in within.reason
    assert cmp.exit_status(loose, fail_on_regression=True) == 0


def test_an_a_a_split_of_one_real_run_is_flagged_no_more_often_than_the_confidence_allows(tmp_path):
    """The repetitions of one real run, split every way into two halves of
    six: an A/A comparison whose halves truly come from one distribution.
    At 99 % confidence at most 1 % of the splits may be called significant
    (the exact test's size); an anti-conservative p-value fails here. Two
    separate runs are no A/A: they see the machine at different times or
    share a CPU, and a real difference of a few per cent between them is
    rightly found."""
    db = tmp_path / "aa.db"
    p = oslens("scale", "-q", "--probe", "getppid", "--workers", "1", "--ops", "50000", "--reps", "12", db=db)
    assert p.returncode == 0, p.stderr
    with Store(db) as store:
        (metric,) = [m for m in cmp.metrics(store, 1).values() if "per worker" in m.name]
    values = metric.values
    assert len(values) == 12
    from itertools import combinations

    from oslens.analysis.stats import mann_whitney

    splits = [list(c) for c in combinations(range(12), 6)]
    flagged = sum(
        mann_whitney([values[i] for i in a], [values[i] for i in range(12) if i not in a]).p < 0.01 for a in splits
    )
    assert flagged <= 0.01 * len(splits), f"{flagged} of {len(splits)} A/A splits significant at 99 %"


@pytest.fixture
def hog_on(request):
    """A busy loop pinned to a CPU (the caller's), ended after the test."""
    procs = []

    def start(cpu: int):
        procs.append(subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"]))

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_a_real_regression_fails_the_gate_through_the_cli(tmp_path, hog_on):
    """The README's CI gate: a run whose only worker shares its CPU with a
    busy loop does about half the work of the same run alone; `compare
    --fail-on-regression` exits 1 and names the metric, and without the
    flag it reports and exits 0."""
    db = tmp_path / "gate.db"
    args = ("scale", "-q", "--json", "--probe", "getppid", "--workers", "1", "--duration", "0.2", "--reps", "6")
    alone = json.loads(oslens(*args, db=db).stdout)["run"]
    hog_on(engine.placement(1, "compact")[0])  # the CPU its one worker is placed on
    shared = json.loads(oslens(*args, db=db).stdout)["run"]
    gate = oslens("compare", str(alone), str(shared), "--fail-on-regression", db=db)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "regression" in gate.stdout and "getppid" in gate.stdout
    report = oslens("compare", str(alone), str(shared), db=db)
    assert report.returncode == 0 and "regression" in report.stdout


def test_runs_of_different_kinds_are_refused_in_one_line(store):
    a = scale_run(store, {1: noisy(1e6, 4, 1)})
    b = appscale_run(store, noisy(1.0, 4, 2))
    with pytest.raises(UsageError) as e:
        cmp.compare(store, a, b)
    msg = str(e.value)
    assert "\n" not in msg and "scale" in msg and "appscale" in msg


def test_three_against_three_is_not_testable_never_no_difference(store):
    # Completely separated and 30 % apart, yet 3 against 3 cannot reach p < 0.05.
    a = scale_run(store, {1: [1.00e6, 1.01e6, 1.02e6]})
    b = scale_run(store, {1: [0.70e6, 0.71e6, 0.72e6]})
    c = cmp.compare(store, a, b)
    m = c.metrics[0]
    assert m.verdict == cmp.NOT_TESTABLE and not m.significant and m.p is None
    assert m.min_p == pytest.approx(0.1)
    assert m.reason.startswith("not testable with n=3 and n=3")
    assert "at least 4 repetitions in each run" in m.reason
    assert cmp.exit_status(c, fail_on_regression=True) == 0
    assert json_roundtrip(c)["metrics"][0]["verdict"] == "not testable"
    text = rendered(c)
    assert "not testable with n=3 and n=3" in text
    assert "not significant" not in text and "no difference" not in text
    # One more repetition each makes the same separation testable, and a regression.
    a4 = scale_run(store, {1: [1.00e6, 1.01e6, 1.02e6, 1.03e6]})
    b4 = scale_run(store, {1: [0.70e6, 0.71e6, 0.72e6, 0.73e6]})
    assert cmp.compare(store, a4, b4).metrics[0].verdict == cmp.REGRESSION


@pytest.mark.parametrize(
    "text,value",
    [("5%", 0.05), ("5 %", 0.05), (" 12.5% ", 0.125), ("0.05", 0.05), ("0%", 0.0), ("0", 0.0), (".1", 0.1)],
)
def test_parse_threshold_accepts(text, value):
    assert cmp.parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "abc", "-5%", "5", "5%%", "5 percent", "%", "1e999%", "nan", "0.05.1"])
def test_parse_threshold_refuses_in_one_line(text):
    with pytest.raises(UsageError) as e:
        cmp.parse_threshold(text)
    assert "\n" not in str(e.value)


def test_direction_is_respected(store):
    base = noisy(1e6, 8, 1)
    # Higher is better: 20 % more ops/s is an improvement, 20 % fewer a regression.
    a = scale_run(store, {1: base})
    faster = scale_run(store, {1: [v * 1.2 for v in noisy(1e6, 8, 2)]})
    slower = scale_run(store, {1: [v * 0.8 for v in noisy(1e6, 8, 3)]})
    up = cmp.compare(store, a, faster)
    assert up.metrics[0].metric.direction == cmp.HIGHER
    assert up.metrics[0].verdict == cmp.IMPROVEMENT and not up.regressions
    assert cmp.exit_status(up, fail_on_regression=True) == 0
    assert cmp.compare(store, a, slower).metrics[0].verdict == cmp.REGRESSION
    # Lower is better: 20 % less wall time is an improvement, 20 % more a regression.
    walls = noisy(2.0, 8, 4)
    w = appscale_run(store, walls)
    quicker = appscale_run(store, [v * 0.8 for v in noisy(2.0, 8, 5)])
    longer = appscale_run(store, [v * 1.2 for v in noisy(2.0, 8, 6)])
    down = cmp.compare(store, w, quicker)
    wall = {m.name: m for m in down.metrics}["appscale/1 CPUs/wall s"]
    assert wall.metric.direction == cmp.LOWER and wall.verdict == cmp.IMPROVEMENT
    assert cmp.exit_status(down, fail_on_regression=True) == 0
    worse = cmp.compare(store, w, longer)
    assert {m.name: m for m in worse.metrics}["appscale/1 CPUs/wall s"].verdict == cmp.REGRESSION
    assert cmp.exit_status(worse, fail_on_regression=True) == 1


def test_values_that_cannot_reach_significance_do_not_dilute_the_others(store):
    # Wall time clearly longer (4 against 4, completely separated: p = 0.029); the system share is 0 in
    # every repetition of both runs: not testable, and left out of the multiplicity adjustment.
    rid = []
    for walls in ([1.0, 1.1, 1.2, 1.05], [2.0, 2.1, 2.2, 2.05]):
        run_id = store.begin_run("appscale", ["oslens"], {"command": ["app"], "cpus": [1]}, MACHINE)
        store.add_records(
            run_id,
            [
                {
                    "type": "point",
                    "n": 1,
                    "cpus": [0],
                    "rep": i,
                    "status": "ok",
                    "wall_ns": int(w * 1e9),
                    "user_ns": int(w * 1e9),
                    "system_ns": 0,
                }
                for i, w in enumerate(walls)
            ],
        )
        store.finish_run(run_id, "complete")
        rid.append(run_id)
    c = cmp.compare(store, *rid)
    by_name = {m.name: m for m in c.metrics}
    share = by_name["appscale/1 CPUs/system share"]
    assert share.verdict == cmp.NOT_TESTABLE and share.untestable_because == "identical values"
    wall = by_name["appscale/1 CPUs/wall s"]
    assert wall.p == pytest.approx(2 / 70) and wall.q == wall.p and c.tested == 1
    assert wall.verdict == cmp.REGRESSION


def test_rank_test_statistics():
    from scipy import stats as sps

    from oslens.analysis.stats import (
        adjust_fdr,
        mann_whitney,
        min_two_sided_p,
        min_two_sided_p_given,
        repetitions_for_test,
    )

    assert min_two_sided_p(3, 3) == pytest.approx(0.1)
    assert min_two_sided_p(4, 4) == pytest.approx(2 / 70)
    assert repetitions_for_test(0.95) == 4 and repetitions_for_test(0.99) == 5
    # With ties: the exact permutation distribution, as scipy's permutation test enumerates it.
    a, b = [140, 150, 150, 140, 150, 160], [150, 160, 160, 150, 170, 160]
    t = mann_whitney(a, b)
    ref = sps.mannwhitneyu(a, b, alternative="two-sided", method=sps.PermutationMethod(n_resamples=10**5))
    assert t.method == "exact with ties" and t.p == pytest.approx(ref.pvalue)
    assert mann_whitney([1, 2, 3], [4, 5, 6]).p == pytest.approx(0.1)
    assert min_two_sided_p_given([0, 0, 0, 0], [0, 0, 0, 0]) == 1.0
    assert min_two_sided_p_given([160] * 4, [160, 160, 160, 170]) == 1.0
    assert min_two_sided_p_given([1, 1, 1, 1], [2, 2, 2, 2]) == pytest.approx(2 / 70)
    assert adjust_fdr([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])


def test_real_latency_noise_and_profile_runs_have_metrics(tmp_path):
    db = tmp_path / "kinds.db"
    commands = [
        ("latency", "--probe", "getppid", "--duration", "0.05", "--reps", "2", "-q"),
        ("noise", "--cpus", "0", "--duration", "0.1", "--reps", "1", "--no-attribution", "-q"),
        ("profile", "-q", "--", "true"),
    ]
    with ThreadPoolExecutor(len(commands)) as pool:
        for p in list(pool.map(lambda args: oslens(*args, db=db, timeout=120), commands)):
            assert p.returncode == 0, p.stderr
    with Store(db) as store:
        for run in store.runs():
            names = list(cmp.metrics(store, run))
            expected = {
                "latency": ["latency/getppid:default/alone/p50 ns", "latency/null:default/alone/p99 ns"],
                "noise": ["noise/alone/all CPUs/lost share", "noise/alone/cpu 0/lost share"],
                "profile": ["profile/wall s", "profile/page faults per s"],
            }[run.kind]
            assert set(expected) <= set(names), (run.kind, names)
            c = cmp.compare(store, run.id, run.id)
            assert all(m.verdict == cmp.NOT_TESTABLE for m in c.metrics)  # 2, 1 and 1 repetitions
            json_roundtrip(c)
            text = rendered(c)
            if run.kind == "profile":
                assert "no significance test is possible" in text
