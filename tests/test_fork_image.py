"""The fork probes' parent is as lean as a plain C program: fork's cost grows
with the parent's address space (mappings, private pages), so a worker that
carries the engine's weight measures the engine, not fork. The engine
reports its worker's image; the plain program is bench/fork_loop.c, built
the way the engine is."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from oslens import engine

from conftest import SESSION_TMP

BENCH = Path(__file__).parents[1] / "bench"
FLAGS = ["-O2", "-std=gnu11", "-pthread", "-D_GNU_SOURCE"]


def plain_image(static: bool) -> tuple[int, int]:
    cc = shutil.which("cc") or shutil.which("gcc")
    exe = SESSION_TMP / ("fork_loop_static" if static else "fork_loop")
    subprocess.run(
        [cc, *FLAGS, "-static" if static else "-no-pie", "-o", str(exe), str(BENCH / "fork_loop.c")], check=True
    )
    cpu = engine.topology()["cpus"][0]["cpu"]
    _, maps, anon = subprocess.run(
        [str(exe), "20", str(cpu)], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(maps), int(anon)


def workers(exe: Path, probe: str, n: int = 1) -> list[dict]:
    out = subprocess.run(
        [str(exe), "run", "--probe", probe, "--workers", str(n), "--ops", "20", "--reps", "1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [r for r in map(json.loads, out.splitlines()) if r["type"] == "worker"]


def worker_image(exe: Path, probe: str) -> dict:
    return workers(exe, probe)[0]["image"]


@pytest.mark.parametrize("probe,static", [("fork", False), ("fork-static", True)])
def test_the_fork_parent_is_as_lean_as_a_plain_program(probe, static):
    exe = engine.engine_path()
    if static:
        exe = exe.with_name(exe.name + "-static")
        if not exe.exists():
            pytest.skip("no static engine built here")
    image = worker_image(exe, probe)
    maps, anon = plain_image(static)
    assert image["mappings"] > 0 and image["anon_kb"] > 0
    assert image["fresh"] is True  # exec'd afresh: no page of the master, no anon_vma chain to it
    # the engine's worker adds its shared results page, its heap and its bss to the
    # plain program's: a few mappings, not its libraries; tens of KiB, not hundreds
    assert image["mappings"] <= maps + 3, (image, maps)
    assert image["anon_kb"] <= anon + 96, (image, anon)


def test_only_probes_that_ask_get_a_fresh_image():
    assert worker_image(engine.engine_path(), "getppid")["fresh"] is False


def test_fresh_workers_run_where_the_master_planned_them():
    # the master pins itself to a spare CPU; a fresh image plans the run again
    # from the CPUs the master was given, not from the master's own pin
    n = len(engine.topology()["cpus"])
    ws = workers(engine.engine_path(), "fork", n)
    assert len(ws) == n
    assert all(w["image"]["fresh"] and w["cpu_seen"] == w["cpu"] and w["ops"] == 20 for w in ws)
    assert len({w["cpu"] for w in ws}) == n


def test_fresh_workers_read_the_masters_clock():
    # each fresh image would otherwise calibrate a clock of its own: another
    # zero (the warm-up deadline and start offsets compare across processes)
    # and another unit (their histograms could not be merged)
    n = max(2, len(engine.topology()["cpus"]))
    out = subprocess.run(
        [str(engine.engine_path()), "run", "--probe", "fork", "--workers", str(n), "--ops", "20", "--latency"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    records = list(map(json.loads, out.splitlines()))
    units = {r["hist"]["unit_ns"] for r in records if r["type"] == "hist"}
    assert len([r for r in records if r["type"] == "hist"]) == n
    assert len(units) == 1, units
