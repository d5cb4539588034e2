"""`--in kvm`: the engine in a QEMU guest booted from the distribution's
kernel, its records back in the host's store; and the many-CPU tier — one
16-vCPU, 2-socket, SMT2, 2-node guest, booted once for this module, in which
oslens's placement, sweeps, noise timeline and explanations run on a
topology this host does not have.

Where this host's KVM cannot run the distribution's kernel (a PVM host runs
only PVM guest kernels) the guests are emulated (accel=tcg): what is checked
here is correctness, which emulation keeps, never timings."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from oslens import engine, envs, leftovers, runtime
from oslens.cli import main
from oslens.envs import kvm
from oslens.errors import UsageError

from conftest import can_run_as_nobody, one_line_error, oslens


def _guest_unavailable() -> str | None:
    try:
        envs.parse("kvm:accel=tcg,cpus=1")
    except UsageError as e:
        return str(e)
    return None


UNAVAILABLE = _guest_unavailable()
needs_guest = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no guest can be made here: {UNAVAILABLE}")


def accel() -> str:
    """kvm where it can run the distribution's kernel, else QEMU's emulation."""
    try:
        envs.parse("kvm:cpus=1")
    except UsageError:
        return "tcg"
    return "kvm"


def _pvm_host() -> bool:
    mods = {p.name for p in Path("/sys/module").glob("kvm*")}
    return "kvm_pvm" in mods and not mods & {"kvm_intel", "kvm_amd"}


@pytest.mark.skipif(not _pvm_host(), reason="not a PVM host (kvm_pvm without kvm_intel or kvm_amd)")
def test_a_pvm_host_refuses_a_stock_kernel_in_one_line_before_anything_runs(tmp_path):
    """The README's promise: where KVM is PVM, a guest of the distribution's
    kernel is refused at once, naming accel=tcg, with no guest started."""
    before = leftovers.guests()
    db = tmp_path / "s.db"
    p = oslens("scale", "--in", "kvm:cpus=1", "--probe", "getppid", "--workers", "1", "--ops", "10", db=db)
    assert p.returncode == 2
    line = one_line_error(p.stderr)
    assert "PVM" in line and "accel=tcg" in line
    assert not db.exists() and leftovers.guests() == before


def show(db, run: str = "last") -> dict:
    return json.loads(oslens("show", run, "--json", db=db).stdout)


def csv_rows(db, run: str = "last", *frame: str) -> list[dict]:
    out = oslens("export", run, "--format", "csv", *frame, db=db).stdout
    return list(csv.DictReader(io.StringIO(out)))


# ------------------------------------------------------------ one command, one guest


@pytest.mark.parametrize(
    "spec, words",
    [
        ("cpus=0", "cpus=0 is not a whole number"),
        ("cpus=2,sockets=4", "sockets=4 is more than cpus=2"),
        ("cpus=16,sockets=2,cores=3", "is not sockets×cores×threads"),
        ("cpus=16,numa=3", "numa=3 cannot split"),
        ("cpus=2,threads=2,numa=2", "numa=2 cannot split"),
        ("vcpus=2", "unknown key 'vcpus'"),
        ("mem=1k", "mem=1k is not a size"),
        ("mem=100M", "less than 256M"),
        ("accel=xen", "accel=xen is not kvm or tcg"),
        ("cpus=²", "is not a whole number"),
    ],
)
def test_bad_specs_are_refused_before_anything_runs(tmp_path, spec, words):
    proc = oslens("scale", "--in", f"kvm:{spec}", "--probe", "getppid", "--workers", "1", db=tmp_path / "db")
    assert proc.returncode == 2, proc.stderr
    assert words in one_line_error(proc.stderr)
    assert not (tmp_path / "db").exists() or "no runs" in oslens("runs", db=tmp_path / "db").stdout
    assert leftovers.guests() == []


@needs_guest
def test_a_scale_point_runs_in_a_guest_and_says_so(tmp_path):
    db = tmp_path / "db"
    proc = oslens(
        "scale", "--in", f"kvm:cpus=2,accel={accel()}", "--probe", "getppid", "--workers", "1,2",
        "--ops", "3000", "--reps", "1", db=db,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    first = " ".join(proc.stdout.split()[:60])  # the run line, however the terminal wrapped it
    assert "in a kvm" in first
    doc = show(db)
    m, env = doc["machine"], doc["machine"]["environment"]
    # the run's kernel is the guest's, as the guest's agent saw it; the host's is kept beside it
    assert m["kernel"]["seen_from"] == "inside the guest"
    assert m["kernel"]["release"] == Path(env["kernel_image"]).name.removeprefix("vmlinuz-")
    assert env["host"]["kernel"]["release"] == os.uname().release
    assert f"Linux {m['kernel']['release']}" in first
    assert env["shape"] == {"cpus": 2, "sockets": 1, "cores": 2, "threads": 1, "numa": 1, "mem_mib": 1152}
    assert env["guest"]["cpus_online"] == 2 and m["topology"]["online"] == 2
    assert env["qemu_version"] and env["boot_s"] > 0 and env["qemu_accel"].split(",")[0] == env["accel"]
    if env["accel"] != "kvm":
        assert "timings not meaningful" in env["note"] and " ".join(env["note"].split()) in first
    # the engine in the guest did exactly the work asked, on the CPUs planned
    rows = csv_rows(db)
    assert Counter(int(r["workers"]) for r in rows) == {1: 1, 2: 2}
    assert all(int(r["ops"]) == 3000 for r in rows)
    assert all(r["cpu"] == r["cpu_seen"] for r in rows)
    assert leftovers.guests() == []


@needs_guest
def test_a_guest_that_cannot_start_fails_in_one_line_and_leaves_nothing(tmp_path):
    # a kernel image cut short: QEMU or the kernel gives up, and says why
    release = os.uname().release
    image = next(
        (p for p in sorted(Path("/boot").glob("vmlinuz-*")) if (Path("/lib/modules") / p.name[8:]).is_dir()), None
    )
    assert image is not None, release
    broken = tmp_path / image.name
    broken.write_bytes(image.read_bytes()[:4096])
    db = tmp_path / "db"
    proc = oslens(
        "scale", "-q", "--in", f"kvm:cpus=1,accel=tcg,kernel={broken}", "--probe", "getppid", "--workers", "1",
        "--ops", "100", "--reps", "1", db=db, timeout=200,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    line = one_line_error(proc.stderr)
    assert line.startswith("oslens: measurement failed: kvm: the guest did not"), line
    assert leftovers.guests() == []


def _start(db: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "oslens", "scale", "--in", f"kvm:cpus=1,accel={accel()}", "--probe", "getppid",
         "--workers", "1", "--duration", "3", "--reps", "5", *args],
        env={**os.environ, "OSLENS_DB": str(db)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


def _wait_measuring(proc: subprocess.Popen, timeout: float = 240) -> None:
    """Until the guest's engine measures (a relay to the guest runs `run`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["pgrep", "-f", "oslens-guest relay .* run --probe getppid"], capture_output=True)
        if out.returncode == 0:
            return
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.2)
    raise AssertionError("the guest's engine never started measuring")


