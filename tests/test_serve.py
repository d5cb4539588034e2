"""`oslens serve` and `study scaleout`: real server software from the
distribution's packages (nginx, redis, xapian-tcpsrv), driven by their
real load generators (wrk, redis-benchmark, Xapian's own client library)
over a private loopback, profiled in
steady state; nothing of them left after any kill, and no one else able to
reach them meanwhile."""

from __future__ import annotations

import glob
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

import oslens as api
from oslens import servers
from oslens.servers import netns

from conftest import can_run_as_nobody, leaving_nothing, one_line_error, oslens

# The programs `serve` starts, by their command names.
COMMS = {"nginx", "wrk", "redis-server", "redis-benchmark", "redis-cli", "xapian-tcpsrv", "python3", "mpirun", "hpcc",
         "sh", "tr", "sort", "uniq"}  # fmt: skip


def mpi_files() -> set[str]:
    """Open MPI's shared-memory segments and session directories, wherever Open MPI puts them."""
    return set(glob.glob("/dev/shm/vader_segment.*")) | set(glob.glob("/dev/shm/oslens.*.mpi.*/*"))


def installed(name: str) -> bool:
    s = servers.get(name)
    found = servers.find(s.server_exe) is not None and servers.find(s.client_exe) is not None
    return found and not (s.unavailable and s.unavailable())


def needs(name: str):
    return pytest.mark.skipif(not installed(name), reason=f"{name} or its load generator is not installed "
                                                          "(scripts/install-deps.sh servers)")  # fmt: skip


def ours_running() -> list[str]:
    """Server and generator processes in a network namespace other than
    ours but under our root directory (a container's have another): those
    `serve` starts (it starts them nowhere else)."""
    mine, root = os.readlink("/proc/self/ns/net"), os.stat("/")
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            comm = open(f"/proc/{d}/comm").read().strip()
            net = os.readlink(f"/proc/{d}/ns/net")
            theirs = os.stat(f"/proc/{d}/root")
        except OSError:
            continue
        if comm in COMMS and net != mine and (theirs.st_dev, theirs.st_ino) == (root.st_dev, root.st_ino):
            found.append(f"{d} {comm}")
    return found


