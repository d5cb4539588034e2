"""The engine's built-in application workloads (`oslens-engine app`): each is
a fixed amount of work, so its checksum must not depend on how many workers
share it or whether they are threads or processes."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import engine_bin, engine_processes, one_line_error, run_engine

KINDS = {"kmeans": "compute", "wordcount": "memory", "psearchy": "kernel", "linreg": "memory", "matmul": "compute",
         "pca": "compute", "strmatch": "compute"}  # fmt: skip
# Test sizes: each run takes tens of milliseconds on a slow CPU.
SIZES = {"kmeans": 20000, "wordcount": 50000, "psearchy": 150, "linreg": 200000, "matmul": 60, "pca": 40,
         "strmatch": 50000}  # fmt: skip
SPLITS = [(2, "thread"), (1, "process"), (2, "process"), (3, "thread"), (3, "process")]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A small psearchy tree, made once for the module."""
    d = tmp_path_factory.mktemp("psearchy") / "tree"
    r = run_engine("app", "psearchy", "--prepare", str(d), "--size", str(SIZES["psearchy"]))
    assert r.rc == 0, r.stderr
    assert r.of("app_prepare")[0]["size"] == SIZES["psearchy"]
    return d


def app_args(name: str, prepared: Path) -> list[str]:
    args = ["app", name, "--size", str(SIZES[name])]
    return args + ["--dir", str(prepared)] if name == "psearchy" else args


def the_app_record(r) -> dict:
    assert r.rc == 0, r.stderr
    assert len(r.records) == 1 and r.records[0]["type"] == "app", r.records
    return r.records[0]


def test_list_has_every_kind():
    r = run_engine("app", "list")
    assert r.rc == 0, r.stderr
    infos = {rec["name"]: rec for rec in r.records}
    assert all(rec["type"] == "app_info" for rec in r.records)
    assert {name: infos[name]["kind"] for name in KINDS} == KINDS
    for rec in infos.values():
        assert rec["summary"] and rec["default_size"] > 0


@pytest.mark.parametrize("name", list(KINDS))
def test_checksum_is_the_same_for_any_split(name, prepared, no_leaks):
    one = the_app_record(run_engine(*app_args(name, prepared)))
    assert (one["workers"], one["mode"], one["size"]) == (1, "thread", SIZES[name])
    assert one["work_ns"] > 0
    for workers, mode in SPLITS:
        rec = the_app_record(run_engine(*app_args(name, prepared), "--workers", str(workers), "--mode", mode))
        assert (rec["workers"], rec["mode"]) == (workers, mode)
        assert rec["work_ns"] > 0
        assert rec["checksum"] == one["checksum"], f"{workers} {mode} workers got another result"


@pytest.mark.parametrize("name", ["kmeans", "wordcount", "linreg", "matmul", "pca", "strmatch"])
def test_checksum_depends_on_the_work(name):
    a = the_app_record(run_engine("app", name, "--size", str(SIZES[name])))
    b = the_app_record(run_engine("app", name, "--size", str(SIZES[name] + 1)))
    assert a["checksum"] != b["checksum"]


def test_more_workers_than_work(no_leaks):
    """Workers with an empty share still take part (kmeans and pca: in every barrier)."""
    for name, size in [("kmeans", "16"), ("wordcount", "2"), ("pca", "3"), ("matmul", "2")]:
        ref = the_app_record(run_engine("app", name, "--size", size))
        rec = the_app_record(run_engine("app", name, "--size", size, "--workers", "7", "--mode", "process"))
        assert rec["checksum"] == ref["checksum"]


def test_psearchy_prepares_small_files_and_leaves_them(prepared):
    files = sorted(glob.glob(f"{prepared}/*/*"))
    assert len(files) == SIZES["psearchy"]
    assert len({os.path.dirname(f) for f in files}) > 1, "files are spread over subdirectories"
    assert all(1024 - 13 <= os.path.getsize(f) <= 8192 for f in files)
    before = sorted(p.name for p in prepared.rglob("*"))
    the_app_record(run_engine("app", "psearchy", "--dir", str(prepared), "--workers", "2"))
    assert sorted(p.name for p in prepared.rglob("*")) == before, "a run changed the caller's tree"


def test_psearchy_runs_all_prepared_files_by_default(prepared):
    rec = the_app_record(run_engine("app", "psearchy", "--dir", str(prepared)))
    assert rec["size"] == SIZES["psearchy"]
    fewer = the_app_record(run_engine("app", "psearchy", "--dir", str(prepared), "--size", "10"))
    assert fewer["size"] == 10 and fewer["checksum"] != rec["checksum"]


@pytest.mark.parametrize("how", ["empty", "missing", "too_few"])
def test_psearchy_without_its_files_fails_in_one_line(how, tmp_path, prepared, no_leaks):
    args = {
        "empty": ["--dir", str(tmp_path)],
        "missing": ["--dir", str(tmp_path / "nothing-here")],
        "too_few": ["--dir", str(prepared), "--size", str(SIZES["psearchy"] + 1)],
    }[how]
    r = run_engine("app", "psearchy", *args, "--workers", "2")
    assert r.rc == 1
    assert r.records == []
    assert one_line_error(r.stderr).startswith("oslens-engine: ")


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_file_that_vanished_fails_the_run(mode, tmp_path, no_leaks):
    d = tmp_path / "tree"
    assert run_engine("app", "psearchy", "--prepare", str(d), "--size", "20").rc == 0
    victim = sorted(glob.glob(f"{d}/*/*.txt"))[15]
    os.unlink(victim)
    r = run_engine("app", "psearchy", "--dir", str(d), "--workers", "2", "--mode", mode)
    assert r.rc == 1 and r.records == []
    assert os.path.basename(victim) in one_line_error(r.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["app"],
        ["app", "bogus"],
        ["app", "kmeans", "--workers", "0"],
        ["app", "kmeans", "--workers", "two"],
        ["app", "kmeans", "--mode", "bogus"],
        ["app", "kmeans", "--size", "-1"],
        ["app", "wordcount", "--size", "0"],
        ["app", "kmeans", "--bogus"],
        ["app", "kmeans", "extra"],
        ["app", "kmeans", "--dir", "/tmp"],
        ["app", "kmeans", "--prepare", "/tmp/x"],
        ["app", "psearchy"],
        ["app", "list", "extra"],
    ],
)
def test_bad_input_is_refused_in_one_line(args):
    r = run_engine(*args)
    assert r.rc == 2, r.stderr
    assert r.records == []
    assert one_line_error(r.stderr).startswith("oslens-engine: ")


def children_of(pid: int) -> list[int]:
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.split("/")[2]))
    return found


def started_workers(proc: subprocess.Popen, n: int, timeout: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = children_of(proc.pid)
        if len(kids) == n:
            return kids
        assert proc.poll() is None, "the engine ended before its workers were seen"
        time.sleep(0.01)
    raise AssertionError(f"no {n} workers within {timeout}s")


def long_kmeans() -> subprocess.Popen:
    return subprocess.Popen(
        [engine_bin(), "app", "kmeans", "--size", "4000000", "--workers", "2", "--mode", "process"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_process_workers_die_with_the_engine(no_leaks):
    proc = long_kmeans()
    started_workers(proc, 2)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while engine_processes() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert engine_processes() == [], "a worker outlived the engine"


def test_a_dead_worker_fails_the_run_and_the_rest_are_reaped(no_leaks):
    proc = long_kmeans()
    victim = started_workers(proc, 2)[-1]
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and out == ""
    assert "killed by signal 9" in one_line_error(err)