@needs_guest
def test_a_guest_killed_mid_run_leaves_nothing_and_the_run_is_incomplete(tmp_path):
    db = tmp_path / "db"
    proc = _start(db)
    _wait_measuring(proc)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode == 143, proc.stderr.read()
    assert "incomplete" in oslens("runs", db=db).stdout
    assert leftovers.guests() == []
    # SIGKILL of the whole group: the guest dies with oslens (and the next start would sweep it)
    proc = _start(db)
    _wait_measuring(proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while leftovers.guests() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers.guests() == []
    oslens("runs", db=db)
    assert not [d for d in Path(runtime.root()).iterdir() if d.name.startswith(f"{proc.pid}.")]


@needs_guest
def test_envs_puts_a_guest_beside_native(tmp_path):
    db = tmp_path / "db"
    spec = f"kvm:cpus=2,accel={accel()}"
    proc = oslens("envs", "getppid", "--envs", f"native;{spec}", "--ops", "1000", "--rounds", "2", db=db)
    assert proc.returncode == 0, proc.stderr
    doc = show(db)
    rows = doc["operations"]["getppid:default"]
    assert [r["env"] for r in rows] == ["native", "kvm"]
    assert all(r["count"] == 2 * 1000 for r in rows)
    guest = doc["params"]["environments"]["kvm"]
    assert guest["shape"]["cpus"] == 2 and guest["inside"]["kernel"]["release"]
    if guest["accel"] != "kvm":  # whatever the figures, the table says they mean nothing
        assert "timings not meaningful" in " ".join(proc.stdout.split())
    assert leftovers.guests() == []


# ------------------------------------------------------------ the many-CPU tier

SPEC = {"cpus": 16, "sockets": 2, "threads": 2, "numa": 2}


@pytest.fixture(scope="module")
def big_guest():
    """One 16-vCPU guest for the whole tier. Its commands run in this
    process (the guest is made once, not per command); what they leave in
    this process — its runtime entry, its temporary directory — goes with
    the guest."""
    if UNAVAILABLE:
        pytest.skip(f"no guest can be made here: {UNAVAILABLE}")
    spec = ",".join(f"{k}={v}" for k, v in SPEC.items())
    guest = envs.parse(f"kvm:{spec},mem=2G,accel={accel()}")
    had_entry, tmp = os.environ.get(runtime.ENV), tempfile.tempdir
    with guest:
        yield guest
    if had_entry is None:
        runtime.release()
        os.environ.pop(runtime.ENV, None)
    tempfile.tempdir = tmp
    assert leftovers.guests() == []


def inside(guest, db: Path, *args: str) -> tuple[int, str]:
    """`oslens ARGS` with the engine in the guest: its exit status and output."""
    out, err = io.StringIO(), io.StringIO()
    tmp = tempfile.tempdir  # each command gives this process a private temporary directory: not the next test's
    with engine.inside(guest), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["--db", str(db), *args])
            rc = 0
        except SystemExit as e:
            rc = e.code
        finally:
            tempfile.tempdir = tmp
    return rc, out.getvalue() + err.getvalue()


