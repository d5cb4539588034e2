"""`oslens io` and the engine's block I/O probes, against real zram and
loop devices: exact I/O counts in the kernel's own counters, completions
that add up, devices made and removed (also after a kill), and refusals to
write where data would be destroyed."""

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

from chromium import load
from oslens import leftovers
from oslens.blockdev import devices
from oslens.blockdev.target import Target, hole_bytes

from conftest import engine_bin, one_line_error, oslens, run_engine

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="making block devices needs root")


@pytest.fixture(scope="module")
def zram():
    if not ROOT or devices.available_kinds()["zram"]:
        pytest.skip("no zram device can be made here")
    t = devices.make("zram", 64 << 20)
    yield t
    devices.remove_device(t.made_line)


@pytest.fixture(scope="module")
def loop():
    if not ROOT or devices.available_kinds()["loop"]:
        pytest.skip("no loop device can be made here")
    t = devices.make("loop", 64 << 20)
    yield t
    devices.remove_device(t.made_line)


# The engine's own check of the target reads one block at offset 0 before the
# run (reads are harmless): it is in the device's counts, once per invocation.
CHECK_READS = 1


@needs_root
@pytest.mark.parametrize(
    "probe,opts",
    [
        ("io:direct", []),
        ("io:direct", ["--opt", "bs=16384"]),
        ("io:direct", ["--opt", "reads=0"]),
        ("io:direct", ["--opt", "reads=70"]),
        ("io:direct", ["--opt", "seq=1", "--opt", "reads=0"]),
        ("io:cached", ["--opt", "reads=0", "--opt", "seq=1", "--opt", "fsync=1"]),
        ("io:cached", ["--opt", "reads=0", "--opt", "seq=1", "--opt", "fsync=5", "--opt", "datasync=1"]),
        ("io:direct", ["--opt", "reads=50", "--opt", "fsync=3"]),
        ("io-uring", ["--opt", "qd=1"]),
        ("io-uring", ["--opt", "qd=8"]),
        ("io-uring", ["--opt", "qd=8", "--opt", "wait=1"]),
        ("io-uring", ["--opt", "qd=8", "--opt", "taskrun=2"]),
        ("io-uring", ["--opt", "qd=8", "--opt", "taskrun=0", "--opt", "reads=0"]),
        ("io-uring", ["--opt", "qd=8", "--opt", "reads=30", "--opt", "seq=1"]),
        ("libaio", ["--opt", "qd=1"]),
        ("libaio", ["--opt", "qd=8", "--opt", "reads=50"]),
        ("libaio", ["--opt", "qd=16", "--opt", "seq=1", "--opt", "bs=8192"]),
        ("io-uring", ["--opt", "qd=8", "--opt", "reads=0", "--opt", "fsync=7"]),
        (
            "io-uring",
            ["--opt", "qd=8", "--opt", "wait=1", "--opt", "reads=50", "--opt", "fsync=3", "--opt", "datasync=1"],
        ),
        ("libaio", ["--opt", "qd=8", "--opt", "reads=0", "--opt", "seq=1", "--opt", "fsync=5"]),
    ],
)
@pytest.mark.parametrize("device", ["zram", "loop"])
def test_each_engine_issues_exactly_the_ios_asked_of_the_size_asked(device, probe, opts, request):
    """Every I/O the engine counts is one the block layer counts, of bs
    bytes, in the direction the worker says it chose: direct I/O in each
    engine and pattern, and buffered writes synced every N writes (in
    order, in a slice of the worker's own: a block written twice before
    writeback would be written once; at N = 1 one dirty block per sync, so
    one write each; the last is synced at the worker's end; at N > 1
    writeback may gather adjacent blocks into one request)."""
    t = request.getfixturevalue(device)
    asked = dict(o.split("=") for o in opts if "=" in o)
    bs = int(asked.get("bs", 4096))
    ops, workers = 3000, min(2, os.cpu_count() or 1)
    before = t.counters()
    r = run_engine("run", "--probe", probe, *opts, "--target", t.path, "--ops", str(ops), "--warmup", "0",
                   "--workers", str(workers), "--latency", "--completions")  # fmt: skip
    after = t.counters()
    assert r.rc == 0, r.stderr
    counted = sum(w["ops"] for w in r.of("worker"))
    assert counted == ops * workers
    books = r.of({"io:direct": "io", "io:cached": "io", "io-uring": "uring", "libaio": "aio"}[probe])
    reads, writes = sum(b["reads"] for b in books), sum(b["writes"] for b in books)
    assert reads + writes == counted
    share = int(asked.get("reads", 100))
    if 0 < share < 100:  # each worker's own draw: a binomial share, far inside these bounds
        assert abs(reads / counted - share / 100) < 0.05, (reads, counted)
    else:
        assert reads == (counted if share else 0)
    d = {k: after[k] - before[k] for k in after}
    if probe == "io:cached":
        # the engine's check reads a block through the page cache, with read-ahead (none if cached)
        assert d["reads"] + d["read_merges"] <= CHECK_READS
    else:
        # a request that adjacent I/Os were merged into counts once, its merges beside it
        assert d["reads"] + d["read_merges"] == reads + CHECK_READS, d
        assert d["read_sectors"] == (reads + CHECK_READS) * bs // 512
    # a sync's flush of a device with a write cache (loop) counts as a write of no sectors too
    data_writes = d["writes"] + d["write_merges"] - d.get("flushes", 0)
    if flushes := d.get("flushes", 0):
        assert flushes <= sum(b.get("syncs", 0) for b in books) + workers, d  # one per sync, and the last
    gathered = probe == "io:cached" and int(asked.get("fsync", 0)) > 1
    assert (data_writes <= writes) if gathered else (data_writes == writes), d
    # every I/O of bs bytes: the device saw exactly bs/512 sectors per I/O
    assert d["write_sectors"] == writes * bs // 512
    # each I/O timed once
    assert sum(h["hist"]["count"] for h in r.of("hist")) == counted
    if every := int(asked.get("fsync", 0)):
        _synced_as_asked(probe, books, every, ops)
    if probe == "io-uring":
        _ring_driven_as_asked(r.of("uring"), opts, counted)
    if probe == "libaio":
        for b in books:  # a submit per I/O, a getevents at most per I/O (once the queue is full)
            assert b["submits"] == b["reads"] + b["writes"] and 0 < b["getevents"] <= b["submits"], b
    comp = r.of("completions")[0]
    if comp["available"] and probe == "io:cached":
        # buffered writes reach the device as writeback's bios, not the workers' calls: as many as the
        # device counted at most (the last ones, synced at each worker's end, may fall after the window)
        assert sum(c["submitted"] for c in comp["cpus"]) <= data_writes + reads, comp
    elif comp["available"]:
        assert sum(c["submitted"] for c in comp["cpus"]) == counted
        completed = sum(c["completed"] for c in comp["cpus"])
        # each I/O completed once: short only by events the kernel said it did not deliver, and by
        # those the record says no event reported (a bio queued again while waiting: a loop write
        # in about 100,000 under load), exactly
        if comp["missed"] == 0:
            assert completed + comp["unseen"] == counted, comp
        assert counted - comp["missed"] - comp["unseen"] <= completed <= counted
        assert all(0 <= c["local"] <= c["completed"] for c in comp["cpus"])


