"""The scale-out study's verdicts where it sets workloads against each other
(the data-center ones against HPC) or judges one range over several: from
profiles made here, so that each verdict's rule is seen to agree, differ
and refuse to tell."""

from __future__ import annotations

import pytest

from oslens.analysis import scaleout
from oslens.studies import load


def finding(fid: str):
    return next(f for f in load(scaleout.STUDY) if f.id == fid)


def profile(preempt=0.0, migrate=0.0, faults=0.0, timer_ns=0, net_ns=0, hardirq_ns=0.0):
    return {
        scaleout.CPUS: 1,
        "sections": {
            "switches": {
                "counts": {"involuntary_per_s": preempt, "migrations_per_s": migrate},
                "preemptions": {"total": 100, "kernel_threads": min(100, preempt)},
            },
            "faults": {"counts": {"all_per_s": faults}},
            "interrupts": {
                "softirq": {"rows": [{"name": "TIMER", "ns": timer_ns}, {"name": "NET_RX", "ns": net_ns}]},
                "hardirq": {"total": {"avg_ns": hardirq_ns}},
            },
        },
    }


def reps(cpus: int = 1, **kw) -> list[dict]:
    """Six repetitions around the given figures (±1 %) of a workload on `cpus` CPUs."""
    return [{**profile(**{k: v * (1 + d) for k, v in kw.items()}), scaleout.CPUS: cpus}
            for d in (-0.01, -0.005, 0.0, 0.002, 0.005, 0.01)]  # fmt: skip


@pytest.mark.parametrize(
    "dc, hpc, verdict",
    [
        (1000.0, 10.0, "agrees"),  # the data-center workloads preempted far more often than HPC
        (10.0, 1000.0, "differs"),
        (100.0, 100.0, "cannot tell here"),  # intervals that overlap tell nothing
    ],
)
def test_preemptions_of_the_data_center_workloads_against_hpc(dc, hpc, verdict):
    profiles = {
        "streaming": reps(preempt=dc / 2, migrate=dc / 2),
        "search": reps(preempt=dc),
        "hpcc": reps(preempt=hpc),
    }
    v = scaleout._compared(finding("cs_freq_dc_gt_hpc"), profiles)
    assert v.verdict == verdict, v
    assert "2 of the paper's 4" in v.reason and "together" in v.reason


def test_hpc_page_faults_above_one_data_center_workload_and_below_another_differ():
    profiles = {"streaming": reps(faults=10.0), "search": reps(faults=1e6), "hpcc": reps(faults=1000.0)}
    v = scaleout._compared(finding("pf_freq_hpc_gt_dc"), profiles)
    assert v.verdict == "differs" and "search above" in v.reason and "streaming below" in v.reason, v


def test_against_hpc_without_hpcc_or_with_one_repetition_cannot_tell():
    f = finding("cs_freq_dc_gt_hpc")
    v = scaleout._compared(f, {"streaming": reps(preempt=1.0)})
    assert v.verdict == "cannot tell here" and "hpcc not run" in v.reason
    v = scaleout._compared(f, {"streaming": reps(preempt=1.0), "hpcc": [profile(preempt=1.0)]})
    assert v.verdict == "cannot tell here" and "one repetition" in v.reason


@pytest.mark.parametrize(
    "streaming, search, verdict",
    [(60.0, 70.0, "agrees"), (60.0, 10.0, "differs"), (60.0, None, "agrees")],
)
def test_the_timer_share_range_is_judged_for_each_data_center_workload_run(streaming, search, verdict):
    """The paper's 40–90 % over its data-center workloads: every one run
    here must lie in it to agree; one wholly outside differs."""

    def shares(pct: float) -> list[dict]:
        return reps(timer_ns=pct * 1000, net_ns=(100 - pct) * 1000)

    profiles = {"streaming": shares(streaming)}
    if search is not None:
        profiles["search"] = shares(search)
    v = scaleout._timer_share_verdict(finding("softirq_timer_share"), profiles)
    assert v.verdict == verdict, v
    assert ("search not run" in v.reason) == (search is None)


