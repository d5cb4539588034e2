"""`noise`: the detour probe finds interruptions it is shown, attribution
names their causes, and nothing stays loaded in the kernel."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest

from oslens import engine
from oslens.analysis.noise import NoiseSummary, summarize, tail_at_scale

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


def detour_run(*extra: str, duration: float = 3.0) -> list[dict]:
    r = run_engine(
        "run",
        "--probe",
        "detour",
        "--cpus",
        str(CPU),
        "--duration",
        str(duration),
        "--warmup",
        "0.1",
        "--interval",
        "0.5",
        "--trace",
        *extra,
    )
    assert r.rc == 0, r.stderr
    return r.records


def attribution_or_skip(records: list[dict]) -> None:
    trace = next(r for r in records if r["type"] == "trace")
    if not trace["available"]:
        pytest.skip(f"attribution unavailable here: {trace['reason']}")


def test_injected_detours_are_found_measured_and_named(no_leaks):
    # A detour is the injected busy time plus the wake-up interrupt and two
    # context switches around it (up to ~100 µs in a VM): 5 ms keeps that
    # fixed part within the 10 % the probe must meet.
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
            "2.6",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    records = detour_run(duration=3.0)
    out, err = inject.communicate(timeout=30)
    assert inject.returncode == 0, err
    injected = json.loads(out)["intervals"]
    det = next(r for r in records if r["type"] == "detours")
    t0, t1 = det["start_ns"], det["start_ns"] + det["runtime_ns"]
    inside = [(s, e) for s, e in injected if t0 < s and e < t1]
    assert len(inside) >= 80
    spans = [(end - dur, end, dur) for end, dur in det["detours"]]
    found = []
    for s, e in inside:
        match = [d for d in spans if d[0] <= s + 20_000 and d[1] >= e - 20_000]
        if match:
            found.append(max(match, key=lambda d: d[2])[2] / (e - s))
    assert len(found) >= 0.95 * len(inside), f"found {len(found)} of {len(inside)} injected detours"
    ratios = np.array(found)
    assert np.mean((ratios >= 0.99) & (ratios <= 1.10)) >= 0.95, f"durations off: {np.percentile(ratios, [5, 50, 95])}"

    attribution_or_skip(records)
    s = summarize(records)
    named = [d for d in s.detours if d.duration_ns > 0.9 * busy_us * 1000]
    assert named and np.mean([d.cause.startswith("oslens-inject") for d in named]) >= 0.95, {d.cause for d in named}


def test_timer_signal_found_at_its_rate_and_attributed(no_leaks):
    hz, busy_us, duration = 100, 300, 3.0
    records = detour_run("--opt", f"signal_hz={hz}", "--opt", f"signal_busy_us={busy_us}", duration=duration)
    det = next(r for r in records if r["type"] == "detours")
    long = [end for end, dur in det["detours"] if dur >= busy_us * 1000]
    rate = len(long) / (det["runtime_ns"] / 1e9)
    assert abs(rate - hz) / hz < 0.15, f"{rate:.1f}/s of ≥{busy_us} µs detours, signals at {hz}/s"
    attribution_or_skip(records)
    s = summarize(records)
    signalled = [d for d in s.detours if d.duration_ns >= busy_us * 1000]
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
        (["--threshold-ns", "0"], "--threshold-ns"),
        (["--duration", "0"], "--duration"),
        (["--step-us", "0"], "--step-us"),
        (["--ftq-us", "0"], "--ftq-us"),
        (["--compete", "fork"], "every CPU"),
    ],
)
def test_bad_noise_input(tmp_path, args, word):
    p = oslens("noise", "--duration", "0.2", *args, db=tmp_path / "s.db")
    assert p.returncode == 2
    assert word in one_line_error(p.stderr)
    assert not (tmp_path / "s.db").exists()


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
    assert 1.002 < t["nodes"]["100"]["expected_slowdown"] <= 1.2
