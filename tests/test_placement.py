"""Placement on machines we do not have: the engine reads a model sysfs tree
(OSLENS_SYSFS) describing several sockets, SMT and NUMA nodes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import one_line_error, oslens, run_engine


def model_machine(root: Path, packages: int, cores: int, threads: int, siblings_adjacent: bool) -> Path:
    """Writes a sysfs tree; CPU numbering as Linux does it on Intel
    (siblings_adjacent=False: all first threads, then all second threads)
    or on many AMD/ARM boxes (siblings adjacent)."""
    ncpu = packages * cores * threads
    cpu_dir = root / "devices/system/cpu"
    cpu_dir.mkdir(parents=True)
    (cpu_dir / "online").write_text(f"0-{ncpu - 1}\n")
    for pkg in range(packages):
        for core in range(cores):
            if siblings_adjacent:
                sibs = [(pkg * cores + core) * threads + t for t in range(threads)]
            else:
                sibs = [t * packages * cores + pkg * cores + core for t in range(threads)]
            for cpu in sibs:
                topo = cpu_dir / f"cpu{cpu}/topology"
                topo.mkdir(parents=True)
                (topo / "physical_package_id").write_text(f"{pkg}\n")
                (topo / "die_id").write_text("0\n")
                (topo / "core_id").write_text(f"{core}\n")
                (topo / "thread_siblings_list").write_text(",".join(map(str, sibs)) + "\n")
                (cpu_dir / f"cpu{cpu}/node{pkg}").mkdir()
    return root


def plan(root: Path, n, policy: str) -> list[int]:
    r = run_engine("plan", str(n), policy, env={**os.environ, "OSLENS_SYSFS": str(root)})
    assert r.rc == 0, r.stderr
    return r.records[0]["cpus"]


def test_two_sockets_smt_siblings_numbered_last(tmp_path):
    root = model_machine(tmp_path, packages=2, cores=4, threads=2, siblings_adjacent=False)
    # Physical cores before SMT siblings; compact fills socket 0 first.
    assert plan(root, "max", "compact") == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    assert plan(root, 4, "compact") == [0, 1, 2, 3]
    # spread alternates sockets.
    assert plan(root, 4, "spread") == [0, 4, 1, 5]
    assert plan(root, "max", "spread") == [0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15]


def test_two_sockets_smt_siblings_adjacent(tmp_path):
    root = model_machine(tmp_path, packages=2, cores=4, threads=2, siblings_adjacent=True)
    assert plan(root, 5, "compact") == [0, 2, 4, 6, 8]
    assert plan(root, 4, "spread") == [0, 8, 2, 10]
    assert plan(root, 10, "spread")[8:] == [1, 9]


def test_four_sockets_no_smt_256_cpus(tmp_path):
    root = model_machine(tmp_path, packages=4, cores=64, threads=1, siblings_adjacent=True)
    full = plan(root, "max", "spread")
    assert sorted(full) == list(range(256))
    assert full[:8] == [0, 64, 128, 192, 1, 65, 129, 193]
    assert plan(root, 70, "compact") == list(range(70))


def test_more_workers_than_cpus_is_refused(tmp_path):
    root = model_machine(tmp_path, packages=1, cores=2, threads=1, siblings_adjacent=True)
    r = run_engine("plan", "3", "compact", env={**os.environ, "OSLENS_SYSFS": str(root)})
    assert r.rc == 2
    assert "3 workers" in one_line_error(r.stderr)


@pytest.mark.parametrize("policy", ["compact", "spread"])
def test_this_machine_plans_distinct_available_cpus(policy):
    r = run_engine("topology")
    available = {c["cpu"] for c in r.records[0]["cpus"]}
    cpus = run_engine("plan", "max", policy).records[0]["cpus"]
    assert len(cpus) == len(set(cpus)) == len(available)
    assert set(cpus) == available


@pytest.mark.parametrize("model", ["nonexistent", "empty", "garbled"])
def test_a_model_machine_that_cannot_be_read_is_refused(tmp_path, monkeypatch, model):
    # A model sysfs without a readable CPU list is a mistake of the caller's,
    # never "no sysfs here": it planned for 4096 CPUs, and exited 0.
    root = tmp_path / "sys"
    if model != "nonexistent":
        (root / "devices/system/cpu").mkdir(parents=True)
    if model == "garbled":
        (root / "devices/system/cpu/online").write_text("zero to three\n")
    env = {**os.environ, "OSLENS_SYSFS": str(root)}
    for command in (["topology"], ["plan", "1", "compact"]):
        r = run_engine(*command, env=env)
        assert r.rc == 2 and not r.records, r.stderr
        assert f"OSLENS_SYSFS={root}" in one_line_error(r.stderr)
    monkeypatch.setenv("OSLENS_SYSFS", str(root))
    proc = oslens("scale", "--dry-run", db=tmp_path / "db", check=False)
    assert proc.returncode == 2, proc.stdout
    assert "OSLENS_SYSFS" in one_line_error(proc.stderr)
