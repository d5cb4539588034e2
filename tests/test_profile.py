"""`profile`: real workloads built here, profiled by the real engine; each
test checks a relation the workload guarantees (N calls made, N pages
touched, K children forked), never a machine-dependent speed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oslens.analysis.histogram import Histogram
from oslens.profile import collect

from conftest import (
    NCPU,
    SESSION_TMP,
    bpf_programs,
    can_run_as_nobody,
    engine_for_nobody,
    one_line_error,
    oslens,
    oslens_until,
    run_engine,
    thp_enabled,
)

WORKLOADS = Path(__file__).parent / "workloads"


@pytest.fixture(scope="session")
def build():
    """The workloads, compiled with the system compiler into this session's tmp."""
    out = SESSION_TMP / "workloads"
    out.mkdir(exist_ok=True)
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is needed (scripts/install-deps.sh installs gcc)"
    built = {}
    for src in WORKLOADS.glob("*.c"):
        exe = out / src.stem
        subprocess.run([cc, "-O2", "-pthread", "-o", str(exe), str(src)], check=True)
        built[src.stem] = str(exe)
    return built


def profile(*cmd: str, **kw) -> collect.Profile:
    return collect.run(list(cmd), **kw)


def bpf_or_skip(prof: collect.Profile) -> None:
    bpf = prof.first("bpf")
    if not bpf["loaded"]:
        pytest.skip(f"kernel tracing unavailable here: {bpf['why']}")


def syscalls(prof: collect.Profile) -> dict[str, dict]:
    return {r["name"]: r for r in prof.first("syscalls")["rows"]}


def threads(prof: collect.Profile) -> list[dict]:
    return [r for r in prof.records if r["type"] == "thread" and r["when"] == "exit"]


def kernel_share(prof: collect.Profile) -> float:
    ts = threads(prof)
    user = sum(t["utime_ns"] for t in ts)
    system = sum(t["stime_ns"] for t in ts)
    return system / (user + system) if user + system else float("nan")


def test_getppid_loop_is_counted_exactly_and_kernel_heavy(build, no_leaks):
    n = 200_000
    prof = profile(build["getppid_loop"], str(n))
    bpf_or_skip(prof)
    calls = syscalls(prof)
    top = max(calls.values(), key=lambda r: r["count"])
    assert top["name"] == "getppid"
    assert top["count"] == n  # syscall(2) only: nothing else in the program calls getppid
    h = Histogram.from_record(top["hist"])
    assert h.count == top["count"] and 0 < h.min_ns <= h.percentile(50) <= h.percentile(99) <= h.max_ns
    assert top["errors"] == 0
    assert kernel_share(prof) > 0.5


def test_compute_loop_spends_almost_nothing_in_the_kernel(build, no_leaks):
    prof = profile(build["compute"], "300000000")
    bpf_or_skip(prof)
    assert sum(t["runtime_ns"] for t in threads(prof)) > 50e6
    assert kernel_share(prof) < 0.05
    # what the kernel did for it is start-up: a few dozen calls
    assert sum(r["count"] for r in prof.first("syscalls")["rows"]) < 200


def test_touched_pages_fault_once_each_with_latencies(build, no_leaks):
    n = 5000
    prof = profile(build["touch_pages"], str(n))
    bpf_or_skip(prof)
    faults = prof.first("faults")
    if faults is None or "page_faults" in prof.first("bpf")["missing"]:
        pytest.skip("this kernel cannot time page faults")
    assert faults["minor"] >= n
    h = Histogram.from_record(faults["hist"])
    assert h.count >= n and 0 < h.min_ns <= h.percentile(50) <= h.max_ns
    counted = {e["name"]: e["value"] for e in prof.first("counters")["events"] if e["scope"] == "all"}
    assert counted["page-faults-min"] >= n
    # the minor faults' own latency: all faults minus the major ones, bucket by bucket
    from oslens.profile.records import Records
    from oslens.profile.sections import faults as section

    latency = section.summarize(Records(prof.records))["latency"]
    assert latency["minor"]["count"] == latency["all"]["count"] - latency["major"]["count"] >= n
    assert latency["minor"]["p50_ns"] is not None and latency["minor"]["avg_ns"] > 0
    assert sum(t["min_flt"] for t in threads(prof)) >= n