def test_the_guest_has_the_topology_asked_for(big_guest):
    with engine.inside(big_guest):
        cpus = engine.topology()["cpus"]
    assert len(cpus) == SPEC["cpus"]
    assert len({c["package"] for c in cpus}) == SPEC["sockets"]
    assert len({c["node"] for c in cpus}) == SPEC["numa"]
    cores = Counter((c["package"], c["core"]) for c in cpus)
    assert set(cores.values()) == {SPEC["threads"]}
    assert len(cores) == SPEC["cpus"] // SPEC["threads"]
    # each node holds whole sockets' worth of cores, never a core split across nodes
    assert all(len({c["node"] for c in cpus if (c["package"], c["core"]) == k}) == 1 for k in cores)


def test_placement_follows_the_guest_topology(big_guest):
    with engine.inside(big_guest):
        by_cpu = {c["cpu"]: c for c in engine.topology()["cpus"]}
        plans = {(p, n): engine.placement(n, p) for p in ("compact", "spread") for n in (1, 4, 8, 16)}
    per_socket = SPEC["cpus"] // SPEC["sockets"] // SPEC["threads"]
    physical = SPEC["cpus"] // SPEC["threads"]
    for (policy, n), plan in plans.items():
        placed = [by_cpu[c] for c in plan]
        assert len(set(plan)) == n
        cores = Counter((c["package"], c["core"]) for c in placed)
        if n <= physical:  # physical cores before siblings
            assert max(cores.values()) == 1, (policy, n, plan)
        else:
            assert set(cores.values()) == {SPEC["threads"]}
        packages = [c["package"] for c in placed]
        if policy == "compact" and n <= per_socket:  # one socket filled before the next
            assert set(packages) == {packages[0]}, plan
        if policy == "spread" and n > 1:  # sockets alternate
            assert packages[: SPEC["sockets"]] == sorted(set(packages)), plan
            counts = Counter(packages).values()
            assert max(counts) - min(counts) <= 1, plan


