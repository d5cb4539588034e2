"""The results store: one SQLite file holding every run, its engine records and its analysis summary.

Runs are written as they happen (begin, records batch by batch, finish), each step its own
transaction, so a process killed at any point leaves a readable store and a run marked as
running, which readers then report as incomplete.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import socket
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Iterator

import platformdirs

from . import trust

SCHEMA_VERSION = 1
# Marks the file as ours, so another program's SQLite database is refused instead of altered.
APPLICATION_ID = 0x4F534C4E  # "OSLN"
BUSY_TIMEOUT_S = 10.0
FINAL_STATUSES = ("complete", "incomplete", "failed")
DEAD_REASON = "process ended without finishing the run"
# Kept beside the store while runs are written, and given up when the disk
# fills mid-run, so that the run can still be marked failed: the status
# update needs a few pages of write-ahead log, and on a full disk not even
# a checkpoint can run (it grows the database).
RESERVE_BYTES = 64 * 1024

_SCHEMA = """
CREATE TABLE run (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- ids are never reused, even if runs are deleted
    kind TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'complete', 'incomplete', 'failed')),
    reason TEXT,
    started TEXT NOT NULL,
    finished TEXT,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    proc_start INTEGER,  -- start time of pid (clock ticks since boot): tells a reused pid apart
    argv TEXT NOT NULL,
    params TEXT NOT NULL,
    machine TEXT NOT NULL,
    summary TEXT
);
CREATE TABLE record (
    run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE INDEX record_type ON record(run_id, type, seq);
"""

_RUN_COLUMNS = (
    "id, kind, status, reason, started, finished, host, pid, proc_start, argv, params,"
    " machine, summary, (SELECT COUNT(*) FROM record WHERE run_id = run.id)"
)


# A run named by its tag where a run id goes: tag:kernel=6.1
TAG_REF = "tag:"
TAG_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
TAG_VALUE_MAX = 200


def parse_tag(text: str) -> tuple[str, str]:
    """'KEY=VALUE' -> (key, value); ValueError saying what is wrong."""
    key, eq, value = text.partition("=")
    if not eq or not TAG_KEY.match(key):
        raise ValueError(f"'{text}' is not KEY=VALUE (a key of letters, digits, '_', '.' or '-')")
    if not value or len(value) > TAG_VALUE_MAX or not value.isprintable():
        raise ValueError(f"'{text}': a value is 1 to {TAG_VALUE_MAX} printable characters")
    return key, value


class StoreError(Exception):
    """A problem with the store itself, in one printable line naming the store's path."""


@dataclasses.dataclass(frozen=True)
class Run:
    id: int
    kind: str
    status: str
    started: str
    finished: str | None
    host: str
    pid: int
    argv: list
    params: dict
    machine: dict
    summary: dict | None
    reason: str | None
    n_records: int

    @property
    def tags(self) -> dict[str, str]:
        """Its --tag labels."""
        return (self.params or {}).get("tags") or {}


def default_path() -> Path:
    env = os.environ.get("OSLENS_DB")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("oslens")) / "oslens.db"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of a process, or None if /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # comm (field 2) may hold spaces and parentheses: split after its closing one.
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _alive(host: str, pid: int, proc_start: int | None) -> bool:
    if host != socket.gethostname():
        return True  # another machine's process: nothing here can prove it dead
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    stat = _proc_stat(pid)
    if stat is None:
        return True
    state, start = stat
    # A killed but unreaped process is a zombie; a different start time means the pid was reused.
    return state != "Z" and (proc_start is None or start == proc_start)


IMPORTED_RUNNING_REASON = "still running in the store it was imported from"
_IMPORT_COLUMNS = (
    "id",
    "kind",
    "status",
    "reason",
    "started",
    "finished",
    "host",
    "pid",
    "proc_start",
    "argv",
    "params",
    "machine",
    "summary",
)


@dataclasses.dataclass(frozen=True)
class Imported:
    old_id: int
    new_id: int
    kind: str
    copied: bool  # False: the run was already in the store, as new_id
    # copied again over what an earlier import took while it was still
    # being written: it has grown or ended since
    refreshed: bool = False
    # still being written in the source: what was copied is a snapshot
    snapshot: bool = False


