"""`noise`: the detour probe finds interruptions it is shown, attribution
names their causes, and nothing stays loaded in the kernel."""

from __future__ import annotations

import bisect
import io
import json
import math
import os
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest
from rich.console import Console

from oslens import engine
from oslens.analysis.noise import (
    CANNOT_TELL,
    KIND_STEAL,
    KIND_VECTOR,
    STEAL,
    TOLD_BELOW,
    UNEXPLAINED,
    CpuNoise,
    EventIndex,
    NoiseSummary,
    summarize,
    tail_at_scale,
    windows_to_tell,
)
from oslens.format import ns
from oslens.report.noise import render

from conftest import (
    NCPU,
    StreamingEngine,
    bpf_programs,
    can_run_as_nobody,
    engine_bin,
    engine_for_nobody,
    one_line_error,
    oslens,
    run_engine,
)

CPU = engine.topology()["cpus"][-1]["cpu"]  # the last CPU: never assume CPU 0


def detour_run(*extra: str, duration: float = 3.0, warmup: float = 0.1, trace: bool = True) -> list[dict]:
    r = run_engine(
        "run",
        "--probe",
        "detour",
        "--cpus",
        str(CPU),
        "--duration",
        str(duration),
        "--warmup",
        str(warmup),
        "--interval",
        "0.5",
        *(["--trace"] if trace else []),
        *extra,
    )
    assert r.rc == 0, r.stderr
    return r.records


def attribution_or_skip(records: list[dict]) -> None:
    trace = next(r for r in records if r["type"] == "trace")
    if not trace["available"]:
        pytest.skip(f"attribution unavailable here: {trace['reason']}")


def stolen_within(records: list[dict]) -> dict[int, float]:
    """Each detour's end -> what of it the host took (the vCPU not run), as
    the trace's reads of the steal clock charge it to the detour's time that
    no event covers. A host that does not run the vCPU lengthens a detour
    by time no guest-side measure can keep out — but not a busy wait timed
    by the clock, which the host's time shortens instead: subtract it only
    from what may be lengthened. Empty where the trace is unavailable."""
    if not next(r for r in records if r["type"] == "trace")["available"]:
        return {}
    return {d.start_ns + d.duration_ns: d.causes.get(STEAL, 0.0) for d in summarize(records).detours if d.cpu == CPU}