def test_dry_run_and_a_short_sweep_place_workers_as_planned(big_guest, tmp_path):
    db = tmp_path / "db"
    rc, out = inside(big_guest, db, "scale", "--probe", "getppid", "--dry-run")
    assert rc == 0, out
    assert "16 CPUs, 2 sockets, 8 cores, 2 threads per core" in out
    rc, out = inside(
        big_guest, db, "scale", "--probe", "getppid", "--workers", "1,8,16", "--placement", "spread",
        "--ops", "2000", "--reps", "1",
    )  # fmt: skip
    assert rc == 0, out
    assert "timings not meaningful" in out or "in a kvm" in out
    rows = csv_rows(db)
    with engine.inside(big_guest):
        plans = {n: engine.placement(n, "spread") for n in (1, 8, 16)}
    for n, plan in plans.items():
        point = sorted((int(r["worker"]), int(r["cpu"]), int(r["cpu_seen"])) for r in rows if int(r["workers"]) == n)
        assert [cpu for _, cpu, _ in point] == plan
        assert all(cpu == seen for _, cpu, seen in point)
        assert all(int(r["ops"]) == 2000 for r in rows if int(r["workers"]) == n)


def test_explain_runs_in_the_guest(big_guest, tmp_path):
    db = tmp_path / "db"
    rc, out = inside(
        big_guest, db, "scale", "--probe", "getppid", "--workers", "1,16", "--ops", "1000", "--reps", "1", "--explain"
    )
    assert rc == 0, out
    series = show(db)["series"][0]
    assert series["explained"], out
    # the guest's kernel has BTF, so the engine's BPF attribution runs there and names the system call
    assert [e["workers"] for e in series["explained"]] == [1, 16]
    assert "getppid() in the kernel" in series["explanation"], series["explanation"]
    # its sampled kernel stacks are named by the guest's kernel (its own build and KASLR offset), not the host's
    import oslens as api

    guest_names = {line.split()[2] for line in big_guest.kallsyms().splitlines() if len(line.split()) > 2}
    stacks = api.Store(db).run(show(db)["run"]).frames()["stacks"]
    # a stack is its cause, then frames; a frame in a module carries " [module]", and the
    # engine's own BPF programs (" [bpf]") were listed only while they were loaded
    frames = {f for s in stacks["stack"] for f in s.split(";")[1:] if not f.startswith(("0x", "["))}
    named = {f.split(" [")[0] for f in frames if not f.endswith(" [bpf]")}
    assert named and named <= guest_names, sorted(named - guest_names)[:10]


def test_noise_on_sixteen_cpus_keeps_a_readable_timeline(big_guest, tmp_path):
    db = tmp_path / "db"
    rc, out = inside(big_guest, db, "noise", "--duration", "1", "--reps", "1")
    assert rc == 0, out
    doc = show(db)
    alone = doc["phases"]["alone"]
    assert [c["cpu"] for c in alone["cpus"]] == list(range(SPEC["cpus"]))
    ran = [c["runtime_ns"] > 0 for c in alone["cpus"]]
    if big_guest.accel == "kvm":
        assert all(ran)
    else:  # 16 emulated vCPUs taking turns on the host's CPUs: a loaded host may starve one for the window
        assert sum(ran) > len(ran) // 2, ran
    report = tmp_path / "noise.html"
    rc, out = inside(big_guest, db, "report", "last", "-o", str(report))
    assert rc == 0, out
    page = report.read_text()
    # one full-width panel per CPU, in CPU order, each kept short enough that 16 fit a screen or two
    at = page.index('"facet":{"field":"panel"')
    panels = json.loads("[" + re.search(r'"sort":\[(.*?)\]', page[at:]).group(1) + "]")
    run = doc["run"]
    assert panels == [f"run {run} · CPU {c}" for c in range(SPEC["cpus"]) if f"run {run} · CPU {c}" in panels]
    assert len(panels) >= SPEC["cpus"] // 2  # nearly every CPU had a detour in a second
    heights = [int(h) for h in re.findall(r'"height":(\d+)', page[page.index("noise-timeline") :])[:1]]
    assert heights and heights[0] <= 80


def test_latency_with_one_worker_per_cpu(big_guest, tmp_path):
    db = tmp_path / "db"
    rc, out = inside(big_guest, db, "latency", "--probe", "getppid", "--workers", "max", "--ops", "500", "--reps", "1")
    assert rc == 0, out
    rows = [r for r in csv_rows(db) if r["probe"] == "getppid"]
    assert sorted(int(r["cpu"]) for r in rows) == list(range(SPEC["cpus"]))
    assert all(int(r["count"]) == 500 for r in rows)