def _open_read_only(path: Path, what: str) -> sqlite3.Connection:
    """A store opened to read and never to write, refused (StoreError,
    starting with `what`) unless it is an oslens store of a schema this
    oslens understands."""

    def connect(query: str) -> tuple[sqlite3.Connection, int, int]:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True, timeout=BUSY_TIMEOUT_S,
                             isolation_level=None)  # fmt: skip
        try:
            return db, *(db.execute(f"PRAGMA {p}").fetchone()[0] for p in ("application_id", "user_version"))
        except BaseException:
            db.close()
            raise

    try:
        db, app_id, version = connect("mode=ro")
    except sqlite3.Error as e:
        # A WAL store reads through a -shm file it makes beside itself: on a
        # read-only mount or a full disk it cannot. With no -wal holding
        # writes not yet in the file, the file alone is the store: read it
        # as immutable (nothing can write there either).
        wal = Path(f"{path}-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreError(f"{what}: {e} (its -wal holds writes that need a writable directory to be read)") from None
        try:
            db, app_id, version = connect("mode=ro&immutable=1")
        except sqlite3.Error as e2:
            raise StoreError(f"{what}: {e2}") from None
    if app_id != APPLICATION_ID or version > SCHEMA_VERSION:
        db.close()
        if app_id != APPLICATION_ID:
            raise StoreError(f"{what}: not an oslens results store")
        raise StoreError(f"{what}: it has schema {version}, newer than this oslens understands ({SCHEMA_VERSION})")
    return db


class Source:
    """Another results store, opened read-only to import its runs: refused
    (StoreError) unless it is a readable oslens store of a schema this oslens
    understands, and every run asked for is in it. Its rows are read in one
    read transaction, so a store being written meanwhile gives one consistent
    snapshot."""

    def __init__(self, path: str | os.PathLike, run_ids: Iterable[int] | None = None):
        self.path = Path(path).expanduser()
        self._db: sqlite3.Connection | None = None
        if not self.path.is_file():
            raise StoreError(f"cannot import {self.path}: no such file")
        self._db = _open_read_only(self.path, f"cannot import {self.path}")
        try:
            self._db.execute("BEGIN")
            rows = self._db.execute(f"SELECT {', '.join(_IMPORT_COLUMNS)} FROM run ORDER BY id").fetchall()
            by_id = {row[0]: dict(zip(_IMPORT_COLUMNS, row)) for row in rows}
            wanted = list(dict.fromkeys(run_ids)) if run_ids else list(by_id)
            missing = [i for i in wanted if i not in by_id]
            if missing:
                raise StoreError(f"cannot import {self.path}: no run {', '.join(map(str, missing))} in it")
            self.runs = [by_id[i] for i in sorted(wanted)]
        except sqlite3.Error as e:
            self.close()
            raise StoreError(f"cannot import {self.path}: {e}") from None
        except BaseException:
            self.close()
            raise

    def records(self, run_id: int) -> Iterator[tuple[int, str, str]]:
        """(seq, type, data) of a run, as stored: copied, never re-encoded."""
        try:
            yield from self._db.execute("SELECT seq, type, data FROM record WHERE run_id = ? ORDER BY seq", (run_id,))
        except sqlite3.Error as e:
            raise StoreError(f"cannot read {self.path}: {e}") from None

    def n_records(self, run_id: int) -> int:
        try:
            return self._db.execute("SELECT COUNT(*) FROM record WHERE run_id = ?", (run_id,)).fetchone()[0]
        except sqlite3.Error as e:
            raise StoreError(f"cannot read {self.path}: {e}") from None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Store:
    def __init__(self, path: str | os.PathLike, read_only: bool = False):
        """read_only: for the commands that only read (a store on a
        read-only mount or a full disk still reads); nothing is created or
        written, not even the summaries `show` would otherwise keep."""
        self.path = Path(path).expanduser()
        self._db: sqlite3.Connection | None = None
        # Whoever can change the store's directory can put their own file (or a
        # link to any file, which SQLite's journal would then write) in its place.
        if why := trust.problem(self.path):
            raise StoreError(f"results store {self.path} is not safe to use: {why}")
        if read_only:
            if not self.path.is_file():
                raise StoreError(f"no results store at {self.path} (nothing measured there yet)")
            self._db = _open_read_only(self.path, f"results store {self.path}")
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the directory of results store {self.path}: {e.strerror or e}") from None
        try:
            self._open()
        except sqlite3.Error as e:
            self.close()
            raise StoreError(f"cannot open results store {self.path}: {e}") from None
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        # isolation_level=None: transactions are ours to begin, so each one is exactly one step.
        self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        self._db.execute("PRAGMA foreign_keys = ON")
        with self._write() as db:
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if app_id == 0 and version == 0 and not db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
                # Statement by statement: executescript() would commit our transaction first.
                for stmt in filter(str.strip, _SCHEMA.split(";")):
                    db.execute(stmt)
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            elif app_id != APPLICATION_ID:
                raise StoreError(f"{self.path} is not an oslens results store")
            elif version > SCHEMA_VERSION:
                raise StoreError(
                    f"results store {self.path} has schema {version}, newer than "
                    f"this oslens understands ({SCHEMA_VERSION})"
                )
            # Always written, so a store we cannot write to is refused now, before measuring.
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._mark_dead_runs(db)
        self._enter_wal()

    def _enter_wal(self) -> None:
        """WAL lets readers run alongside the one writer of the moment.

        The switch is kept in the file, so only the store's first opening
        makes it, but two first openings can meet (a `runs` while the first
        `scale` creates the store): each holds a read lock and wants the
        exclusive one, and SQLite answers one of them "database is locked"
        at once, without waiting its busy timeout — so the wait is ours."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                self._db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as e:
                busy = "locked" in str(e) or "busy" in str(e)  # SQLITE_BUSY's texts (no error codes before 3.11)
                if not busy or time.monotonic() > deadline:
                    raise
            time.sleep(0.005)

    @staticmethod
    def _mark_dead_runs(db: sqlite3.Connection) -> None:
        """Runs left `running` by a process of this host that is gone (a
        SIGKILL, or a disk too full even to mark the run) are marked as
        what they are, by the next oslens that writes here."""
        rows = db.execute("SELECT id, host, pid, proc_start FROM run WHERE status = 'running'").fetchall()
        dead = [(DEAD_REASON, _now(), id_) for id_, host, pid, start in rows if not _alive(host, pid, start)]
        db.executemany("UPDATE run SET status = 'incomplete', reason = ?, finished = ? WHERE id = ?", dead)

    @property
    def _reserve(self) -> Path:
        return self.path.with_name(self.path.name + "-reserve")

    def _keep_reserve(self) -> None:
        """Makes the reserve if it is missing and the disk has room."""
        if self._reserve.exists():
            return
        try:
            with open(self._reserve, "xb") as f:
                f.write(bytes(RESERVE_BYTES))  # written, not sparse: the blocks are really taken
                f.flush()
                os.fsync(f.fileno())
        except FileExistsError:
            pass
        except OSError:
            self._reserve.unlink(missing_ok=True)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as e:
            raise StoreError(f"{what} {self.path}: {e}") from None

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front, so concurrent writers wait (busy timeout)
        # instead of failing when a read lock cannot be upgraded.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            if self._db.in_transaction:  # SQLite itself rolls back after some errors
                self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _missing(self, run_id) -> StoreError:
        return StoreError(f"no run {run_id} in {self.path}")

    def begin_run(self, kind: str, argv: list[str], params: dict, machine: dict) -> int:
        stat = _proc_stat(os.getpid())
        with self._guard("cannot write to results store"), self._write() as db:
            cur = db.execute(
                "INSERT INTO run (kind, status, started, host, pid, proc_start, argv, params, machine)"
                " VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?)",
                (
                    kind,
                    _now(),
                    socket.gethostname(),
                    os.getpid(),
                    stat and stat[1],
                    json.dumps(list(argv)),
                    json.dumps(params),
                    json.dumps(machine),
                ),
            )
            run_id = cur.lastrowid
        self._keep_reserve()
        return run_id

    def add_records(self, run_id: int, records: Iterable[dict]) -> None:
        with self._guard("cannot write to results store"), self._write() as db:
            if not db.execute("SELECT 1 FROM run WHERE id = ?", (run_id,)).fetchone():
                raise self._missing(run_id)
            first = db.execute("SELECT COALESCE(MAX(seq) + 1, 0) FROM record WHERE run_id = ?", (run_id,)).fetchone()[0]
            rows = []
            for seq, rec in enumerate(records, first):
                if not isinstance(rec.get("type"), str):
                    raise ValueError(f"record {seq} of run {run_id} has no string 'type'")
                rows.append((run_id, seq, rec["type"], json.dumps(rec, separators=(",", ":"))))
            db.executemany("INSERT INTO record (run_id, seq, type, data) VALUES (?, ?, ?, ?)", rows)

    def finish_run(self, run_id: int, status: str, reason: str | None = None) -> None:
        if status not in FINAL_STATUSES:
            raise ValueError(f"run status must be one of {', '.join(FINAL_STATUSES)}, not {status!r}")
        values = (status, reason, _now())
        try:
            self._update(run_id, "status = ?, reason = ?, finished = ?", values)
        except StoreError:
            if not self._reserve.exists():
                raise
            self._reserve.unlink()  # the disk is full: what it held is for this update
            self._update(run_id, "status = ?, reason = ?, finished = ?", values)

    def delete_run(self, run_id: int) -> None:
        """Removes a run and its records: only for a run that measured
        nothing because its input was refused (exit 2 stores nothing)."""
        with self._guard("cannot write to results store"), self._write() as db:
            db.execute("DELETE FROM run WHERE id = ?", (run_id,))

    def set_summary(self, run_id: int, summary: dict) -> None:
        """Keeps a run's analysis beside it: a cache, made again from the
        records whenever asked, so a store that cannot take it (read-only,
        full) keeps none and the reading goes on."""
        try:
            with self._write() as db:
                updated = db.execute("UPDATE run SET summary = ? WHERE id = ?", (json.dumps(summary), run_id)).rowcount
        except sqlite3.Error:
            return
        if not updated:
            raise self._missing(run_id)

    def _update(self, run_id: int, assignments: str, values: tuple) -> None:
        with self._guard("cannot write to results store"), self._write() as db:
            if db.execute(f"UPDATE run SET {assignments} WHERE id = ?", (*values, run_id)).rowcount == 0:
                raise self._missing(run_id)

    def import_runs(self, source: Source) -> list[Imported]:
        """Copies the runs `source` selected, each with its records, under new
        ids, in one transaction: all of them or, on any error, none. A run is
        the same run in two stores when it has the same kind, start time, host,
        pid, arguments and parameters (copied verbatim; the start is to the
        millisecond, and one process may begin several runs within one), so
        one already here (imported before, or this store's own) is skipped,
        not copied twice — unless what was copied was a snapshot of a run
        still being written, which is copied again, whole, once it has grown
        or ended there."""
        done = []
        cols = [c for c in _IMPORT_COLUMNS if c != "id"]
        with self._guard("cannot import into results store"), self._write() as db:
            for src in source.runs:
                here = db.execute(
                    "SELECT id, status, reason, (SELECT COUNT(*) FROM record WHERE run_id = run.id) FROM run"
                    " WHERE kind = ? AND started = ? AND host = ? AND pid = ? AND argv = ? AND params = ?",
                    (src["kind"], src["started"], src["host"], src["pid"], src["argv"], src["params"]),
                ).fetchone()
                row = dict(src)
                snapshot = row["status"] == "running"
                if snapshot:
                    # A run still being written (or whose process died elsewhere): never finished
                    # here, and nothing could later tell it dead on another host.
                    row["status"], row["reason"] = "incomplete", IMPORTED_RUNNING_REASON
                if here is not None:
                    was_snapshot = (here[1], here[2]) == ("incomplete", IMPORTED_RUNNING_REASON)
                    if not (was_snapshot and (not snapshot or source.n_records(src["id"]) > here[3])):
                        done.append(Imported(src["id"], here[0], src["kind"], copied=False, snapshot=snapshot))
                        continue
                    new_id = here[0]
                    db.execute("DELETE FROM record WHERE run_id = ?", (new_id,))
                    db.execute(f"UPDATE run SET {', '.join(f'{c} = ?' for c in cols)} WHERE id = ?",
                               [*(row[c] for c in cols), new_id])  # fmt: skip
                else:
                    new_id = db.execute(
                        f"INSERT INTO run ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                        [row[c] for c in cols],
                    ).lastrowid
                db.executemany(
                    "INSERT INTO record (run_id, seq, type, data) VALUES (?, ?, ?, ?)",
                    ((new_id, seq, type_, data) for seq, type_, data in source.records(src["id"])),
                )
                done.append(
                    Imported(src["id"], new_id, src["kind"], copied=True, refreshed=here is not None, snapshot=snapshot)
                )
        return done

    def runs(self) -> list[Run]:
        with self._guard("cannot read results store"):
            rows = self._db.execute(f"SELECT {_RUN_COLUMNS} FROM run ORDER BY id DESC").fetchall()
        return [self._run(row) for row in rows]

    def run(self, ref: int | str) -> Run:
        """The run of an id, 'last', or 'tag:KEY=VALUE' (the newest run so tagged)."""
        text = str(ref).strip()
        if text.startswith(TAG_REF):
            return self.tagged(text)[-1]
        with self._guard("cannot read results store"):
            if text in ("last", "latest"):
                row = self._db.execute(f"SELECT {_RUN_COLUMNS} FROM run ORDER BY id DESC LIMIT 1").fetchone()
                if row is None:
                    raise StoreError(f"no runs yet in {self.path}")
            elif text.isascii() and text.isdigit():  # isdigit() alone takes '²', which int() refuses
                run_id = int(text)
                row = None
                if run_id < 2**63:  # past SQLite's integers: no such run either
                    row = self._db.execute(f"SELECT {_RUN_COLUMNS} FROM run WHERE id = ?", (run_id,)).fetchone()
                if row is None:
                    raise self._missing(run_id)
            else:
                raise StoreError(
                    f"bad run reference {text!r} (expected a run id, 'last' or 'tag:KEY=VALUE') for {self.path}"
                )
        return self._run(row)

    def tagged(self, ref: str) -> list[Run]:
        """The runs a 'tag:KEY=VALUE' reference selects, oldest first; an error if none."""
        try:
            key, value = parse_tag(ref[len(TAG_REF) :])
        except ValueError as e:
            raise StoreError(f"bad run reference {ref!r}: {e}") from None
        found = [r for r in reversed(self.runs()) if r.tags.get(key) == value]
        if not found:
            raise StoreError(f"no run tagged {key}={value} in {self.path}")
        return found

    def resolve(self, ref: int | str) -> list[Run]:
        """What a reference names where several runs may go (a report): every
        run a tag selects, oldest first, or the one run of an id or 'last'."""
        text = str(ref).strip()
        return self.tagged(text) if text.startswith(TAG_REF) else [self.run(text)]

    def records(self, run_id: int, type: str | None = None) -> list[dict]:
        run_id = self.run(run_id).id
        query, args = "SELECT data FROM record WHERE run_id = ?", [run_id]
        if type is not None:
            query, args = query + " AND type = ?", args + [type]
        with self._guard("cannot read results store"):
            return [json.loads(data) for (data,) in self._db.execute(query + " ORDER BY seq", args)]

    @staticmethod
    def _run(row: tuple) -> Run:
        (
            id_,
            kind,
            status,
            reason,
            started,
            finished,
            host,
            pid,
            proc_start,
            argv,
            params,
            machine,
            summary,
            n_records,
        ) = row
        if status == "running" and not _alive(host, pid, proc_start):
            status, reason = "incomplete", DEAD_REASON
        return Run(
            id=id_,
            kind=kind,
            status=status,
            started=started,
            finished=finished,
            host=host,
            pid=pid,
            argv=json.loads(argv),
            params=json.loads(params),
            machine=json.loads(machine),
            summary=summary and json.loads(summary),
            reason=reason,
            n_records=n_records,
        )