def run_lengths(prof: collect.Profile) -> dict:
    from oslens.profile.records import Records
    from oslens.profile.sections import run_lengths as section

    return section.summarize(Records(prof.records))


def test_run_lengths_of_a_system_call_loop_are_short_and_counted(build, no_leaks):
    n = 100_000
    prof = profile(build["getppid_loop"], str(n))
    bpf_or_skip(prof)
    rl = run_lengths(prof)
    calls = syscalls(prof)
    # every system call is an entry: the same count as the system call table's
    assert rl["kinds"]["syscall"]["count"] == sum(r["count"] for r in calls.values())
    assert rl["kinds"]["syscall"]["over"]["1000"][0] < 0.1
    # each kind's time is also in the combined figure, counted once
    assert rl["all"]["count"] == sum(k["count"] for k in rl["kinds"].values() if k)
    assert rl["all"]["total_ns"] == sum(k["total_ns"] for k in rl["kinds"].values() if k)


@pytest.mark.skipif(not thp_enabled(), reason="transparent huge pages are off (or absent) here")
def test_run_lengths_show_the_long_huge_page_faults(build, no_leaks):
    small = profile(build["touch_pages"], "2000")
    bpf_or_skip(small)
    huge = profile(build["huge_pages"], "16")
    if "page_faults" in huge.first("bpf")["missing"]:
        pytest.skip("this kernel cannot time page faults")
    f_small, f_huge = run_lengths(small)["kinds"]["fault"], run_lengths(huge)["kinds"]["fault"]
    # zeroing 2 MiB takes longer than zeroing 4 KiB: the long entries are the huge page faults,
    # and they hold most of the fault time
    assert f_huge["mean_ns"] > 5 * f_small["mean_ns"]
    assert f_huge["over"]["10000"][1] > 0.5 > f_small["over"]["10000"][1]


def test_run_lengths_say_what_was_not_traced(build, no_leaks):
    prof = profile(build["touch_pages"], "100", syscalls=False)
    bpf_or_skip(prof)
    rl = run_lengths(prof)
    assert "syscall" not in rl["kinds"] and "--no-syscalls" in rl["unmeasured"]["syscall"]
    assert any("interrupts taken inside them" in n for n in rl["notes"])


def test_the_process_tree_is_followed(build, no_leaks):
    k, m = 8, 20_000
    prof = profile(build["fork_tree"], str(k), str(m))
    bpf_or_skip(prof)
    assert syscalls(prof)["getppid"]["count"] == k * m
    assert len({t["tgid"] for t in threads(prof)}) == k + 1


# The CPU time a process can run after its parent's wait4 has read its times
# (the rest of do_exit, up to its last switch): the profile reads that switch,
# rusage does not. A few µs of kernel code; rusage truncates to 1 µs as well.
AFTER_REAP_NS = 20_000


def test_a_fork_heavy_command_is_counted_whole(no_leaks):
    """Children that exec and exit within a tick without sleeping: their
    sum_exec_runtime at sched_process_exit was about 0 (the scheduler had not
    charged their run yet), and the profile's total was 139 ms of the 460 ms
    that the per-CPU time, task-clock and rusage saw. Both the per-thread
    total and the command's rusage (itself and every child, all waited for)
    sum the kernel's precise runtime, so they agree within what a child runs
    after being reaped, not within a tick."""
    from oslens.profile.records import Records
    from oslens.profile.sections import time as section

    n = 200
    prof = profile("sh", "-c", f"for i in $(seq {n}); do cat /dev/null; done", syscalls=False)
    bpf_or_skip(prof)
    recs = Records(prof.records)
    assert len(recs.threads) == n + 2  # sh, seq and the cats
    total = section.summarize(recs)["total"]
    rusage = recs.rusage["utime_ns"] + recs.rusage["stime_ns"]
    assert abs(total["runtime_ns"] - rusage) <= AFTER_REAP_NS * len(recs.threads), (total, rusage)