# ------------------------------------------------------------ who may use a guest
# (the guest is the tier's: no boot of its own)

# Another local user at the port QEMU forwards to the agent: it connects,
# sends what it sends, and prints what came back (hex) once the agent closes.
STRANGER = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=120)
s.sendall(bytes.fromhex(sys.argv[2]))
got = b""
while chunk := s.recv(65536):
    got += chunk
print(got.hex())
"""


def _frame(kind: bytes, data: bytes) -> bytes:
    return kind + len(data).to_bytes(4, "little") + data  # engine/guest/wire.h


def _tally(guest) -> dict:
    """The agent's count of commands begun (this one among them) and of
    connections refused, asked as oslens asks, with the key."""
    proc = subprocess.run([*guest.engine_argv()[:-1], "@tally"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_appscale_runs_a_built_in_workload_in_the_guest_on_the_cpus_planned(big_guest, tmp_path):
    """No cgroup of the host's and no descriptor but stdout and stderr reach
    a command in the guest: the engine there starts it on the point's vCPUs
    (affinity), its input made there, its output kept off the records."""
    db = tmp_path / "a.db"
    rc, out = inside(big_guest, db, "appscale", "--workload", "psearchy", "--size", "200", "--mode", "process",
                     "--cpu-counts", f"1,{SPEC['cpus']}", "--placement", "spread", "--reps", "1", "-q")  # fmt: skip
    assert rc == 0, out
    with engine.inside(big_guest):
        planned = {n: engine.placement(n, "spread") for n in (1, SPEC["cpus"])}
    doc = json.loads(oslens("export", "last", "--format", "json", db=db).stdout)
    points = [r for r in doc["records"] if r["type"] == "point"]
    assert {p["n"]: p["cpus"] for p in points} == planned
    for p in points:
        assert p["status"] == "ok" and p["wall_ns"] > 0 and p["confinement"] == "affinity (inside the kvm)", p
        assert p["argv"][p["argv"].index("--dir") + 1].startswith("/oslens/")
    assert doc["run"]["machine"]["environment"]["name"] == "kvm"


@needs_guest
def test_study_kernels_runs_in_a_guest_of_each_kernel_and_compare_judges_two_runs_together(tmp_path):
    """`--kernels`: one stored run per kernel, in a guest booting it; the
    finding one run cannot tell ("kernel versions barely change
    scalability") judged by `compare` of two runs, never from runs that
    differ in more than their kernel (a guest and the host), nor
    (tests/test_study_kernels.py) from the same kernel twice or an emulated guest."""
    image = kvm.guest_kernel(None)[0]
    release = image.name.removeprefix("vmlinuz-")
    db = tmp_path / "k.db"
    before = leftovers.guests()
    p = oslens("study", "kernels", "--kernels", str(image), "--guest", f"accel={accel()},cpus=2", "--apps",
               "strmatch", "--cpu-counts", "1,2", "--reps", "1", "--json", db=db)  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    ((kernel, run_id),) = [(r["kernel"], r["run"]) for r in doc["runs"]]
    assert kernel == release and doc["not_run"] == [] and doc["across"]["verdict"] == "cannot tell here"
    assert "one run measures one kernel" in doc["across"]["reason"]
    run = show(db, str(run_id))
    assert run["params"]["kernel"] == release and run["params"]["apps"] == ["strmatch"]
    env = run["machine"]["environment"]
    assert env["name"] == "kvm" and env["accel"] == accel() and run["machine"]["kernel"]["release"] == release
    rows = [r for r in json.loads(oslens("export", str(run_id), "--format", "json", db=db).stdout)["records"]
            if r["type"] == "point"]  # fmt: skip
    assert sorted(r["n"] for r in rows) == [1, 2] and all(r["status"] == "ok" for r in rows)
    assert leftovers.guests() == before
    # the same study on the host, then both compared: the finding is judged from the two together
    counts = ",".join(map(str, sorted({1, min(2, len(os.sched_getaffinity(0)))})))
    p = oslens("study", "kernels", "--apps", "strmatch", "--cpu-counts", counts, "--reps", "1", "-q", db=db)
    assert p.returncode == 0, p.stderr
    cmp = json.loads(oslens("compare", str(run_id), "last", "--json", db=db).stdout)
    (row,) = [f for f in cmp["findings"] if f["id"] == "kernels_no_improvement"]
    assert row["a_verdict"] == row["b_verdict"] and f"runs {run_id} and" in row["a_here"]
    # a guest beside the host: more than the kernel differs between them, which is said, not judged
    assert row["a_verdict"] == "cannot tell here" and "differ in more than their kernel" in row["a_here"], row
    assert "environment a kvm" in row["a_here"], row


@pytest.mark.skipif(not can_run_as_nobody(), reason="needs root, setpriv and a 'nobody' user")
def test_another_user_cannot_run_anything_in_the_guest(big_guest):
    as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    argv = _frame(b"A", b"@facts\0")
    attempts = {
        "no key": argv,  # what the agent took from anyone before it asked for a key
        "a wrong key": _frame(b"K", secrets.token_bytes(32)) + argv,
        "a key of the wrong length": _frame(b"K", secrets.token_bytes(33)) + argv,
    }

    def attempt(frames: bytes) -> bytes:
        proc = subprocess.run(
            [*as_nobody, "/usr/bin/python3", "-c", STRANGER, str(big_guest.port), frames.hex()],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return bytes.fromhex(proc.stdout.strip())

    for what, frames in attempts.items():
        # refused, and nothing else: no output, no exit status of a command
        assert attempt(frames) == _frame(b"R", b""), what
    before = _tally(big_guest)
    assert before["refused"] == len(attempts)  # since the guest booted: no other test is refused
    assert attempt(attempts["no key"]) == _frame(b"R", b"")
    after = _tally(big_guest)
    assert after["refused"] == before["refused"] + 1
    assert after["run"] == before["run"] + 1  # the @tally that read it, nothing of the stranger's
    # the key is where only its user reaches it, and nowhere else a stranger can read
    key = big_guest.key_file.read_bytes()
    assert big_guest.key_file.stat().st_mode & 0o777 == 0o600 and big_guest.dir.stat().st_mode & 0o777 == 0o700
    assert subprocess.run([*as_nobody, "cat", str(big_guest.key_file)], capture_output=True).returncode != 0
    assert not (big_guest.dir / "initramfs.cpio").exists()  # QEMU loaded it at start
    cmdline = Path(f"/proc/{big_guest.proc.pid}/cmdline").read_bytes()
    assert key not in cmdline and key.hex().encode() not in cmdline
    # oslens itself, with the key, still runs what it asks
    with engine.inside(big_guest):
        assert len(engine.topology()["cpus"]) == SPEC["cpus"]


def test_the_relay_believes_only_an_agent_that_proves_the_key(tmp_path):
    """Whoever else listens at the port (one taken before QEMU bound it, or
    after QEMU died) is sent the host's half of the key alone, and what it
    answers never comes out of the relay as the engine's."""
    relay = engine.engine_path().with_name(kvm.GUEST)
    key = secrets.token_bytes(kvm.KEY_LEN)
    key_file = tmp_path / "key"
    key_file.write_bytes(key)
    forged = _frame(b"O", b'{"type":"topology","forged":true}\n') + _frame(b"X", bytes(4))
    for proof in (b"", _frame(b"K", secrets.token_bytes(32))):
        with socket.create_server(("127.0.0.1", 0)) as impostor:
            relay_proc = subprocess.Popen(
                [relay, "relay", str(impostor.getsockname()[1]), key_file, "/oslens/oslens-engine", "topology"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            conn, _ = impostor.accept()
            with conn, conn.makefile("rb") as stream:
                told = b""  # what the relay said, up to its command
                while True:
                    head = stream.read(5)
                    told += head + stream.read(int.from_bytes(head[1:], "little"))
                    if head[:1] in (b"A", b""):
                        break
                conn.sendall(proof + forged)
            out, err = relay_proc.communicate(timeout=60)
        assert relay_proc.returncode == 1 and b"forged" not in out, (out, err)
        assert "is not the guest's agent" in err.decode()
        assert key[32:] not in told  # the guest's half is the agent's to say
