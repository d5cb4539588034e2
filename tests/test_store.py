import csv
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import oslens.store as store_mod
from oslens.export import export_run
from oslens.store import DEAD_REASON, Store, StoreError, default_path

HEADER = {
    "type": "header",
    "probe": {"name": "dup", "description": "dup/close"},
    "variant": "shared",
    "mode": "process",
    "workers": 2,
}
HEADER2 = {"type": "header", "probe": {"name": "fork"}, "variant": None, "mode": "thread", "workers": 1}


def worker(rep, w, cpu, ops):
    return {
        "type": "worker",
        "rep": rep,
        "worker": w,
        "cpu": cpu,
        "ops": ops,
        "seconds": 0.5,
        "ops_per_sec": ops / 0.5,
        "rusage": {"user_s": 0.1},
    }


RECORDS = [
    HEADER,
    worker(0, 0, 3, 100),
    worker(0, 1, 5, 120),
    {"type": "rep", "rep": 0},
    HEADER2,
    worker(0, 0, 7, 40),
    {"type": "end", "status": "ok"},
]


def child_env():
    # The child must import the same oslens as this test, installed or not.
    src = str(Path(store_mod.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


@pytest.fixture
def db(tmp_path):
    with Store(tmp_path / "sub" / "oslens.db") as s:
        yield s


def test_round_trip(db):
    rid = db.begin_run("scale", ["oslens", "scale", "--probe", "dup"], {"reps": 3}, {"kernel": "6.1"})
    assert db.run(rid).status == "running"
    db.add_records(rid, RECORDS[:3])
    db.add_records(rid, iter(RECORDS[3:]))
    db.set_summary(rid, {"speedup": 1.5})
    db.set_summary(rid, {"speedup": 1.9})
    db.finish_run(rid, "complete")

    run = db.run(rid)
    assert (run.id, run.kind, run.status, run.reason) == (rid, "scale", "complete", None)
    assert run.argv == ["oslens", "scale", "--probe", "dup"]
    assert run.params == {"reps": 3} and run.machine == {"kernel": "6.1"}
    assert run.summary == {"speedup": 1.9}
    assert run.pid == os.getpid() and run.n_records == len(RECORDS)
    assert run.started.endswith("+00:00") and run.finished >= run.started
    assert db.runs() == [run]
    assert db.run(str(rid)) == run
    assert db.records(rid) == RECORDS
    assert db.records(rid, type="worker") == [r for r in RECORDS if r["type"] == "worker"]
    assert db.records(rid, type="nothing") == []


def scale_header(probe, variant, mode, workers):
    """A header as the engine writes it, with the fields the frames read."""
    return {
        "type": "header",
        "probe": {"name": probe},
        "variant": variant,
        "mode": mode,
        "workers": workers,
        "placement": {"policy": "compact", "workers": [{"cpu": c, "smt": 0} for c in range(workers)]},
        "fixed": "time",
    }


def scale_worker(rep, w, cpu, ops):
    return {
        **worker(rep, w, cpu, ops),
        "cpu_seen": cpu,
        "rusage": {"user_s": 0.1, "sys_s": 0.2, "nvcsw": 0, "nivcsw": 1},
    }


SCALE_RECORDS = [
    scale_header("dup", "shared", "process", 2),
    scale_worker(0, 0, 3, 100),
    scale_worker(0, 1, 5, 120),
    {"type": "rep", "rep": 0, "status": "ok"},
    scale_header("fork", "default", "thread", 1),
    scale_worker(0, 0, 7, 40),
    {"type": "rep", "rep": 0, "status": "ok"},
    {"type": "end", "status": "ok"},
]


def test_export_json_and_csv(db):
    rid = db.begin_run("scale", [], {}, {})
    db.add_records(rid, SCALE_RECORDS)
    db.finish_run(rid, "incomplete", "interrupted")

    out = io.StringIO()
    export_run(db, rid, "json", out)
    doc = json.loads(out.getvalue())
    assert doc["records"] == SCALE_RECORDS
    assert doc["run"]["id"] == rid and doc["run"]["status"] == "incomplete"
    assert doc["run"]["reason"] == "interrupted"

    out = io.StringIO()
    export_run(db, "last", "csv", out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    old = ["run_id", "probe", "variant", "mode", "workers", "rep", "worker", "cpu", "ops", "seconds", "ops_per_s"]
    assert [[r[k] for k in old] for r in rows] == [
        [str(rid), "dup", "shared", "process", "2", "0", "0", "3", "100", "0.5", "200.0"],
        [str(rid), "dup", "shared", "process", "2", "0", "1", "5", "120", "0.5", "240.0"],
        [str(rid), "fork", "default", "thread", "1", "0", "0", "7", "40", "0.5", "80.0"],
    ]
    with pytest.raises(ValueError, match="parquet"):
        export_run(db, rid, "parquet", io.StringIO())


def test_last_is_newest_and_runs_newest_first(db):
    with pytest.raises(StoreError, match="no runs"):
        db.run("last")
    ids = [db.begin_run(k, [], {}, {}) for k in ("a", "b", "c")]
    assert db.run("last").id == db.run("latest").id == ids[-1]
    assert [r.id for r in db.runs()] == ids[::-1]


def test_unknown_run(db, tmp_path):
    db.begin_run("a", [], {}, {})
    for call in (
        lambda: db.run(42),
        lambda: db.run("42"),
        lambda: db.records(42),
        lambda: db.finish_run(42, "failed"),
        lambda: db.set_summary(42, {}),
        lambda: db.add_records(42, [{"type": "x"}]),
    ):
        with pytest.raises(StoreError) as exc:
            call()
        assert str(exc.value) == f"no run 42 in {tmp_path / 'sub' / 'oslens.db'}"
    with pytest.raises(StoreError, match="bad run reference"):
        db.run("first")


def test_bad_input_is_rejected(db):
    rid = db.begin_run("a", [], {}, {})
    with pytest.raises(ValueError):
        db.finish_run(rid, "done")
    with pytest.raises(ValueError):
        db.add_records(rid, [{"type": "ok"}, {"no": "type"}])
    assert db.run(rid).n_records == 0  # the whole batch was rolled back


def test_unwritable_location(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError) as exc:
        Store(blocker / "dir" / "oslens.db")
    assert str(blocker) in str(exc.value) and "\n" not in str(exc.value)


def test_read_only_store_is_refused_at_open(tmp_path, monkeypatch):
    path = tmp_path / "oslens.db"
    Store(path).close()
    # Root ignores file modes, so make SQLite itself open the file read-only.
    real_connect = sqlite3.connect
    monkeypatch.setattr(store_mod.sqlite3, "connect", lambda p, **kw: real_connect(f"file:{p}?mode=ro", uri=True, **kw))
    with pytest.raises(StoreError, match="readonly"):
        Store(path)


@pytest.mark.parametrize("content", [b"this is not sqlite at all\n" * 100, b"SQLite format 3\0" + b"\xff" * 200])
def test_not_a_database(tmp_path, content):
    path = tmp_path / "oslens.db"
    path.write_bytes(content)
    with pytest.raises(StoreError) as exc:
        Store(path)
    assert str(path) in str(exc.value) and "\n" not in str(exc.value)
    assert path.read_bytes() == content


def test_foreign_sqlite_database_is_left_alone(tmp_path):
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="not an oslens results store"):
        Store(path)
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] != "wal"
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["t"]
    con.close()


def test_reopen_keeps_runs(tmp_path):
    path = tmp_path / "oslens.db"
    with Store(path) as s:
        rid = s.begin_run("a", [], {}, {})
        s.finish_run(rid, "complete")
    with Store(path) as s:
        assert [r.id for r in s.runs()] == [rid]


def test_default_path(monkeypatch, tmp_path):
    monkeypatch.setenv("OSLENS_DB", str(tmp_path / "x.db"))
    assert default_path() == tmp_path / "x.db"
    monkeypatch.delenv("OSLENS_DB")
    assert default_path().name == "oslens.db" and "oslens" in default_path().parent.parts


def test_run_of_dead_process_is_incomplete(db):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    rid = db.begin_run("scale", [], {}, {})
    db._db.execute("UPDATE run SET pid = ? WHERE id = ?", (dead.pid, rid))
    run = db.run(rid)
    assert run.status == "incomplete"
    assert run.reason == "process ended without finishing the run"
    assert db.runs()[0].status == "incomplete"


def test_running_run_of_live_or_remote_process_stays_running(db):
    mine = db.begin_run("a", [], {}, {})
    remote = db.begin_run("b", [], {}, {})
    db._db.execute("UPDATE run SET host = 'elsewhere', pid = 999999999 WHERE id = ?", (remote,))
    assert db.run(mine).status == "running"
    assert db.run(remote).status == "running"


def test_concurrent_writer_in_another_process(db):
    code = textwrap.dedent(f"""
        from oslens.store import Store
        with Store({str(db.path)!r}) as s:
            rid = s.begin_run("child", [], {{}}, {{}})
            for i in range(200):
                s.add_records(rid, [{{"type": "worker", "i": i}}] * 5)
            s.finish_run(rid, "complete")
    """)
    child = subprocess.Popen([sys.executable, "-c", code], env=child_env(), stderr=subprocess.PIPE, text=True)
    rid = db.begin_run("parent", [], {}, {})
    for i in range(200):
        db.add_records(rid, [{"type": "worker", "i": i}] * 5)
    db.finish_run(rid, "complete")
    _, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    runs = {r.kind: r for r in db.runs()}
    assert runs["parent"].n_records == runs["child"].n_records == 1000
    assert runs["child"].status == "complete"
    assert [r["i"] for r in db.records(runs["child"].id)] == [i for i in range(200) for _ in range(5)]


def test_killed_writer_leaves_store_intact(db):
    code = textwrap.dedent(f"""
        import sys
        from oslens.store import Store
        with Store({str(db.path)!r}) as s:
            rid = s.begin_run("victim", [], {{}}, {{}})
            print(rid, flush=True)
            while True:
                s.add_records(rid, [{{"type": "worker", "pad": "x" * 500}}] * 100)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], env=child_env(), stdout=subprocess.PIPE, text=True)
    rid = int(child.stdout.readline())
    deadline = time.monotonic() + 30
    while db.run(rid).n_records < 1000 and time.monotonic() < deadline:
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    with Store(db.path) as s:
        assert s._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        run = s.run(rid)
        assert run.status == "incomplete" and run.reason.startswith("process ended")
        assert run.n_records >= 1000 and run.n_records % 100 == 0
        assert len(s.records(rid)) == run.n_records


# ------------------------------------------- a store on a read-only or full disk


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 4 MiB tmpfs of our own: remounted read-only, or filled, for real."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "mnt"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def _cli(*args, db):
    from conftest import oslens

    return oslens(*args, db=db, timeout=120)


def _one_run(db):
    p = _cli("-q", "scale", "--probe", "getppid", "--workers", "1", "--duration", "0.05", "--reps", "1",
             "--warmup", "0", db=db)  # fmt: skip
    assert p.returncode == 0, p.stderr


def _fill(where: Path) -> None:
    with open(where / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    assert os.statvfs(where).f_bavail == 0


@pytest.mark.parametrize("damage", ["read-only", "full"])
def test_a_store_that_cannot_be_written_still_reads(small_tmpfs, damage, tmp_path):
    db = small_tmpfs / "oslens.db"
    _one_run(db)
    if damage == "read-only":
        subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    else:
        _fill(small_tmpfs)
    runs = _cli("runs", "--json", db=db)
    assert runs.returncode == 0, runs.stderr
    assert [r["status"] for r in json.loads(runs.stdout)] == ["complete"]
    for args in (["show", "1"], ["export", "1"], ["show", "1", "--json"]):
        p = _cli(*args, db=db)
        assert p.returncode == 0 and p.stdout.strip(), (args, p.stderr)
    assert _cli("report", "1", "-o", str(tmp_path / "r.html"), db=db).returncode == 0
    # writing is refused before anything is measured, in one line
    p = _cli("scale", "--probe", "getppid", "--workers", "1", "--duration", "0.05", db=db)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_run_whose_process_died_is_marked_so_by_the_next_writer(tmp_path):
    """A SIGKILL leaves its run `running`: the next oslens that writes to
    the store marks it, so that the stored status is true for every reader
    (another tool reading the SQLite file, an import elsewhere)."""
    db = tmp_path / "s.db"
    killed = (
        "import os, sys; from oslens.store import Store;"
        " Store(sys.argv[1]).begin_run('scale', [], {}, {}); os.kill(os.getpid(), 9)"
    )
    assert subprocess.run([sys.executable, "-c", killed, str(db)]).returncode == -signal.SIGKILL
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT status FROM run").fetchall() == [("running",)]
    Store(db).close()
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT status, reason FROM run").fetchall() == [("incomplete", DEAD_REASON)]


def test_a_disk_that_fills_mid_run_fails_the_run_in_one_line(small_tmpfs):
    """Enough room to begin the run, not to store its repetitions: exit 1
    (a failure of the run, not bad usage), one line, and the run is never
    left `running`."""
    db = small_tmpfs / "oslens.db"
    _one_run(db)
    with open(small_tmpfs / "filler", "wb") as f:  # leave 96 KiB
        f.write(b"\0" * (os.statvfs(small_tmpfs).f_bavail * os.statvfs(small_tmpfs).f_frsize - 96 * 1024))
    p = _cli("-q", "scale", "--probe", "getppid", "--workers", "1", "--duration", "0.002", "--reps", "400",
             "--warmup", "0", db=db)  # fmt: skip
    assert p.returncode == 1, p.stderr
    line = p.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert "full" in line, line
    # as stored, not as `runs` reads a dead process's run
    with sqlite3.connect(db) as con:
        stored = con.execute("SELECT status, reason FROM run ORDER BY id").fetchall()
    assert [s for s, _ in stored] == ["complete", "failed"] and "full" in stored[1][1], stored
    (small_tmpfs / "filler").unlink()
    runs = json.loads(_cli("runs", "--json", db=db).stdout)
    assert [r["status"] for r in runs] == ["failed", "complete"], runs


def _open_each_at_once(paths, barrier, errors):
    for path in paths:
        barrier.wait(timeout=60)
        try:
            Store(path).close()
        except StoreError as e:
            errors.put(str(e))


def test_first_openings_that_meet_both_get_the_store(tmp_path):
    """A `runs` while the first `scale` creates the store: several first
    openings of one new store at the same instant all succeed (the switch
    to WAL, which SQLite refuses at once rather than waiting, once lost one
    in about 200 such meetings)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    paths = [tmp_path / f"{i}.db" for i in range(60)]
    openers = 4
    barrier, errors = ctx.Barrier(openers), ctx.Queue()
    procs = [ctx.Process(target=_open_each_at_once, args=(paths, barrier, errors)) for _ in range(openers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * openers
    lost = []
    while not errors.empty():
        lost.append(errors.get())
    assert not lost, f"{len(lost)} of {len(paths) * openers} openings refused: {lost[0]}"
    for path in paths:
        with Store(path, read_only=True) as s:
            assert s.runs() == []