def test_faults_of_children_are_timed(build, no_leaks):
    n = 3000
    prof = profile("sh", "-c", f"{build['touch_pages']} {n}; {build['touch_pages']} {n}")
    bpf_or_skip(prof)
    if "page_faults" in prof.first("bpf")["missing"]:
        pytest.skip("this kernel cannot time page faults")
    faults = prof.first("faults")
    assert faults["minor"] >= 2 * n and Histogram.from_record(faults["hist"]).count >= 2 * n


def test_contended_mmap_lock_shows_in_the_lock_table(build, no_leaks):
    prof = profile(build["mmap_threads"], "8", "1.0")
    bpf_or_skip(prof)
    if "lock_contention" in prof.first("bpf")["missing"]:
        pytest.skip("this kernel has no lock:contention_* tracepoints")
    rows = prof.first("locks")["rows"]
    assert rows, "no contended lock seen"
    mmap = [r for r in rows if r["lock_name"] == "mmap_lock"]
    assert mmap and all(r["kind"].startswith("rwsem") for r in mmap)
    assert all(r["count"] > 0 and 0 < r["max_ns"] <= r["total_ns"] for r in mmap)
    assert any(r["caller"] for r in mmap)


NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")

# Forks a child, then has the kernel give its pid to a second child (the
# next pid is the one after ns_last_pid), and writes both pids down.
REUSE_A_PID = """
import os, sys
def child():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid
first = child()
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(first - 1))
second = child()
with open(sys.argv[1], "w") as f:
    f.write(f"{first} {second}")
"""


@pytest.mark.skipif(not os.access(NS_LAST_PID, os.W_OK), reason="needs root to set the next pid")
def test_a_reused_thread_id_keeps_both_lifetimes(tmp_path, no_leaks):
    """The kernel's exit records were keyed by tid alone: a child given a pid
    an earlier child of the workload had (a fork loop longer than pid_max)
    replaced that child's record, and its time was lost without a word."""
    pids = tmp_path / "pids"
    prof = profile(sys.executable, "-c", REUSE_A_PID, str(pids), syscalls=False)
    bpf_or_skip(prof)
    first, second = map(int, pids.read_text().split())
    if first != second:
        pytest.skip(f"another process took pid {first} before the second child: no reuse to count")
    assert len([t for t in threads(prof) if t["tid"] == first]) == 2


@pytest.mark.skipif(NCPU < 2, reason="threads must wake each other across CPUs")
def test_locks_are_named_as_explain_names_them(build, no_leaks):
    """Pipe ping-pong: each wake-up takes the sleeper's run queue lock. The
    table showed '0xffff888627c2ba80 spinlock try_to_wake_up+0x206' where
    --explain says rq_lock: one naming (engine/bpf/locknames.h, and
    src/oslens/locknames.py for the rest), and why a static lock has no name."""
    from oslens.kallsyms import Kallsyms
    from oslens.profile.records import Records
    from oslens.profile.sections import locks as section

    prof = profile(build["wakeups"], "4", "20000", syscalls=False)
    bpf_or_skip(prof)
    if "lock_contention" in prof.first("bpf")["missing"]:
        pytest.skip("this kernel has no lock:contention_* tracepoints")
    rec = prof.first("locks")
    s = section.summarize(Records(prof.records))
    syms = Kallsyms()
    if syms.usable:  # every lock is called by a name, a symbol or who waited: never by its address alone
        by_address = [r for r in s["rows"] if r["lock"].startswith(("0x", "lock 0x"))]
        assert not by_address, [{k: r[k] for k in ("lock", "kind", "caller", "count", "stack")} for r in by_address]
        if not syms.has_data_symbols:
            assert rec["lock_symbols_unavailable"] in s["notes"]
    else:
        pytest.skip("kallsyms gives no addresses here: which locks are run queue locks is not known")
    # __schedule and __task_rq_lock take no spinlock but their CPU's run queue lock
    rq = [r for r in rec["rows"] if _spin_lock_taker(r["stack_symbols"]).startswith(("__schedule+", "__task_rq_lock+"))]
    if not rq:
        pytest.skip("no run queue lock was contended (wake-ups queued to the other CPU?): its naming is not exercised")
    cpus = set(prof.first("header")["cpus_online"])
    assert all((r["lock_name"] or "").startswith("rq_lock (cpu ") for r in rq), rq
    assert all(int(r["lock_name"].split("cpu ")[1].rstrip(")")) in cpus for r in rq)