def test_injected_detours_are_found_measured_and_named(no_leaks):
    # A detour is the injected busy time plus the wake-up interrupt and two
    # context switches around it (up to ~100 µs in a VM): 5 ms keeps that
    # fixed part within the 10 % the probe must meet. The injector goes on
    # until the probe is done (stopped by SIGTERM, it reports what it made):
    # a probe slow to start, on a loaded machine, still has the injections
    # of its whole window, where a fixed 2.6 s had left 76 of 80 in it.
    busy_us = 5000
    inject = subprocess.Popen(
        [
            engine_bin(),
            "inject",
            "--cpu",
            str(CPU),
            "--period-us",
            "25000",
            "--busy-us",
            str(busy_us),
            "--duration",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        records = detour_run(duration=3.0)
    finally:
        inject.terminate()
    out, err = inject.communicate(timeout=30)
    assert inject.returncode == 0, err
    injected = json.loads(out)["intervals"]
    det = next(r for r in records if r["type"] == "detours")
    t0, t1 = det["start_ns"], det["start_ns"] + det["runtime_ns"]
    inside = [(s, e) for s, e in injected if t0 < s and e < t1]
    assert len(inside) >= 80
    stolen = stolen_within(records)
    spans = [(end - dur, end, dur, stolen.get(end, 0.0)) for end, dur in det["detours"]]
    found = []
    for s, e in inside:
        match = [d for d in spans if d[0] <= s + 20_000 and d[1] >= e - 20_000]
        if match:
            _, _, dur, host = max(match, key=lambda d: d[2])
            found.append((dur / (e - s), (dur - host) / (e - s)))
    assert len(found) >= 0.95 * len(inside), f"found {len(found)} of {len(inside)} injected detours"
    # As long as the injection, whatever the host did (the injector spins on
    # the clock); no more than a tenth longer, less what the host took.
    whole, ours = np.array(found).T
    assert np.mean((whole >= 0.99) & (ours <= 1.10)) >= 0.95, (
        f"durations off: {np.percentile(whole, [5, 50, 95])}, less the {sum(stolen.values()):.0f} ns the host "
        f"took {np.percentile(ours, [5, 50, 95])}"
    )

    attribution_or_skip(records)
    s = summarize(records)
    named = [d for d in s.detours if d.duration_ns > 0.9 * busy_us * 1000]
    assert named and np.mean([d.cause.startswith("oslens-inject") for d in named]) >= 0.95, {d.cause for d in named}


def test_timer_signal_found_at_its_rate_and_attributed(no_leaks):
    """Each run of the signal handler, as its own clock reads place it, lies
    in one detour at least as long. Matched by time, not told by length: a
    host that does not run the vCPU makes detours of any length, and cuts
    into the handler's busy wait, which is timed by the clock."""
    hz, busy_us, duration = 100, 300, 3.0
    records = detour_run("--opt", f"signal_hz={hz}", "--opt", f"signal_busy_us={busy_us}", duration=duration)
    det = next(r for r in records if r["type"] == "detours")
    t0, t1 = det["start_ns"], det["start_ns"] + det["runtime_ns"]
    handled = [(s, e) for s, e in det["signals"] if t0 < s and e < t1]
    assert det["signals_overflow"] == 0 and all(e - s >= busy_us * 1000 for s, e in handled)
    rate = len(handled) / (det["runtime_ns"] / 1e9)
    assert abs(rate - hz) / hz < 0.15, f"the handler ran {rate:.1f} times a second, signalled at {hz}/s"
    # The loop re-reads the clock after keeping a detour (its bookkeeping
    # is not the OS's noise), so a signal in those few ns is not seen: some
    # 2e-4 of the time, a miss in about 20 runs of 300 signals.
    spans = [(end - dur - 2_000, end) for end, dur in det["detours"]]  # 2 µs: the loop's and the handler's reads
    starts = [a for a, _ in spans]
    within = {}
    for s, e in handled:
        k = bisect.bisect_right(starts, s) - 1
        if k >= 0 and spans[k][1] >= e:
            within[spans[k][1]] = (s, e)
    assert len(within) >= 0.98 * len(handled), f"{len(within)} of {len(handled)} signals found in a detour"
    attribution_or_skip(records)
    signalled = [d for d in summarize(records).detours if d.cpu == CPU and d.start_ns + d.duration_ns in within]
    with_timer = [d for d in signalled if "timer interrupt" in d.causes]
    assert len(with_timer) >= 0.9 * len(signalled), {c for d in signalled for c in d.causes}


@pytest.mark.skipif(not can_run_as_nobody(), reason="needs root, setpriv and a 'nobody' user")
def test_without_privileges_detours_are_measured_and_attribution_says_why(no_leaks):
    with engine_for_nobody() as (nobody, exe, env):
        p = subprocess.run(
            [*nobody, exe, "run", "--probe", "detour", "--cpus", str(CPU), "--duration", "0.5", "--trace"],
            capture_output=True,
            text=True,
            env=env,
        )
    assert p.returncode == 0, p.stderr
    recs = [json.loads(line) for line in p.stdout.splitlines()]
    trace = next(r for r in recs if r["type"] == "trace")
    assert trace["available"] is False and trace["reason"]
    assert next(r for r in recs if r["type"] == "detours")["iterations"] > 0
    assert summarize(recs).attribution == trace["reason"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_root_without_the_bpf_capabilities_is_told_which_it_lacks(no_leaks):
    # Issue 28, item 17: uid 0 in a container without CAP_BPF/CAP_PERFMON was
    # told "BPF needs root … (running as uid 0)". The capabilities are what
    # is missing: dropped here from the bounding set, as a container does.
    p = subprocess.run(
        ["setpriv", "--bounding-set=-perfmon,-sys_admin", engine_bin(), "run", "--probe", "detour",
         "--cpus", str(CPU), "--duration", "0.2", "--trace"],
        capture_output=True, text=True,
    )  # fmt: skip
    if p.returncode != 0 and "perfmon" in p.stderr:
        pytest.skip(f"this setpriv cannot drop CAP_PERFMON: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    reason = next(json.loads(line) for line in p.stdout.splitlines() if '"trace"' in line)["reason"]
    assert "without CAP_PERFMON" in reason and "runs as root" in reason and "needs root" not in reason, reason


def test_no_bpf_says_so_in_its_own_words(tmp_path, no_leaks):
    # It said "(--no-attribution)", the flag --no-bpf replaced.
    p = oslens("noise", "-q", "--json", "--cpus", str(CPU), "--duration", "0.2", "--no-bpf", db=tmp_path / "s.db")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["phases"]["alone"]["attribution"] == "attribution not requested (--no-bpf)"


@pytest.mark.skipif(shutil.which("bpftool") is None, reason="bpftool not installed")
@pytest.mark.parametrize("how", ["end", signal.SIGINT, signal.SIGTERM])
def test_nothing_stays_loaded(how, no_leaks):
    assert bpf_programs() == 0
    if how == "end":
        records = detour_run(duration=0.5)
        attribution_or_skip(records)
    else:
        run = StreamingEngine("run", "--probe", "detour", "--cpus", str(CPU), "--duration", "30", "--trace")
        run.wait_for("started")
        time.sleep(0.5)
        run.proc.send_signal(how)
        assert run.finish(timeout=30) == 128 + how
    assert bpf_programs() == 0


def test_cli_noise_round_trip(tmp_path, no_leaks):
    p = oslens(
        "noise",
        "-q",
        "--json",
        "--cpus",
        str(CPU),
        "--duration",
        "0.5",
        "--step-us",
        "500",
        "--ftq-us",
        "100",
        db=tmp_path / "s.db",
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    alone = doc["phases"]["alone"]
    cpu = alone["cpus"][0]
    assert cpu["cpu"] == CPU and cpu["runtime_ns"] > 0.4e9 and 0 <= cpu["lost_share"] < 1
    assert cpu["count"] >= len(doc["detours"]["alone"])
    assert alone["tail"]["windows"] > 0
    # Steal is read over the detours' window, and says its resolution.
    assert abs(cpu["steal_window_ns"] - cpu["runtime_ns"]) < cpu["steal_resolution_ns"]
    assert 0 <= cpu["steal_ns"] <= cpu["steal_window_ns"] + cpu["steal_resolution_ns"]
    # Every tail figure lies in its interval; "told" is the documented rule.
    for row in alone["tail"]["nodes"].values():
        for label, p in row["p_delayed"].items():
            lo, hi = row["p_bounds"][label]
            assert 0 <= lo <= p <= hi <= 1
            assert row["told"][label] == (hi - lo <= CANNOT_TELL)
        assert row["measure_s"] > 0
    ftq = cpu["ftq"]
    # One count per 100 µs quantum of the run, the work lost a share.
    assert ftq["quanta"] == pytest.approx(cpu["runtime_ns"] / 100_000, abs=2)
    assert 0 <= ftq["min"] <= ftq["median"] <= ftq["full"] and 0 <= ftq["work_lost"] < 1
    shown = oslens("show", str(doc["run"]), "--json", db=tmp_path / "s.db")
    assert json.loads(shown.stdout)["phases"] == doc["phases"]


@pytest.mark.parametrize(
    "args,word",
    [
        (["--cpus", str(NCPU + 5)], "not online"),
        (["--cpus", "x"], "--cpus"),
        (["--cpus", "0-99999999999"], "no CPU is numbered above"),  # refused, not expanded until memory runs out
        (["--threshold-ns", "0"], "--threshold-ns"),
        (["--duration", "0"], "--duration"),
        (["--step-us", "0"], "--step-us"),
        (["--ftq-us", "0"], "--ftq-us"),
        (["--compete", "fork"], "every CPU"),
        (["--cpus", "²"], "'²'"),
        (["--cpus", ""], "--cpus: an empty value"),
        (["--step-us", "1e29"], "longer than the 200 ms measured"),
    ],
)
def test_bad_noise_input(tmp_path, args, word):
    p = oslens("noise", "--duration", "0.2", *args, db=tmp_path / "s.db")
    assert p.returncode == 2
    assert word in one_line_error(p.stderr)
    assert not (tmp_path / "s.db").exists()


def test_a_threshold_within_a_few_loop_times_is_refused_naming_the_least(tmp_path):
    # Issue 28: --threshold-ns 10 was taken, and every iteration of the
    # probe's own loop counted as a detour (177 million, "51 % lost"). The
    # least threshold is this machine's: the probe's, measured here.
    det = next(r for r in run_engine("run", "--probe", "detour", "--cpus", str(CPU), "--ops", "1").records
               if r["type"] == "detours")  # fmt: skip
    least = det["min_threshold_ns"]
    assert det["loop_ns"] < least <= 10 * det["loop_ns"]
    # half of it: oslens calibrates again, and its least may come out a ns or two under this one's (fresh-
    # clone run 3 of stop 41 asked least - 1, and was taken)
    asked = max(1, int(least) // 2)
    p = oslens("noise", "--cpus", str(CPU), "--duration", "0.2", "--threshold-ns", str(asked), db=tmp_path / "s.db")
    assert p.returncode == 2
    line = one_line_error(p.stderr)
    named = float(line.rsplit(" is ", 1)[1].removesuffix(" ns"))
    # Calibrated again by oslens (the fastest of 200 batches, rounded up to
    # a whole ns): above what it refused and a few loop times, as the
    # engine's least is — but not that least's twin: two calibrations of
    # the same loop differ by more than their own rounding when the CPU was
    # idle before one of them.
    assert "--threshold-ns" in line and asked < named and det["loop_ns"] < named <= 10 * det["loop_ns"], line
    assert not (tmp_path / "s.db").exists()
    # Above it, taken: a few loop times is all it asks.
    ok = oslens("noise", "-q", "--json", "--cpus", str(CPU), "--duration", "0.2", "--no-bpf",
                "--threshold-ns", str(math.ceil(2 * least)), db=tmp_path / "s.db")  # fmt: skip
    assert ok.returncode == 0, ok.stderr


def test_tail_at_scale_arithmetic():
    # One node's 1 ms steps: 1 % of them carry a 200 µs detour.
    step, n_windows = 1e6, 10_000
    detours = [
        type("D", (), {"cpu": 0, "start_ns": int(k * step + 10), "duration_ns": 200_000})()
        for k in range(0, n_windows, 100)
    ]
    s = NoiseSummary(cpus=[], detours=detours, attribution="bpf", windows=[(0, 0, n_windows * step)])
    t = tail_at_scale(s, step, nodes=(1, 100), delays_ns=(1e5,))
    assert t["windows"] == n_windows
    assert t["nodes"]["1"]["p_delayed"][">100us"] == pytest.approx(0.01)
    assert t["nodes"]["100"]["p_delayed"][">100us"] == pytest.approx(1 - 0.99**100)  # 63 %
    assert t["nodes"]["1"]["expected_slowdown"] == pytest.approx(1 + 0.01 * 0.2)
    # The longest of 100 nodes' windows is 200 µs unless all 100 are clean
    # (0.99^100): E[max] = 200 µs × (1 − 0.99^100), a slowdown of 1.12679.
    # Exact sums of exact binary fractions but for 0.99: rounding only.
    assert t["nodes"]["100"]["expected_slowdown"] == pytest.approx(1 + (1 - 0.99**100) * 200_000 / step, rel=1e-12)


def test_steal_is_read_over_the_detours_window(no_leaks):
    # A warm-up far longer than a tick: read around it, steal's window
    # would miss the detours' by more than its resolution.
    records = detour_run("--reps", "2", duration=0.5, warmup=0.3, trace=False)
    stats = [x for x in records if x["type"] == "cpustat"]
    dets = {x["rep"]: x for x in records if x["type"] == "detours"}
    assert len(stats) == 2 and set(dets) == {0, 1}
    for st in stats:
        det, res = dets[st["rep"]], st["resolution_ns"]
        assert res == pytest.approx(1e9 / os.sysconf("SC_CLK_TCK"))
        assert abs(st["start_ns"] - det["start_ns"]) < res
        assert abs(st["end_ns"] - (det["start_ns"] + det["runtime_ns"])) < res
        for c in st["cpus"]:
            assert 0 <= c["steal"] <= st["end_ns"] - st["start_ns"] + res
    [c] = summarize(records).cpus
    assert c.steal_window_ns == sum(st["end_ns"] - st["start_ns"] for st in stats)
    assert c.steal_resolution_ns == sum(st["resolution_ns"] for st in stats)
    assert abs(c.steal_window_ns - c.runtime_ns) < c.steal_resolution_ns
    assert 0 <= c.steal_ns <= c.steal_window_ns + c.steal_resolution_ns
    out = _rendered(summarize(records))
    assert f"±{ns(c.steal_resolution_ns)}" in out and "tick-sampled" in out


@pytest.mark.parametrize(
    "stolen,causes",
    [
        # no steal clock read around it: what no event covers is unexplained
        ([], {"timer interrupt": 500, UNEXPLAINED: 3500}),
        # the vCPU's steal clock rose by 2000 ns between two reads around the detour: that much is steal
        ([(900, 6000, 2000)], {"timer interrupt": 500, STEAL: 2000, UNEXPLAINED: 1500}),
        # ... and never more than the time no event covers
        ([(900, 6000, 9000)], {"timer interrupt": 500, STEAL: 3500}),
        # reads of a rise that ended before the detour began say nothing of it
        ([(100, 900, 2000)], {"timer interrupt": 500, UNEXPLAINED: 3500}),
        # ... and of one whose bounds hold only the detour's last 1000 ns, no more than those
        ([(4000, 9000, 3000)], {"timer interrupt": 500, STEAL: 1000, UNEXPLAINED: 2500}),
    ],
)
def test_time_no_event_covers_is_steal_as_far_as_the_steal_clock_rose_around_it(stolen, causes):
    """Made-up events on CPU 5 (no BPF): a detour [1000, 5000) with a timer
    interrupt in its first 500 ns."""
    events = [[5, 1000, 1500, KIND_VECTOR, 0, 0, "local_timer"]] + [
        [5, a, b, KIND_STEAL, n, 0, ""] for a, b, n in stolen
    ]
    index = EventIndex([{"type": "events", "events": events}])
    assert index.causes(5, [(1000, 5000)]) == [causes]
    assert sum(r.ns for r in index.rises(5)) == sum(n for *_, n in stolen)
    assert index.events(5) == [(1000, 1500, "timer interrupt", KIND_VECTOR, 0, "local_timer")]  # steal is no event


def test_a_rise_of_the_steal_clock_is_shared_once_longest_uncovered_stretch_first():
    """Three uncovered detours between two reads 2200 ns apart in steal: the
    longest takes what it can hold, the next longest the rest, the shortest
    (a real unexplained blip) nothing; asked in any order, the same; the
    total charged is the rise, never more."""
    index = EventIndex([{"type": "events", "events": [[5, 0, 9000, KIND_STEAL, 2200, 0, ""]]}])
    spans = [(1000, 1100), (3000, 5000), (6000, 6500)]
    expect = [{UNEXPLAINED: 100}, {STEAL: 2000}, {STEAL: 200, UNEXPLAINED: 300}]
    assert index.causes(5, spans) == expect
    assert index.causes(5, spans[::-1]) == expect[::-1]
    assert index.causes(5, spans) == expect  # nothing spent by asking


def _proc_stat_steal_ns(cpu: int) -> int:
    for line in open("/proc/stat"):
        if line.startswith(f"cpu{cpu} "):
            return int(line.split()[8]) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    raise AssertionError(f"cpu{cpu} not in /proc/stat")


def test_the_steal_traced_is_within_the_kernels_own_count(no_leaks):
    """Whatever the trace says the host stole from the probed CPU's vCPU, the
    kernel's steal count (/proc/stat, from the same clock at each tick) rose
    by as much over the run, give or take the tick it is kept in; and where
    that count rose by more than the ticks around the run can hold, the
    trace saw steal. Off a guest with a steal clock both are 0."""
    before = _proc_stat_steal_ns(CPU)
    records = detour_run(duration=1.0)
    after = _proc_stat_steal_ns(CPU)
    attribution_or_skip(records)
    steals = [e for r in records if r["type"] == "events" for e in r["events"] if e[3] == KIND_STEAL]
    assert all(e[0] == CPU and e[1] < e[2] and e[4] > 0 for e in steals), steals[:5]
    tick = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    traced = sum(r.ns for r in EventIndex(records).rises(CPU))
    assert traced <= after - before + 2 * tick
    if after - before > 2 * tick:  # stolen beyond what the ticks around the run could hold: the trace saw some
        assert traced > 0, (after - before, traced)


def _rendered(s: NoiseSummary, tail: dict | None = None) -> str:
    console = Console(width=250, record=True, file=io.StringIO())
    render(console, "alone", s, tail or {"note": "not computed"})
    return console.export_text()


def _cpu(**kw) -> CpuNoise:
    base = dict(
        cpu=0,
        runtime_ns=1e9,
        count=0,
        total_ns=0.0,
        max_ns=0.0,
        loop_ns=10.0,
        threshold_ns=500.0,
        kept=0,
        percentiles_ns={"p50": 0.0, "p99": 0.0, "p99.9": 0.0},
    )
    return CpuNoise(**{**base, **kw})


def test_steal_from_an_engine_that_read_it_around_the_warm_up_is_not_shown():
    det = {
        "type": "detours",
        "rep": 0,
        "cpu": 0,
        "start_ns": 0,
        "runtime_ns": 1e9,
        "count": 0,
        "total_ns": 0.0,
        "max_ns": 0.0,
        "loop_ns": 10.0,
        "threshold_ns": 500.0,
        "detours": [],
    }
    old = {"type": "cpustat", "rep": 0, "resolution_ns": 1e7, "cpus": [{"cpu": 0, "steal": 3e7}]}
    s = summarize([det, old])
    assert s.cpus[0].steal_ns is None and "warm-up included" in s.steal_note
    assert "warm-up included" in _rendered(s)


def test_steal_beyond_every_detour_is_flagged():
    assert _cpu(steal_ns=5e7, steal_resolution_ns=1e7, total_ns=2e7).steal_exceeds_noise
    assert not _cpu(steal_ns=3e7, steal_resolution_ns=1e7, total_ns=2.62e7).steal_exceeds_noise
    s = NoiseSummary(
        cpus=[_cpu(steal_ns=5e7, steal_resolution_ns=1e7, steal_window_ns=1e9, total_ns=2e7)],
        detours=[],
        attribution="x",
        windows=[],
    )
    assert "exceeds all detours" in _rendered(s)


def _quiet(windows: int, step: float = 1e6, every: int = 0, delay_ns: float = 2e5, cpus: int = 1) -> NoiseSummary:
    """`windows` step-long windows per CPU, one `delay_ns` detour in every `every`-th."""
    detours = [
        type("D", (), {"cpu": c, "start_ns": int(k * step + 10), "duration_ns": delay_ns})()
        for c in range(cpus)
        for k in (range(0, windows, every) if every else ())
    ]
    return NoiseSummary(
        cpus=[], detours=detours, attribution="bpf", windows=[(c, 0, windows * step) for c in range(cpus)]
    )


def test_tail_at_scale_says_cannot_tell_with_too_few_windows():
    step = 1e6
    t = tail_at_scale(_quiet(500, step), step, nodes=(1, 10_000), delays_ns=(1e6,))
    far, one = t["nodes"]["10000"], t["nodes"]["1"]
    assert far["p_delayed"][">1000us"] == 0  # the point figure the bounds must qualify
    lo, hi = far["p_bounds"][">1000us"]
    assert lo == 0 and hi > 0.99 and far["told"][">1000us"] is False and far["slowdown_told"] is False
    # How long to tell: enough windows that none seen bounds the figure under 5 %.
    assert far["measure_s"] == pytest.approx(windows_to_tell(10_000) * step / 1e9)
    assert far["measure_s"] > 500 * step / 1e9
    lo1, hi1 = one["p_bounds"][">1000us"]
    assert one["told"][">1000us"] and lo1 == 0 < hi1 < 0.01  # 0 of 500 on one node: told, below 1 %
    text = _rendered(NoiseSummary(cpus=[], detours=[], attribution="x", windows=[]), t)
    assert "cannot tell" in text and "measure ≥" in text and "Clopper-Pearson" in text
    # Windows from more CPUs at once: less time to the same count.
    t2 = tail_at_scale(_quiet(500, step, cpus=2), step, nodes=(10_000,), delays_ns=(1e6,))
    assert t2["windows"] == 1000 and t2["nodes"]["10000"]["measure_s"] == pytest.approx(far["measure_s"] / 2)


def test_windows_to_tell_is_the_rule_it_states():
    for nodes in (1, 100, 10_000):
        n = windows_to_tell(nodes)
        step = 1e6
        told = tail_at_scale(_quiet(n, step), step, nodes=(nodes,), delays_ns=(1e5,))["nodes"][str(nodes)]
        assert told["told"][">100us"] and told["p_bounds"][">100us"][1] < TOLD_BELOW
        if n > 1:
            short = tail_at_scale(_quiet(n - 1, step), step, nodes=(nodes,), delays_ns=(1e5,))["nodes"][str(nodes)]
            assert short["p_bounds"][">100us"][1] >= TOLD_BELOW


def test_tail_at_scale_intervals_narrow_with_many_events():
    step = 1e6
    t = tail_at_scale(_quiet(100_000, step, every=10), step, nodes=(1, 10, 100), delays_ns=(1e5,))
    prev = (0.0, 0.0)
    for row in t["nodes"].values():
        lo, hi = row["p_bounds"][">100us"]
        p = row["p_delayed"][">100us"]
        assert lo <= p <= hi and row["told"][">100us"]
        assert lo >= prev[0] and hi >= prev[1]  # more nodes: more likely delayed, at both bounds
        prev = (lo, hi)
    lo, hi = t["nodes"]["1"]["p_bounds"][">100us"]
    assert lo < 0.1 < hi and hi - lo < 0.01
