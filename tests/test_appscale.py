"""`appscale`: the command really runs on the CPUs asked for, {n} is the
count, a failing command is reported (not timed), the fits recover known
parameters, the built-in workloads contrast as they should, and nothing
(process, cgroup, input files) is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

from oslens import cgroups, engine
from oslens.analysis.appscale import summarize
from oslens.analysis.scaling import usl

from conftest import NCPU, one_line_error, oslens, oslens_until

COUNTS = sorted({1, NCPU})


def our_cgroups() -> list[Path]:
    m = cgroups.mounts()
    found = []
    for root in (m.v2, m.v1_cpuset, m.v1_cpuacct):
        if root is not None:
            found += [d for d in root.iterdir() if d.name.startswith(cgroups.PREFIX)]
    return found


@pytest.fixture
def no_cgroups_left():
    before = set(our_cgroups())
    yield
    assert set(our_cgroups()) - before == set(), "cgroups left behind"


def appscale(tmp_path: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return oslens("appscale", "-q", "--json", *args, db=tmp_path / "s.db", **kw)


def test_command_runs_only_on_the_cpus_asked_for_with_n_substituted(tmp_path, no_leaks, no_cgroups_left):
    probe = (
        f"grep Cpus_allowed_list /proc/self/status > {tmp_path}/affinity_{{n}}; "
        f"cat /proc/self/cgroup > {tmp_path}/cgroup_{{n}}"
    )
    p = appscale(tmp_path, "--cpu-counts", ",".join(map(str, COUNTS)), "--reps", "1", "--", "sh", "-c", probe)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    for n in COUNTS:
        planned = engine.placement(n, "compact")
        seen = (tmp_path / f"affinity_{n}").read_text().split(":")[1].strip()
        cpus = set()
        for part in seen.split(","):
            a, _, b = part.partition("-")
            cpus |= set(range(int(a), int(b or a) + 1))
        assert cpus == set(planned), f"{n} CPUs: ran on {seen}, planned {planned}"
        row = next(r for r in doc["rows"] if r["n"] == n)
        assert row["cpus"] == planned and row["ok"] == 1
        if "cgroup" in row["confinement"]:
            assert "oslens." in (tmp_path / f"cgroup_{n}").read_text()


def test_a_failing_command_is_reported_not_timed(tmp_path, no_leaks, no_cgroups_left):
    p = appscale(tmp_path, "--cpu-counts", "1", "--reps", "2", "--", "sh", "-c", "echo broken >&2; exit 3")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    row = doc["rows"][0]
    assert row["ok"] == 0 and "wall_s" not in row and "speedup" not in row
    assert [f["code"] for f in row["failures"]] == [3, 3]
    assert "broken" in row["failures"][0]["output_tail"]
    assert doc["failed_points"] == [1]


def test_a_command_failing_at_one_count_only(tmp_path, no_leaks, no_cgroups_left):
    if NCPU < 2:
        pytest.skip("needs 2 CPUs")
    p = appscale(tmp_path, "--cpu-counts", "1,2", "--reps", "1", "--", "sh", "-c", "test {n} -eq 1")
    assert p.returncode == 1
    rows = {r["n"]: r for r in json.loads(p.stdout)["rows"]}
    assert rows[1]["ok"] == 1 and rows[1]["wall_s"]["median"] > 0
    assert rows[2]["ok"] == 0 and rows[2]["failures"][0]["code"] == 1


def synthetic(sigma: float, kappa: float, counts, reps: int = 3, noise: float = 0.01, seed: int = 1) -> list[dict]:
    rng = np.random.default_rng(seed)
    recs = []
    for n in counts:
        for r in range(reps):
            wall = 10.0 / usl(n, 1.0, sigma, kappa) * (1 + rng.normal(0, noise))
            recs.append(
                {
                    "type": "point",
                    "n": n,
                    "cpus": list(range(n)),
                    "rep": r,
                    "status": "ok",
                    "how": "exited",
                    "code": 0,
                    "signal": None,
                    "wall_ns": int(wall * 1e9),
                    "confinement": "test",
                    "cpu_source": "test",
                    "user_ns": int(wall * 1e9),
                    "system_ns": 0,
                    "usage_ns": None,
                    "irq_ns": 0,
                    "softirq_ns": 0,
                    "nvcsw": 0,
                    "nivcsw": 0,
                    "min_flt": 0,
                    "maj_flt": 0,
                }
            )
    return recs


@pytest.mark.parametrize("sigma, kappa", [(0.05, 0.001), (0.2, 0.0), (0.02, 0.0005)])
def test_fits_recover_known_parameters(sigma, kappa):
    counts = [1, 2, 4, 8, 16, 32, 48]
    fits = summarize(synthetic(sigma, kappa, counts), available_cpus=48)["fits"]
    u = fits["usl"]
    assert u["fitted"]
    assert u["sigma"] == pytest.approx(sigma, abs=0.02)
    assert u["kappa"] == pytest.approx(kappa, abs=2e-4)
    if kappa > 0:
        assert u["peak_n"] == pytest.approx(np.sqrt((1 - sigma) / kappa), rel=0.3)
        assert u["peak_is_extrapolated"] == (u["peak_n"] > 48)
    assert all(p["extrapolated"] for p in u["predicted"])
    a = fits["amdahl"]
    assert a["fitted"] and 0 <= a["serial_fraction"] <= 1


def test_speedup_and_efficiency_are_against_the_smallest_count():
    recs = synthetic(0.0, 0.0, [2, 4, 8], reps=1, noise=0.0)
    s = summarize(recs)
    rows = {r["n"]: r for r in s["rows"]}
    assert s["base_n"] == 2
    assert rows[8]["speedup"] == pytest.approx(4.0, rel=1e-6)
    assert rows[8]["efficiency"] == pytest.approx(1.0, rel=1e-6)
    assert not s["fits"]["amdahl"]["fitted"] and "1 CPU" in s["fits"]["amdahl"]["why"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_leaves_nothing(tmp_path, sig, no_leaks, no_cgroups_left):
    marker = tmp_path / "started"
    proc = oslens_until(
        marker,
        "appscale",
        "-q",
        "--cpu-counts",
        "1",
        "--reps",
        "3",
        "--",
        "sh",
        "-c",
        f"touch {marker}; sleep 1000 & sleep 1000",
        db=tmp_path / "s.db",
    )
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    left = subprocess.run(["pgrep", "-f", "sleep 1000"], capture_output=True, text=True).stdout.strip()
    assert left == "", "the command's processes outlived the run"
    runs = json.loads(oslens("runs", "--json", db=tmp_path / "s.db").stdout)
    assert runs[-1]["status"] == "incomplete"


@pytest.mark.parametrize(
    "args, word",
    [
        ([], "one application"),
        (["--workload", "kmeans", "--", "true"], "one application"),
        (["--workload", "no-such-app"], "no workload"),
        (["--cpu-counts", "0", "--", "true"], "--cpu-counts"),
        (["--cpu-counts", "100000", "--", "true"], "--cpu-counts"),
        (["--reps", "0", "--", "true"], "--reps"),
        (["--reps", "9" * 30, "--", "true"], "--reps"),  # not a loop that never ends
        (["--size", "5", "--", "true"], "--size"),
        # the engine's own limits, checked before any repetition runs
        (["--workload", "kmeans", "--size", "1"], "--size"),
        (["--workload", "kmeans", "--size", "1", "--dry-run"], "--size"),
        (["--", "/no/such/program"], "cannot run"),
    ],
)
def test_bad_appscale_input_is_one_line_and_stores_nothing(tmp_path, args, word):
    p = oslens("appscale", *args, db=tmp_path / "s.db")
    assert p.returncode == 2, p.stderr
    assert word in one_line_error(p.stderr)
    assert not (tmp_path / "s.db").exists() or json.loads(oslens("runs", "--json", db=tmp_path / "s.db").stdout) == []


def test_compute_scales_in_user_time_and_the_kernel_heavy_one_spends_in_the_kernel(tmp_path, no_leaks, no_cgroups_left):
    shares = {}
    for workload, size in (("kmeans", "200000"), ("psearchy", "3000")):
        p = appscale(
            tmp_path, "--workload", workload, "--size", size, "--cpu-counts", ",".join(map(str, COUNTS)), "--reps", "1"
        )
        assert p.returncode == 0, p.stderr
        rows = json.loads(p.stdout)["rows"]
        assert all(r["ok"] == 1 and r["user_s"] > 0 for r in rows)
        shares[workload] = max(r["system_share"] for r in rows)
    assert shares["kmeans"] < 0.05
    assert shares["psearchy"] > 0.15 and shares["psearchy"] > 4 * shares["kmeans"]
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("oslens.appscale.*")), "input files left behind"


def test_groups_left_by_a_killed_oslens_are_swept(monkeypatch):
    m = cgroups.mounts()
    root = m.v1_cpuset or m.v2
    if root is None or os.geteuid() != 0:
        pytest.skip("no cgroup file system to write to")
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = root / f"{cgroups.PREFIX}{dead.pid}.left"
    stale.mkdir()
    try:
        monkeypatch.setattr(cgroups, "_swept", False)
        with cgroups.Confinement([engine.topology()["cpus"][0]["cpu"]], "sweeper"):
            assert not stale.exists()
    finally:
        if stale.exists():
            stale.rmdir()