def test_each_row_of_a_workload_run_here_is_judged_on_its_stand_in(monkeypatch):
    """With streaming, the search backend and hpcc profiled, each of their
    rows is set beside its stand-in's figure, hpcc's with what it cannot
    tell apart; the frontend's rows say it has no stand-in."""
    fields = {
        "time": {"total": {"kernel_share": 0.3}},
        "faults": {"counts": {"all_per_s": 50.0},
                   "latency": {"all": {"avg_ns": 2e3, "max_ns": 1e5, "min_ns": 500.0, "std_ns": 1e3}}},
    }  # fmt: skip

    def profiled(i: int) -> dict:
        p = profile(preempt=10.0 * (i + 1), faults=50.0 + i, timer_ns=600, net_ns=400, hardirq_ns=1000.0 + i)
        p["sections"]["time"] = fields["time"]
        p["sections"]["faults"]["latency"] = fields["faults"]["latency"]
        return p

    run = ("streaming", "search", "hpcc", "analysis")
    monkeypatch.setattr(scaleout, "_profiles", lambda records: {s: [profiled(i) for i in range(6)] for s in run})
    rows = {r["id"]: r for r in scaleout.beside(None, None, [])}
    for fid in ("kernel_share_media_streaming", "pf_freq_media_streaming", "pf_avg_search_backend",
                "pf_max_fft", "pf_freq_hpl", "kernel_share_hpc", "cs_freq_dc_gt_hpc", "pf_freq_hpc_gt_dc",
                "kernel_share_bayes", "pf_min_bayes", "pf_freq_bayes_max_dc", "irq_latency_bayes_gt_hpc",
                "cs_freq_max_streaming", "cs_kdaemon_share_streaming", "softirq_timer_share"):  # fmt: skip
        assert rows[fid]["here"] != "not measured", rows[fid]
    for fid in ("pf_max_fft", "pf_freq_hpl", "kernel_share_hpc"):
        assert "together" in rows[fid]["reason"], rows[fid]
    for fid in ("pf_freq_search_frontend", "kernel_share_search", "cs_kdaemon_delay_search_frontend"):
        assert rows[fid]["reason"].startswith("the search frontend"), rows[fid]
    assert rows["cs_avg_search_backend"]["reason"] == scaleout.UNDEFINED
    assert "across" not in rows["lock_latency_grows"]["reason"] and "1, 2, 4" in rows["lock_latency_grows"]["reason"]
    # the same figures everywhere: nothing lies wholly above the rest
    assert rows["pf_freq_bayes_max_dc"]["verdict"] == "cannot tell here", rows["pf_freq_bayes_max_dc"]


def test_one_workload_leading_the_others_agrees_and_one_led_differs():
    f = finding("pf_freq_bayes_max_dc")
    v = scaleout._compared(
        f, {"analysis": reps(faults=500.0), "streaming": reps(faults=10.0), "search": reps(faults=9.0)}
    )
    assert v.verdict == "agrees" and "analysis above streaming, above search" in v.reason, v
    v = scaleout._compared(
        f, {"analysis": reps(faults=50.0), "streaming": reps(faults=10.0), "search": reps(faults=90.0)}
    )
    assert v.verdict == "differs" and "below search" in v.reason, v
    v = scaleout._compared(f, {"analysis": reps(faults=50.0)})
    assert v.verdict == "cannot tell here" and "no other workload" in v.reason


def runs(*points: tuple[int, float, float]) -> dict[int, list[tuple[float, dict]]]:
    """A job's runs: (CPUs, seconds, kernel lock wait ns), each three times (±1 %)."""
    out: dict[int, list[tuple[float, dict]]] = {}
    for n, seconds, wait in points:
        for d in (-0.01, 0.0, 0.01):
            time = {"runtime_ns": seconds * n * 1e9, "system_ns": wait * 10 * (1 + d)}
            p = {"sections": {"locks": {"total": {"total_ns": wait * (1 + d)}}, "time": {"total": time}}}
            out.setdefault(n, []).append((seconds * (1 + d), p))
    return out


def test_the_jobs_speedup_near_linear_up_to_this_machines_cpus_cannot_tell_the_papers_14():
    v = scaleout._scaling_verdict(finding("speedup_linear_until_14"), runs((1, 10.0, 1e6), (2, 5.1, 2e6)))
    assert v.verdict == "cannot tell here" and "needs 14 CPUs" in v.reason and "2: 1.96×" in v.here, v
    v = scaleout._scaling_verdict(finding("speedup_plateau"), runs((1, 10.0, 1e6), (2, 5.1, 2e6)))
    assert v.verdict == "cannot tell here" and "14 to 24 cores" in v.reason


