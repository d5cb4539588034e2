"""Nothing outlives a SIGKILL of the whole process group: every oslens
writes down what it makes (oslens.runtime) and the next one removes what a
dead one left. Real engine, real kernel; `oslens doctor` on fabricated
leftovers of a dead and of a live process."""

from __future__ import annotations

import ctypes
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from oslens import leftovers, runtime

from conftest import NCPU, SESSION_TMP, TWO, engine_bin, one_line_error, oslens, oslens_tmp

# -------------------------------------------------------------- looking


def session_processes(sid: int) -> list[int]:
    return list(leftovers.session_processes(sid))


def measuring(sid: int) -> bool:
    """An engine of the session has a child: its workers (run) or its
    command (profile), so set-up is done and the measurement under way."""
    procs = leftovers.session_processes(sid)
    engines = {p for p in procs if leftovers.exe_of(p).startswith(engine_bin())}
    return any(int(st[2]) in engines for st in procs.values())


def sems() -> dict[int, int]:
    """semid -> key."""
    return runtime.sysv_sems()


def ledger_sems(entry: Path) -> set[int]:
    """The sets an entry's engine ledgers say were made."""
    return {i for ledger in entry.glob("engine.*") for i in runtime.ledger_sem_keys(ledger)[0].values()}


# ------------------------------------------------------------- killing


def _engine_run(*args: str) -> list[str]:
    return ["scale", *args, "--workers", str(TWO), "--duration", "60", "--reps", "1", "--warmup", "0"]


CASES = {
    "sem": _engine_run("--probe", "sem"),
    "semop": _engine_run("--probe", "semop"),
    "mmap-own-file": _engine_run("--probe", "mmap:own-file"),
    "fault-file": _engine_run("--probe", "fault:file", "--opt", "region_mb=8"),
    "mmap-munmap-file": _engine_run("--probe", "mmap-munmap:file-4k"),
    "open": _engine_run("--probe", "open:shared"),
    "getdents64": _engine_run("--probe", "getdents64"),
    "write-file": _engine_run("--probe", "write:file-4k"),
    "fork": _engine_run("--probe", "fork"),
    "fork-exec": _engine_run("--probe", "fork-exec"),
    "thread-mode": _engine_run("--probe", "sem,socket:unix", "--mode", "thread"),
    "sendrecv": _engine_run("--probe", "sendrecv:tcp-64"),
    "pingpong": _engine_run("--probe", "pingpong:pipe"),
    "latency": ["latency", "--probe", "semop", "--duration", "60", "--reps", "1"],
    "noise": ["noise", "--cpus", "0", "--duration", "60"],
    "timerlat": ["timerlat", "--cpus", str(max(os.sched_getaffinity(0))), "--duration", "60"],
    "profile": ["profile", "--", "sleep", "60"],
    "appscale": ["appscale", "--cpu-counts", "1", "--reps", "1", "--", "sleep", "60"],
}
if NCPU >= 2:
    # alone first, then with the competitor: killed while both run
    CASES["latency-compete"] = ["latency", "--probe", "getppid", "--compete", "sem", "--duration", "5", "--reps", "1"]


@contextmanager
def outranking_the_run():
    """This test at a real-time priority while it starts, watches and kills
    a run; what it starts runs at the normal one (SCHED_RESET_ON_FORK). A
    partner probe's workers (sem, a pipe ping-pong: two tasks handing one
    CPU to each other) can keep every other runnable task off the CPUs for
    as long as they run (seen here: 60 s, kernel 6.18), and a kill that
    lands after the run has ended tests nothing."""
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(1))
    try:
        yield
    finally:
        os.sched_setscheduler(0, policy, param)


