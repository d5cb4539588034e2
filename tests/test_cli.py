"""The `oslens` command line against the real engine: usage errors, a run's
round trip through the store, fixed work, modes, interruption and a crash."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from oslens.store import Store

from conftest import NCPU, TWO, engine_processes, one_line_error, oslens, run_engine

SHORT = ("--duration", "0.2", "--warmup", "0.05", "--reps", "2")
# A measurement that would succeed: each bad-input case overrides one thing
# in it (click keeps an option's last value), so that case is the only fault.
# No --duration in it, since --ops cases need it absent; its default 1 s only
# runs if a bad case is wrongly accepted.
VALID = ("--probe", "dup", "--workers", "1", "--warmup", "0.05", "--reps", "1")


def ok(*args: str, db: Path) -> str:
    p = oslens(*args, db=db)
    assert p.returncode == 0, p.stderr
    return p.stdout


def scale_json(db: Path, *args: str) -> dict:
    return json.loads(ok("scale", "-q", "--json", *args, db=db))


def export_json(db: Path, run: int) -> dict:
    return json.loads(ok("export", str(run), "--format", "json", db=db))


def worker_records(doc: dict) -> list[dict]:
    return [r for r in doc["records"] if r["type"] == "worker"]


def status_of(db: Path, run: int) -> str:
    return {r["id"]: r["status"] for r in json.loads(ok("runs", "--json", db=db))}[run]


def store_contents(db: Path) -> list:
    with Store(db) as s:
        return [(r.id, r.status, r.n_records, r.summary, s.records(r.id)) for r in s.runs()]


# ------------------------------------------------------------- bad input

BAD_SCALE = [
    pytest.param(["--probe", "nope"], "unknown probe 'nope'", id="unknown-probe"),
    pytest.param(["--probe", "dup:nope"], "variant 'nope'", id="unknown-variant"),
    pytest.param(["--workers", str(NCPU + 1)], f"{NCPU + 1} workers", id="workers-above-ncpu"),
    pytest.param(["--workers", "0"], "'0'", id="workers-0"),
    pytest.param(["--workers", "abc"], "'abc'", id="workers-abc"),
    pytest.param(["--duration", "-1"], "--duration", id="duration-negative"),
    pytest.param(["--duration", "0"], "--duration", id="duration-0"),
    pytest.param(["--duration", "1", "--ops", "100"], "exclusive", id="duration-and-ops"),
    pytest.param(["--reps", "0"], "--reps", id="reps-0"),
    pytest.param(["--opt", "pages=8"], "option 'pages'", id="opt-no-taker"),
    pytest.param(["--probe", "mmap", "--opt", "pages=0"], "outside", id="opt-pages-0"),
    pytest.param(["--mode", "bogus"], "bogus", id="mode-bogus"),
    pytest.param(["--placement", "bogus"], "bogus", id="placement-bogus"),
    # str.isdigit() takes '²', int() does not
    pytest.param(["--workers", "²"], "'²'", id="workers-superscript"),
    # an empty value is no default: a script's empty variable must not measure
    pytest.param(["--workers", ""], "--workers: an empty value", id="workers-empty"),
    pytest.param(["--probe", ""], "--probe: an empty value", id="probe-empty"),
    pytest.param(["--probe", "dup:"], "an empty variant", id="probe-empty-variant"),
    pytest.param(["--db", ""], "--db: an empty value", id="db-empty"),
    pytest.param(["--sample-rate", "250"], "--explain was not given", id="sample-rate-unexplained"),
    pytest.param(["--explain", "light", "--sample-rate", "0"], "--sample-rate", id="sample-rate-0"),
    pytest.param(["--explain", "--sample-rate", "20000"], "--sample-rate", id="sample-rate-above-10k"),
] + [
    # Non-finite and oversized numbers must be refused before a run is stored.
    pytest.param(args, word, id=name)
    for name, args, word in [
        ("duration-nan", ["--duration", "nan"], "--duration"),
        ("duration-inf", ["--duration", "inf"], "--duration"),
        ("warmup-nan", ["--warmup", "nan"], "--warmup"),
        ("ops-above-int64", ["--ops", str(2**64)], "--ops"),
        # a huge range is refused as it is read, not expanded first until memory runs out
        ("workers-huge-range", ["--workers", "1-99999999999"], "99,999,999,999 workers"),
        ("duration-huge", ["--duration", "9223372036854775807"], "--duration: more than the"),
    ]
]


@pytest.mark.parametrize("args, word", BAD_SCALE)
def test_bad_scale_input_is_one_line_and_stores_nothing(tmp_path, no_leaks, args, word):
    db = tmp_path / "store.db"
    p = oslens("scale", *VALID, *args, db=db)
    line = one_line_error(p.stderr)
    assert p.returncode == 2, line
    assert word.lower() in line.lower()
    assert p.stdout == ""
    assert not db.exists()


def test_the_sample_rates_help_states_the_engines_defaults(tmp_path):
    """--sample-rate's defaults are each mode's attribution's period as the
    engine publishes it, read when the help is shown: no copy to drift."""
    from oslens import engine

    said = ", ".join(f"{engine.Explain.default_hz(m):,} {m}" for m in engine.EXPLAIN_MODES)
    p = oslens("scale", "--help", db=tmp_path / "db")
    assert p.returncode == 0, p.stderr
    assert f"[default: {said}]" in " ".join(p.stdout.split()), p.stdout


def test_unwritable_store_is_refused_before_measuring(tmp_path, no_leaks):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory\n")
    p = oslens("scale", *VALID, "--db", str(blocker / "db"), db=tmp_path / "unused.db")
    line = one_line_error(p.stderr)
    assert p.returncode == 2, line
    assert "store" in line and str(blocker / "db") in line
    assert blocker.read_text() == "not a directory\n"
    assert not (tmp_path / "unused.db").exists()


@pytest.fixture
def store_with_a_run(tmp_path) -> Path:
    """A store holding run 1, made without the engine: the store commands only read it."""
    db = tmp_path / "store.db"
    with Store(db) as s:
        run = s.begin_run("scale", ["oslens", "scale"], {"probes": ["dup:default"]}, {})
        s.finish_run(run, "complete")
    return db


@pytest.mark.parametrize(
    "args, word",
    [
        pytest.param(["show", "999"], "999", id="show-unknown-run"),
        pytest.param(["show", "first"], "'first'", id="show-first"),
        pytest.param(["export", "1", "--format", "xml"], "xml", id="export-xml"),
        pytest.param(["show", "²"], "'²'", id="show-superscript"),
        pytest.param(["export", "²"], "'²'", id="export-superscript"),
        pytest.param(["compare", "²", "1"], "'²'", id="compare-superscript"),
        pytest.param(["report", "²"], "'²'", id="report-superscript"),
        pytest.param(["show", str(2**70)], str(2**70), id="show-past-int64"),
        pytest.param(["report", "999"], "999", id="report-unknown-run"),
        pytest.param(["report", "1", "-o", "/nonexistent-dir/r.html"], "/nonexistent-dir", id="report-missing-dir"),
        pytest.param(
            ["report", "1", "--format", "svg", "-o", "/etc/hostname"], "not a directory", id="report-svg-file"
        ),
        pytest.param(["show", "1", "--db", ""], "--db: an empty value", id="show-db-empty"),
    ],
)
def test_bad_store_command_is_one_line_and_changes_nothing(store_with_a_run, args, word):
    before = store_contents(store_with_a_run)
    p = oslens(*args, db=store_with_a_run)
    line = one_line_error(p.stderr)
    assert p.returncode == 2, line
    assert word in line
    assert p.stdout == ""
    assert store_contents(store_with_a_run) == before


def test_export_to_a_missing_directory_is_one_line(store_with_a_run, tmp_path):
    p = oslens("export", "1", "--format", "csv", "-o", str(tmp_path / "nodir" / "x.csv"), db=store_with_a_run)
    line = one_line_error(p.stderr)
    assert p.returncode == 2 and "nodir" in line


@pytest.mark.parametrize(
    "command", [["show", "999"], ["runs"], ["export", "1"], ["report", "1"], ["compare", "1", "2"]]
)
def test_a_missing_store_is_an_error_and_is_not_created(tmp_path, command):
    """Only the commands that measure make a store; the others, given a
    path where none is (a typo), say so and exit 2 alike."""
    db = tmp_path / "typo.db"
    p = oslens(*command, db=db)
    assert "no results store" in one_line_error(p.stderr)
    assert p.returncode == 2
    assert not db.exists()


@pytest.mark.parametrize(
    "args, heavy",
    [
        (["report", "999"], "oslens.report.html"),
        (["report", "1", "-o", "/nonexistent-dir/r.html"], "oslens.report.html"),
        (["compare", "999", "1"], "oslens.compare"),
        (["export", "1", "--format", "csv", "-o", "/nonexistent-dir/x.csv"], "oslens.frames"),
    ],
)
def test_refusals_come_before_the_slow_work(store_with_a_run, args, heavy):
    """Bad input is refused before the report is built, the statistics
    imported or the frames made (seconds, for nothing)."""
    code = (
        "import sys\n"
        "from oslens.cli import main\n"
        "try:\n"
        f"    main({['--db', str(store_with_a_run), *args]!r})\n"
        "except SystemExit as e:\n"
        f"    print(e.code, {heavy!r} in sys.modules)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.stdout.split() == ["2", "False"], p.stderr


# ------------------------------------------------------------ round trip


def test_scale_round_trip_through_the_store(tmp_path, no_leaks):
    db = tmp_path / "store.db"
    counts = sorted({1, TWO})
    doc = scale_json(db, "--probe", "dup,getppid", "--workers", f"1,{TWO}", *SHORT)
    run = doc["run"]
    assert doc["status"] == "complete"
    assert doc["machine"]["kernel"]["release"] == os.uname().release
    assert doc["machine"]["topology"]["available"] == NCPU
    assert sorted(s["probe"] for s in doc["series"]) == ["dup", "getppid"]
    for s in doc["series"]:
        assert [p["workers"] for p in s["points"]] == counts
        assert all(p["per_worker"]["median"] > 0 for p in s["points"])
        assert all(p["reps"] == 2 for p in s["points"])
        assert s["baseline_workers"] == 1 and s["points"][0]["efficiency"] == 1

    assert status_of(db, run) == "complete"
    assert json.loads(ok("show", str(run), "--json", db=db))["series"] == doc["series"]
    table = ok("show", "last", db=db)
    assert f"run {run}" in table and "dup:default" in table and "getppid:default" in table

    rows = list(csv.DictReader(io.StringIO(ok("export", str(run), "--format", "csv", db=db))))
    assert len(rows) == 2 * 2 * sum(counts)  # probes × reps × workers of every point
    assert all(int(r["ops"]) > 0 and r["mode"] == "process" and r["run_id"] == str(run) for r in rows)
    # Each (probe, worker count, rep) must hold exactly as many rows as workers.
    groups = Counter((r["probe"], int(r["workers"]), r["rep"]) for r in rows)
    assert set(groups) == {(p, n, rep) for p in ("dup", "getppid") for n in counts for rep in ("0", "1")}
    assert all(size == n for (_, n, _), size in groups.items())

    assert len(worker_records(export_json(db, run))) == len(rows)


def test_fixed_work_times_exactly_n_operations(tmp_path, no_leaks):
    db = tmp_path / "store.db"
    doc = scale_json(db, "--probe", "dup", "--workers", str(TWO), "--ops", "500", "--warmup", "0.05", "--reps", "2")
    workers = worker_records(export_json(db, doc["run"]))
    assert len(workers) == 2 * TWO
    assert all(w["ops"] == 500 for w in workers)
    [series] = doc["series"]
    assert series["fixed"] == "ops"
    [point] = series["points"]
    assert 0 < point["fastest_s"]["median"] <= point["slowest_s"]["median"]


@pytest.mark.parametrize("mode, expected", [("thread", {"thread"}), ("both", {"process", "thread"})])
def test_modes_give_a_series_each(tmp_path, no_leaks, mode, expected):
    doc = scale_json(tmp_path / "store.db", "--probe", "sem", "--workers", str(TWO), "--mode", mode, *SHORT)
    assert {s["mode"] for s in doc["series"]} == expected
    assert len(doc["series"]) == len(expected)
    assert all(s["points"] and s["points"][0]["per_worker"]["median"] > 0 for s in doc["series"])


# ------------------------------------------------- interruption and crash


def start_scale(db: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "oslens", "scale", "-q", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OSLENS_DB": str(db)},
    )


def wait_for_first_rep(db: Path, proc: subprocess.Popen, timeout: float = 60) -> int:
    """The run's id, once its first repetition is in the store."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"oslens ended early: {proc.communicate()}"
        if db.exists():
            with Store(db) as s:
                runs = s.runs()
                if runs and s.records(runs[0].id, "rep"):
                    return runs[0].id
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("no repetition stored in time")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_run_is_kept_incomplete(tmp_path, no_leaks, sig):
    db = tmp_path / "store.db"
    proc = start_scale(db, "--probe", "sem,dup", "--duration", "3", "--reps", "3", "--warmup", "0.05")
    run = wait_for_first_rep(db, proc)
    os.kill(proc.pid, sig)
    sent = time.monotonic()
    _, err = proc.communicate(timeout=60)
    # Two more 3 s repetitions of this point remain: an engine left to run
    # them (the signal not forwarded) would keep oslens alive for over 6 s.
    assert time.monotonic() - sent < 6  # without forwarding the engine would run on for 6+ s
    line = one_line_error(err)
    assert proc.returncode == 128 + sig, line
    assert "incomplete" in line and sig.name in line
    assert status_of(db, run) == "incomplete"
    with Store(db) as s:
        assert s.records(run, "worker"), "the repetition measured before the signal was lost"


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def engine_workers(cli_pid: int, n: int, timeout: float = 30) -> list[int]:
    """The worker processes of the engine master that the CLI started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        parents = {pid: _ppid(pid) for pid in engine_processes()}
        masters = {pid for pid, pp in parents.items() if pp == cli_pid}
        workers = [pid for pid, pp in parents.items() if pp in masters]
        if len(workers) == n:
            return workers
        time.sleep(0.05)
    raise AssertionError(f"no {n} engine workers under oslens pid {cli_pid}")


def test_crashed_worker_fails_the_run(tmp_path, no_leaks):
    db = tmp_path / "store.db"
    proc = start_scale(
        db, "--probe", "sem", "--workers", str(TWO), "--duration", "5", "--reps", "1", "--warmup", "0.05", "--json"
    )
    victim = engine_workers(proc.pid, TWO)[0]
    time.sleep(0.5)  # into the timed phase
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    line = one_line_error(err)
    assert proc.returncode == 1, line
    assert re.search(rf"\b{victim}\b", line) and "signal 9" in line
    with Store(db) as s:
        [run] = s.runs()
    assert status_of(db, run.id) == "failed"


# ------------------------------------------------------------- the rest


def test_probes_lists_every_engine_probe(tmp_path):
    listed = {r["name"] for r in run_engine("list").of("probe")}
    assert listed
    table = ok("probes", db=tmp_path / "store.db")
    first_column = {line.split()[0] for line in table.splitlines() if line.strip()}
    assert listed <= first_column
    assert set(json.loads(ok("probes", "--json", db=tmp_path / "store.db"))) == listed


def test_version(tmp_path):
    from oslens import __version__

    assert __version__ in ok("--version", db=tmp_path / "store.db")


# ------------------------------------------------- one door, one vocabulary


def test_an_argv_the_engine_refuses_is_a_usage_error_and_stores_nothing(tmp_path):
    # Python has no rule against this; the engine does (too many samples).
    db = tmp_path / "store.db"
    p = oslens(
        "scale", "--probe", "dup", "--workers", "1", "--duration", "200", "--interval", "0.0001", "--reps", "1", db=db
    )
    assert p.returncode == 2
    assert "--interval" in one_line_error(p.stderr)
    assert store_contents(db) == [] if db.exists() else True


def test_a_duration_the_engine_cannot_bound_is_refused_in_the_users_words(tmp_path):
    db = tmp_path / "store.db"
    p = oslens("scale", "--probe", "dup", "--duration", "86400", "--reps", "3", db=db)
    assert p.returncode == 2
    line = one_line_error(p.stderr)
    assert "--reps" in line and "--time-limit" not in line.split(";")[0]
    assert not db.exists() or store_contents(db) == []


def _two_scale_runs(db: Path) -> list[str]:
    return [str(json.loads(ok("scale", "-q", "--json", *VALID, "--ops", "20000", db=db))["run"]) for _ in range(2)]


def _params(db: Path) -> dict:
    return json.loads(ok("show", "last", "--json", db=db))["params"]


FIRST_CPU = str(min(os.sched_getaffinity(0)))
# Each old spelling runs and does what its new one does; the deprecation is said once, on stderr.
OLD_SPELLINGS = {
    "noise --threshold": (
        ["noise", "--threshold", "2500", "--cpus", FIRST_CPU, "--duration", "0.1", "--no-bpf"], "--threshold-ns",
        lambda db, out: _params(db)["threshold_ns"] == 2500,
    ),
    "noise --no-attribution": (
        ["noise", "--no-attribution", "--cpus", FIRST_CPU, "--duration", "0.1"], "--no-bpf",
        lambda db, out: _params(db)["attribution"] is False,
    ),
    "appscale --cpus": (
        ["appscale", "--cpus", "1", "--reps", "1", "--", "true"], "--cpu-counts",
        lambda db, out: _params(db)["cpus"] == [1],
    ),
    "compare --threshold": (
        lambda db: ["compare", "--json", *_two_scale_runs(db), "--threshold", "5%"], "--threshold-pct",
        lambda db, out: json.loads(out)["threshold"] == 0.05,
    ),
}  # fmt: skip


@pytest.mark.parametrize("spelling", OLD_SPELLINGS)
def test_old_spellings_still_work_and_say_what_replaced_them(tmp_path, spelling):
    args, new, did = OLD_SPELLINGS[spelling]
    db = tmp_path / "store.db"
    p = oslens(*(args(db) if callable(args) else args), db=db)
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert sum("deprecated" in line and new in line for line in lines) == 1, p.stderr
    assert did(db, p.stdout), p.stdout[-2000:]


def test_db_and_json_work_before_the_command(tmp_path):
    db = tmp_path / "store.db"
    doc = json.loads(
        ok("--db", str(db), "--json", "scale", "-q", *VALID, "--duration", "0.1", db=tmp_path / "elsewhere.db")
    )
    assert db.exists() and not (tmp_path / "elsewhere.db").exists()
    listed = json.loads(ok("--db", str(db), "runs", "--json", db=tmp_path / "elsewhere.db"))
    assert [r["id"] for r in listed] == [doc["run"]]


def test_workloads_is_a_command_with_json(tmp_path):
    doc = json.loads(ok("workloads", "--json", db=tmp_path / "store.db"))
    assert {"kmeans", "wordcount", "psearchy"} <= set(doc)
    table = ok("workloads", db=tmp_path / "store.db")
    assert {line.split()[0] for line in table.splitlines() if line.strip()} == set(doc)


def test_markup_in_a_stored_command_is_printed_as_text(tmp_path):
    db = tmp_path / "store.db"
    p = oslens("profile", "-q", "--no-bpf", "--", "/bin/echo", "[/]", db=db)
    assert p.returncode == 0, p.stderr
    assert "[/]" in ok("runs", db=db)


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_prints_each_engine_invocation_which_runs_again_by_hand(tmp_path, where):
    """-v (before or after the command) says every engine command line on
    stderr, as one that can be run again by hand; without it, none."""
    args = ["scale", "--probe", "getppid", "--workers", "1", "--ops", "1000", "--reps", "1"]
    p = oslens(*(["-v", *args] if where == "before" else [*args, "-v"]), db=tmp_path / "store.db")
    assert p.returncode == 0, p.stderr
    said = [line.removeprefix("oslens: runs ") for line in p.stderr.splitlines() if line.startswith("oslens: runs ")]
    assert len(said) == 1 and "run --probe getppid:default" in said[0], p.stderr
    again = subprocess.run(shlex.split(said[0]), capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert [json.loads(line)["type"] for line in again.stdout.splitlines()][-1] == "end"
    quiet = oslens(*args, db=tmp_path / "store.db")
    assert quiet.returncode == 0 and "oslens: runs" not in quiet.stderr
