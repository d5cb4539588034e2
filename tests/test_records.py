"""records.py mirrors engine/README.md's records, and real engine output
carries what both say: the README, the Python readers and the engine cannot
drift apart without this failing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from oslens import engine
from oslens.records import (
    OSLENS_RECORDS,
    RANK_STAMP,
    RECORD_FIELDS,
    JobRanks,
    bsp_of,
    bsps,
    by_context,
    by_rank,
    invocations,
    missing_fields,
    nodes,
    rank_host,
    rank_info,
    scale_points,
)

from conftest import TWO, oslens, run_engine

README = (Path(__file__).resolve().parents[1] / "engine" / "README.md").read_text()
SECTIONS = {"run": "## Records", "profile": "## `profile` records", "app": "## `app`", "cluster": "## cluster records"}


def readme_section(heading: str) -> str:
    start = README.index(heading)
    nxt = README.find("\n## ", start + len(heading))
    return README[start : nxt if nxt >= 0 else len(README)]


def readme_types(command: str) -> dict[str, str]:
    """type -> the README's text about its fields, for one command's section."""
    text = readme_section(SECTIONS[command])
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^\|\s*`([a-z_]+)`(?:,\s*`([a-z_]+)`)?\s*\|(.*)\|\s*$", line)
        if m:
            for t in filter(None, m.group(1, 2)):
                rows[t] = m.group(3)
    for m in re.finditer(r'\{"type":"([a-z_]+)",([^}]*)\}', text):
        rows[m.group(1)] = m.group(2)
    return rows


@pytest.mark.parametrize("command", sorted(RECORD_FIELDS))
def test_every_documented_record_is_mirrored_and_every_mirrored_one_documented(command):
    documented = set(readme_types(command)) - set(OSLENS_RECORDS)
    assert documented == set(RECORD_FIELDS[command])


@pytest.mark.parametrize("command", sorted(RECORD_FIELDS))
def test_every_mirrored_field_is_in_the_readme(command):
    rows = readme_types(command)
    missing = [
        f"{t}.{f}"
        for t, fields in RECORD_FIELDS[command].items()
        for f in fields
        if not re.search(rf"(?<![\w]){re.escape(f)}(?![\w])", rows[t])
    ]
    assert not missing


def check_output(command: str, records: list[dict]) -> None:
    assert records
    for r in records:
        assert r["type"] in RECORD_FIELDS[command], f"undocumented {command} record {r['type']}"
        assert missing_fields(command, r) == [], r


def test_scale_output_matches_the_readme():
    r = run_engine("run", "--probe", "dup", "--workers", str(TWO), "--duration", "0.05", "--warmup", "0", "--reps", "2")
    assert r.rc == 0, r.stderr
    check_output("run", r.records)
    (p,) = scale_points(r.records)
    assert (p.probe, p.workers, p.fixed) == ("dup", TWO, "time")
    assert p.complete_reps == [0, 1] and all(len(ws) == TWO for ws in p.complete)


def test_latency_output_matches_the_readme():
    cpu = engine.topology()["cpus"][0]["cpu"]
    r = run_engine("run", "--probe", "getppid", "--cpus", str(cpu), "--latency", "--ops", "1000", "--warmup", "0")
    assert r.rc == 0, r.stderr
    check_output("run", r.records)
    assert sum(h["hist"]["count"] for h in r.of("hist")) == 1000


def test_detour_output_matches_the_readme():
    cpu = engine.topology()["cpus"][-1]["cpu"]
    r = run_engine("run", "--probe", "detour", "--cpus", str(cpu), "--duration", "0.1", "--warmup", "0", "--trace")
    assert r.rc == 0, r.stderr
    check_output("run", r.records)
    assert r.of("detours") and r.of("trace")


def test_timerlat_output_matches_the_readme():
    cpu = engine.topology()["cpus"][-1]["cpu"]
    r = run_engine("run", "--probe", "timerlat", "--cpus", str(cpu), "--duration", "0.1", "--warmup", "0", "--trace")
    assert r.rc == 0, r.stderr
    check_output("run", r.records)
    assert r.of("timerlat") and r.of("trace")


def test_profile_and_app_output_match_the_readme(tmp_path):
    import json
    import os
    import subprocess

    out = tmp_path / "records"
    with open(out, "w") as f:
        p = subprocess.run(
            [str(engine.engine_path()), *engine.profile_argv(command=["/bin/true"], out_fd=f.fileno())],
            pass_fds=(f.fileno(),),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert p.returncode == 0, p.stderr
    check_output("profile", [json.loads(line) for line in out.read_text().splitlines() if line.strip()])
    app = subprocess.run(
        engine.app_argv("kmeans", workers=1, mode="thread", size=10000),
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
    )
    assert app.returncode == 0, app.stderr
    check_output("app", [json.loads(line) for line in app.stdout.splitlines() if line.strip()])
    check_output("app", [{"type": "app_info", **w} for w in engine.workloads().values()])


def test_invocations_keep_the_context_stored_before_each():
    recs = [
        {"type": "context", "competition": None},
        {"type": "header", "workers": 1},
        {"type": "rep", "rep": 0},
        {"type": "context", "competition": {"probe": "fork"}},
        {"type": "header", "workers": 2},
        {"type": "rep", "rep": 0},
    ]
    a, b = invocations(recs)
    assert a.competition is None and b.competition == {"probe": "fork"}
    assert [r["type"] for r in a.records] == ["rep"] and b.header["workers"] == 2


# The cluster's records come from real MPI jobs: Open MPI's launcher and
# compiler wrapper are what these tests need that oslens does not provide.
MPI_MISSING = [tool for tool in ("mpirun", "mpicc") if shutil.which(tool) is None]
JOB_CPUS = sorted(os.sched_getaffinity(0))[:2]
needs_a_job = pytest.mark.skipif(
    bool(MPI_MISSING) or len(JOB_CPUS) < 2,
    reason=f"Open MPI is not installed: no {' or '.join(MPI_MISSING)}" if MPI_MISSING else "two ranks need two CPUs",
)


def on_two_cpus():
    os.sched_setaffinity(0, JOB_CPUS)


def check_job_output(records: list[dict]) -> dict[str, int]:
    """Every record a rank wrote carries its rank and host, and what the
    README says of its type (a rank's own record, else run's); oslens's
    own records carry no rank. Returns how many of each type."""
    seen: dict[str, int] = {}
    for r in records:
        t = r["type"]
        seen[t] = seen.get(t, 0) + 1
        if t in OSLENS_RECORDS:
            assert not set(RANK_STAMP) & set(r), r
            assert missing_fields("run", r) == [], r
            continue
        assert [k for k in RANK_STAMP if k not in r] == [], r
        assert list(r)[: len(RANK_STAMP) + 1] == [*RANK_STAMP, "type"], r  # first, as the README shows them
        command = "cluster" if t in RECORD_FIELDS["cluster"] else "run"
        assert t in RECORD_FIELDS[command], f"undocumented record {t} of a rank"
        assert missing_fields(command, r) == [], r
    return seen


@pytest.mark.parametrize(
    "measure, args, types",
    [
        ("noise", ["--duration", "0.2", "--warmup", "0"], {"rank", "node", "header", "detours", "rep", "end"}),
        ("bsp", ["--compute-us", "200", "--iterations", "100"], {"rank", "node", "bsp", "rep", "end", "trace"}),
    ],
)
@needs_a_job
def test_cluster_output_matches_the_readme(tmp_path, measure, args, types):
    from oslens.api import Store

    db = tmp_path / "c.db"
    p = oslens("cluster", measure, *args, "--ranks", "2", "--quiet", db=db, timeout=300, preexec_fn=on_two_cpus)
    assert p.returncode == 0, p.stderr
    records = Store(db).run(1).records()
    seen = check_job_output(records)
    assert types <= set(seen), seen
    assert seen["rank"] == 2 and seen["node"] == 1  # one node: one record, from its first rank
    # the readers agree with the records
    ranks = by_rank(records)
    assert list(ranks) == [0, 1]
    infos = {k: rank_info(recs) for k, recs in ranks.items()}
    assert all(i.rank == k and i.size == 2 and rank_host(ranks[k]) == i.host for k, i in infos.items())
    assert sorted(c for i in infos.values() for c in i.cpus) == JOB_CPUS
    assert list(nodes(records)) == [infos[0].host]
    if measure == "bsp":
        assert all(i.mpi_thread == "single" for i in infos.values())
        b = bsps(records)
        assert list(b) == [0, 1] and b[1] == bsp_of(ranks[1])
        assert all(len(x.work_ns) == len(x.wait_ns) == len(x.step_start_ns) == x.iterations for x in b.values())
        assert all(x.cpu in infos[k].cpus for k, x in b.items())


@needs_a_job
def test_a_ranks_topology_record_matches_the_readme():
    """`topology` as a rank: what oslens plans a job from (not stored)."""
    argv = ["mpirun", "-n", "2", "--bind-to", "none", *(["--allow-run-as-root"] if os.geteuid() == 0 else [])]
    p = subprocess.run(
        [*argv, str(engine.mpi_engine_path()), "topology"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        preexec_fn=on_two_cpus,
    )
    assert p.returncode == 0, p.stderr
    records = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    seen = check_job_output(records)
    assert seen == {"rank": 2, "node": 1, "topology": 2}, seen
    for recs in by_rank(records).values():
        (topo,) = [r for r in recs if r["type"] == "topology"]
        assert [c["cpu"] for c in topo["cpus"]] == rank_info(recs).cpus and topo["available"] == 1


def test_job_ranks_keep_each_ranks_host_and_the_signal_that_stopped_it():
    job = JobRanks()
    for r in [
        {"rank": 0, "host": "a", "type": "rank"},
        {"rank": 1, "host": "b", "type": "rank"},
        {"rank": 0, "host": "a", "type": "end", "status": "ok"},
        {"rank": 1, "host": "b", "type": "end", "status": "interrupted", "signal": 15},
        {"type": "end", "status": "interrupted", "signal": 2},  # a single engine's: no rank's
    ]:
        job.add(r)
    assert job.hosts == {0: "a", 1: "b"} and job.stopped == {1: 15}


def test_records_are_grouped_by_the_context_stored_before_them():
    a, b = {"type": "context", "competition": None}, {"type": "context", "competition": {"probe": "fork"}}
    assert by_context([{"type": "x"}, a, {"type": "y"}, b, a, {"type": "z"}]) == [
        (None, [{"type": "x"}]),
        (a, [{"type": "y"}]),
        (b, []),
        (a, [{"type": "z"}]),
    ]
    assert by_context([a]) == [(a, [])] and by_context([]) == []