def test_a_plateau_at_the_papers_cores_is_judged_against_its_figure():
    points = [(1, 90.0, 0), (8, 12.0, 0), (16, 10.0, 0), (24, 10.0, 0)]
    assert scaleout._scaling_verdict(finding("speedup_plateau"), runs(*points)).verdict == "agrees"
    points[-1] = (24, 3.0, 0)  # 30× on 24 cores: no plateau near 9
    assert scaleout._scaling_verdict(finding("speedup_plateau"), runs(*points)).verdict == "differs"


@pytest.mark.parametrize(
    "waits, verdict", [((1e6, 5e6), "agrees"), ((5e6, 1e6), "differs"), ((1e6, 1e6), "cannot tell here")]
)
def test_lock_wait_and_kernel_time_against_cores(waits, verdict):
    job = runs((1, 10.0, waits[0]), (2, 5.0, waits[1]))
    for fid in ("lock_latency_grows", "kernel_time_grows"):
        v = scaleout._scaling_verdict(finding(fid), job)
        assert v.verdict == verdict, v
    assert "linearly" in scaleout._scaling_verdict(finding("kernel_time_grows"), job).reason


def test_one_cpu_count_gives_no_series_and_says_so():
    v = scaleout._scaling_verdict(finding("lock_latency_grows"), runs((2, 5.0, 1e6)))
    assert v.verdict == "cannot tell here" and "two CPU counts" in v.reason


def test_a_comparison_without_its_leader_says_the_leader_was_not_run():
    v = scaleout._compared(finding("pf_freq_bayes_max_dc"), {"streaming": reps(faults=10.0)})
    assert v.verdict == "cannot tell here" and v.reason == "analysis not run in this study run", v


def test_a_row_about_hpl_or_fft_alone_shows_hpccs_figure_and_is_not_judged_by_it(monkeypatch):
    monkeypatch.setattr(scaleout, "_profiles", lambda records: {"hpcc": reps(faults=100.0)})
    rows = {r["id"]: r for r in scaleout.beside(None, None, [])}
    for fid in ("pf_freq_hpl", "pf_freq_fft"):
        assert rows[fid]["here"] != "not measured" and rows[fid]["verdict"] == "cannot tell here", rows[fid]
        assert "not of" in rows[fid]["reason"]


def test_on_one_cpu_the_scaling_rows_say_the_machine_cannot_give_two_counts():
    from types import SimpleNamespace

    run = SimpleNamespace(params={"scaling": {"analysis": [1]}})
    rows = {r["id"]: r for r in scaleout.beside(None, run, [])}
    assert rows["lock_latency_grows"]["reason"] == "this machine has 1 CPU: the job cannot run on two CPU counts"


def test_the_speedups_first_point_is_exactly_one():
    (first, second) = scaleout._speedups(runs((1, 10.0, 0), (2, 5.0, 0)))
    assert first == (1, 1.0, 1.0, 1.0) and second[0] == 2 and second[2] <= 2.0 <= second[3]


@pytest.mark.parametrize("value, drawn", [("5", True), ("~5", True), ("3-7", True), ("<5", False), (">85", False)])
def test_only_a_papers_figure_or_range_is_drawn_never_a_bound(value, drawn):
    from dataclasses import replace

    from oslens.studies.verdict import Measured, judge

    f = replace(finding("kernel_share_bayes"), value=value)
    v = judge(f, Measured(4.0, 3.5, 4.5, 0.9, 6))
    assert (v.paper_low is not None) == drawn, v


def test_rates_are_compared_per_cpu_the_workload_had():
    """A job on 2 CPUs faulting 150/s and a server on 1 CPU faulting 100/s:
    the server faults more per CPU, and the comparison says so."""
    f = finding("pf_freq_hpc_gt_dc")
    v = scaleout._compared(f, {"hpcc": reps(cpus=2, faults=150.0), "streaming": reps(cpus=1, faults=100.0)})
    assert v.verdict == "differs" and "streaming above hpcc's" in v.reason and "per CPU" in v.reason, v
