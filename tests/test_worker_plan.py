"""Which worker counts `scale` and `appscale` run and where (--workers,
--cpu-counts, --dry-run): defaults drawn from the topology, ranges, and the
plan printed without measuring. Machines we do not have are model sysfs
trees (OSLENS_SYSFS), read by the real engine through the real CLI."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from oslens import engine
from test_placement import model_machine

from conftest import NCPU, one_line_error, oslens, run_engine

# 2 sockets × 24 cores × SMT2, with Intel's numbering (siblings 48 apart) and
# with adjacent siblings (many AMD/ARM boxes).
SOCKETS, CORES, THREADS = 2, 24, 2
ALL = SOCKETS * CORES * THREADS


@pytest.fixture(params=[False, True], ids=["siblings-numbered-last", "siblings-adjacent"])
def two_by_24_smt2(request, tmp_path, monkeypatch) -> Path:
    root = model_machine(tmp_path / "sys", SOCKETS, CORES, THREADS, siblings_adjacent=request.param)
    monkeypatch.setenv("OSLENS_SYSFS", str(root))
    return root


def dry_run(db: Path, *args: str, command: str = "scale") -> dict:
    p = oslens(command, "--dry-run", "--json", *args, db=db)
    assert p.returncode == 0, p.stderr
    assert not db.exists(), "a dry run must not create the store"
    return json.loads(p.stdout)


def powers_of_two_below(n: int) -> set[int]:
    return {1 << k for k in range(n.bit_length()) if 1 << k < n}


def model_topology() -> dict[int, dict]:
    return {c["cpu"]: c for c in run_engine("topology", env=dict(os.environ)).records[0]["cpus"]}


# ------------------------------------------------------- default counts


def test_compact_defaults_include_a_socket_all_cores_and_all_cpus(two_by_24_smt2, tmp_path):
    doc = dry_run(tmp_path / "store.db", "--probe", "dup")
    counts = [p["workers"] for p in doc["points"]]
    assert doc["params"]["workers"] == counts == sorted(set(counts))
    # One full socket's cores, every physical core, one socket's siblings too, every CPU.
    landmarks = {24, 48, 72, ALL}
    assert set(counts) == powers_of_two_below(ALL) | landmarks
    marks = {p["workers"]: p["landmark"] for p in doc["points"] if p["landmark"]}
    assert set(marks) == landmarks
    assert "socket 0" in marks[24] and marks[48] == "all physical cores" and marks[ALL] == "all CPUs"
    assert doc["machine"] == {"cpus": ALL, "sockets": SOCKETS, "cores": SOCKETS * CORES, "threads_per_core": THREADS}


def test_quick_is_the_osmark_five_at_the_default_counts_half_a_second_three_times(two_by_24_smt2, tmp_path):
    """The README's `make run`: `scale --quick` is the OSMark five at 1, 2,
    4, …, each socket boundary, all physical cores and all CPUs, 0.5 s per
    point, 3 repetitions."""
    doc = dry_run(tmp_path / "store.db", "--quick")
    probes = [p.split(":")[0] for p in doc["params"]["probes"]]
    assert probes == ["fork", "mmap", "dup", "socket", "sem"]
    assert (doc["params"]["duration_s"], doc["params"]["reps"], doc["params"]["modes"]) == (0.5, 3, ["process"])
    assert set(doc["params"]["workers"]) == powers_of_two_below(ALL) | {24, 48, 72, ALL}
    assert doc["invocations"] == len(probes) * len(doc["points"])


def test_spread_defaults_include_every_socket_all_cores_and_all_cpus(two_by_24_smt2, tmp_path):
    doc = dry_run(tmp_path / "store.db", "--probe", "dup", "--placement", "spread")
    counts = {p["workers"] for p in doc["points"]}
    # spread never fills one socket alone: its boundaries are a worker on every socket, then all cores.
    assert counts == powers_of_two_below(ALL) | {SOCKETS, SOCKETS * CORES, ALL}


def test_defaults_here_include_every_physical_core_and_every_cpu(tmp_path):
    """This machine, whatever it is: the physical cores we may use and all CPUs are points."""
    cpus = engine.topology()["cpus"]
    physical = sum(c["smt"] == 0 for c in cpus)
    doc = dry_run(tmp_path / "store.db", "--probe", "dup")
    counts = [p["workers"] for p in doc["points"]]
    assert {physical, NCPU} | powers_of_two_below(NCPU) <= set(counts)
    assert counts[-1] == NCPU


# ------------------------------------------------------------- dry run


def test_dry_run_says_which_cpus_sockets_and_siblings_each_count_uses(two_by_24_smt2, tmp_path):
    doc = dry_run(tmp_path / "store.db", "--probe", "dup,sem", "--mode", "both", "--workers", "1-96:8")
    where = model_topology()
    assert doc["invocations"] == 2 * 2 * len(doc["points"])
    for p in doc["points"]:
        n, cpus = p["workers"], p["cpu_order"]
        plan = run_engine("plan", str(n), "compact", env=dict(os.environ)).records[0]["cpus"]
        assert cpus == plan, "the plan printed is the engine's own placement"
        sockets = {}
        for c in cpus:
            sockets[where[c]["package"]] = sockets.get(where[c]["package"], 0) + 1
        assert {int(k): v for k, v in p["sockets"].items()} == sockets
        # compact: socket 0's cores, socket 1's cores, then the siblings, socket by socket
        socket0 = min(n, CORES) + min(max(n - 2 * CORES, 0), CORES)
        assert sockets == ({0: socket0, 1: n - socket0} if n > CORES else {0: n})
        shared = p["smt_shared"]
        assert len(shared) == max(0, n - SOCKETS * CORES) == n - p["cores"]
        for pair in shared:
            a, b = pair
            assert where[a]["package"] == where[b]["package"] and where[a]["core"] == where[b]["core"]
            assert a in cpus and b in cpus


def test_dry_run_table_is_printed_and_nothing_is_measured_or_stored(two_by_24_smt2, tmp_path, no_leaks):
    db = tmp_path / "store.db"
    p = oslens("scale", "--dry-run", "--probe", "fork,mmap", "--workers", "24,48,64", db=db)
    assert p.returncode == 0, p.stderr
    assert not db.exists()
    out = p.stdout
    assert "nothing measured or stored" in out
    row = re.compile(r"\s*(\d+)\s+\d+\s+\d+:\d+")  # workers, sockets, per socket (not a wrapped CPU list)
    rows = {int(m.group(1)): line for line in out.splitlines() if (m := row.match(line))}
    assert set(rows) == {24, 48, 64}
    assert "0:24 " in rows[24] + " " and "socket 0's cores" in rows[24]
    assert "0:24 1:24" in rows[48] and "all physical cores" in rows[48]
    # 64 workers: 2 sockets, 40 on socket 0 and 24 on socket 1, 48 cores, 16 of them running two workers
    assert re.match(r"\s*64\s+2\s+0:40 1:24\s+48\s+16\s", rows[64]), rows[64]


# -------------------------------------------------------------- ranges


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1-4", [1, 2, 3, 4]),
        ("1-48", list(range(1, 49))),
        ("1-96:8", [*range(1, 96, 8), 96]),
        ("24-max:24", [24, 48, 72, 96]),
        ("1-4,24,max,2", [1, 2, 3, 4, 24, 96]),
        ("96-96", [96]),
    ],
)
def test_worker_ranges(two_by_24_smt2, tmp_path, text, expected):
    assert dry_run(tmp_path / "store.db", "--probe", "dup", "--workers", text)["params"]["workers"] == expected


@pytest.mark.parametrize(
    "text", ["4-2", "1-4:0", "1-", "-4", "1-4:x", "1-4:2:3", "1--4", "a-b", "0-4", "1-97", "1-4,", "0"]
)
def test_bad_worker_counts_are_one_line_and_status_2(two_by_24_smt2, tmp_path, text):
    db = tmp_path / "store.db"
    p = oslens("scale", "--dry-run", "--probe", "dup", "--workers", text, db=db)
    line = one_line_error(p.stderr)
    assert p.returncode == 2, line
    assert "--workers" in line
    assert p.stdout == "" and not db.exists()


def test_appscale_shares_the_counts_and_the_dry_run(two_by_24_smt2, tmp_path):
    doc = dry_run(tmp_path / "store.db", "--workload", "kmeans", command="appscale")
    assert {24, 48, ALL} <= {p["workers"] for p in doc["points"]}
    doc = dry_run(tmp_path / "store.db", "--workload", "kmeans", "--cpu-counts", "1-96:48", command="appscale")
    assert [p["workers"] for p in doc["points"]] == [1, 49, 96]
    assert [len(p["smt_shared"]) for p in doc["points"]] == [0, 1, 48]


# ------------------------------------------------- mmap's variants named


def test_mmap_variant_is_named_for_what_it_does(tmp_path):
    mmap = json.loads(oslens("probes", "--json", db=tmp_path / "store.db").stdout)["mmap"]
    assert mmap["variants"] == ["shared", "own-file"]
    assert "MAP_PRIVATE" not in mmap["variant_help"]["own-file"].replace("not MAP_PRIVATE", "")


def test_mmap_private_still_works_and_says_it_is_deprecated(tmp_path):
    p = oslens("scale", "--dry-run", "--json", "--probe", "mmap:private", "--workers", "1", db=tmp_path / "s.db")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["params"]["probes"] == ["mmap:own-file"]
    assert "deprecated" in p.stderr and "mmap:own-file" in p.stderr and "MAP_SHARED" in p.stderr


def test_a_series_title_can_say_what_its_variant_does():
    titles = engine.descriptions()
    for info in engine.probes().values():
        for v in info.variants:
            assert titles[f"{info.name}:{v}"].startswith(info.summary)
            assert info.variant_help[v] in titles[f"{info.name}:{v}"]
    assert "each worker maps a file of its own" in titles["mmap:own-file"]