def outranking_the_run_too(sid: int) -> None:
    """Gives the oslens of session sid, about to be SIGKILLed, and the
    engines it started this test's real-time priority: a killed task still
    has to run to exit, and an orphaned engine to end its repetition in
    order, and the run's two-task pairs can keep a SCHED_OTHER task off
    every CPU until they end (outranking_the_run). Seen in fresh-clone run
    71: the killed oslens not gone 30 s later, and the kernel's log said
    "rcu_preempt kthread starved for 14752 jiffies" while two engine
    processes held the two CPUs. What is tested is what the kill leaves,
    not how long a starved task takes to die or to clean up."""
    procs = leftovers.session_processes(sid)
    # an engine's master is its main thread: in thread mode its workers are its other threads
    masters = [pid for pid, st in procs.items() if int(st[2]) == sid and leftovers.exe_of(pid).startswith(engine_bin())]
    try:
        tids = [int(task.name) for task in Path(f"/proc/{sid}/task").iterdir()]
    except FileNotFoundError:  # gone already
        tids = []
    for tid in [*tids, *masters]:
        try:
            os.sched_setscheduler(tid, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(1))
        except ProcessLookupError:  # the thread ended meanwhile
            pass


def what_runs(sid: int) -> str:
    """The live processes of session sid — pid, command, state, where each
    waits — and the machine's runnable tasks: a failure's message."""
    out = []
    for pid, st in sorted(leftovers.session_processes(sid).items()):
        try:
            wchan = Path(f"/proc/{pid}/wchan").read_text() or "-"
        except OSError:
            wchan = "?"
        out.append(f"{pid} {st[0]} {st[1]} {wchan}")
    running = next((line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("procs_running")))
    return "; ".join(out) + f" ({running})"


def _entry_of(pid: int) -> Path | None:
    r = runtime.root()
    found = list(r.glob(f"{pid}.*")) if r else []
    return found[0] if found else None