@needs_root
@pytest.mark.parametrize(
    "probe,opts",
    [("io:direct", []), ("io:direct", ["--opt", "reads=0"]), ("io-uring", ["--opt", "qd=4"]),
     ("io-uring", ["--opt", "qd=4", "--opt", "wait=1"]), ("libaio", ["--opt", "qd=4"])],
)  # fmt: skip
def test_a_rate_is_held_within_five_percent_where_the_device_goes_faster(zram, probe, opts):
    """zram does some 100,000 I/Os per second per CPU here; 2,000 asked of
    each worker is held, and never exceeded: the bucket starts empty. A
    worker the machine did not run for longer than its bucket (10 ms) falls
    behind, and says so: the tokens it lost then make up the difference
    (a busy host took 70 ms of one worker's 500 here)."""
    rate, workers = 2000, min(2, os.cpu_count() or 1)
    r = run_engine("run", "--probe", probe, *opts, "--opt", f"rate={rate}", "--target", zram.path, "--duration",
                   "0.5", "--reps", "2", "--warmup", "0.1", "--workers", str(workers), "--latency")  # fmt: skip
    assert r.rc == 0, r.stderr
    books = {(b["rep"], b["worker"]): b for b in r.of({"io:direct": "io", "io-uring": "uring", "libaio": "aio"}[probe])}
    got = [(w["ops_per_sec"], books[w["rep"], w["worker"]]["pace_dropped"] / w["seconds"]) for w in r.of("worker")]
    assert len(got) == 2 * workers
    # (the tokens lost are of the warm-up too: they can only make the rate look held, never less)
    assert all(x <= 1.05 * rate and x + lost >= 0.95 * rate for x, lost in got), got
    assert all(b["pace_sleeps"] > 0 for b in books.values()), books  # it waited for its tokens


# what each `taskrun` may set up (a kernel without some takes less)
TASKRUN_SETUP = {0: set(), 1: {"COOP_TASKRUN"}, 2: {"COOP_TASKRUN", "SINGLE_ISSUER", "DEFER_TASKRUN"}}


def _synced_as_asked(probe: str, books: list[dict], every: int, ops: int) -> None:
    """A sync before every write after every `every` writes (the worker's
    last ones are not); a queued engine waits for what is in flight first."""
    for b in books:
        assert b["syncs"] == (b["writes"] - 1) // every if b["writes"] == ops else b["syncs"] > 0, b
        assert b["sync_ns"] > 0
        if probe in ("io-uring", "libaio"):
            assert b["getevents" if probe == "libaio" else "waits"] >= b["syncs"], b


def _ring_driven_as_asked(rings: list[dict], opts: list[str], counted: int) -> None:
    """Each ring set up with no more than was asked, and driven as asked:
    with wait=0 one enter per I/O submitted plus those that waited, with
    wait=1 every enter waits."""
    asked = dict(o.split("=") for o in opts if "=" in o)
    wait, taskrun = int(asked.get("wait", 0)), int(asked.get("taskrun", 1))
    assert sum(r["ios"] for r in rings) == counted
    for r in rings:
        assert set(r["setup"]) <= TASKRUN_SETUP[taskrun] and r["wait"] == wait
        assert r["enters"] == (r["waits"] if wait else r["ios"] + r["waits"]), r


@needs_root
def test_direct_io_lands_on_block_boundaries(zram):
    """zram's logical block is 4 KiB: a direct I/O off a 4 KiB boundary fails
    with EINVAL, so a clean run of random offsets proves them aligned; a
    bs that is not a multiple is refused before anything runs."""
    assert Path(f"/sys/block/{Path(zram.path).name}/queue/logical_block_size").read_text().strip() == "4096"
    r = run_engine("run", "--probe", "io:direct", "--target", zram.path, "--ops", "20000", "--warmup", "0")
    assert r.rc == 0, r.stderr
    r = run_engine("run", "--probe", "io:direct", "--opt", "bs=512", "--target", zram.path, "--ops", "10")
    assert r.rc == 2 and "not a multiple of its logical block size 4096" in r.stderr


def show(db) -> dict:
    return json.loads(oslens("show", "last", "--json", db=db).stdout)


@needs_root
def test_the_workers_own_cpu_per_io_is_of_the_window_and_within_every_cpus(tmp_path):
    """The workers' rusage spans warm-up and window, the I/Os counted the
    window only: per I/O it is taken at the window's share (a long warm-up
    made it three times too large). It is part of what every CPU spent in
    the window, so never above it, but for the tick accounting's error."""
    p = oslens("io", "--engine", "pread", "--workers", "1", "--duration", "0.5", "--warmup", "1", "--reps", "1",
               "--size", "32M", db=tmp_path / "r.db")  # fmt: skip
    assert p.returncode == 0, p.stderr
    (pt,) = show(tmp_path / "r.db")["series"][0]["points"]
    # (irq is None on a kernel that does not account it)
    own, every = sum(pt["worker_us_per_io"].values()), sum(v for v in pt["cpu_us_per_io"].values() if v is not None)
    slack = 4 * pt["cpu_resolution_us"] * os.cpu_count()
    assert 0 < own <= every * 1.1 + slack, (pt["worker_us_per_io"], pt["cpu_us_per_io"])


