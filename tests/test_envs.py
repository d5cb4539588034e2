"""`--in ENV`: the same measurement inside a container, with the engine's
records coming back to the host's store, and nothing of the environment left
behind — also when oslens is killed."""

from __future__ import annotations

import contextlib
import copy
import csv
import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from chromium import load, needs_browser
from every_kind import RECIPES
from oslens import kinds, leftovers

from conftest import one_line_error, oslens


def container_runtime() -> str | None:
    for name in ("podman", "docker"):
        if shutil.which(name) and subprocess.run([name, "info"], capture_output=True, timeout=60).returncode == 0:
            return name
    return None


RUNTIME = container_runtime()
needs_runtime = pytest.mark.skipif(RUNTIME is None, reason="no container runtime runs here (podman or docker)")


def show(db, run: str = "last") -> dict:
    return json.loads(oslens("show", run, "--json", db=db).stdout)


@needs_runtime
def test_a_scale_point_runs_in_a_container_and_says_so(tmp_path):
    before = leftovers.containers(RUNTIME)
    db = tmp_path / "db"
    proc = oslens(
        "scale", "--in", "container", "--probe", "getppid", "--workers", "1", "--ops", "3000", "--reps", "2", db=db
    )
    assert "in a container" in proc.stdout.splitlines()[0]
    doc = show(db)
    env = doc["machine"]["environment"]
    assert env["name"] == "container" and env["runtime"] == RUNTIME and env["runtime_version"]
    assert env["image"].startswith("localhost/oslens-engine:") and env["container"]
    assert env["cgroup"], env  # the container's own cgroup, read from its first process
    # what the engine inside may do, from its first process: the runtime's defaults, none that BPF needs
    # (so that a refusal of BPF there names them, not root, the engine inside running as uid 0)
    assert "CAP_CHOWN" in env["capabilities"]
    assert not {"CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN"} & set(env["capabilities"])
    cpus = [c["cpu"] for c in doc["machine"]["topology"]["cpus"]]
    assert set(cpus) <= set(os.sched_getaffinity(0))  # the inside's topology: the cpuset it was given
    # the engine inside did exactly the work asked, and its records reached the host's store
    rows = list(csv.DictReader(io.StringIO(oslens("export", "last", "--format", "csv", db=db).stdout)))
    assert [int(r["ops"]) for r in rows] == [3000, 3000]
    assert leftovers.containers(RUNTIME) == before
    # the image is a cache of one: the engine's newest build
    images = subprocess.run(
        [RUNTIME, "images", "--format", "{{.Repository}}:{{.Tag}}", "localhost/oslens-engine"],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert images == [env["image"]]


@needs_runtime
def test_the_cpuset_reaches_the_engine_inside(tmp_path):
    cpu = max(os.sched_getaffinity(0))
    db = tmp_path / "db"
    oslens("scale", "--in", f"container:cpuset={cpu}", "--probe", "getppid", "--ops", "500", "--reps", "1", db=db)
    doc = show(db)
    assert doc["machine"]["topology"]["available"] == 1
    assert doc["machine"]["environment"]["cpuset"] == str(cpu)
    assert [p["workers"] for p in doc["series"][0]["points"]] == [1]  # max is the one CPU it was given


@pytest.mark.parametrize(
    "where",
    [
        "vm",
        "container:bogus=1",
        "container:cpuset",
        "container:cpuset=100000",
        "container:memory=lots",
        "container:memory=²",  # str.isdigit() took it, and podman refused it once the image was made
        "container:memory=0",
        "container:memory=99999999999999g",
        "container:cpuset=0-9999999999",  # expanded to ten billion CPUs: MemoryError
        "kvm:cpus=²",
        "kvm:mem=²",
        "container:runtime=lxc",
        "native:x=1",
    ],
)
def test_bad_environments_are_refused_before_anything_runs(tmp_path, where):
    proc = oslens("scale", "--in", where, "--probe", "getppid", "--ops", "10", db=tmp_path / "db", check=False)
    assert proc.returncode == 2, proc.stderr
    assert "--in" in one_line_error(proc.stderr)
    assert not (tmp_path / "db").exists() or "no runs" in oslens("runs", db=tmp_path / "db").stdout.lower()


@needs_runtime
def test_appscale_runs_a_built_in_workload_in_a_container_on_the_cpus_planned(tmp_path):
    """Inside an environment no cgroup of the host's reaches the command and
    only stdout and stderr come back: the engine starts it on the point's
    CPUs (affinity) and its output leaves stdout to the records."""
    before = leftovers.containers(RUNTIME)
    db = tmp_path / "db"
    top = len(os.sched_getaffinity(0))
    p = oslens("appscale", "--in", "container", "--workload", "psearchy", "--size", "200", "--cpu-counts",
               f"1,{top}", "--reps", "1", "--json", db=db)  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["machine"]["environment"]["name"] == "container"
    points = [r for r in json.loads(oslens("export", "last", "--format", "json", db=db).stdout)["records"]
              if r["type"] == "point"]  # fmt: skip
    assert sorted(pt["n"] for pt in points) == sorted({1, top})
    for pt in points:
        assert pt["status"] == "ok" and pt["wall_ns"] > 0 and len(pt["cpus"]) == pt["n"], pt
        assert pt["confinement"] == "affinity (inside the container)"
        assert pt["argv"][0] == "/oslens/oslens-engine"  # the engine inside, and its input made inside
        assert pt["argv"][pt["argv"].index("--dir") + 1].startswith("/oslens/")
    assert leftovers.containers(RUNTIME) == before


@pytest.mark.parametrize(
    "args,words",
    [
        (["--", "true"], "--in container: inside an environment only the engine's built-in workloads"),
        (["--workload", "kmeans", "--prepare", "true"], "--in container: --prepare runs a shell command"),
        (["--workload", "kmeans", "--reps", "0"], "--reps: 0"),
        (["--workload", "kmeans", "--size", "0"], "--size: 0"),
        (["--workload", "nosuch"], "--workload: no workload 'nosuch'"),
        ([], "give either --workload NAME or -- CMD ARGS"),
    ],
)
def test_appscale_refuses_inside_an_environment_before_making_it(tmp_path, args, words):
    p = oslens("appscale", "--in", "container", "--cpu-counts", "1", *args, db=tmp_path / "db")
    assert p.returncode == 2, p.stderr
    assert words in one_line_error(p.stderr)  # the only line: no "making the container environment" before it
    assert not (tmp_path / "db").exists()


@pytest.mark.parametrize("kind", [k.name for k in kinds.KINDS.values() if not k.in_envs])
def test_a_kind_that_takes_no_environment_refuses_one_before_anything_runs(tmp_path, kind):
    args = RECIPES[kind].args()
    at = args.index("--") if "--" in args else len(args)
    proc = oslens(*args[:at], "--in", "container", *args[at:], db=tmp_path / "db", check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"{kind} takes no environment" in one_line_error(proc.stderr)
    assert not (tmp_path / "db").exists()


@needs_runtime
def test_a_container_that_cannot_start_is_named_in_one_line(tmp_path):
    before = leftovers.containers(RUNTIME)
    # below any runtime's minimum memory: the runtime refuses to start it
    proc = oslens(
        "scale",
        "-q",
        "--in",
        "container:memory=1k",
        "--probe",
        "getppid",
        "--ops",
        "10",
        db=tmp_path / "db",
        check=False,
    )
    assert proc.returncode == 1
    assert f"container: {RUNTIME} could not start it: " in one_line_error(proc.stderr)
    assert leftovers.containers(RUNTIME) == before


def measuring(db) -> bool:
    """A run is begun in store db, and running."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            return bool(con.execute("SELECT 1 FROM run WHERE status = 'running'").fetchall())
    except sqlite3.OperationalError:  # no store yet, or no table in it
        return False


@needs_runtime
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_run_leaves_no_container(tmp_path, sig):
    before = leftovers.containers(RUNTIME)
    db = tmp_path / "db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "oslens", "scale", "--in", "container", "--probe", "getppid", "--workers", "1"]
        + ["--duration", "30", "--reps", "1"],
        env={**os.environ, "OSLENS_DB": str(db)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own group: the whole of it is what a scheduler kills
    )
    # the container is made, and the engine checked in it, before the run is begun in the store: a
    # signal then stops a run that never was; wait for the one that measures
    deadline = time.monotonic() + 60
    while not measuring(db) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [n for n in leftovers.containers(RUNTIME) if n not in before], "the container never started"
    assert measuring(db), "the run was never begun"
    time.sleep(1.0)  # the engine is measuring inside
    if sig == signal.SIGKILL:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    proc.wait(timeout=90)
    if sig == signal.SIGTERM:
        assert proc.returncode != 0
        assert show(db)["status"] == "incomplete"
    oslens("runs", db=db)  # the next start sweeps what a killed one left
    assert leftovers.containers(RUNTIME) == before


# ------------------------------------------------------------ oslens envs: side by side


def export_json(db) -> dict:
    return json.loads(oslens("export", "last", "--format", "json", db=db).stdout)


@needs_runtime
def test_envs_times_each_operation_in_each_environment_taking_turns(tmp_path):
    before = leftovers.containers(RUNTIME)
    db = tmp_path / "db"
    proc = oslens(
        "envs", "getppid", "fault:anon", "--envs", "native,container", "--ops", "2000", "--rounds", "3", db=db
    )
    assert proc.returncode == 0, proc.stderr
    # every round of every operation in every environment did exactly the work asked
    summary = list(
        csv.DictReader(io.StringIO(oslens("export", "last", "--format", "csv", "--frame", "summary", db=db).stdout))
    )
    assert {(r["operation"], r["environment"]) for r in summary} == {
        (op, env) for op in ("getppid:default", "fault:anon") for env in ("native", "container")
    }
    assert all(int(r["count"]) == 3 * 2000 and int(r["rounds"]) == 3 for r in summary)
    # the ratio is the environment's figure over native's, and native has none
    by = {(r["operation"], r["environment"]): r for r in summary}
    for op in ("getppid:default", "fault:anon"):
        native, inside = by[(op, "native")], by[(op, "container")]
        assert native["p99_ns_ratio"] == ""
        assert float(inside["p99_ns_ratio"]) == pytest.approx(float(inside["p99_ns"]) / float(native["p99_ns"]))
        assert 0 <= float(inside["ops_per_s_q"]) <= 1
    # the environments take turns: each starts a round first in turn, the operations in order within it
    contexts = [r for r in export_json(db)["records"] if r["type"] == "context"]
    order = [(c["round"], c["environment"]) for c in contexts]
    assert order[:4] == [(0, "native"), (0, "container"), (0, "native"), (0, "container")]
    assert order[4:8] == [(1, "container"), (1, "native"), (1, "container"), (1, "native")]
    doc = show(db)
    assert doc["params"]["environments"]["container"]["runtime"] == RUNTIME
    assert "container: " in proc.stdout and "vs native" in proc.stdout
    assert leftovers.containers(RUNTIME) == before


@pytest.mark.parametrize(
    "args, words",
    [
        (["--envs", "native,,container"], "an empty environment"),
        (["--envs", "native,native"], "named twice"),
        (["--envs", "native,vm"], "unknown environment 'vm'"),
        (["--envs", "native", "--rounds", "0"], "--rounds: 0"),
        (["--envs", "native", "--workers", "0"], "--workers: 0"),
        (["--envs", "native", "nosuchprobe"], "nosuchprobe"),
        (["--envs", "native", "detour"], "no per-operation latency"),
        # one environment with options, its commas its own, refused in the option's name
        (["--envs", "kvm:accel=tcg,cpus=3,sockets=2"], "--envs kvm: cpus=3 is not a multiple of sockets"),
        (["--envs", "native,kvm:accel=tcg,cpus=3,sockets=2"], "--envs kvm: cpus=3 is not a multiple of sockets"),
        (["--envs", "native,container:memory=²,runtime=lxc"], "--envs container: memory=²"),
        (["--envs", "native;kvm:cpus=²"], "--envs kvm: cpus=²"),
        (["--envs", "native,kvm:cpus"], "--envs kvm: 'cpus' is not KEY=VALUE"),
    ],
)
def test_envs_refuses_bad_input_before_anything_runs(tmp_path, args, words):
    proc = oslens("envs", *args, "--ops", "10", db=tmp_path / "db", check=False)
    assert proc.returncode == 2, proc.stderr
    assert words in one_line_error(proc.stderr)
    assert not (tmp_path / "db").exists() or "no runs" in oslens("runs", db=tmp_path / "db").stdout.lower()


@needs_runtime
@pytest.mark.parametrize(
    "args, words",
    [
        (["--ops", "0"], "--ops: 0"),
        (["--rounds", "0"], "--rounds: 0"),
        (["--workers", "2"], "--workers 2: "),  # the container's one CPU (or native's, on a machine of one)
    ],
)
def test_envs_checks_everything_before_making_an_environment(tmp_path, args, words):
    # the container was made (its image built, the container started) before --ops 0 was refused
    before = leftovers.containers(RUNTIME)
    where = f"native;container:cpuset={max(os.sched_getaffinity(0))}"
    proc = oslens("envs", "getppid", "--envs", where, *args, db=tmp_path / "db", check=False)
    assert proc.returncode == 2, proc.stderr
    assert words in one_line_error(proc.stderr)  # and no "making the container environment" before it
    assert leftovers.containers(RUNTIME) == before


def test_envs_by_default_skips_what_cannot_be_made_here_and_says_why(tmp_path, monkeypatch):
    # a PATH with no container runtime and no QEMU: neither can be made, on any machine
    monkeypatch.setenv("PATH", str(tmp_path))
    db = tmp_path / "db"
    proc = oslens("envs", "getppid", "--ops", "500", "--rounds", "1", db=db)
    assert proc.returncode == 0, proc.stderr
    assert "container skipped, it cannot be made here: no container runtime" in proc.stderr
    assert "kvm skipped, it cannot be made here: qemu-system-" in proc.stderr
    doc = show(db)
    assert doc["params"]["envs"] == ["native"]
    assert set(doc["params"]["skipped"]) == {"container", "kvm"}
    assert any(w.startswith("container not measured: no container runtime") for w in doc["warnings"])
    assert "kvm not measured: " in proc.stdout
    # named, the same environment is refused, before anything runs
    proc = oslens("envs", "getppid", "--envs", "native,container", db=tmp_path / "db2", check=False)
    assert proc.returncode == 2
    assert one_line_error(proc.stderr).startswith("oslens: --envs container: no container runtime")


@needs_browser
def test_envs_report_draws_every_percentile_in_chromium(tmp_path, browser):
    # bars on the log axis began at 0: Vega warned "Log scale domain includes zero" and drew nothing
    db = tmp_path / "db"
    oslens("envs", "getppid", "fault:anon", "--envs", "native", "--ops", "5000", "--rounds", "2", "-q", db=db)
    out = tmp_path / "envs.html"
    oslens("report", "last", "-o", str(out), db=db)
    page = load(browser, str(out))
    assert page["error"] is None and page["console"] == [], page["console"]
    assert page["plots"] == page["drawn"] == 1
    drawn = browser.execute_script(
        "return document.querySelectorAll('div.plot svg.marks g.mark-symbol.role-mark path').length"
    )
    assert drawn == 2 * 3  # p50, p99 and p99.9 of each operation


@pytest.mark.parametrize(
    "ratio, text",
    [(31817.86, "×31,800"), (0.0000314159, "×0.0000314"), (1.04449, "×1.04"), (0.99996, "×1.00"), (213.4, "×213")],
)
def test_a_ratio_is_printed_to_three_significant_digits(ratio, text):
    # two decimals printed ×31817.86, and ×0.00 for a throughput a fifty-thousandth of native's
    from oslens.analysis.envs import Comparison
    from oslens.report.envs import ratio_cell

    assert ratio_cell(Comparison(ratio, None, 0.001, 0.001)).plain == text


def native_and_twin(db, ops: int, rounds: int) -> tuple[dict, list[dict], list[dict]]:
    """A native run's params and records, and the same records again as if
    measured in a second environment, 'twin'."""
    oslens("envs", "getppid", "--envs", "native", "--ops", str(ops), "--rounds", str(rounds), "-q", db=db)
    params, records = show(db)["params"], export_json(db)["records"]
    twin = copy.deepcopy(records)
    for r in twin:
        if r["type"] == "context":
            r["environment"] = "twin"
    return {**params, "envs": ["native", "twin"]}, records, twin


def test_a_percentile_the_pool_tells_and_no_round_does_has_an_untested_ratio(tmp_path):
    # 2 rounds of 5,000: p99.9 from the pool of 10,000, from no round alone; the analysis raised 'no values'
    from oslens.analysis.envs import summarize

    params, records, twin = native_and_twin(tmp_path / "db", 5000, 2)
    row = next(r for r in summarize(params, records + twin).operations["getppid:default"] if r.env == "twin")
    assert row.vs_native["p99.9"].ratio == pytest.approx(1.0) and row.vs_native["p99.9"].p is None
    assert row.vs_native["p50"].p is not None


def test_a_ratio_to_a_figure_near_zero_is_unavailable_and_says_why(tmp_path):
    # native's latencies 0 ns (below its clock's tick): the ratio was NaN in --json and the frames, '–' unexplained
    from rich.console import Console

    from oslens.analysis.envs import summarize
    from oslens.frames import envs as envs_frames
    from oslens.report.envs import show as render

    params, records, twin = native_and_twin(tmp_path / "db", 4000, 3)  # p99.9 told
    for r in records:
        if r["type"] == "hist":
            r["hist"].update(sum=0, min=0, max=0, buckets=[[0, r["hist"]["count"]]])
    s = summarize(params, records + twin)
    json.dumps(s.to_dict(), allow_nan=False)
    row = next(r for r in s.operations["getppid:default"] if r.env == "twin")
    for q in ("p50", "p99", "p99.9"):
        c = row.vs_native[q]
        assert c.ratio is None and c.why.startswith(f"native's {q} of getppid:default, 0 ns, is within 10 ticks")
    assert row.vs_native["ops/s"].ratio == pytest.approx(1.0)  # the throughput is still compared
    console = Console(record=True, width=200)
    render(console, None, s)
    text = console.export_text()
    assert "n/a (twin p50): native's p50 of getppid:default, 0 ns, is within 10 ticks" in text
    assert "nan" not in text.lower()
    run = type("Run", (), {"id": 1, "params": params})()
    summary = envs_frames.frames(run, records + twin)["summary"]
    twin_row = summary[summary.environment == "twin"].iloc[0]
    assert twin_row["p50_ns_why"].startswith("native's p50") and twin_row["ops_per_s_why"] == ""


def test_a_percentile_too_few_operations_tell_is_not_given(tmp_path):
    # 2 rounds of 500: p99.9 was printed from 1,000 operations, one beyond it (histogram.TAIL_RULE)
    db = tmp_path / "db"
    proc = oslens("envs", "getppid", "--envs", "native", "--ops", "500", "--rounds", "2", db=db)
    doc = show(db)
    figures = doc["operations"]["getppid:default"][0]["figures"]
    assert figures["p99.9"] is None and figures["p99"] > 0 and figures["p50"] > 0  # p99 from 1,000, p99.9 from 10,000
    assert doc["percentile_rule"] and "– where the operations cannot tell the percentile" in proc.stdout
    summary = list(
        csv.DictReader(io.StringIO(oslens("export", "last", "--format", "csv", "--frame", "summary", db=db).stdout))
    )
    assert summary[0]["p99.9_ns"] == "" and float(summary[0]["p99_ns"]) > 0
    rounds = list(
        csv.DictReader(io.StringIO(oslens("export", "last", "--format", "csv", "--frame", "rounds", db=db).stdout))
    )
    assert [(r["p99_ns"], r["p99.9_ns"]) for r in rounds] == [("", "")] * 2  # 500 a round tell neither
    assert all(float(r["p50_ns"]) > 0 for r in rounds)