def _start_measuring(case: str, db: Path) -> tuple[subprocess.Popen, Path]:
    """Starts a case in a session of its own (its id: the top pid) and
    returns once it measures, with its runtime entry holding its SysV sets
    if it makes any; killed with its group if it never gets there."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "oslens", "-q", *CASES[case]],
        env={**os.environ, "OSLENS_DB": str(db)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        with_sems = case in ("sem", "semop", "thread-mode", "latency-compete")
        while not (measuring(proc.pid) and (entry := _entry_of(proc.pid)) and (ledger_sems(entry) or not with_sems)):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "never started measuring"
            time.sleep(0.05)
    except BaseException:
        outranking_the_run_too(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        raise
    return proc, entry


@pytest.mark.parametrize("case", sorted(CASES))
def test_sigkill_of_the_whole_group_leaves_nothing_after_the_next_command(case, tmp_path):
    db = tmp_path / "db"
    tmp_before = oslens_tmp()
    with outranking_the_run():
        proc, entry = _start_measuring(case, db)
        sid = proc.pid
        try:
            time.sleep(0.3)
            made = ledger_sems(entry)
            assert made <= set(sems()), "the engine's sets are written down as they exist"
            progs = leftovers.bpf_of_session(sid)
            assert measuring(sid), "the run ended before it was killed"
        finally:
            outranking_the_run_too(sid)
            os.killpg(sid, signal.SIGKILL)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the killed oslens was not gone 30 s later: {what_runs(sid)}")
    deadline = time.monotonic() + 30
    while session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.05)
    before_next = what_runs(sid)

    # One more command, any: it sweeps what the dead one left.
    p = oslens("runs", db=db)
    assert p.returncode == 0, p.stderr

    assert session_processes(sid) == [], f"processes of the killed run left: {what_runs(sid)}, before: {before_next}"
    assert made.isdisjoint(sems()), "SysV semaphore sets left"
    assert oslens_tmp() - tmp_before == set(), "temporary directories left"
    assert leftovers.cgroup_dirs(proc.pid) == [], "cgroups left"
    assert leftovers.bpf_still_loaded(progs) == set(), "BPF programs left"
    assert not entry.exists(), "the runtime entry left"
    # The store is sound and the killed run reads as incomplete.
    if db.exists():
        con = __import__("sqlite3").connect(db)
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        con.close()
        runs = json.loads(oslens("runs", "--json", db=db).stdout)
        assert all(r["status"] != "running" for r in runs)


@pytest.mark.parametrize("case", ["sem", "profile"])
def test_sigkill_of_the_top_process_alone_ends_its_engine_which_cleans_up_after_itself(case, tmp_path):
    """The engine dies with its oslens (SIGTERM on its parent's death),
    within moments and before any other oslens starts: it ends in order,
    removes what it made (and ends the profiled command), never measuring
    on as an orphan until its repetition ends."""
    db = tmp_path / "db"
    tmp_before = oslens_tmp()
    with outranking_the_run():
        proc, entry = _start_measuring(case, db)
        sid = proc.pid
        try:
            made, progs = ledger_sems(entry), leftovers.bpf_of_session(sid)
            assert measuring(sid), "the run ended before it was killed"
        except BaseException:  # not left measuring on into the next tests
            outranking_the_run_too(sid)
            os.killpg(sid, signal.SIGKILL)
            proc.wait(timeout=30)
            raise
        outranking_the_run_too(sid)
        proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert session_processes(sid) == [], "the engine runs on without its oslens"
    assert made.isdisjoint(sems())
    assert leftovers.bpf_still_loaded(progs | leftovers.bpf_of_session(sid)) == set()
    # left for the next oslens to sweep: what the dead one itself made, no more
    assert {Path(d).name.split(".")[1] for d in oslens_tmp() - tmp_before} <= {str(sid)}
    assert oslens("runs", db=db).returncode == 0
    assert oslens_tmp() - tmp_before == set()
    assert not entry.exists()


# -------------------------------------------------------------- doctor


def _semget(key: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    semid = libc.semget(ctypes.c_int(key), ctypes.c_int(1), ctypes.c_int(0o1000 | 0o2000 | 0o600))  # CREAT|EXCL
    assert semid >= 0, os.strerror(ctypes.get_errno())
    return semid


def _fabricate(root: Path, pid: int, start: int, tag: str) -> dict:
    """An entry as a run of (pid, start) leaves it: a ledger naming a
    semaphore set and a temporary directory, and a directory of its own."""
    entry = root / f"{pid}.{start}"
    entry.mkdir(parents=True)
    key = random.randrange(1 << 20, 1 << 31)
    semid = _semget(key)
    prefix = f"{SESSION_TMP}/oslens.{tag}."
    engine_dir = Path(prefix + "abc123")
    engine_dir.mkdir()
    (engine_dir / "file").write_text("x")
    own_dir = SESSION_TMP / f"oslens.{tag}"
    own_dir.mkdir()
    (entry / "owner").write_text(json.dumps({"pid": pid, "start": start, "boot_id": runtime._boot_id()}))
    (entry / "owns").write_text(f"tmpdir {own_dir}\n")
    (entry / f"engine.{_dead_pid()}.1").write_text(f"tmpdir {prefix}\nsem_key {key}\nsem {key} {semid}\n")
    return {"entry": entry, "semid": semid, "dirs": [engine_dir, own_dir]}


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_doctor_removes_a_dead_runs_leftovers_and_never_a_live_ones(tmp_path, monkeypatch):
    root = tmp_path / "runtime"
    monkeypatch.setenv("OSLENS_RUNTIME_DIR", str(root))
    live = subprocess.Popen(["sleep", "300"])
    try:
        dead = _fabricate(root, _dead_pid(), 12345, "dead")
        alive = _fabricate(root, live.pid, runtime.proc_start(live.pid), "live")

        p = oslens("doctor", "--dry-run", "--json", db=tmp_path / "db")
        assert p.returncode == 0, p.stderr
        listed = json.loads(p.stdout)
        whats = {x["what"] for x in listed["leftovers"]}
        assert f"SysV semaphore set {dead['semid']}" in whats
        assert {str(d) for d in dead["dirs"]} <= whats
        assert not any(str(d) in whats for d in alive["dirs"]) and f"SysV semaphore set {alive['semid']}" not in whats
        assert all(x["action"] == "would remove" for x in listed["leftovers"])
        assert dead["semid"] in sems() and all(d.exists() for d in dead["dirs"]), "--dry-run removes nothing"
        assert alive["entry"].name in listed["live"]

        p = oslens("doctor", "--json", db=tmp_path / "db")
        assert p.returncode == 0, p.stderr
        done = json.loads(p.stdout)["leftovers"]
        assert {x["action"] for x in done if x["what"] in whats} == {"removed"}
        assert dead["semid"] not in sems() and not any(d.exists() for d in dead["dirs"])
        assert not dead["entry"].exists()
        assert alive["semid"] in sems() and all(d.exists() for d in alive["dirs"]) and alive["entry"].exists()

        p = oslens("doctor", db=tmp_path / "db")
        assert p.returncode == 0 and "no leftovers" in p.stdout
    finally:
        live.kill()
        live.wait()
        for semid, key in sems().items():
            if key and str(key) in "".join(f.read_text() for f in root.glob("*/engine.*")):
                runtime._sem_remove(semid)
        for d in glob.glob(f"{SESSION_TMP}/oslens.live*"):
            shutil.rmtree(d, ignore_errors=True)


def test_a_reused_pid_is_not_its_former_owner(tmp_path, monkeypatch):
    """An entry names pid and start time: a live process with that pid but
    another start time did not make it, so its leftovers are swept."""
    root = tmp_path / "runtime"
    monkeypatch.setenv("OSLENS_RUNTIME_DIR", str(root))
    live = subprocess.Popen(["sleep", "300"])
    try:
        fake = _fabricate(root, live.pid, runtime.proc_start(live.pid) + 1, "reused")
        p = oslens("doctor", "--json", db=tmp_path / "db")
        assert p.returncode == 0, p.stderr
        assert fake["semid"] not in sems() and not fake["entry"].exists()
    finally:
        live.kill()
        live.wait()


def test_a_dead_oslens_directory_no_entry_names_is_removed_by_the_next_start(tmp_path):
    """An Open MPI process still ending after its oslens's directory in
    /dev/shm was removed made its session path there again, and no entry
    named it any more (seen after a fresh-clone run): the next start finds
    such directories by their name, oslens.PID.START, and removes those of
    dead processes only."""
    dead = subprocess.Popen(["sleep", "60"])
    dead_key = f"{dead.pid}.{runtime.proc_start(dead.pid)}"
    dead.kill()
    dead.wait()
    live_key = f"{os.getpid()}.{runtime.proc_start(os.getpid())}"
    made = {
        "dead shm": Path(f"/dev/shm/oslens.{dead_key}.mpi"),
        "dead tmp": SESSION_TMP / f"oslens.{dead_key}",
        "live shm": Path(f"/dev/shm/oslens.{live_key}.mpi"),
        "live tmp": SESSION_TMP / f"oslens.{live_key}",
    }
    try:
        for d in made.values():
            (d / "ompi.vm.0" / "pid.1" / "1" / "0").mkdir(parents=True)
        p = oslens("doctor", "--json", db=tmp_path / "db")  # any command's start sweeps
        assert p.returncode == 0, p.stderr
        assert not made["dead shm"].exists() and not made["dead tmp"].exists()
        assert made["live shm"].is_dir() and made["live tmp"].is_dir()
    finally:
        for d in made.values():
            shutil.rmtree(d, ignore_errors=True)


def test_doctor_bad_input_is_one_line_and_status_2(tmp_path):
    p = oslens("doctor", "--no-such-option", db=tmp_path / "db")
    assert p.returncode == 2
    one_line_error(p.stderr)


@pytest.mark.parametrize(
    "how",
    [["--collect-only"], ["-k", "not test_"], ["-k", "test_doctor_bad_input"]],
    ids=["collect-only", "all-deselected", "a-test-with-tmp_path"],
)
def test_a_test_session_leaves_no_directory(tmp_path, how):
    """The suite's own temporary directory goes with its session, even one
    in which no test ran (no fixture runs then), and with it the tests'
    tmp_path directories (pytest's own place keeps them). "not test_"
    deselects every test, this one too: a name it matched would run it
    again inside."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *how, __file__]
    p = subprocess.run(args, cwd=Path(__file__).parents[1], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode in (0, 5), p.stdout + p.stderr  # 5: no test ran
    assert list(tmp_path.iterdir()) == []