@needs_root
def test_how_io_uring_is_driven_is_chosen_recorded_and_said(tmp_path):
    p = oslens("io", "--engine", "uring", "--qd", "4", "--workers", "1", "--ops", "500", "--warmup", "0", "--reps",
               "1", "--size", "32M", "--uring-wait", "--taskrun", "interrupt", db=tmp_path / "r.db")  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = show(tmp_path / "r.db")
    assert doc["params"]["uring"] == {"wait": 1, "taskrun": 0}
    (pt,) = doc["series"][0]["points"]
    assert pt["uring"]["setup"] == [] and pt["uring"]["wait"] == 1
    assert pt["uring"]["waits_per_io"] == pt["uring"]["enters_per_io"] > 0
    assert "ring no IORING_SETUP_ flags, submits all, waits in the same enter" in p.stdout


@needs_root
def test_explain_charges_each_io_to_its_system_call(tmp_path):
    """--explain runs each point again with the worker's time charged to its
    causes: a direct pread is one pread64() per I/O, and the causes add up to
    the measured time per I/O."""
    p = oslens("io", "--engine", "pread", "--workers", "1", "--duration", "0.3", "--reps", "1", "--warmup", "0.1",
               "--size", "32M", "--explain", "full", db=tmp_path / "r.db")  # fmt: skip
    assert p.returncode == 0, p.stderr
    (pt,) = show(tmp_path / "r.db")["series"][0]["points"]
    ex = pt["explained"]
    if ex is None:
        pytest.skip(next(w for w in pt["warnings"] if w.startswith("not explained")))
    own = [c for c in ex["causes"] if c["group"] != "runq"]  # a loaded machine makes the worker wait for its CPU
    top = max(own, key=lambda c: c["ns_per_op"])
    assert top["key"] == "syscall:pread64", ex["causes"]
    assert top["count_per_op"] == pytest.approx(1.0, rel=0.01)
    charged = sum(c["ns_per_op"] for c in ex["causes"]) + ex["unexplained_ns"]
    assert charged == pytest.approx(ex["ns_per_op"], rel=0.05)
    assert "pread64() in the kernel" in p.stdout  # the table says it too


def test_the_measured_repetitions_carry_no_tracing(tmp_path):
    """Following each I/O with BPF costs it a quarter of its time on zram:
    the repetitions whose IOPS and latency are reported run without it, and
    one more repetition, not reported as such, follows the completions."""
    from oslens import engine
    from oslens.plan import io as io_plan

    f = tmp_path / "data"
    f.write_bytes(os.urandom(8 << 20))
    choices = io_plan.check(target=str(f), size=None, engines="psync,uring", qd="1", bs="4k", span=None,
                            workers="1", placement="compact", duration=0.2, ops=None, reps=3, warmup=0.1,
                            scheduler=None, allow_overwrite=False, explain=engine.Explain("full"))  # fmt: skip
    points = io_plan.plan(choices, choices["target"]).points
    roles = [(p.series.label, p.role) for p in points]
    assert roles == [(s, r) for s in ("psync", "uring qd1") for r in ("measure", "completions", "explain")]
    for p in points:
        args = list(p.args)
        reps = args[args.index("--reps") + 1]
        assert ("--completions" in args) == (p.role == "completions")
        assert reps == ("1" if p.role == "completions" else "3")
        assert ("--explain" in args) == (p.role == "explain")


@needs_root
def test_io_makes_its_device_measures_and_removes_it(tmp_path):
    before = leftovers.block_devices()
    p = oslens("io", "--workers", "1,max", "--engine", "psync,uring", "--qd", "1,4", "--ops", "2000", "--warmup",
               "0", "--reps", "2", "--size", "32M", db=tmp_path / "r.db")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert leftovers.block_devices() == before, "the device made for the run is still there"
    doc = show(tmp_path / "r.db")
    assert doc["kind"] == "io" and doc["target"]["made"] in devices.MADE
    labels = [s["label"] for s in doc["series"]]
    assert labels == ["psync", "uring qd1", "uring qd4"]
    assert doc["params"]["uring"] == {"wait": 0, "taskrun": 1}
    assert "an enter per I/O, waits only when full" in p.stdout
    for s in doc["series"]:
        for pt in s["points"]:
            assert pt["reps"] == 2 and pt["ops"] == [2000 * pt["workers"]] * 2
            assert pt["latency"]["p50"] <= pt["latency"]["p99"] <= pt["latency"]["p99.9"]
            # every I/O of the fixed work, and the engine's check, in the device's count
            assert pt["device"]["reads"] + pt["device"]["read_merges"] == sum(pt["ops"]) + CHECK_READS
            # followed in one more repetition of the same fixed work
            assert pt["completions"] or pt["completions_unavailable"]
            if pt["completions"]:
                assert sum(pt["completions"]["completed"].values()) == 2000 * pt["workers"]
            assert set(pt["cpu_us_per_io"]) == {"user", "system", "irq", "softirq"}
    assert "uring qd4" in oslens("show", "last", db=tmp_path / "r.db").stdout


