"""`oslens tune`: `apply` sets what steadies a measurement and `reset` puts
every file it changed back byte for byte, from a state file written before
any change (so a second process resets what a first, since killed,
applied); on a model machine's tree where every setting exists, and on
this machine where many do not (each says why)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import one_line_error

# a model machine of two CPUs, every setting tunable
MODEL = {
    "sys/devices/system/cpu/online": "0-1\n",
    "sys/devices/system/cpu/intel_pstate/no_turbo": "0\n",
    "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
    "proc/sys/kernel/randomize_va_space": "2\n",
    "proc/sys/kernel/nmi_watchdog": "1\n",
    "proc/sys/kernel/perf_event_paranoid": "2\n",
    "proc/irq/10/smp_affinity_list": "0-1\n",
    "proc/irq/11/smp_affinity_list": "0\n",
    "proc/irq/12/smp_affinity_list": "1\n",
    **{f"sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor": "schedutil\n" for c in (0, 1)},
    **{f"sys/devices/system/cpu/cpu{c}/cpufreq/scaling_available_governors": "performance powersave schedutil\n"
       for c in (0, 1)},
    **{f"sys/devices/system/cpu/cpu{c}/cpuidle/state{s}/{f}": v for c in (0, 1)
       for s, lat in ((0, "0"), (1, "2"), (2, "100")) for f, v in (("latency", lat + "\n"), ("disable", "0\n"))},
}  # fmt: skip


def tune(*args: str, root: Path | None, data: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_DATA_HOME": str(data)}
    if root is not None:
        env["OSLENS_TUNE_ROOT"] = str(root)
    return subprocess.run([sys.executable, "-m", "oslens", "tune", *args], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip


@pytest.fixture
def model(tmp_path) -> Path:
    root = tmp_path / "root"
    for rel, text in MODEL.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_apply_tunes_every_setting_and_reset_restores_every_byte(model, tmp_path):
    data = tmp_path / "data"
    before = snapshot(model)
    p = tune("apply", "--cpus", "1", "--json", root=model, data=data)
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)["settings"]}
    assert all(r["tuned"] for r in rows.values()), rows
    after = snapshot(model)
    assert after["sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"] == b"performance"
    assert after["sys/devices/system/cpu/intel_pstate/no_turbo"] == b"1"
    # POLL (0 µs) stays; the states slower than 1 µs to leave are disabled
    assert [after[f"sys/devices/system/cpu/cpu0/cpuidle/state{s}/disable"] for s in range(3)] == [b"0\n", b"1", b"1"]
    # the interrupts on CPU 1 move to CPU 0; the one on CPU 0 alone stays
    assert [after[f"proc/irq/{n}/smp_affinity_list"] for n in (10, 11, 12)] == [b"0", b"0\n", b"0"]
    assert after["proc/sys/kernel/randomize_va_space"] == b"0" and after["proc/sys/kernel/nmi_watchdog"] == b"0"
    # the state file was written with the originals; a second apply (another process) keeps them
    state = data / "oslens" / "tune-state.json"
    assert json.loads(state.read_text())["files"][str(model / "proc/sys/kernel/nmi_watchdog")] == "1\n"
    assert tune("apply", "--cpus", "1", root=model, data=data).returncode == 0
    # a third process, as after a SIGKILL of the first: every file back, byte for byte
    p = tune("reset", "--json", root=model, data=data)
    assert p.returncode == 0, p.stderr
    assert all(f["restored"] for f in json.loads(p.stdout)["files"])
    assert snapshot(model) == before
    assert not state.exists()
    assert "nothing to reset" in tune("reset", root=model, data=data).stderr


def test_a_file_that_cannot_be_written_is_said_and_the_rest_still_resets(model, tmp_path):
    data = tmp_path / "data"
    before = snapshot(model)
    blocked = model / "proc/sys/kernel/nmi_watchdog"
    blocked.unlink()
    blocked.mkdir()  # a directory where the file was: it reads as missing, writing fails
    (model / "proc/sys/kernel/perf_event_paranoid").unlink()
    p = tune("apply", "--json", root=model, data=data)
    rows = {r["name"]: r for r in json.loads(p.stdout)["settings"]}
    assert rows["NMI watchdog"]["tuned"] is None and "no NMI watchdog" in rows["NMI watchdog"]["unavailable"]
    assert "give the measured CPUs" in rows["interrupts off the measured CPUs"]["unavailable"]
    assert tune("reset", root=model, data=data).returncode == 0
    del before["proc/sys/kernel/nmi_watchdog"], before["proc/sys/kernel/perf_event_paranoid"]
    assert snapshot(model) == before


def test_show_on_this_machine_says_what_it_cannot_tune_and_why(tmp_path):
    p = tune("show", "--json", root=None, data=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["settings"]
    assert len(rows) == 9
    for r in rows:
        assert r["tuned"] in (True, False) or r["unavailable"], r  # never a silent blank
    cpufreq = next(r for r in rows if r["name"] == "cpufreq governor")
    if not Path("/sys/devices/system/cpu/cpu0/cpufreq").exists():
        assert "no cpufreq" in cpufreq["unavailable"]


@pytest.mark.skipif(os.geteuid() != 0, reason="tuning this machine needs root")
def test_apply_and_reset_on_this_machine_restore_every_file_it_changed(tmp_path):
    data = tmp_path / "data"
    p = tune("apply", "--json", root=None, data=data)
    try:
        state = data / "oslens" / "tune-state.json"
        changed = json.loads(state.read_text())["files"] if state.exists() else {}
    finally:
        r = tune("reset", "--json", root=None, data=data)
    assert p.returncode in (0, 1), p.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    for path, old in changed.items():
        assert Path(path).read_text() == old, path


def test_a_bad_cpu_list_is_refused_in_one_line(tmp_path, model):
    p = tune("apply", "--cpus", "0-x", root=model, data=tmp_path)
    assert p.returncode == 2 and "--cpus" in one_line_error(p.stderr)
