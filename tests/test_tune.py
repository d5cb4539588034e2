"""`oslens tune`: `apply` sets what steadies a measurement and `reset` puts
every file it changed back byte for byte, from a state file written before
any change (so a second process resets what a first, since killed,
applied); on a model machine's tree where every setting exists, and on
this machine where many do not (each says why)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import can_run_as_nobody, one_line_error

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


AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
needs_nobody = pytest.mark.skipif(not can_run_as_nobody(), reason="needs root, setpriv and a 'nobody' user")


def tune(*args: str, root: Path | None, data: Path | None, as_nobody: bool = False,
         home: str | None = None, prefix: list[str] | None = None) -> subprocess.CompletedProcess:  # fmt: skip
    """`oslens tune ARGS` with its state under `data` (XDG_DATA_HOME; None:
    the home directory's), on the model tree `root` (None: this machine)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_") and k != "OSLENS_TUNE_ROOT"}
    if data is not None:
        env["XDG_DATA_HOME"] = str(data)
    if root is not None:
        env["OSLENS_TUNE_ROOT"] = str(root)
    if home is not None:
        env["HOME"] = home
    if "PYTHONPATH" in env:  # PYTHONPATH=src: the same sources from any directory, as any user
        env["PYTHONPATH"] = os.pathsep.join(map(os.path.abspath, env["PYTHONPATH"].split(os.pathsep)))
    argv = [*(prefix or []), *(AS_NOBODY if as_nobody else []), sys.executable, "-m", "oslens", "tune", *args]
    if not as_nobody:
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    # nobody's oslens keeps its runtime entries in a directory of this call's, not /tmp/oslens-runtime-UID for good
    runtime_home = Path(tempfile.mkdtemp(prefix="oslens-test-nobody-runtime.", dir="/tmp"))
    try:
        os.chown(runtime_home, nobody_uid(), -1)
        env["OSLENS_RUNTIME_DIR"] = str(runtime_home / "runtime")
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    finally:
        shutil.rmtree(runtime_home, ignore_errors=True)


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
    assert state.stat().st_mode & 0o777 == 0o600 and state.parent.stat().st_mode & 0o777 == 0o700  # root's alone
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


# ------------------------------------------------ the state: whose, and what it may name


def state_of(data: Path) -> Path:
    return data / "oslens" / "tune-state.json"


def nobody_uid() -> int:
    return pwd.getpwnam("nobody").pw_uid


@pytest.fixture
def nobody_place():
    """A directory of root's (0755) that 'nobody' can reach, wherever tmp_path
    is (pytest's are 0700): what is made in it is the test's to remove."""
    place = Path(tempfile.mkdtemp(prefix="tune-test-", dir="/tmp"))
    try:
        place.chmod(0o755)
        probe = tune("--help", root=None, data=None, as_nobody=True)
        if probe.returncode != 0:
            pytest.skip(f"'nobody' cannot run this checkout's oslens: {probe.stderr.strip()[-200:]}")
        yield place
    finally:
        shutil.rmtree(place)


def nobody_dir(place: Path) -> Path:
    d = place / "d"
    d.mkdir()
    os.chown(d, nobody_uid(), -1)
    return d


@needs_nobody
@pytest.mark.parametrize(
    "other", ["nobody owns D", "D is writable by all", "nobody owns D/oslens", "nobody owns the tree"]
)
def test_apply_refuses_a_place_another_user_can_change(model, tmp_path, other):
    data = tmp_path / "D"
    data.mkdir()
    if other == "nobody owns D":
        os.chown(data, nobody_uid(), -1)
    elif other == "D is writable by all":
        data.chmod(0o777)
    elif other == "nobody owns D/oslens":
        (data / "oslens").mkdir(mode=0o700)
        os.chown(data / "oslens", nobody_uid(), -1)
    else:
        os.chown(model, nobody_uid(), -1)
    before = snapshot(model)
    p = tune("apply", "--cpus", "1", root=model, data=data)
    assert p.returncode == 2 and "refused" in one_line_error(p.stderr)
    assert snapshot(model) == before
    assert not state_of(data).exists() and not state_of(data).with_suffix(".tmp").exists()
    if other in ("nobody owns D", "D is writable by all"):
        assert not (data / "oslens").exists()


@needs_nobody
def test_a_state_another_user_swapped_in_is_refused_and_nothing_is_written(nobody_place, tmp_path):
    """The issue's attack: root's state directory sits in a directory of
    nobody's, who moves it aside and puts their own state in its place."""
    d = nobody_dir(nobody_place)
    (d / "oslens").mkdir(mode=0o700)
    target = tmp_path / "roots-file"
    target.write_text("root's own\n")
    planted = json.dumps({"root": "/", "files": {str(target): "text"}})
    swap = 'mv "$1/oslens" "$1/old" && mkdir "$1/oslens" && printf %s "$2" > "$1/oslens/tune-state.json"'
    p = subprocess.run([*AS_NOBODY, "sh", "-c", swap, "sh", str(d), planted], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr  # the swap is possible: what follows is what root does with it
    p = tune("reset", root=None, data=d)
    assert p.returncode == 2
    assert "belongs to nobody" in one_line_error(p.stderr)
    assert target.read_bytes() == b"root's own\n"
    assert json.loads(state_of(d).read_text())["files"] == {str(target): "text"}  # left for a person to see


@pytest.mark.parametrize("named", ["a file of root's", "a path with ..", "a link out of the tree", "core_pattern"])
def test_a_state_naming_a_file_of_no_setting_is_refused_whole(model, tmp_path, named):
    target = tmp_path / "target"
    target.write_text("root's own\n")
    path = {
        "a file of root's": str(target),
        "a path with ..": f"{model}/proc/irq/10/../../../../target",
        "a link out of the tree": f"{model}/proc/irq/13/smp_affinity_list",
        "core_pattern": f"{model}/proc/sys/kernel/core_pattern",  # in the tree, but no setting's
    }[named]
    (model / "proc/irq/13").symlink_to(tmp_path)  # for the link: proc/irq/13/smp_affinity_list is tmp_path's
    (tmp_path / "smp_affinity_list").write_text("0\n")
    (model / "proc/sys/kernel/core_pattern").write_text("core\n")
    data = tmp_path / "data"
    (data / "oslens").mkdir(parents=True, mode=0o700)
    nmi = str(model / "proc/sys/kernel/nmi_watchdog")
    # an entry reset may write comes first: a reset that checked as it went would write it
    state_of(data).write_text(json.dumps({"root": str(model), "files": {nmi: "0\n", path: "1\n"}}))
    before, around = snapshot(model), snapshot(tmp_path / "data")
    p = tune("reset", root=model, data=data)
    assert p.returncode == 2
    line = one_line_error(p.stderr)
    assert "may not write" in line and "nothing was written" in line
    assert snapshot(model) == before and snapshot(tmp_path / "data") == around
    assert target.read_bytes() == b"root's own\n" and (tmp_path / "smp_affinity_list").read_bytes() == b"0\n"


@pytest.mark.parametrize(
    "rel, value",
    [
        ("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "ondemand\n"),  # not one the CPU offers
        ("sys/kernel/mm/transparent_hugepage/enabled", "always [defer] never\n"),
        ("sys/kernel/mm/transparent_hugepage/enabled", "always madvise never\n"),  # none chosen
        ("sys/devices/system/cpu/cpu0/cpuidle/state1/disable", "2\n"),
        ("sys/devices/system/cpu/intel_pstate/no_turbo", "1\n0\n"),
        ("proc/sys/kernel/randomize_va_space", "3\n"),
        ("proc/sys/kernel/perf_event_paranoid", "-2\n"),
        ("proc/sys/kernel/perf_event_paranoid", "01\n"),
        ("proc/irq/10/smp_affinity_list", "0-2\n"),  # CPU 2 is not in the model
        ("proc/irq/10/smp_affinity_list", "0-99999999999\n"),
    ],
)
def test_a_value_its_setting_does_not_allow_is_refused_whole(model, tmp_path, rel, value):
    data = tmp_path / "data"
    (data / "oslens").mkdir(parents=True, mode=0o700)
    nmi = str(model / "proc/sys/kernel/nmi_watchdog")
    state_of(data).write_text(json.dumps({"root": str(model), "files": {nmi: "0\n", str(model / rel): value}}))
    before = snapshot(model)
    p = tune("reset", root=model, data=data)
    assert p.returncode == 2 and "is not a value of" in one_line_error(p.stderr)
    assert snapshot(model) == before


def test_a_state_of_another_tree_is_refused(model, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(model, other)
    data = tmp_path / "data"
    assert tune("apply", root=model, data=data).returncode == 0
    untouched = snapshot(other)
    p = tune("reset", root=other, data=data)
    assert p.returncode == 2 and f"not of {other}" in one_line_error(p.stderr)
    assert snapshot(other) == untouched
    assert tune("reset", root=model, data=data).returncode == 0 and snapshot(model) == untouched


@pytest.mark.parametrize("name", ["tune-state.json", "tune-state.tmp"])
@pytest.mark.parametrize("command", ["apply", "reset"])
def test_a_link_where_the_state_would_be_is_never_written_through(model, tmp_path, name, command):
    victim = tmp_path / "victim"
    victim.write_text("root's own\n")
    data = tmp_path / "data"
    (data / "oslens").mkdir(parents=True, mode=0o700)
    (data / "oslens" / name).symlink_to(victim)
    before = snapshot(model)
    p = tune(command, root=model, data=data)
    assert p.returncode == 2 and "symbolic link" in one_line_error(p.stderr)
    assert victim.read_bytes() == b"root's own\n" and snapshot(model) == before
    assert (data / "oslens" / name).is_symlink()


@needs_nobody
def test_another_user_is_told_in_one_line_that_apply_needs_root(nobody_place):
    # as `su -s /bin/bash nobody -c 'oslens tune apply'` runs it: a home that cannot be made, no XDG variables
    for command, rc, says in (("apply", 2, "needs root"), ("show", 0, None), ("reset", 0, "nothing to reset")):
        p = tune(command, root=None, data=None, as_nobody=True, home="/nonexistent")
        assert p.returncode == rc and "Traceback" not in p.stderr, p.stderr
        assert says is None or says in one_line_error(p.stderr)
        assert "changed" not in p.stderr  # show: nothing pending
    # a data directory it could write in: still nothing made there
    d = nobody_dir(nobody_place)
    p = tune("apply", root=None, data=d, as_nobody=True)
    assert p.returncode == 2 and "needs root" in one_line_error(p.stderr)
    assert list(d.iterdir()) == []
    # a state there (nobody's own): reset refuses it, and keeps it
    plant = 'mkdir "$1/oslens" && printf %s "$2" > "$1/oslens/tune-state.json"'
    state = json.dumps({"root": "/", "files": {"/proc/sys/kernel/nmi_watchdog": "1\n"}})
    assert subprocess.run([*AS_NOBODY, "sh", "-c", plant, "sh", str(d), state]).returncode == 0
    p = tune("reset", root=None, data=d, as_nobody=True)
    assert p.returncode == 2 and "needs root" in one_line_error(p.stderr)
    assert state_of(d).read_text() == state


# ------------------------------------------------ crashes and failures: never a change claimed that did not happen


def test_a_whole_state_left_in_tmp_is_completed_and_said(model, tmp_path):
    data = tmp_path / "data"
    before = snapshot(model)
    assert tune("apply", "--cpus", "1", root=model, data=data).returncode == 0
    tmp = state_of(data).with_suffix(".tmp")
    state_of(data).rename(tmp)  # what a kill between the writing and the rename leaves
    p = tune("reset", root=model, data=data)
    assert p.returncode == 0, p.stderr
    assert [line for line in p.stderr.splitlines() if "completed" in line] == [
        f"completed the tuning state an interrupted `oslens tune` left in {tmp}"
    ]
    assert snapshot(model) == before and not tmp.exists() and not state_of(data).exists()


@pytest.mark.parametrize("leftover", ["cut short", "beside a state"])
def test_an_unfinished_tmp_is_discarded_and_said(model, tmp_path, leftover):
    data = tmp_path / "data"
    before = snapshot(model)
    tmp = state_of(data).with_suffix(".tmp")
    if leftover == "cut short":
        # a kill while the first apply wrote its state: nothing was changed yet
        tmp.parent.mkdir(parents=True, mode=0o700)
        tmp.write_text(
            json.dumps({"root": str(model), "files": {str(model / "proc/sys/kernel/nmi_watchdog"): "0\n"}})[:-9]
        )
        p = tune("apply", "--cpus", "1", root=model, data=data)
    else:
        # a kill while a second apply wrote a newer state, which never took the kept one's place
        assert tune("apply", "--cpus", "1", root=model, data=data).returncode == 0
        state = json.loads(state_of(data).read_text())
        state["files"].pop(str(model / "proc/sys/kernel/nmi_watchdog"))
        tmp.write_text(json.dumps(state))
        p = tune("reset", root=model, data=data)
    assert p.returncode == 0, p.stderr
    assert len([line for line in p.stderr.splitlines() if line.startswith(f"discarded {tmp}, ")]) == 1
    assert not tmp.exists()
    # never reused: the state restored from is whole (the apply's own, or the one kept)
    assert tune("reset", root=model, data=data).returncode == 0
    assert snapshot(model) == before and not state_of(data).exists()


def read_only_apply(blocked: Path, *args: str, root: Path, data: Path) -> subprocess.CompletedProcess:
    """`oslens tune apply ARGS` where `blocked` is mounted read-only (in a mount
    namespace of its own): a write that fails for root too, as a file's mode
    would not make it."""
    ro = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", ro, "sh", str(blocked)]
    return tune("apply", *args, root=root, data=data, prefix=prefix)


@pytest.fixture
def read_only_mounts(tmp_path):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")
    probe = tmp_path / "probe"
    probe.write_text("1\n")
    ro = 'mount --bind -o ro "$1" "$1" && exec sh -c ": > \\"$1\\"" sh "$1"'
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", ro, "sh", str(probe)],
                       capture_output=True, text=True)  # fmt: skip
    if "Read-only" not in p.stderr:
        pytest.skip(f"no read-only bind mount here: {p.stderr.strip()}")
    probe.unlink()


def test_a_write_that_fails_is_not_recorded(model, tmp_path, read_only_mounts):
    data = tmp_path / "data"
    before = snapshot(model)
    p = read_only_apply(model / "proc/sys/kernel/nmi_watchdog", "--cpus", "1", "--json", root=model, data=data)
    assert p.returncode == 1, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)["settings"]}
    assert "Read-only" in " ".join(rows["NMI watchdog"]["failed"])
    after = snapshot(model)
    changed = {rel for rel in before if after[rel] != before[rel]}
    assert changed and "proc/sys/kernel/nmi_watchdog" not in changed
    # the state names exactly the files that changed, and show counts those
    recorded = json.loads(state_of(data).read_text())["files"]
    assert {str(Path(f).relative_to(model)) for f in recorded} == changed
    assert f"changed {len(changed)} files" in tune("show", root=model, data=data).stderr
    assert tune("reset", root=model, data=data).returncode == 0 and snapshot(model) == before
    # where the only write fails, nothing is pending and no state is kept
    tiny = tmp_path / "tiny"
    (tiny / "proc/sys/kernel").mkdir(parents=True)
    (tiny / "proc/sys/kernel/nmi_watchdog").write_text("1\n")
    p = read_only_apply(tiny / "proc/sys/kernel/nmi_watchdog", root=tiny, data=data)
    assert p.returncode == 1 and not state_of(data).exists()
    p = tune("show", root=tiny, data=data)
    assert p.returncode == 0 and "changed" not in p.stderr
    assert "nothing to reset" in tune("reset", root=tiny, data=data).stderr


def test_files_put_back_by_hand_are_said_to_be_unchanged(model, tmp_path):
    data = tmp_path / "data"
    before = snapshot(model)
    assert tune("apply", "--cpus", "1", root=model, data=data).returncode == 0
    for rel, content in before.items():
        (model / rel).write_bytes(content)
    assert "changed" not in tune("show", root=model, data=data).stderr
    p = tune("reset", root=model, data=data)
    assert p.returncode == 0 and "nothing was changed" in one_line_error(p.stderr)
    assert snapshot(model) == before and not state_of(data).exists()