@pytest.mark.skipif(NCPU < 2, reason="threads must wake each other across CPUs")
def test_every_contended_lock_keeps_the_stack_it_was_waited_from(build, no_leaks):
    """A lock wait's stack was kept in a stack map by bucket, and two stacks
    sharing a bucket lost the second: its lock row had no caller, and a lock
    with neither name nor symbol was then called by its address (a fresh-clone
    run failed the naming test above so). Stacks are kept by a 64-bit hash of
    their own now, in the table the clock's samples use: every row keeps its
    stack, it is the wait's own (it passes through the locking code, not
    through whatever a clock's sample interrupted while the program ran), and
    a stack that found no room would be counted."""
    from oslens.kallsyms import Kallsyms, is_lock_internal
    from oslens.profile.records import Records
    from oslens.profile.sections import locks as section

    syms = Kallsyms()
    if not syms.usable:
        pytest.skip("kallsyms gives no addresses here: the stacks cannot be read")
    prof = profile(build["wakeups"], "4", "20000", syscalls=False)
    bpf_or_skip(prof)
    if "lock_contention" in prof.first("bpf")["missing"]:
        pytest.skip("this kernel has no lock:contention_* tracepoints")
    rec = prof.first("locks")
    if not rec["rows"]:
        pytest.skip("no lock was contended: nothing to check")
    assert rec["stacks_lost"] == 0  # a few dozen stacks in a table of thousands
    stackless = [(r["lock"], r["lock_name"], r["count"]) for r in rec["rows"] if not r["stack"]]
    assert not stackless, f"{len(stackless)} of {len(rec['rows'])} lock rows without a stack: {stackless}"

    def a_wait(frames: list[str]) -> bool:
        return any(is_lock_internal(f.split("+")[0]) for f in frames)

    not_waits = [r["stack_symbols"] for r in rec["rows"] if not a_wait(r["stack_symbols"])]
    assert not not_waits, f"stacks that are not a lock wait's: {not_waits}"
    assert all(r["callers"] for r in rec["rows"])
    # had the table been full, the section would say for how many waits
    full = [{**r, "stacks_lost": 3} if r is rec else r for r in prof.records]
    assert any(n.startswith("no stack kept for 3 waits") for n in section.summarize(Records(full))["notes"])


def _spin_lock_taker(frames: list[str]) -> str:
    """The function that called _raw_spin_lock*, or ''."""
    at = next((i for i, f in enumerate(frames) if f.startswith("_raw_spin_lock")), None)
    return frames[at + 1] if at is not None and at + 1 < len(frames) else ""


def test_attaching_to_a_running_process_and_detaching(build, no_leaks):
    target = subprocess.Popen([build["getppid_loop"], str(10**12)])
    try:
        time.sleep(0.2)
        prof = collect.run(pid=target.pid, duration=0.5)
        assert target.poll() is None, "the attached process must survive the profile"
        end = prof.first("end_target")
        assert end["how"] == "duration" and end["code"] is None
        assert 0.45e9 < end["wall_ns"] < 5e9
        begin = {t["tid"]: t for t in prof.records if t["type"] == "thread" and t["when"] == "begin"}
        after = {t["tid"]: t for t in prof.records if t["type"] == "thread" and t["when"] == "end"}
        assert target.pid in begin and target.pid in after
        assert after[target.pid]["runtime_ns"] > begin[target.pid]["runtime_ns"]
        if prof.first("bpf")["loaded"]:
            assert syscalls(prof)["getppid"]["count"] > 0
            assert bpf_programs() == 0
    finally:
        target.kill()
        target.wait()