def served(tmp_path, *args: str) -> dict:
    p = oslens("serve", *args, "--warmup", "0.5", "--duration", "1", "--json", db=tmp_path / "s.db", timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


# What `study scaleout` runs: where all of it is installed, its one run (study_run) is what the
# tests of each server and job read, rather than a run of each of their own.
EVERY = ("nginx", "streaming", "redis", "search", "analysis", "hpcc")


@pytest.fixture(scope="module")
def study_run(tmp_path_factory) -> tuple:
    """`study scaleout` at its smallest settings, run once for the module:
    (its store, its JSON document). Nothing of its servers, clients and MPI
    is left after it."""
    if not all(installed(n) for n in EVERY):
        pytest.skip("nginx, wrk, redis, Xapian and hpcc: scripts/install-deps.sh servers")
    before = mpi_files()
    db = tmp_path_factory.mktemp("scaleout") / "z.db"
    with leaving_nothing():
        p = oslens("study", "scaleout", "--reps", "2", "--warmup", "0.5", "--duration", "1", "--json", db=db,
                   timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert ours_running() == [] and mpi_files() - before == set()
    return db, json.loads(p.stdout)


def one_server(request, tmp_path, name: str) -> tuple:
    """(the store, the server's or job's entry of its run, its serve records):
    from the study's run where every server is installed, else from a run
    of this one alone. A job's entry is the one on every CPU."""
    if all(installed(n) for n in EVERY):
        db, doc = request.getfixturevalue("study_run")
        run = doc["run"]
    else:
        doc, db = served(tmp_path, "--server", name), tmp_path / "s.db"
        run = doc["run"]
    (s,) = [s for s in doc["servers"] if s["server"] == name and not s["scaling"]]
    records = [r for r in api.Store(db).run(run).records() if r["type"] == "serve" and r["server"] == name
               and not r.get("scaling")]  # fmt: skip
    return db, s, records


@pytest.mark.parametrize("name", ["nginx", "streaming", "redis", "search"])
def test_each_server_answers_its_generator_and_is_profiled_under_load(request, tmp_path, name):
    if not installed(name):
        pytest.skip(f"{name} or its load generator is not installed (scripts/install-deps.sh servers)")
    db, s, records = one_server(request, tmp_path, name)
    assert s["reps"] and s["answered"]
    for rep in s["reps"]:
        assert rep["requests"] > 0 and rep["errors"] == 0, rep
        assert rep["server_alive"]
        assert 0 < rep["per_s"] < rep["requests"]  # a rate over more than a second, not a count
        # streaming's nginx hands each segment to sendfile at a held rate: its user time can fall under
        # one tick of the tick-sampled split, and then every tick it was caught in is kernel time (1.0)
        assert 0 < rep["kernel_share"] <= 1 and rep["syscalls_per_s"] > 0
    # the profile was of the server (its master and workers) while it served: kernel time, calls, switches
    target = s["profile"]["target"]
    assert target["how"] == "duration" and target["pid"] > 0
    assert s["versions"]["server"] and s["versions"]["client"]
    assert len(records) == len(s["reps"])
    for record in records:
        assert record["server_cpus"] and record["client_cpus"] and record["config"] is not None
    assert ours_running() == []
    shown = oslens("show", "last", db=db)
    assert shown.returncode == 0 and name in shown.stdout and "Servers under load" in shown.stdout


@needs("hpcc")
def test_hpcc_is_a_job_run_whole_on_every_cpu_with_its_ranks_profiled(request, tmp_path):
    """hpcc runs to its end, a rank per CPU, profiled from the moment all
    its ranks ran until it exited: every rank's threads are in the profile,
    hpcc's own check of its results passed, its results are kept, and
    nothing of Open MPI is left in /dev/shm (study_run checks that too)."""
    before = mpi_files()
    db, s, records = one_server(request, tmp_path, "hpcc")
    cpus = len(os.sched_getaffinity(0))
    assert s["job"] and s["server_cpus"] == sorted(os.sched_getaffinity(0)), s
    for rep in s["reps"]:
        assert rep["errors"] == 0 and rep["results"]["Success"] == 1 and rep["results"]["HPL_Tflops"] > 0, rep
        assert rep["seconds"] > 0 and 0 < rep["kernel_share"] < 1 and rep["faults_per_s"] > 0
    assert s["versions"]["server"] and s["versions"]["client"]
    target = s["profile"]["target"]
    assert target["how"] == "exited", target
    ranks = {t["tgid"] for t in s["profile"]["sections"]["time"]["threads"] if t["comm"] == "hpcc"}
    assert len(ranks) == cpus, s["profile"]["sections"]["time"]["threads"]
    assert records and all("hpccinf.txt" in r["config"] for r in records)
    assert ours_running() == [] and mpi_files() - before == set()
    shown = oslens("show", "last", db=db)
    assert shown.returncode == 0 and "hpcc's results: HPL, Tflop/s" in shown.stdout


@needs("analysis")
def test_the_data_analysis_job_counts_every_word_it_was_given(request, tmp_path):
    """tr, sort and uniq run to their end, profiled whole: the counts add up
    to the words written, and each of the three is in the profile."""
    _, s, _ = one_server(request, tmp_path, "analysis")
    assert s["job"] and s["reps"]
    for rep in s["reps"]:
        assert rep["errors"] == 0, rep
        assert rep["results"]["words"] == rep["results"]["words_written"] > 0
        assert rep["results"]["distinct_words"] > 1000
        assert 0 < rep["kernel_share"] < 1 and rep["faults_per_s"] > 0
    profile = s["profile"]
    assert profile["target"]["how"] == "exited", profile["target"]
    assert {"tr", "sort", "uniq"} <= {t["comm"] for t in profile["sections"]["time"]["threads"]}
    assert ours_running() == []


def test_a_count_that_misses_a_word_is_an_error(tmp_path):
    from oslens.servers import analysis

    (tmp_path / "analysis.conf").write_text("text t\nbytes 10\nwords 5\n")
    (tmp_path / "counts").write_text("      3 e\n      2 t\n")
    load, found = analysis.results(tmp_path, 1.0)
    assert (load.requests, load.errors) == (1, 0) and found["distinct_words"] == 2
    (tmp_path / "counts").write_text("      3 e\n      1 t\n")
    assert analysis.results(tmp_path, 1.0)[0].errors == 1


def test_search_clients_killed_inside_a_query_are_said_in_the_terminal_and_the_html():
    """The generator counted the queries of a client killed at the stop up
    to its last flush; that its query in flight is not counted was in its
    summary and nowhere a reader looked."""
    from oslens.analysis.serve import rep_notes
    from oslens.servers import search

    out = '{"requests": 900, "errors": 2, "failed_clients": 1, "stopped_in_a_query": 3, "seconds": 3.0}'
    load = search.read(out)
    assert (load.requests, load.errors) == (900, 2)
    assert any("3 client(s) still inside a query" in n for n in load.notes), load.notes
    assert any("1 client(s) failed" in n for n in load.notes)
    s = {"label": "search", "job": False, "reps": [{"rep": 0, "notes": load.notes, "server_alive": True}]}
    assert [level for _, level in rep_notes(s)] == ["note", "note"]
    assert search.read(out.replace('"stopped_in_a_query": 3', '"stopped_in_a_query": 0')).notes == [
        "1 client(s) failed (among the errors)"
    ]


@pytest.mark.parametrize("ranks, grid", [(1, (1, 1)), (2, (1, 2)), (6, (2, 3)), (7, (1, 7)), (256, (16, 16))])
def test_hpl_grid_is_as_square_as_the_ranks_divide(ranks, grid):
    from oslens.servers import hpcc

    assert hpcc.grid(ranks) == grid
    n = hpcc.problem_size(ranks)
    assert n % hpcc.NB == 0 and n <= hpcc.N_PER_RANK * ranks**0.5 < n + hpcc.NB


def test_hpcc_summary_is_read_and_a_failed_check_is_an_error(tmp_path):
    from oslens.servers import hpcc

    out = ("Begin of Summary section.\nVersionMajor=1\nVersionMinor=5\nVersionMicro=0\nVersionRelease=f\n"
           "Success={ok}\nHPL_Tflops=0.0048\nMPIFFT_Gflops=0.51\nEnd of Summary section.\n")  # fmt: skip
    (tmp_path / "hpccoutf.txt").write_text(out.format(ok=1))
    load, found = hpcc.results(tmp_path, 3.0)
    assert (load.requests, load.errors, load.seconds) == (1, 0, 3.0)
    assert found == {"HPL_Tflops": 0.0048, "MPIFFT_Gflops": 0.51, "Success": 1.0, "version": "1.5.0"}
    (tmp_path / "hpccoutf.txt").write_text(out.format(ok=0))
    assert hpcc.results(tmp_path, 3.0)[0].errors == 1
    (tmp_path / "hpccoutf.txt").unlink()
    load, found = hpcc.results(tmp_path, 3.0)
    assert load.requests is None and "no summary" in load.unread


@needs("nginx")
def test_the_generators_count_agrees_with_the_servers_own(tmp_path):
    """wrk's requests against nginx's own counter (stub_status, read in the
    server's namespace before and after the load): the same requests
    counted by both ends. nginx counts a request once it has read it, wrk
    once it has the whole reply: those in flight when wrk stopped — at most
    one per connection — nginx alone counts."""
    doc = served(tmp_path, "--server", "nginx", "--connections", "8")
    (s,) = doc["servers"]
    (rep,) = s["reps"]
    assert rep["counted_by"] == "the load generator" and rep["requests"] > 0
    assert 0 <= rep["server_requests"] - rep["requests"] <= s["connections"], rep


@needs("nginx")
def test_no_other_user_reaches_the_server(tmp_path):
    """The server listens on 127.0.0.1:8080 inside its own network
    namespace: from the machine's loopback — root's or nobody's — nothing
    answers there, while inside it the server listens."""
    if not can_run_as_nobody():
        pytest.skip("needs root and setpriv to act as another user")
    port = servers.get("nginx").port
    if netns.listening(os.getpid(), port):
        pytest.skip(f"another program of this machine listens on port {port}: a refusal could not be told")
    proc = subprocess.Popen(
        [sys.executable, "-m", "oslens", "-q", "serve", "--server", "nginx", "--warmup", "3", "--duration", "1"],
        env={**os.environ, "OSLENS_DB": str(tmp_path / "s.db")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not (running := [r for r in ours_running() if r.endswith(" nginx")]):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.05)
        pid = int(running[0].split()[0])
        while not netns.listening(pid, port):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        probe = ("import socket, sys\ns = socket.socket()\ns.settimeout(2)\n"
                 f"try:\n    s.connect(('127.0.0.1', {port}))\nexcept OSError as e:\n    print(type(e).__name__)\n"
                 "else:\n    print('connected')\n")  # fmt: skip
        for prefix in ([], ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]):
            out = subprocess.run([*prefix, sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
            assert out.stdout.strip() == "ConnectionRefusedError", (prefix, out.stdout, out.stderr)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert ours_running() == []


@pytest.mark.parametrize(
    "name, sig",
    [
        ("nginx", signal.SIGTERM),
        ("nginx", signal.SIGINT),
        ("nginx", signal.SIGKILL),
        ("search", signal.SIGKILL),
        ("hpcc", signal.SIGKILL),
        ("analysis", signal.SIGKILL),
    ],
)
def test_nothing_is_left_after_a_kill_of_the_whole_group(tmp_path, name, sig):
    """Killed at any moment — building the search index, starting the
    server, under load, while profiled — nothing of the server or its
    generator (the search clients' processes too) runs after the next
    start, and the next start removes their cgroups."""
    if not installed(name):
        pytest.skip(f"{name} or its load generator is not installed (scripts/install-deps.sh servers)")
    db = tmp_path / "k.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "oslens", "-q", "serve", "--server", name, "--warmup", "1", "--duration", "2"],
        env={**os.environ, "OSLENS_DB": str(db)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    time.sleep(random.uniform(0.5, 4.0))
    os.killpg(proc.pid, sig)
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 15
    while ours_running() and time.monotonic() < deadline:
        time.sleep(0.1)  # told by their parent-death signal, they end on their own
    assert oslens("runs", db=db).returncode == 0  # a start: it sweeps what a dead oslens left
    assert ours_running() == []
    assert not glob.glob(f"/dev/shm/oslens.{proc.pid}.*")  # Open MPI's files, in a directory of the dead oslens
    from oslens import cgroups

    assert not [g for g in cgroups.stale() if f".{proc.pid}." in str(g)]


@pytest.mark.parametrize(
    "args, word",
    [
        (["--server", "nosuch"], "no server 'nosuch'"),
        (["--server", "nginx,"], "empty name"),
        (["--server-cpus", "0"], "--server-cpus"),
        (["--server-cpus", "100000"], "--server-cpus"),
        (["--connections", "0"], "--connections"),
        (["--duration", "0"], "--duration"),
        (["--warmup", "-1"], "--warmup"),
        (["--reps", "0"], "--reps"),
    ],
)
def test_bad_input_is_one_line_and_starts_nothing(tmp_path, args, word):
    p = oslens("serve", *args, db=tmp_path / "b.db")
    assert p.returncode == 2
    assert word in one_line_error(p.stderr)
    assert not (tmp_path / "b.db").exists() or api.Store(tmp_path / "b.db").runs() == []
    assert ours_running() == []


def test_study_scaleout_gives_every_finding_a_verdict_or_a_reason(study_run, tmp_path, browser):
    from chromium import load
    from oslens.studies import findings

    db, doc = study_run
    rows = {r["id"]: r for r in doc["study"]}
    assert set(rows) == {f["id"] for f in findings("zheng-scaleout")}
    for r in rows.values():
        assert r["verdict"] in ("agrees", "differs", "cannot tell here") and r["reason"], r
    # media streaming is run: its kernel share is measured and judged against "most" (> 50 %)
    share = rows["kernel_share_media_streaming"]
    assert share["here"] != "not measured", share
    # the search backend is run: its page faults are measured; its frontend, not run, says so
    assert rows["pf_freq_search_backend"]["here"] != "not measured", rows["pf_freq_search_backend"]
    assert "frontend" in rows["pf_freq_search_frontend"]["reason"]
    timer = rows["softirq_timer_share"]
    assert "streaming" in timer["reason"] and "search" in timer["reason"], timer
    # what the study cannot run says what it would need
    assert "hardware counters" in rows["fe_stalls_kernel_major"]["reason"]
    shown = oslens("show", "last", db=db)
    assert shown.returncode == 0 and "scaleout" in shown.stdout
    # hpcc is run, whole: HPC's kernel share is measured, with what it cannot tell apart said
    assert rows["kernel_share_hpc"]["here"] != "not measured" and "together" in rows["kernel_share_hpc"]["reason"]
    against = rows["cs_freq_dc_gt_hpc"]
    for workload in ("hpcc", "analysis", "streaming", "search"):
        assert workload in against["here"], against
    # the data-analysis job is run: the Hadoop job's kernel share and page faults are measured
    assert rows["kernel_share_bayes"]["here"] != "not measured" and rows["pf_freq_bayes"]["here"] != "not measured"
    # and on fewer CPUs too, where there are several: its kernel time and lock wait against cores
    if len(os.sched_getaffinity(0)) > 1:
        for fid in ("kernel_time_grows", "lock_latency_grows", "speedup_linear_until_14"):
            assert rows[fid]["here"] != "not measured", rows[fid]
        assert "on 1 CPU" in shown.stdout
    # its report opens with the paper beside this kernel, table then figures, and draws without a warning
    page = tmp_path / "z.html"
    assert oslens("report", str(doc["run"]), "-o", str(page), db=db).returncode == 0
    html = page.read_text()
    assert html.index("the paper and Linux") < html.index("figures beside this kernel")
    shown = load(browser, page)
    assert shown["error"] is None and shown["console"] == [], shown["console"]
    assert shown["plots"] > 0 and shown["drawn"] == shown["plots"]
