"""`oslens import FILE.db`: runs of another store copied into this one, under
new ids, records byte for byte, all or nothing, once."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from oslens.store import IMPORTED_RUNNING_REASON, Source, Store, StoreError

from conftest import one_line_error, oslens

SCALE = ("scale", "--probe", "getppid", "--workers", "1", "--duration", "0.1", "--reps", "1", "-q")
RECORDS = [
    {"type": "header", "probe": {"name": "dup"}, "variant": None, "mode": "process", "workers": 1},
    {"type": "worker", "rep": 0, "worker": 0, "cpu": 0, "ops": 10, "seconds": 0.5, "ops_per_sec": 20.0},
    {"type": "end", "status": "ok"},
]


def rows(db: Path) -> tuple[list, list]:
    """Every run (without its id) and every record (with its run's start), as stored."""
    con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        runs = con.execute("SELECT kind, status, reason, started, host, pid, argv, params, machine FROM run").fetchall()
        recs = con.execute(
            "SELECT run.started, seq, type, data FROM record JOIN run ON run.id = record.run_id ORDER BY 1, 2"
        ).fetchall()
        return sorted(runs), recs
    finally:
        con.close()


def files(d: Path, stem: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.glob(f"{stem}*"))}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Store A with one real scale run, store B with a native one."""
    d = tmp_path_factory.mktemp("import")
    for name in ("A.db", "B.db"):
        p = oslens(*SCALE, db=d / name)
        assert p.returncode == 0, p.stderr
    return d


@pytest.fixture
def pair(stores, tmp_path):
    a, b = tmp_path / "A.db", tmp_path / "B.db"
    shutil.copy(stores / "A.db", a)
    shutil.copy(stores / "B.db", b)
    return a, b


def test_imported_run_compares_with_a_native_one(pair):
    a, b = pair
    p = oslens("import", str(a), db=b)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["run", "1", "→", "2", "scale"]
    # The records, the run's metadata and summary, exactly as they were in A.
    con_a, con_b = sqlite3.connect(a), sqlite3.connect(b)
    run_a = con_a.execute(
        "SELECT kind, status, reason, started, finished, host, pid, argv, params, machine, summary FROM run"
    ).fetchall()
    run_b = con_b.execute(
        "SELECT kind, status, reason, started, finished, host, pid, argv, params, machine, summary"
        " FROM run WHERE id = 2"
    ).fetchall()
    assert run_a == run_b
    assert con_a.execute("SELECT seq, type, data FROM record WHERE run_id = 1 ORDER BY seq").fetchall() == (
        con_b.execute("SELECT seq, type, data FROM record WHERE run_id = 2 ORDER BY seq").fetchall()
    )
    con_a.close()
    con_b.close()
    show = oslens("show", "2", db=b)
    assert show.returncode == 0, show.stderr
    cmp = oslens("compare", "2", "1", db=b)
    assert cmp.returncode == 0, cmp.stderr
    assert "A: run 2 scale" in cmp.stdout and "B: run 1 scale" in cmp.stdout


def test_importing_again_changes_nothing(pair):
    a, b = pair
    assert oslens("import", str(a), db=b).returncode == 0
    before = rows(b)
    p = oslens("import", str(a), "--json", db=b)
    assert p.returncode == 0, p.stderr
    assert '"imported": false' in p.stdout
    assert rows(b) == before
    # B's own runs, imported into B (or a copy of it), are already there too.
    p = oslens("import", str(b), db=b)
    assert p.returncode == 0, p.stderr
    assert rows(b) == before


def test_only_the_runs_asked_for(tmp_path):
    a, b = tmp_path / "A.db", tmp_path / "B.db"
    with Store(a) as s:
        ids = [s.begin_run("scale", ["x", str(i)], {"i": i}, {}) for i in range(3)]
        for i in ids:
            s.add_records(i, RECORDS)
            s.finish_run(i, "complete")
    p = oslens("import", str(a), "--run", "3", "--run", "1", db=b)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["run 1 → 1  scale", "run 3 → 2  scale"]
    with Store(b) as s:
        assert [r.params for r in s.runs()] == [{"i": 2}, {"i": 0}]
        assert s.records(2) == RECORDS


def test_a_run_still_running_arrives_incomplete(tmp_path):
    a, b = tmp_path / "A.db", tmp_path / "B.db"
    with Store(a) as s:
        s.add_records(s.begin_run("scale", [], {}, {}), RECORDS[:2])
    with Source(a) as src, Store(b) as s:
        s.import_runs(src)
        run = s.run(1)
    assert (run.status, run.reason, run.n_records) == ("incomplete", IMPORTED_RUNNING_REASON, 2)


def test_a_run_imported_while_it_ran_is_replaced_whole_once_it_has_grown_and_ended(tmp_path):
    """A snapshot taken mid-run must not stand for the run forever: an
    import after it grew, and one after it ended, bring the rest."""
    a, b = tmp_path / "A.db", tmp_path / "B.db"
    with Store(a) as s:
        rid = s.begin_run("scale", [], {}, {})
        s.add_records(rid, RECORDS[:1])
    assert oslens("import", str(a), db=b).returncode == 0
    p = oslens("import", str(a), db=b)  # nothing new yet: nothing copied
    assert p.returncode == 0 and "already here" in p.stdout and "still running there" in p.stdout, p.stdout
    with Store(a) as s:
        s.add_records(rid, RECORDS[1:2])
    assert "replaces the snapshot" in oslens("import", str(a), db=b).stdout
    with Store(b) as s:
        assert [(r.id, r.status, r.n_records) for r in s.runs()] == [(1, "incomplete", 2)]
    with Store(a) as s:
        s.add_records(rid, RECORDS[2:])
        s.finish_run(rid, "complete")
    p = oslens("import", str(a), db=b)
    assert p.returncode == 0 and p.stdout.strip() == "run 1 → 1  scale (replaces the snapshot taken while it ran)"
    with Store(b) as s:
        (run,) = s.runs()
        assert (run.status, run.reason, run.n_records) == ("complete", None, len(RECORDS))
        assert s.records(1) == RECORDS
    assert "already here" in oslens("import", str(a), db=b).stdout  # and once whole, it stays as it is


def test_all_or_nothing(tmp_path, monkeypatch):
    a, b = tmp_path / "A.db", tmp_path / "B.db"
    with Store(a) as s:
        for _ in range(2):
            s.add_records(s.begin_run("scale", [], {}, {}), RECORDS)
            time.sleep(0.002)  # a run is known by (kind, start ms, host, pid): two in one ms would be one
    Store(b).close()

    real = Source.records

    def second_fails(self, run_id):
        if run_id == 2:
            raise StoreError("disk on fire")
        return real(self, run_id)

    monkeypatch.setattr(Source, "records", second_fails)
    with Source(a) as src, Store(b) as s, pytest.raises(StoreError, match="disk on fire"):
        s.import_runs(src)
    assert rows(b) == ([], [])


def not_sqlite(d: Path) -> Path:
    (d / "x.db").write_text("not a database\n" * 100)
    return d / "x.db"


def other_sqlite(d: Path) -> Path:
    con = sqlite3.connect(d / "x.db")
    con.execute("CREATE TABLE run (id INTEGER)")
    con.commit()
    con.close()
    return d / "x.db"


def newer(d: Path) -> Path:
    with Store(d / "x.db"):
        pass
    con = sqlite3.connect(d / "x.db")
    con.execute("PRAGMA user_version = 99")
    con.close()
    return d / "x.db"


def missing(d: Path) -> Path:
    return d / "nothing-here.db"


def directory(d: Path) -> Path:
    (d / "dir.db").mkdir()
    return d / "dir.db"


@pytest.mark.parametrize(
    "make, says",
    [
        (not_sqlite, "not a database"),
        (other_sqlite, "not an oslens results store"),
        (newer, "schema 99, newer than"),
        (missing, "no such file"),
        (directory, "is a directory"),
    ],
)
@pytest.mark.parametrize("b_exists", [True, False])
def test_bad_files_are_refused_before_writing(pair, tmp_path, make, says, b_exists):
    _, b = pair
    if not b_exists:
        b.unlink()
    src = make(tmp_path)
    before = files(tmp_path, "B.db")
    p = oslens("import", str(src), db=b)
    assert p.returncode == 2
    line = one_line_error(p.stderr)
    assert says in line and str(src.name) in line
    assert files(tmp_path, "B.db") == before  # B untouched, and not created


def test_unreadable_and_unknown_run_are_refused(pair, tmp_path):
    a, b = pair
    before = files(tmp_path, "B.db")
    p = oslens("import", str(a), "--run", "7", db=b)
    assert p.returncode == 2
    assert "no run 7" in one_line_error(p.stderr)
    if os.geteuid() != 0:
        a.chmod(0)
        p = oslens("import", str(a), db=b)
        assert p.returncode == 2
        assert "cannot import" in one_line_error(p.stderr)
    assert files(tmp_path, "B.db") == before


def test_runs_begun_within_one_millisecond_are_distinct(tmp_path, monkeypatch):
    # the start is stored to the millisecond: one process beginning runs in a
    # loop gives them one start, and only their arguments tell them apart
    import oslens.store as store_module

    monkeypatch.setattr(store_module, "_now", lambda: "2026-01-01T00:00:00.000+00:00")
    a, b = tmp_path / "A.db", tmp_path / "B.db"
    with Store(a) as s:
        for i in range(3):
            s.finish_run(s.begin_run("scale", ["x", str(i)], {"i": i}, {}), "complete")
    with Source(a) as src, Store(b) as s:
        done = s.import_runs(src)
        assert [d.copied for d in done] == [True, True, True]
        assert [r.params for r in s.runs()] == [{"i": 2}, {"i": 1}, {"i": 0}]
    with Source(a) as src, Store(b) as s:
        assert [d.copied for d in s.import_runs(src)] == [False, False, False]