def test_a_caller_whose_record_hook_fails_stops_the_engine_at_once(build, no_leaks):
    """A caller's on_record raising (serve's release of a job that died)
    stops the engine and ends the profile at once. It never leaves the
    engine profiling on to its --duration and then blocked writing its
    records into a pipe no one reads, with the caller waiting for it: the
    scenario runs in a process of its own, so that a regression fails here
    instead of hanging the suite."""
    script = (
        "import subprocess, sys, time\n"
        "from oslens.profile import collect\n"
        f"target = subprocess.Popen([{build['getppid_loop']!r}, str(10**12)])\n"
        "def fails(r):\n"
        "    if r.get('type') == 'target':\n"
        "        raise RuntimeError('the caller gave up')\n"
        "t0 = time.monotonic()\n"
        "try:\n"
        "    collect.run(pid=target.pid, duration=60, on_record=fails)\n"
        "except RuntimeError:\n"
        "    print(f'stopped after {time.monotonic() - t0:.1f} s, target alive: {target.poll() is None}')\n"
        "finally:\n"
        "    target.kill()\n"
        "    target.wait()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the profile went on after its caller gave up (the engine profiled to its duration or hung)")
    assert proc.returncode == 0 and "target alive: True" in out, out


@pytest.mark.skipif(shutil.which("bpftool") is None, reason="bpftool not installed")
@pytest.mark.parametrize("how", ["end", "failing command", signal.SIGINT, signal.SIGTERM])
def test_nothing_stays_loaded_and_no_process_is_left(build, tmp_path, how, no_leaks):
    assert bpf_programs() == 0
    db = tmp_path / "s.db"
    if how == "end":
        p = oslens("profile", "-q", "--", build["getppid_loop"], "1000", db=db)
        assert p.returncode == 0, p.stderr
    elif how == "failing command":
        p = oslens("profile", "-q", "--", "sh", "-c", "exit 3", db=db)
        assert p.returncode == 3, p.stderr
    else:
        marker = tmp_path / "started"
        proc = oslens_until(
            marker,
            "profile",
            "-q",
            "--",
            "sh",
            "-c",
            f"touch {marker}; exec {build['getppid_loop']} 1000000000000",
            db=db,
        )
        proc.send_signal(how)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + how, err
        runs = json.loads(oslens("runs", "--json", db=db).stdout)
        assert runs[-1]["status"] == "incomplete"
    assert bpf_programs() == 0
    left = subprocess.run(["pgrep", "-f", "getppid_loop 1000000000000"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "the profiled command outlived the profile"


def test_exit_status_and_output_pass_through(tmp_path, no_leaks):
    db = tmp_path / "s.db"
    p = oslens("profile", "--", "sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 7", db=db)
    assert p.returncode == 7
    assert p.stdout == "to-stdout\n"  # the report is on stderr, like perf stat's
    assert "to-stderr" in p.stderr and "system calls" in p.stderr.lower()


@pytest.mark.parametrize("where", ["first", "last"])
def test_the_command_starts_on_the_cpus_asked_and_its_stdout_leaves_the_records_alone(where, no_leaks):
    """--cpus, for appscale where no cgroup reaches (a guest): the command is
    on those CPUs from its first instruction, and so is what it forks;
    --stdout-to-stderr, for records on stdout: the command's output is on
    stderr and every stdout line is a record."""
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[0] if where == "first" else allowed[-1]
    show = "grep Cpus_allowed_list /proc/self/status; sh -c 'grep Cpus_allowed_list /proc/self/status'"
    r = run_engine("profile", "--no-bpf", "--no-counters", "--cpus", str(cpu), "--stdout-to-stderr", "--", "sh", "-c",
                   show)  # fmt: skip
    assert r.rc == 0, r.stderr
    assert [line.split()[-1] for line in r.stderr.splitlines() if line.startswith("Cpus_allowed_list")] == [
        str(cpu)
    ] * 2
    assert r.of("header")[0]["cpus"] == [cpu] and r.of("end_target")[0]["code"] == 0
    # without --cpus the command keeps the engine's CPUs, and the header says none were asked
    r = run_engine("profile", "--no-bpf", "--no-counters", "--stdout-to-stderr", "--", "true")
    assert r.rc == 0 and r.of("header")[0]["cpus"] is None


@pytest.mark.parametrize(
    "args,word",
    [
        (["--cpus", "99999", "--", "true"], "not online"),
        (["--cpus", "x", "--", "true"], "not a CPU list"),
        (["--cpus", "{c},{c}", "--", "true"], "twice"),
        (["--cpus", "{c}", "--pid", "1"], "not --pid"),
        (["--stdout-to-stderr", "--out-fd", "2", "--", "true"], "keeps stdout"),
    ],
)
def test_bad_cpus_or_output_for_the_command_are_refused_in_one_line(args, word, no_leaks):
    c = str(min(os.sched_getaffinity(0)))
    r = run_engine("profile", *[a.replace("{c}", c) for a in args])
    assert r.rc == 2 and r.records == [] and word in one_line_error(r.stderr), r.stderr


def test_cli_json_report_and_show(build, tmp_path, no_leaks):
    db = tmp_path / "s.db"
    out = tmp_path / "report.json"
    p = oslens("profile", "-q", "--json", "-o", str(out), "--", build["getppid_loop"], "50000", db=db)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    doc = json.loads(out.read_text())
    assert doc["kind"] == "profile" and doc["target"]["code"] == 0
    assert set(doc["sections"]) >= {"time", "switches", "faults", "interrupts", "syscalls", "locks", "counters"}
    shown = oslens("show", str(doc["run"]), "--json", db=db)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["sections"] == doc["sections"]


def test_without_bpf_the_rest_is_measured_and_the_report_says_why(build, tmp_path, no_leaks):
    db = tmp_path / "s.db"
    p = oslens("profile", "-q", "--json", "--no-bpf", "--", build["getppid_loop"], "1000", db=db)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["bpf"]["loaded"] is False and "--no-bpf" in doc["bpf"]["why"]
    assert doc["sections"]["syscalls"].get("missing")
    counters = doc["sections"]["counters"]
    assert counters  # software counters still counted


@pytest.mark.parametrize(
    "args, word",
    [
        ([], "target"),
        (["--", "/nonexistent/command"], "cannot run"),
        (["--", "no-such-command-oslens"], "cannot run"),
        (["--pid", "999999999"], "no process"),
        (["--pid", "1", "--", "true"], "target"),
        (["--duration", "1", "--", "true"], "--duration"),
        (["--pid", "1", "--duration", "-1"], "--duration"),
        (["--pid", "99999999999"], "no process"),  # past a pid_t: no OverflowError
        (["-o", "/nonexistent-dir/p.txt", "--", "true"], "/nonexistent-dir"),  # before it runs
    ],
)
def test_bad_profile_input_is_one_line_and_stores_nothing(tmp_path, args, word):
    db = tmp_path / "s.db"
    p = oslens("profile", *args, db=db)
    assert p.returncode == 2
    assert word in one_line_error(p.stderr)
    assert not db.exists() or json.loads(oslens("runs", "--json", db=db).stdout) == []


def test_no_syscalls_leaves_out_only_the_system_call_table(build, no_leaks):
    prof = profile(build["touch_pages"], "100", syscalls=False)
    bpf_or_skip(prof)
    assert prof.first("bpf")["skipped"] == ["syscalls"]
    assert prof.first("syscalls") is None
    assert prof.first("switches") is not None and threads(prof)


@pytest.mark.skipif(not can_run_as_nobody(), reason="needs root, setpriv and a 'nobody' user")
def test_without_privileges_procfs_and_counters_still_run_and_say_why(no_leaks):
    from oslens.profile.summary import summarize

    with engine_for_nobody() as (nobody, exe, env):
        p = subprocess.run(
            [*nobody, exe, "profile", "--", "sh", "-c", "exit 5"], capture_output=True, text=True, env=env
        )
    assert p.returncode == 0, p.stderr
    recs = [json.loads(line) for line in p.stdout.splitlines()]
    bpf = next(r for r in recs if r["type"] == "bpf")
    assert bpf["loaded"] is False and "root" in bpf["why"]
    assert next(r for r in recs if r["type"] == "end_target")["code"] == 5
    summary = summarize(recs)
    assert bpf["why"] in summary["sections"]["syscalls"]["missing"]
    assert summary["sections"]["time"]["cpu_split"]["per_cpu"]


def test_a_thread_shorter_than_a_few_ticks_gets_no_user_kernel_split(build, no_leaks):
    from oslens.profile.records import Records
    from oslens.profile.sections import time as section

    prof = profile("true")
    recs = Records(prof.records)
    s = section.summarize(recs)
    tick_ns, _ = recs.tick
    short = [t for t in s["threads"] if t["runtime_ns"] < section.MIN_TICKS_FOR_A_SPLIT * tick_ns]
    assert short, "true ran for several ticks?"
    assert all(t["kernel_share"] is None and not t["split"] for t in short)
    assert any("tick-sampled" in n for n in s["notes"])
    long_ = profile(build["compute"], "300000000")
    s = section.summarize(Records(long_.records))
    assert s["total"]["kernel_share"] is not None


def test_a_command_shorter_than_a_few_ticks_gets_no_user_kernel_split_and_says_why(tmp_path, no_leaks):
    """Without BPF the total is the command's rusage: a 1 ms `true` printed
    "1.02 ms user, 0 ns kernel, 0.0 %", a split its tick samples cannot give."""
    from oslens.collectors import kernel

    p = oslens("profile", "--no-bpf", "--", "true", db=tmp_path / "db")
    assert p.returncode == 0, p.stderr
    total = next(line for line in p.stderr.splitlines() if "total (rusage)" in line)
    assert "%" not in total and " 0 ns " not in total, total
    why = next(line for line in p.stderr.splitlines() if "no user/kernel split" in line)
    hz = kernel.build_config().get("options", {}).get("CONFIG_HZ")
    if hz and hz.isdigit():  # the kernel's own tick, not USER_HZ's 10 ms
        assert f"CONFIG_HZ={hz}" in why and f"({3000 // int(hz):g} ms," in why, why


def test_a_time_limit_that_passes_is_said_so(tmp_path, no_leaks):
    """It read "did not finish (no end_target record; per-second rates unavailable)"."""
    p = oslens("profile", "--time-limit", "0.3", "--", "sleep", "30", db=tmp_path / "db")
    assert p.returncode == 128 + signal.SIGTERM, p.stderr  # sleep's own status, as a shell would give it
    line = next(line for line in p.stderr.splitlines() if line.startswith("profile of sleep 30"))
    assert "stopped at its time limit of 300 ms (--time-limit)" in line and "killed by SIGTERM" in line, line
    assert "no end_target" not in p.stderr


@pytest.mark.parametrize("command", ["profile", "appscale"])
def test_help_lists_no_option_the_command_always_refuses(tmp_path, command):
    """Both listed --in ENV, which profile refuses whatever ENV is
    (test_envs.py); appscale takes it for the engine's workloads."""
    from oslens import kinds

    p = oslens(command, "--help", db=tmp_path / "db")
    assert p.returncode == 0 and "--time-limit" in p.stdout
    assert ("--in" in p.stdout.split()) == kinds.KINDS[command].in_envs, p.stdout


PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")


@pytest.mark.skipif(not can_run_as_nobody(), reason="needs root, setpriv and a 'nobody' user")
def test_without_privileges_at_paranoid_2_counters_count_user_space_and_rusage_counts_switches(no_leaks):
    """perf_event_paranoid=2 (set here for the test, restored after): a user
    may count its own child in user mode only, as `perf stat` falls back to;
    the counters say so, and switches and faults come from the rusage."""
    from oslens.profile.summary import summarize

    before = PARANOID.read_text().strip()
    try:
        if before != "2":
            try:
                PARANOID.write_text("2\n")
            except OSError as e:
                pytest.skip(f"perf_event_paranoid is {before} and cannot be set to 2: {e}")
        with engine_for_nobody() as (nobody, exe, env):
            p = subprocess.run(
                [
                    *nobody,
                    exe,
                    "profile",
                    "--",
                    "sh",
                    "-c",
                    "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.05",
                ],
                capture_output=True,
                text=True,
                env=env,
            )
    finally:
        if PARANOID.read_text().strip() != before:
            PARANOID.write_text(before + "\n")
    assert p.returncode == 0, p.stderr
    recs = [json.loads(line) for line in p.stdout.splitlines()]
    events = {(e["name"], e["scope"]): e for e in next(r for r in recs if r["type"] == "counters")["events"]}
    task_clock = events[("task-clock", "all")]
    assert task_clock["value"] and task_clock["error"] is None
    assert task_clock["scope_limited"] == "user only: perf_event_paranoid=2"
    assert all("not permitted" not in (events[(n, "all")]["error"] or "") for n in ("task-clock", "page-faults-min"))
    rusage = next(r for r in recs if r["type"] == "end_target")["rusage"]
    summary = summarize(recs)
    sw = {s["name"]: s for s in summary["sections"]["counters"]["software"]}
    assert sw["task-clock"]["user_only"] == "user-space only (perf_event_paranoid=2)"
    assert sw["task-clock"]["value"] == task_clock["value"]
    # The scheduler counts switches in kernel mode: user-only, none are seen, said so rather than 0.
    assert sw["context-switches"]["value"] is None and "kernel mode" in sw["context-switches"]["error"]
    switches = summary["sections"]["switches"]["counts"]
    faults = summary["sections"]["faults"]["counts"]
    source = "rusage (wait4): the command and the descendants it waited for"
    assert switches["source"] == source and faults["source"] == source
    assert (switches["voluntary"], switches["involuntary"]) == (rusage["nvcsw"], rusage["nivcsw"])
    assert switches["voluntary"] >= 1  # sh waited for sleep
    assert (faults["minor"], faults["major"]) == (rusage["min_flt"], rusage["maj_flt"]) and faults["minor"] > 0


# ---- where the workload's kernel time goes, by function (issue 30, item 7)


def test_kernel_time_is_sampled_by_function_under_the_call_that_entered_it(build, no_leaks):
    prof = profile(build["getppid_loop"], "2000000")
    bpf_or_skip(prof)
    rec = prof.first("samples")
    if rec is None:
        pytest.skip(f"the per-CPU clocks could not be attached: {prof.first('bpf')['missing']}")
    from oslens.profile.records import Records
    from oslens.profile.sections import kernel_functions

    section = kernel_functions.summarize(Records(prof.records))
    assert section["samples"] > 0 and section["functions"], section
    # a loop of getppid: the kernel is entered by getppid, named from the thread's registers
    assert section["entries"][0]["key"] == "syscall:getppid", section["entries"]
    # the samples are the workload's time on a CPU: the folded stacks add up to kernel + user
    assert sum(section["folded"].values()) == pytest.approx(section["kernel_ns"] + section["user_ns"])
    cpu = sum(t["runtime_ns"] for t in threads(prof))
    assert 0.5 * cpu <= section["samples"] * section["period_ns"] <= 1.5 * cpu, (section["samples"], cpu)


def test_compare_of_two_profiles_lists_the_kernel_functions_that_changed(build, tmp_path, no_leaks):
    from conftest import oslens

    db = tmp_path / "p.db"
    # enough calls that the smaller run's kernel time holds some 70 samples of 1 ms: with 300,000 and 900,000 a
    # loaded host left it 21 and 44, and a tripling within the sampling error (fresh-clone run 76)
    for n in ("1000000", "3000000"):
        p = oslens("profile", "-q", "--", build["getppid_loop"], n, db=db)
        assert p.returncode == 0, p.stderr
    doc = json.loads(oslens("compare", "1", "2", "--json", db=db).stdout)
    if not doc["functions"]:
        pytest.skip("no samples here")
    (point,) = doc["functions"]
    assert point["per"] == "run" and point["functions"]
    # three times the calls: the kernel functions of getppid take about three times as long per run
    top = point["functions"][0]
    assert top["delta_ns_per_op"] > 0 and top["beyond_sampling_error"], top
