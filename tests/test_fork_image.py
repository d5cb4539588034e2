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

from conftest import SESSION_TMP, oslens

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
    # the worker image beside the engine, without its attribution, workloads and output
    assert image["program"] == "oslens-engine-worker" + ("-static" if static else "")
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


def test_the_static_worker_image_puts_forks_child_path_on_the_fewest_pages():
    # glibc's fork path and the bookkeeping its child writes, each within one
    # fault-around window or page: worker_layout.sh finds nothing to pad in
    # the installed image (one more fault per fork was 4 % of fork-static)
    image = engine.engine_path().with_name("oslens-engine-worker-static")
    if not image.exists():
        pytest.skip("no static engine built here")
    pads = subprocess.run(
        ["sh", str(Path(__file__).parents[1] / "engine" / "worker_layout.sh"), str(image)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ".space" not in pads, pads


def test_without_a_worker_image_the_engine_execs_itself(tmp_path):
    # an engine copied alone still gives fork a fresh worker: itself
    exe = tmp_path / "oslens-engine"
    shutil.copy(engine.engine_path(), exe)
    image = worker_image(exe, "fork")
    assert image["fresh"] is True and image["program"] == "oslens-engine"


def test_the_scale_table_states_the_workers_image(tmp_path):
    # what fork copies is part of what it measures: fork's series names the
    # fresh worker image, a thread series (one shared address space) nothing
    out = oslens(
        "scale", "--probe", "fork,getppid", "--workers", "1", "--ops", "20", "--reps", "1", db=tmp_path / "db"
    ).stdout
    fork, getppid = out.split("getppid:default")
    assert "worker image: a fresh oslens-engine-worker, " in fork
    assert " mappings, " in fork and " KiB anonymous" in fork
    assert "worker image: a copy of the engine, " in getppid
    threads = oslens(
        "scale", "--probe", "getppid", "--mode", "thread", "--workers", "1", "--ops", "20", "--reps", "1",
        db=tmp_path / "db",
    )  # fmt: skip
    assert threads.returncode == 0, threads.stderr
    assert "getppid:default (threads" in threads.stdout and "worker image" not in threads.stdout