def _wait_for_new_device(before: set[str], proc, timeout=30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = leftovers.block_devices() - before
        if new:
            return new.pop()
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    raise AssertionError("no device was made")


@needs_root
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_io_removes_its_device(tmp_path, sig):
    before = leftovers.block_devices()
    proc = subprocess.Popen([sys.executable, "-m", "oslens", "io", "--duration", "5", "--reps", "3", "--size", "16M"],
                            env={**os.environ, "OSLENS_DB": str(tmp_path / "r.db")}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    _wait_for_new_device(before, proc)
    time.sleep(1.5)  # measuring by now
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig
    assert leftovers.block_devices() == before


@needs_root
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_the_device_is_made_removes_it_on_the_way_out(tmp_path, sig):
    """Filling 1 GiB takes seconds: a signal then comes before any run
    exists, and the device goes with the command, not at the next start."""
    before = leftovers.block_devices()
    proc = subprocess.Popen([sys.executable, "-m", "oslens", "io", "-q", "--size", "1G", "--duration", "0.2"],
                            env={**os.environ, "OSLENS_DB": str(tmp_path / "r.db")}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    _wait_for_new_device(before, proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert one_line_error(err) == f"oslens: interrupted by {sig.name}"
    assert leftovers.block_devices() == before
    assert not (tmp_path / "r.db").exists() or "no runs" in oslens("runs", db=tmp_path / "r.db").stdout


@needs_root
def test_a_killed_io_leaves_a_device_the_next_start_removes(tmp_path):
    before = leftovers.block_devices()  # the loop backing files among them
    proc = subprocess.Popen([sys.executable, "-m", "oslens", "io", "--duration", "5", "--reps", "3", "--size", "16M"],
                            env={**os.environ, "OSLENS_DB": str(tmp_path / "r.db")}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    dev = _wait_for_new_device(before, proc)
    time.sleep(1.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{p}").exists() for p in _engine_pids()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert dev in leftovers.block_devices()  # what a SIGKILL leaves: nothing removed it yet
    p = oslens("runs", db=tmp_path / "r.db")
    assert p.returncode == 0, p.stderr
    assert leftovers.block_devices() == before


# Killed in the instant between the read of zram's hot_add (the device
# exists) and the line that names it: the index was written down before.
KILLED_AFTER_HOT_ADD = """
import os, signal
from oslens import runtime
from oslens.blockdev import devices
runtime.start()
write = runtime.note
def note(kind, what):
    if str(what).startswith("zram "):
        os.kill(os.getpid(), signal.SIGKILL)
    write(kind, what)
runtime.note = note
devices.make("zram", 16 << 20)
"""


@needs_root
def test_a_zram_device_killed_before_it_is_named_is_swept(tmp_path):
    if devices.available_kinds()["zram"]:
        pytest.skip(devices.available_kinds()["zram"])
    env = {**os.environ, "OSLENS_RUNTIME_DIR": str(tmp_path / "rt"), "OSLENS_DB": str(tmp_path / "r.db")}
    (tmp_path / "rt").mkdir()
    before = leftovers.block_devices()
    p = subprocess.run([sys.executable, "-c", KILLED_AFTER_HOT_ADD], env=env, capture_output=True, text=True)
    assert p.returncode == -signal.SIGKILL, p.stderr
    made = {d for d in leftovers.block_devices() - before if d.startswith("zram")}
    assert len(made) == 1  # the device exists, and no line names it as made
    subprocess.run([sys.executable, "-m", "oslens", "runs"], env=env, capture_output=True, timeout=120)
    assert leftovers.block_devices() == before


# An oslens that wrote down zram index N (sys.argv[1]) and was killed: it
# had removed its device (or never made it), and the kernel has given N again.
DEAD_WITH_STALE_ZRAM_LINES = """
import os, signal, sys
from oslens import runtime
runtime.entry()
runtime.note("device", f"zram-unconfirmed {sys.argv[1]}")
runtime.note("device", f"zram {sys.argv[1]}")
os.kill(os.getpid(), signal.SIGKILL)
"""


# A live oslens that made a zram device: it holds it, unopened, until told.
LIVE_WITH_ZRAM = """
import sys
from oslens import runtime
from oslens.blockdev import devices
runtime.start()
t = devices.make("zram", 16 << 20)
print(t.path, flush=True)
sys.stdin.readline()
print(devices.remove_device(t.made_line), flush=True)
"""


@needs_root
def test_a_dead_oslenss_lines_never_remove_the_device_a_live_one_made_at_that_index(tmp_path):
    """A live oslens holds the zram device the kernel gave it; an oslens
    that named the same index earlier is killed; the sweep that follows
    (`oslens doctor`, as every start does) leaves the device alone: it is
    the live one's, as its own lines say, read under the lock every maker
    holds until its device is configured. Such a sweep reset a device
    mid-make before (its maker failed with EBUSY)."""
    if devices.available_kinds()["zram"]:
        pytest.skip(devices.available_kinds()["zram"])
    env = {**os.environ, "OSLENS_DB": str(tmp_path / "r.db")}
    before = leftovers.block_devices()
    live = subprocess.Popen([sys.executable, "-c", LIVE_WITH_ZRAM], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        path = live.stdout.readline().strip()
        assert path.startswith("/dev/zram"), live.stderr.read()
        dead = subprocess.run([sys.executable, "-c", DEAD_WITH_STALE_ZRAM_LINES, path.removeprefix("/dev/zram")],
                              env=env, capture_output=True, text=True)  # fmt: skip
        assert dead.returncode == -signal.SIGKILL, dead.stderr
        doc = subprocess.run([sys.executable, "-m", "oslens", "doctor"], env=env, capture_output=True, text=True)
        assert doc.returncode == 0, doc.stderr
        assert Path(path).exists(), doc.stdout  # the live one's still
        assert f"zram {path.removeprefix('/dev/zram')}  " in doc.stdout  # the dead one's line, said
        assert "left alone: another live oslens names it" in doc.stdout and "removed" not in doc.stdout, doc.stdout
        out, err = live.communicate("\n", timeout=60)
        assert live.returncode == 0 and out.split() == ["removed"], err
    finally:
        if live.poll() is None:
            live.kill()
            live.wait()
    assert leftovers.block_devices() == before


@needs_root
def test_a_device_removed_by_its_maker_is_struck_out_of_its_lines(zram):
    """What a process removed itself is no longer its to remove at exit: a
    line left would name whatever the kernel gives that name next."""
    from oslens import runtime

    t = devices.make("zram", 16 << 20)
    owns, line = runtime.entry() / runtime.OWNS, f"device {t.made_line}"
    assert line in owns.read_text().splitlines()
    assert not [x for x in owns.read_text().splitlines() if x.startswith("device zram-unconfirmed")]
    devices.remove_device(t.made_line)
    assert line not in owns.read_text().splitlines()


def _engine_pids() -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and os.readlink(d / "exe") == engine_bin():
                out.append(int(d.name))
        except OSError:
            pass
    return out


@pytest.fixture
def ext4_on_loop(tmp_path):
    """A loop device holding an ext4 filesystem, and a directory to mount it on."""
    if not ROOT or not shutil.which("mkfs.ext4") or devices.available_kinds()["loop"]:
        pytest.skip("needs root, mkfs.ext4 and loop devices")
    img = tmp_path / "fs.img"
    img.write_bytes(b"\0" * (8 << 20))
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True, capture_output=True)
    dev = subprocess.run(["losetup", "--find", "--show", str(img)], check=True, capture_output=True, text=True)
    dev = dev.stdout.strip()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    yield dev, mnt
    subprocess.run(["umount", str(mnt)], capture_output=True)
    subprocess.run(["losetup", "--detach", dev], capture_output=True)


def _refused(tmp_path, *args) -> str:
    before = leftovers.block_devices()
    p = oslens("io", "--ops", "10", "--workers", "1", *args, db=tmp_path / "r.db")
    assert p.returncode == 2, p.stderr
    assert leftovers.block_devices() == before
    assert not (tmp_path / "r.db").exists() or "no runs" in oslens("runs", db=tmp_path / "r.db").stdout
    return one_line_error(p.stderr)


def test_writes_to_a_device_with_a_filesystem_or_mounted_are_refused(tmp_path, ext4_on_loop):
    dev, mnt = ext4_on_loop
    before = Target(dev).counters()
    assert "holds a ext4 signature" in _refused(tmp_path, "--target", dev, "--engine", "pwrite")
    assert "holds a ext4 signature" in _refused(tmp_path, "--target", dev, "--engine", "uring-write")
    subprocess.run(["mount", dev, str(mnt)], check=True, capture_output=True)
    msg = _refused(tmp_path, "--target", dev, "--engine", "pwrite", "--allow-overwrite")
    assert "is mounted" in msg and "never writes" in msg
    after = Target(dev).counters()
    assert after["writes"] - before["writes"] <= 2  # the mount's own superblock update, none of ours
    # reading a mounted device is fine
    p = oslens("io", "--target", dev, "--engine", "pread", "--ops", "100", "--workers", "1", "--reps", "1",
               "--warmup", "0", db=tmp_path / "ok.db")  # fmt: skip
    assert p.returncode == 0, p.stderr


def test_a_path_that_cannot_be_written_and_a_file_with_data_are_refused(tmp_path, ext4_on_loop):
    dev, mnt = ext4_on_loop
    subprocess.run(["mount", dev, str(mnt)], check=True, capture_output=True)
    (mnt / "data").write_bytes(b"x" * (1 << 20))
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True, capture_output=True)
    assert "not writable" in _refused(tmp_path, "--target", str(mnt / "data"), "--engine", "pwrite",
                                      "--allow-overwrite")  # fmt: skip
    f = tmp_path / "mine"
    f.write_bytes(b"y" * (1 << 20))
    assert "would overwrite its data" in _refused(tmp_path, "--target", str(f), "--engine", "pwrite")
    assert f.read_bytes() == b"y" * (1 << 20)


@pytest.mark.parametrize(
    "args,words",
    [
        (["--engine", "bogus"], "unknown 'bogus'"),
        (["--engine", ""], "--engine: an empty value"),
        (["--qd", "0"], "not a queue depth"),
        (["--qd", "²"], "not a queue depth"),
        (["--taskrun", "soon"], "'soon' is not one of"),
        (["--bs", "4q"], "not a size"),
        (["--bs", "1000"], "multiple of 512 bytes from"),
        (["--size", "0"], "at least 1M"),
        (["--target", ""], "--target: an empty value"),
        (["--target", "/nonexistent/x"], "No such file"),
        (["--target", "/dev/null"], "neither a block device nor a regular file"),
        (["--target", "/proc/version"], "an empty file"),
        (["--span", "3k"], "whole number of MiB"),
        (["--explain"], "use --duration"),
        (["--target", "zram", "--scheduler", "none"], "zram"),
        (["--target", "loop", "--scheduler=-C/etc/x"], "'-C/etc/x' is not an I/O scheduler's name"),
        (["--target", "loop", "--scheduler", "../../x"], "'../../x' is not an I/O scheduler's name"),
        (["--target", "loop", "--scheduler", "mq-deadline/x"], "'mq-deadline/x' is not an I/O scheduler's name"),
    ],
)
def test_bad_input_gets_one_line_and_status_2_before_anything_is_made(tmp_path, args, words):
    assert words in _refused(tmp_path, *args)


@pytest.mark.parametrize("name", ["-C/etc/x", "--dirname=/tmp", "../x", "a/b", "bfq x", "", "é", "x" * 33])
def test_a_scheduler_name_that_could_be_an_option_or_a_path_never_reaches_modprobe_or_sysfs(monkeypatch, name):
    """--scheduler NAME went, for a device still to be made, to `modprobe -n
    -q NAME-iosched` as it was typed ('-C/etc/x' an option of modprobe's),
    and is written to a disk's queue/scheduler: refused before either, and
    before any other option is looked at."""
    from oslens import engine
    from oslens.errors import UsageError
    from oslens.plan import io as io_plan

    reached: list[str] = []
    monkeypatch.setattr(io_plan, "check_scheduler", lambda *a: reached.append("check_scheduler"))
    monkeypatch.setattr(engine, "probes", lambda *a: reached.append("engine.probes"))
    with pytest.raises(UsageError, match="--scheduler: .* is not an I/O scheduler's name"):
        io_plan.check(target="loop", size=None, engines="psync", qd=None, bs="4k", span=None, workers="1",
                      placement="compact", duration=None, ops=10, reps=1, warmup=0.0, scheduler=name,
                      allow_overwrite=False, explain=None)  # fmt: skip
    assert reached == []


@pytest.mark.parametrize("name", ["mq-deadline", "bfq", "kyber", "none"])
def test_the_kernels_scheduler_names_pass_the_name_check(name):
    from oslens.plan.io import check_scheduler_name

    assert check_scheduler_name(name) == name


def test_the_io_probes_belong_to_oslens_io(tmp_path):
    p = oslens("scale", "--probe", "io", "--workers", "1", db=tmp_path / "r.db")
    assert p.returncode == 2 and "use 'oslens io'" in one_line_error(p.stderr)
    r = run_engine("run", "--probe", "io:direct", "--ops", "10")
    assert r.rc == 2 and "needs --target" in r.stderr


# ---- issue 28: a target that is read as it is, options that cannot apply, figures that are not there


def _root_disk() -> str | None:
    """The block device the root filesystem is on, if it has a node in /dev."""
    dev = os.stat("/").st_dev
    link = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    node = f"/dev/{link.resolve().name}" if link.exists() else None
    return node if node and Path(node).exists() else None


@pytest.mark.parametrize(
    "args,words",
    [
        (["--engine", "cached", "--uring-wait"], "--uring-wait: io_uring's only"),
        (["--engine", "libaio", "--uring-wait"], "--uring-wait: io_uring's only"),
        (["--engine", "pread", "--qd", "4"], "--qd: the queued engines' only (uring, libaio)"),
        (["--engine", "pread,pwrite", "--taskrun", "defer"], "--taskrun: io_uring's only"),
        (["--engine", "libaio", "--uring-poll"], "--uring-poll: io_uring's only"),
        (["--engine", "uring", "--uring-poll"], "--uring-poll: the devices oslens makes (zram, loop) complete no I/O"),
        (["--engine", "uring", "--uring-poll", "--target", "loop"], "complete no I/O by polling"),
        (["--mix", "70"], "--mix: the share of reads of a mixed --rw"),
        (["--rw", "randrw", "--mix", "100"], "not a percentage of reads from 1 to 99"),
        (["--rw", "sideways"], "--rw: unknown 'sideways'"),
        (["--engine", "pwrite", "--rw", "randrw"], "--engine pwrite is psync with --rw randwrite"),
        (["--engine", "cached", "--rw", "read"], "a sequential read there is a memory copy"),
        (["--fsync", "4"], "--fsync: syncs the writes, and no --rw writes"),
        (["--rw", "randwrite", "--fsync", "0"], "not a number of writes"),
        (["--rw", "randwrite", "--fsync", "1", "--fdatasync", "1"], "give one"),
        (["--rate", "50"], "--rate: '50' is not a number of I/Os per second per CPU from 100"),
        (["--rate", "10k,fast"], "--rate: 'fast'"),
        (["--rate", "10k", "--ops", "100"], "--rate paces a fixed window of time"),
        (["--bs", "4k,1000"], "--bs: 1000 is not a multiple of 512"),
    ],
)
def test_options_that_cannot_apply_to_the_engines_or_patterns_asked_are_refused(tmp_path, args, words):
    assert words in _refused(tmp_path, *args)


@needs_root
@pytest.mark.parametrize(
    "args,words",
    [
        (["--target", "loop", "--scheduler", "nosuch"], "no I/O scheduler 'nosuch'"),
        (["--size", "16M", "--span", "1T"], "--span: 1T is more than the 16 MiB"),
        (["--size", "16M", "--db", "{tmp}"], "cannot open results store"),
    ],
)
def test_refused_before_a_device_is_made(tmp_path, args, words):
    """Nothing made first (a made device announces itself on stderr, a second line)."""
    if "loop" in args and devices.available_kinds()["loop"]:
        pytest.skip(devices.available_kinds()["loop"])
    assert words in _refused(tmp_path, *(a.format(tmp=tmp_path) for a in args))


def test_polled_io_on_a_target_without_poll_queues_is_refused_in_one_line(tmp_path):
    """--uring-poll on a file whose filesystem's disk has no poll queues
    (its queue says so), or that is on no disk at all: refused in one line,
    before anything is measured or stored; and, where the queue says
    nothing, the engine's check asks the kernel with one polled read."""
    from oslens.blockdev.target import Target

    f = tmp_path / "data"
    f.write_bytes(os.urandom(4 << 20))
    disk = Target(str(f)).disk
    if disk is not None and (disk / "queue" / "io_poll").exists():
        if (disk / "queue" / "io_poll").read_text().strip() != "0":
            pytest.skip(f"{disk.name} polls: the refusal needs a disk that does not")
    p = oslens("io", "--target", str(f), "--engine", "uring", "--uring-poll", "--ops", "10", "--workers", "1",
               "--reps", "1", "--warmup", "0", db=tmp_path / "r.db")  # fmt: skip
    assert p.returncode == 2, p.stderr
    said = one_line_error(p.stderr)
    assert any(w in said for w in ("no poll queues", "no block device", "completes no I/O by polling")), said
    assert not (tmp_path / "r.db").exists() or "uring" not in oslens("runs", db=tmp_path / "r.db").stdout


def test_a_target_the_kernel_will_not_open_is_refused_in_one_line(tmp_path):
    """The root disk: where this user may open it, it is read (reads are
    harmless); where the kernel refuses (EPERM from an LSM, even to root),
    one line, status 2 (it was a PermissionError traceback)."""
    disk = _root_disk()
    if disk is None:
        pytest.skip("the root filesystem is on no block device with a node in /dev")
    p = oslens("io", "--target", disk, "--engine", "pread", "--ops", "10", "--workers", "1", "--reps", "1",
               "--warmup", "0", db=tmp_path / "r.db")  # fmt: skip
    assert "Traceback" not in p.stderr
    if p.returncode != 0:
        assert p.returncode == 2 and f"--target {disk}: cannot open it" in one_line_error(p.stderr)


def _sparse(path: Path, size: int, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.truncate(size)


def test_a_file_with_holes_is_refused_unless_oslens_may_write_them(tmp_path):
    """A read of a hole (or of an extent fallocated and never written) is
    answered with zeros by the filesystem, without a device I/O: it was
    reported as 725k IOPS 'on virtio_blk' while the device counted 18."""
    f = tmp_path / "t.img"
    head = os.urandom(1 << 20)
    _sparse(f, 16 << 20, head)
    if hole_bytes(str(f), 16 << 20) == 0:
        pytest.skip("this filesystem does not keep holes")
    msg = _refused(tmp_path, "--target", str(f), "--engine", "pread")
    assert "15 MiB of the 16 MiB the I/Os reach are holes" in msg and "--allow-overwrite" in msg
    assert "are holes" in _refused(tmp_path, "--target", str(f), "--engine", "pread", "--span", "2M")
    assert "--span: 32M is more than the 16 MiB" in _refused(tmp_path, "--target", str(f), "--span", "32M")
    assert "--size: the size of a device oslens makes" in _refused(tmp_path, "--target", str(f), "--size", "16M")
    g = tmp_path / "fallocated"
    with open(g, "wb") as fh:
        os.posix_fallocate(fh.fileno(), 0, 4 << 20)
    assert "are holes" in _refused(tmp_path, "--target", str(g), "--engine", "pread")
    # only the part the I/Os reach counts: the first MiB is written
    p = oslens("io", "--target", str(f), "--engine", "pread", "--span", "1M", "--ops", "50", "--workers", "1",
               "--reps", "1", "--warmup", "0", db=tmp_path / "ok.db")  # fmt: skip
    assert p.returncode == 0, p.stderr


def test_allow_overwrite_writes_the_holes_and_the_reads_reach_the_device(tmp_path):
    f = tmp_path / "t.img"
    head = os.urandom(1 << 20)
    _sparse(f, 16 << 20, head)
    ops = 3000
    p = oslens("io", "--target", str(f), "--engine", "pread", "--ops", str(ops), "--workers", "1", "--reps", "1",
               "--warmup", "0", "--allow-overwrite", db=tmp_path / "r.db")  # fmt: skip
    if p.returncode == 2 and "direct I/O" in p.stderr:
        pytest.skip(one_line_error(p.stderr))
    assert p.returncode == 0, p.stderr
    assert "writing the 15 MiB of holes" in p.stderr
    assert hole_bytes(str(f), 16 << 20) == 0
    assert f.read_bytes()[: 1 << 20] == head and f.stat().st_size == 16 << 20  # its data as it was
    (pt,) = show(tmp_path / "r.db")["series"][0]["points"]
    if pt["device"] is not None:  # a filesystem on a block device: each direct read is one there
        assert pt["device"]["reads"] + pt["device"]["read_merges"] >= ops


@pytest.fixture(scope="module")
def io_run(tmp_path_factory) -> dict:
    """One real run of two worker counts (one count on a 1-CPU machine), its
    stored records and what `oslens io --json` printed."""
    if not ROOT or devices.available_kinds()["zram"] and devices.available_kinds()["loop"]:
        pytest.skip("no device can be made here")
    from oslens.store import Store

    db = tmp_path_factory.mktemp("io") / "r.db"
    p = oslens("io", "-q", "--json", "--engine", "pread", "--workers", "1,max", "--ops", "300", "--warmup", "0",
               "--reps", "3", "--size", "16M", db=db)  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    with Store(db, read_only=True) as st:
        run = st.run(doc["run"])
        return {"doc": doc, "run": run, "records": st.records(run.id)}


def _terminal(summary, run) -> str:
    import io

    from rich.console import Console

    from oslens.report import io as io_report

    out = io.StringIO()
    io_report.show(Console(file=out, width=250, color_system=None), run, summary)
    return out.getvalue()


def _with(records: list[dict], workers: int, change) -> list[dict]:
    """The records, with `change` applied to each record of the measured
    invocation at `workers`."""
    import copy

    out, here = [], False
    for r in records:
        r = copy.deepcopy(r)
        if r["type"] == "context":
            here = (r.get("io") or {}).get("role") == "measure" and (r.get("io") or {}).get("workers") == workers
        if here:
            change(r)
        out.append(r)
    return out


def test_irq_time_the_kernel_does_not_account_is_unavailable_not_zero(io_run):
    """profile's and appscale's rule: on a kernel without IRQ time
    accounting, irq per I/O is not 0.00 but unavailable, and why, in the
    terminal, --json and the frames."""
    from oslens.analysis.io import analyze
    from oslens.collectors import kernel
    from oslens.frames import io as io_frames

    run, doc = io_run["run"], io_run["doc"]
    why = kernel.irq_time_unavailable(run.machine["kernel"]["config"])
    irq = [pt["cpu_us_per_io"]["irq"] for s in doc["series"] for pt in s["points"]]
    frames = io_frames.frames(run, io_run["records"])["summary"]
    assert doc["irq_unavailable"] == why
    text = _terminal(analyze(run, io_run["records"]), run)
    if why:
        assert irq == [None] * len(irq)
        assert frames["cpu_irq_us_per_io"].isna().all()
        assert f"irq: {why}" in text and " / n/a / " in text and "the irq column aside" in text
    else:
        assert all(isinstance(x, float) for x in irq) and frames["cpu_irq_us_per_io"].notna().all()
        assert "n/a" not in text


def test_a_superlinear_io_point_is_flagged_by_scales_rule(io_run):
    from oslens.analysis.io import summarize
    from oslens.analysis.scale import SUPERLINEAR_NOTE

    run, recs = io_run["run"], io_run["records"]
    counts = run.params["workers"]
    if len(counts) < 2:
        pytest.skip("one CPU: one worker count")
    base = io_run["doc"]["series"][0]["points"][0]
    # every repetition of the larger count at 1.7 times the fewest CPUs' best IOPS per CPU (173 % was seen)
    best = max(base["iops"]) / base["workers"]
    rates = iter([1.69, 1.70, 1.71] * 8)

    def faster(r):
        if r["type"] == "worker":
            r["ops_per_sec"] = best * next(rates)

    s = summarize(run.params, _with(recs, counts[-1], faster), run.machine)
    first, last = s.series[0].points[0], s.series[0].points[-1]
    assert last.superlinear and SUPERLINEAR_NOTE in last.warnings and last.efficiency_ci.low > 1.0
    assert not first.superlinear
    text = _terminal(s, run)
    assert "↑" in text and "superlinear" in text


def test_a_point_with_no_timed_io_has_no_figure_and_no_nan(io_run, tmp_path):
    """A point whose repetitions timed no I/O printed '0 [0–0]' and nan:
    it has no figure, says so in one line, and its JSON is strict."""
    from oslens.analysis.io import summarize
    from oslens.frames import io as io_frames

    run, recs = io_run["run"], io_run["records"]
    n = run.params["workers"][-1]

    def idle(r):
        if r["type"] == "worker":
            r["ops"], r["ops_per_sec"] = 0, 0.0
        if r["type"] == "hist":
            r["hist"].update(count=0, sum=0, min=0, max=0, buckets=[])

    changed = _with(recs, n, idle)
    s = summarize(run.params, changed, run.machine)
    json.dumps(s.to_dict(), allow_nan=False)
    pt = next(p for p in s.series[0].points if p.workers == n)
    assert pt.median_iops is None and pt.latency == {} and pt.cpu_us_per_io is None
    text = _terminal(s, run)
    assert "nan" not in text.lower() and "no I/O was timed" in text
    row = io_frames.frames(run, changed)["summary"]
    assert row[row.workers == n]["iops"].isna().all()
    # and the run failed there: stored as failed, said in one line (exit 1), never a complete run
    from oslens.commands import nothing_measured
    from oslens.store import Store

    with Store(tmp_path / "s.db") as store:
        rid = store.begin_run("io", run.argv, run.params, run.machine)
        store.add_records(rid, changed)
        store.finish_run(rid, "complete")
        failure = nothing_measured(store, rid, s)
        assert failure is not None and f"×{n}" in str(failure)
        assert (store.run(rid).status, store.run(rid).reason) == (
            "failed",
            f"nothing measured at {failure.args[0].split(' at ')[1]}",
        )
        assert nothing_measured(store, rid, summarize(run.params, recs, run.machine)) is None


def test_io_charts_draw_in_chromium_with_a_zero_latency_and_no_irq_bar(io_run, browser, tmp_path):
    """A percentile of 0 ns (below the clock's resolution) on the log scale
    left the latency chart blank ('Log scale domain includes zero'): it is
    said, not drawn; irq the kernel does not account has no bar."""
    from types import SimpleNamespace

    from oslens.collectors import kernel
    from oslens.report.html import io as io_html
    from oslens.report.html.page import Figure, Page

    run, recs = io_run["run"], io_run["records"]

    def instant(r):
        if r["type"] == "hist":
            r["hist"].update(sum=0, min=0, max=0, buckets=[[0, r["hist"]["count"]]])

    rd = SimpleNamespace(short=f"run {run.id}", run=run, records=_with(recs, run.params["workers"][0], instant))
    (section,) = io_html.sections([rd])
    figures = {b.id.split("-")[1]: b for b in section.blocks if isinstance(b, Figure)}
    assert {"iops", "lat", "cpu"} <= set(figures)
    assert "0 ns, not drawn on the log scale" in figures["lat"].caption
    bars = {d["kind"] for d in figures["cpu"].spec()["datasets"].popitem()[1]}
    assert ("irq" in bars) == (kernel.irq_time_unavailable(run.machine["kernel"]["config"]) is None)
    page = tmp_path / "io.html"
    page.write_text(Page("io", sections=[section]).to_html())
    shown = load(browser, str(page))
    assert shown["error"] is None and shown["console"] == [], shown["console"]
    assert shown["drawn"] == shown["plots"] == len(figures)


def test_scheduler_is_set_for_the_run_recorded_and_put_back(tmp_path, ext4_on_loop):
    """The README's --scheduler: a device's I/O scheduler is the one asked
    for while the run measures, the run records it, and the device has its
    own again afterwards."""
    dev, _ = ext4_on_loop
    sched = Path(f"/sys/block/{Path(dev).name}/queue/scheduler")
    text = sched.read_text()
    before = text[text.index("[") + 1 : text.index("]")]
    others = [s.strip("[]") for s in text.split() if s.strip("[]") != before]
    if not others:
        pytest.skip(f"{dev} offers one I/O scheduler only ({text.strip()})")
    want = others[0]
    db = tmp_path / "s.db"
    p = oslens("io", "--json", "-q", "--target", dev, "--engine", "pread", "--scheduler", want, "--ops", "200",
               "--workers", "1", "--reps", "1", "--warmup", "0", db=db)  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["params"]["target"]["scheduler"] == want
    assert doc["params"]["scheduler"] == want
    now = sched.read_text()
    assert now[now.index("[") + 1 : now.index("]")] == before


@needs_root
def test_cpu_per_io_against_the_rate_is_stored_shown_and_drawn(tmp_path, browser):
    """--rate as a user runs it: one series per engine and rate, each held
    in every repetition, the CPU cost per I/O at each, exported, and drawn
    against the rate in the report with no console warning."""
    rates = (1000, 4000)
    p = oslens("io", "--engine", "psync,libaio", "--qd", "2", "--rate", ",".join(map(str, rates)), "--workers",
               "1", "--duration", "0.4", "--reps", "2", "--warmup", "0.1", "--size", "32M",
               db=tmp_path / "r.db")  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = show(tmp_path / "r.db")
    labels = [s["label"] for s in doc["series"]]
    assert labels == [f"{e} at {r:,}/s per CPU" for e in ("psync", "libaio qd2") for r in rates]
    for s, rate in zip(doc["series"], rates * 2):
        (pt,) = s["points"]
        assert pt["rate"] == rate and all(0.95 * rate <= x <= 1.05 * rate for x in pt["iops"]), pt["iops"]
        assert pt["books"]["pace_sleeps"] > 0 and pt["books"]["writes"] == 0
        # the workers' own time, exact (every CPU's comes in ticks, which an idle machine's may all miss)
        assert sum(pt["worker_us_per_io"].values()) > 0
        assert not [w for w in pt["warnings"] if "asked per CPU" in w], pt["warnings"]
    out = subprocess.run([sys.executable, "-m", "oslens", "--db", str(tmp_path / "r.db"), "export", "last", "--frame",
                          "summary", "--format", "csv"], capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr
    import csv
    import io as io_

    rows = list(csv.DictReader(io_.StringIO(out.stdout)))
    assert sorted(int(r["rate_per_cpu"]) for r in rows) == sorted(rates * 2)
    assert all(float(r["cpu_user_us_per_io"]) >= 0 and float(r["cpu_system_us_per_io"]) >= 0 for r in rows)
    page = tmp_path / "r.html"
    rep = oslens("report", "last", "-o", str(page), db=tmp_path / "r.db")
    assert rep.returncode == 0, rep.stderr
    shown = load(browser, str(page))
    assert shown["error"] is None and shown["console"] == [], shown["console"]
    assert shown["drawn"] == shown["plots"]
    assert any("CPU time per I/O against the I/O rate" in (t or "") for t in shown["titles"]), shown["titles"]
