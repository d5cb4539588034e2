#!/usr/bin/env python3
"""A campaign of random kills and bad invocations (issue 17, item 12; issue
13, item 10): not a test, a figure.

Kills: short `scale`, `latency`, `noise`, `profile`, `appscale` and
`cluster` commands, each sent SIGINT, SIGTERM or SIGKILL at a random
moment: the top oslens process, an engine (a cluster job's rank), a worker
(an engine's child: a probe's worker, or the profiled command), a cluster
job's launcher (mpirun), or the whole process group. What the killed run left is
counted twice: once everything of its session has ended (before any other
oslens starts) and after one more oslens start (`oslens runs`, which sweeps
what dead ones left): processes of its session, SysV semaphore sets its
engines wrote down, temporary directories, its cgroups, the BPF programs
its processes held, block devices it made (`oslens io`), a device's I/O
scheduler it changed and did not put back, its QEMU guests and containers
(`--in kvm`, `--in container`), and Open MPI's shared-memory segments and
oslens's directories for them in /dev/shm (`cluster`). Commands that need what this machine lacks
(root for devices, a container runtime, a guest) are left out, and the
campaign says so. A hang: the top process still there HANG_S after the
signal (but for a SIGINT to a worker, which workers ignore: that run goes
on). A traceback: one on the killed command's stderr. An ignored stop: a
SIGINT or SIGTERM to the command or its group after which it ran to a
normal end (exit 0).

Bad invocations: every command's options given values they must refuse
(empty, '²', negative, not a number, beyond any integer, markup…) and bad
run references, drawn at random from the whole list. Each must exit 2 with
one line on stderr, no traceback, no run stored, within REFUSE_S.

At the end, the store's `PRAGMA integrity_check`, and every completed run
read back with `show`.

    PYTHONPATH=src .venv/bin/python bench/campaign.py -n 100 --seed 1

Everything goes to a private store, TMPDIR and runtime directory (as root,
cgroups and BPF are the machine's). Exit status 0 if every trial was clean
and the store is sound, 1 otherwise, 2 for bad usage."""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

# run from a checkout as well as from the installed package
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from oslens import engine, envs, leftovers, runtime  # noqa: E402
from oslens.blockdev import devices  # noqa: E402
from oslens.errors import UsageError  # noqa: E402

SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}
TARGETS = ("top", "engine", "worker", "launcher", "group")
LAUNCHERS = ("orterun", "mpirun", "mpiexec", "prterun")  # a cluster job's launcher, by its executable
LEAK_KINDS = (
    "processes", "sems", "tmpdirs", "cgroups", "bpf", "devices", "schedulers", "guests", "containers", "mpi_shm",
)  # fmt: skip
SCHEDULER = "mq-deadline"  # what the io trial on the campaign's own device sets; it starts at none
HANG_S = 10.0  # a stop asked of the top or its group must end it sooner
REFUSE_S = 5.0  # a refusal must come sooner (it comes before anything runs)


@dataclass
class Machine:
    """What the commands under trial can use here, and why not where not."""

    ncpu: int
    device_kinds: list[str] = field(default_factory=list)  # zram, loop: what oslens io can make
    user_device: str | None = None  # a loop device the campaign made, as a user's device
    container: str | None = None  # the container runtime --in container uses
    guest: str | None = None  # the --in kvm spec that works here
    mpi: bool = False  # oslens cluster can run here (mpirun and oslens-engine-mpi)
    missing: list[str] = field(default_factory=list)

    @classmethod
    def look(cls, ncpu: int) -> "Machine":
        m = cls(ncpu)
        for kind, why in devices.available_kinds().items():
            if why:
                m.missing.append(f"io on {kind}: {why}")
            else:
                m.device_kinds.append(kind)
        try:
            m.container = envs.parse("container").runtime
        except UsageError as e:
            m.missing.append(f"--in container: {e}")
        for spec in ("kvm:cpus=1,mem=512M", "kvm:cpus=1,mem=512M,accel=tcg"):
            try:
                envs.parse(spec)
                m.guest = spec
                break
            except UsageError as e:
                why = str(e)
        if m.guest is None:
            m.missing.append(f"--in kvm: {why}")
        try:
            engine.mpi_engine_path()
            m.mpi = shutil.which("mpirun") is not None
            if not m.mpi:
                m.missing.append("cluster: no mpirun")
        except UsageError as e:
            m.missing.append(f"cluster: {e}")
        return m

    def make_user_device(self, work: Path) -> None:
        """A loop device on a file of the campaign's, standing for a user's
        disk: io trials set its scheduler, which a killed run must not leave."""
        if "loop" not in self.device_kinds:
            return
        backing = work / "user-disk"
        with open(backing, "wb") as f:
            f.truncate(64 << 20)
        p = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True)
        dev = p.stdout.strip()
        sched = Path(f"/sys/block/{Path(dev).name}/queue/scheduler")
        if p.returncode != 0 or not sched.exists() or SCHEDULER not in sched.read_text():
            self.missing.append(f"--scheduler on a device of the user's: no loop device with {SCHEDULER}")
            if p.returncode == 0:
                subprocess.run(["losetup", "--detach", dev], capture_output=True)
            return
        sched.write_text("none")
        self.user_device = dev

    def remove_user_device(self) -> None:
        if self.user_device:
            subprocess.run(["losetup", "--detach", self.user_device], capture_output=True)

    def scheduler_changed(self) -> int:
        if not self.user_device:
            return 0
        text = Path(f"/sys/block/{Path(self.user_device).name}/queue/scheduler").read_text()
        return 0 if "[none]" in text else 1

    def objects(self) -> dict[str, set[str]]:
        """What exists now of what a killed run may leave outside its session."""
        return {
            "devices": leftovers.block_devices() - ({Path(self.user_device).name} if self.user_device else set()),
            "guests": set(leftovers.guests()),
            "containers": set(leftovers.containers(self.container)),
            # the segments a job left in /dev/shm itself, and oslens's own directories for them
            "mpi_shm": set(glob.glob("/dev/shm/vader_segment.*")) | set(glob.glob("/dev/shm/oslens.*.mpi")),
        }


def commands(machine: Machine) -> dict[str, list[list[str]]]:
    ncpu = machine.ncpu
    two = "1,2" if ncpu >= 2 else "1"
    scale = [
        ["scale", "--probe", p, "--workers", two, "--duration", "0.5", "--reps", "2", "--warmup", "0"]
        for p in ("sem", "semop", "mmap:own-file", "fault:file", "fork", "socket:unix", "open:shared")
    ]
    scale.append(["scale", "--probe", "sem,pingpong:pipe", "--mode", "thread", "--workers", two, "--duration", "0.5"])
    latency = [["latency", "--probe", "semop,getppid,fault:file", "--duration", "0.5", "--reps", "1"]]
    if ncpu >= 2:
        latency.append(["latency", "--probe", "getppid", "--compete", "sem", "--duration", "1", "--reps", "1"])
    io = [
        ["io", "--target", kind, "--size", "32M", "--workers", two, "--duration", "0.5", "--reps", "2",
         "--qd", "4", "--warmup", "0"]
        for kind in machine.device_kinds
    ]  # fmt: skip
    if machine.user_device:
        io.append(["io", "--target", machine.user_device, "--scheduler", SCHEDULER, "--engine", "pread",
                   "--workers", two, "--duration", "0.5", "--reps", "2", "--warmup", "0"])  # fmt: skip
    environments = []
    if machine.container:
        environments.append(["scale", "--in", "container", "--probe", "dup,sem", "--workers", two,
                             "--duration", "0.5", "--reps", "2", "--warmup", "0"])  # fmt: skip
    if machine.guest:
        environments.append(["noise", "--in", machine.guest, "--duration", "1", "--reps", "2", "--no-bpf"])
    ranks = str(min(2, ncpu))
    cluster = [
        ["cluster", "noise", "--duration", "2", "--ranks", ranks],
        ["cluster", "bsp", "--compute-us", "500", "--iterations", "4000", "--ranks", ranks],
        ["cluster", "latency", "--probe", "getppid,dup", "--duration", "0.3", "--reps", "2", "--ranks", ranks],
    ]
    return {
        "scale": scale,
        "latency": latency,
        "noise": [["noise", "--cpus", "0", "--duration", "2"]],
        "profile": [["profile", "--", "sh", "-c", "for i in 1 2 3 4 5 6; do ls -R /usr/lib >/dev/null; done"]],
        "appscale": [
            ["appscale", "--workload", "psearchy", "--cpu-counts", two, "--reps", "1", "--size", "2000"],
            ["appscale", "--cpu-counts", "1", "--reps", "1", "--", "sleep", "2"],
        ],
        **({"io": io} if io else {}),
        **({"in-env": environments} if environments else {}),
        **({"cluster": cluster} if machine.mpi else {}),
    }


# ------------------------------------------------------------- looking


def targets(sid: int, engine: str) -> dict[str, list[int]]:
    """The processes of session sid a signal may be sent to. An engine is
    an installed executable (oslens-engine*, and oslens-guest's relay, which
    stands for an engine in a guest) that oslens started, not one an engine
    forked or exec'd: those are its workers (a forked copy of the engine, or
    a fresh worker image), which ignore SIGINT as every worker does."""
    procs = leftovers.session_processes(sid)
    ours = {p for p in procs if leftovers.exe_of(p).startswith(engine)}
    engines = [p for p in ours if p != sid and int(procs[p][2]) not in ours]
    # below an engine: its workers (a forked copy of the engine, or a fresh
    # worker image), their partners, what it runs (a profiled command)
    workers = [p for p, st in procs.items() if p not in engines and int(st[2]) in ours]
    launchers = [p for p in procs if os.path.basename(leftovers.exe_of(p)) in LAUNCHERS]
    return {
        "top": [sid] if sid in procs else [],
        "engine": engines,
        "worker": workers,
        "launcher": launchers,
        "group": [sid] if procs else [],
    }


def ledger_sems(runtime_dir: Path) -> set[tuple[int, int]]:
    """(id, key) of every set an engine ledger there says it made or was making."""
    have = runtime.sysv_sems()
    out = set()
    for ledger in runtime_dir.glob("*/engine.*"):
        made, unsure = runtime.ledger_sem_keys(ledger)
        out |= {(i, k) for i, k in have.items() if made.get(k) == i or k in unsure}
    return out


# ---------------------------------------------------------------- doing


# The session being killed now: if the campaign itself is stopped, it is ended
# and swept before the work directory (where its runtime ledgers are) goes.
LIVE_SESSIONS: set[int] = set()


def _stopped(signum, frame):
    raise KeyboardInterrupt


def sweep(env: dict) -> None:
    """One more oslens start with the campaign's runtime directory: it sweeps what the dead left."""
    subprocess.run([sys.executable, "-m", "oslens", "-q", "runs"], env=env, capture_output=True, timeout=120)


def leaks(sid: int, known: set[tuple[int, int]], progs: set[int], tmp: Path, machine: Machine,
          baseline: dict[str, set[str]]) -> dict[str, int]:  # fmt: skip
    have = runtime.sysv_sems()
    now = machine.objects()
    return {
        **{k: len(now[k] - baseline[k]) for k in now},
        "schedulers": machine.scheduler_changed(),
        "processes": len(leftovers.session_processes(sid)),
        "sems": sum(1 for i, k in known if have.get(i) == k),
        "tmpdirs": len(glob.glob(f"{tmp}/oslens.*")),
        "cgroups": len(leftovers.cgroup_dirs(sid)),
        "bpf": len(leftovers.bpf_still_loaded(progs | leftovers.bpf_of_session(sid), settle_s=1.0)),
    }


def pick_victim(proc: subprocess.Popen, args, target: str, runtime_dir: Path, after_s: float,
                rng: random.Random) -> tuple[int | None, set[tuple[int, int]]]:  # fmt: skip
    """A process of the target's kind in the command's session, chosen at
    random once `after_s` have passed (None if the command ended first), and
    the SysV sets its ledgers named meanwhile."""
    known: set[tuple[int, int]] = set()
    moment = time.monotonic() + after_s
    while proc.poll() is None:
        known |= ledger_sems(runtime_dir)
        if time.monotonic() >= moment:
            candidates = targets(proc.pid, args.engine)[target]
            if candidates:
                return rng.choice(candidates), known
        time.sleep(0.01)
    return None, known


def stops_within(proc: subprocess.Popen, first_s: float, then_s: float) -> bool:
    """Whether the command ended within first_s; if not, it is given then_s
    more, and its session killed after that."""
    try:
        proc.wait(timeout=first_s)
        return True
    except subprocess.TimeoutExpired:
        pass
    try:
        proc.wait(timeout=then_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return False


def one_kill(args, env: dict, machine: Machine, cmd: list[str], target: str, sig: str, rng: random.Random) -> dict:
    tmp = Path(env["TMPDIR"])
    runtime_dir = Path(env["OSLENS_RUNTIME_DIR"])
    baseline = machine.objects()
    err = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "oslens", "-q", *cmd],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=err,
        start_new_session=True,
    )
    sid = proc.pid
    LIVE_SESSIONS.add(sid)
    row = {"command": cmd[0], "argv": " ".join(cmd), "target": target, "signal": sig, "delivered": False}
    # a guest or a container takes seconds to start: a moment may fall after that too
    late = 4 if "--in" in cmd else 1
    victim, known = pick_victim(
        proc, args, target, runtime_dir, rng.uniform(args.min_delay, args.max_delay * late), rng
    )
    progs = leftovers.bpf_of_session(sid)
    if victim is not None:
        try:
            if target == "group":
                os.killpg(sid, SIGNALS[sig])
            else:
                os.kill(victim, SIGNALS[sig])
            row["delivered"] = True
        except ProcessLookupError:
            pass
    signalled = time.monotonic()
    ignored = target == "worker" and sig == "SIGINT"  # workers ignore it: the run goes on
    if not stops_within(proc, args.stop_timeout if ignored else HANG_S, args.stop_timeout):
        row["hung"] = True
    row["stop_s"] = round(time.monotonic() - signalled, 3)
    row["status"] = proc.returncode
    # a stop asked of the command or its group that it went on past, to a
    # normal end (an engine's may come as it ends its last repetition: the
    # command then goes on to the next engine, rightly)
    row["ignored"] = row["delivered"] and sig != "SIGKILL" and target in ("top", "group") and proc.returncode == 0
    err.seek(0)
    row["traceback"] = "Traceback" in err.read()
    err.close()
    known |= ledger_sems(runtime_dir)
    progs |= leftovers.bpf_of_session(sid)
    # what the killed run left before any other oslens starts, once its
    # session has ended (an engine dies with its oslens, in moments)
    deadline = time.monotonic() + HANG_S
    while leftovers.session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.05)
    row["before"] = leaks(sid, known, progs, tmp, machine, baseline)
    sweep(env)  # the next start: it sweeps what the dead left
    LIVE_SESSIONS.discard(sid)
    row["leaks"] = leaks(sid, known, progs, tmp, machine, baseline)
    if row["leaks"]["processes"]:  # leave nothing for the next kill to be charged with
        os.killpg(sid, signal.SIGKILL)
    for d in glob.glob(f"{tmp}/oslens.*"):
        shutil.rmtree(d, ignore_errors=True)
    return row


# ------------------------------------------------------ bad invocations

HUGE = "9" * 30  # beyond any integer the engine or SQLite holds
NOT_NUMBERS = ["", "²", "abc", "[/]", "nan", "1e999", "-1", HUGE]
MEASURE = ["--duration", "0.05", "--reps", "1"]  # what would run if a bad value were taken


def bad_invocations(ncpu: int) -> list[list[str]]:
    """Every command's options with values each must refuse, and bad run
    references: none of these may measure, store or print a traceback."""
    options = {
        # option: the values it must refuse beyond NOT_NUMBERS
        "scale": {"--workers": ["0", str(ncpu + 1), "1-", "max:0"], "--duration": ["0"], "--reps": ["0"],
                  "--warmup": [], "--ops": ["0"], "--interval": ["0"], "--probe": ["nope", "dup:nope", ",", "dup:"],
                  "--opt": ["=", "pages", "pages=x", "nope=1"], "--mode": ["bogus"], "--placement": ["bogus"]},
        "latency": {"--probe": ["nope", "[/]"], "--workers": ["0"], "--duration": ["0"], "--reps": ["0"],
                    "--mix": ["nope", "getppid:0"], "--compete": ["nope", "sem:x:9999"]},
        "noise": {"--cpus": [str(ncpu + 5), "0-", "3-1", "0:0"], "--duration": ["0"], "--threshold-ns": ["0"],
                  "--reps": ["0"], "--warmup": [], "--ftq-us": ["0"], "--step-us": ["0"], "--compete": ["nope"]},
        "profile": {"--pid": ["0", str(2**31), str(2**63)], "--duration": ["0"], "--time-limit": ["0"]},
        "appscale": {"--workload": ["nope"], "--cpu-counts": ["0", str(ncpu + 1)], "--reps": ["0"], "--size": ["0"],
                     "--time-limit": ["0"]},
        "io": {"--target": ["/nonexistent", "/dev/null", "/etc/hostname"], "--engine": ["nope"], "--qd": ["0"],
               "--bs": ["0", "100"], "--span": ["0"], "--workers": ["0"], "--duration": ["0"], "--reps": ["0"],
               "--size": ["0"], "--scheduler": ["nope"], "--taskrun": ["nope", "3"]},
    }  # fmt: skip
    numeric_free = {"--probe", "--opt", "--mode", "--placement", "--mix", "--compete", "--workload", "--engine",
                    "--target", "--scheduler", "--cpus", "--workers", "--cpu-counts", "--taskrun"}  # fmt: skip
    out = []
    for command, opts in options.items():
        base = MEASURE if command in ("scale", "latency", "noise", "io") else []
        for opt, values in opts.items():
            extra = ["", "²", "[/]", HUGE] if opt in numeric_free else NOT_NUMBERS
            # a command to run, but for profile --pid, which takes none
            tail = ["--", "true"] if command in ("profile", "appscale") and opt != "--pid" else []
            for v in dict.fromkeys(values + extra):
                out.append([command, *base, opt, v, *tail])
    for ref in ["", "²", "-1", "999", HUGE, "[/]", "last1", "1.0"]:
        out += [["show", ref], ["export", ref], ["report", ref], ["compare", ref, "1"], ["compare", "1", ref]]
    out += [
        ["export", "1", "-o", "/nonexistent-dir/x.csv", "--format", "csv"],
        ["export", "1", "--format", "xml"],
        ["report", "1", "-o", "/nonexistent-dir/r.html"],
        ["report", "1", "--format", "png", "-o", "/etc/hostname"],
        ["report", "1", "1"],
        ["profile", "-o", "/nonexistent-dir/p.txt", "--", "true"],
        ["profile", "--", "/nonexistent/command"],
        ["profile"],
        ["runs", "--db", ""],
        ["show", "1", "--db", ""],
        ["scale", *MEASURE, "--db", ""],
        ["scale", *MEASURE, "--explain", "--mode", "thread", "--probe", "nope"],
        ["nope"],
        ["scale", "--nope"],
    ]
    return out


def one_refusal(env: dict, db: Path, argv: list[str]) -> dict:
    before = stored_runs(db)
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "oslens", *argv], env=env, capture_output=True, text=True, timeout=120,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, err = None, (e.stderr or b"").decode(errors="replace")  # bytes, even with text=True
    took = time.monotonic() - t0
    lines = [line for line in err.splitlines() if line.strip()]
    return {
        "argv": argv,
        "status": rc,
        "seconds": round(took, 2),
        "traceback": "Traceback" in err,
        "lines": len(lines),
        "stored": stored_runs(db) - before,
        "said": lines[-1] if lines else "",
    }


def stored_runs(db: Path) -> int:
    if not db.exists():
        return 0
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM run").fetchone()[0]
    finally:
        con.close()


def integrity(env: dict, db: Path) -> dict:
    if not db.exists():
        return {"integrity_check": "no store", "runs": 0, "complete": 0, "unreadable": [], "running": 0}
    con = sqlite3.connect(db)
    check = con.execute("PRAGMA integrity_check").fetchone()[0]
    con.close()
    p = subprocess.run([sys.executable, "-m", "oslens", "runs", "--json"], env=env, capture_output=True, text=True)
    runs = json.loads(p.stdout or "[]")
    complete = [r for r in runs if r["status"] == "complete"]
    unreadable = []
    for r in complete:
        q = subprocess.run(
            [sys.executable, "-m", "oslens", "show", str(r["id"]), "--json"], env=env, capture_output=True, text=True
        )
        try:
            if q.returncode != 0:
                raise ValueError(q.stderr)
            json.loads(q.stdout)
        except ValueError:
            unreadable.append(r["id"])
    return {
        "integrity_check": check,
        "runs": len(runs),
        "complete": len(complete),
        "unreadable": unreadable,
        "running": sum(1 for r in runs if r["status"] == "running"),
        "statuses": dict(Counter(r["status"] for r in runs)),
    }


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {n}")
    return n


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):
        print(f"campaign.py: {message}", file=sys.stderr)
        sys.exit(2)


def kill_campaign(args, env: dict, rng: random.Random, machine: Machine) -> tuple[list[dict], int]:
    cmds = {k: v for k, v in commands(machine).items() if not args.only or k in args.only}
    if not cmds:
        return [], 0
    rows, attempts = [], 0
    while len(rows) < args.kills and attempts < 4 * args.kills:
        attempts += 1
        kind = rng.choice(sorted(cmds))
        cmd = rng.choice(cmds[kind])
        # only a cluster job has a launcher
        target = rng.choice([t for t in TARGETS if t != "launcher" or kind == "cluster"])
        sig = rng.choice(sorted(SIGNALS))
        row = one_kill(args, env, machine, cmd, target, sig, rng)
        row["command"] = kind
        if not row["delivered"]:
            continue  # it ended first, or had no such process then: draw again
        rows.append(row)
        bad = {k: v for k, v in row["leaks"].items() if v}
        print(
            f"kill {len(rows):3d} {kind:<8} {target:<6} {sig:<7} exit {row['status']:>4} {row['stop_s']:6.2f} s"
            + (" HUNG" if row.get("hung") else "")
            + (" IGNORED" if row["ignored"] else "")
            + (" TRACEBACK" if row["traceback"] else "")
            + (f"  LEFT {bad}" if bad else ""),
            file=sys.stderr,
        )
        if args.json:
            print(json.dumps(row))
    return rows, attempts


def refusal_campaign(args, env: dict, rng: random.Random, db: Path, ncpu: int) -> tuple[list[dict], int]:
    every = bad_invocations(ncpu)
    drawn = rng.sample(every, min(args.bad, len(every)))
    drawn += [rng.choice(every) for _ in range(args.bad - len(drawn))]
    rows = []
    for argv in drawn:
        row = one_refusal(env, db, argv)
        row["clean"] = (
            row["status"] == 2
            and row["lines"] == 1
            and not row["traceback"]
            and not row["stored"]
            and row["seconds"] < REFUSE_S
        )
        rows.append(row)
        if not row["clean"]:
            print(f"bad  {' '.join(map(repr, argv))}: exit {row['status']}, {row['lines']} lines, "
                  f"{row['seconds']} s, {row['stored']} stored: {row['said'][:120]}", file=sys.stderr)  # fmt: skip
        if args.json:
            print(json.dumps(row))
    return rows, len(every)


def arguments():
    ap = OneLineParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=positive_int, default=100, help="kills and bad invocations each (default 100)")
    ap.add_argument("--kills", type=int, default=None, help="kills (default N; 0: none)")
    ap.add_argument("--bad", type=int, default=None, help="bad invocations (default N; 0: none)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: chosen and printed)")
    ap.add_argument("--min-delay", type=float, default=0.2, help=argparse.SUPPRESS)
    ap.add_argument("--max-delay", type=float, default=3.0, help=argparse.SUPPRESS)
    ap.add_argument("--stop-timeout", type=float, default=90.0, help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="also print every trial as JSON lines")
    ap.add_argument("--only", action="append", metavar="KIND", help="kill only these commands (e.g. cluster)")
    args = ap.parse_args()
    args.kills = args.n if args.kills is None else args.kills
    args.bad = args.n if args.bad is None else args.bad
    if args.kills < 0 or args.bad < 0:
        ap.error("--kills and --bad take 0 or more")
    if not 0 <= args.min_delay <= args.max_delay:
        ap.error("--min-delay must be between 0 and --max-delay")
    return args


def report_store(store: dict) -> bool:
    print("\nstore")
    print(f"  PRAGMA integrity_check: {store['integrity_check']}")
    print(f"  runs: {store['runs']} {store.get('statuses', {})}; still 'running': {store['running']}")
    print(f"  completed runs unreadable: {len(store['unreadable'])} {store['unreadable'] or ''}")
    return store["integrity_check"] in ("ok", "no store") and not store["unreadable"] and not store["running"]


def main() -> int:
    args = arguments()
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    rng = random.Random(seed)

    args.engine = str(engine.engine_path().with_name("oslens-"))  # the engines and the guest's relay
    ncpu = engine.topology()["available"]
    machine = Machine.look(ncpu)

    # SIGTERM (a job's time limit, `timeout`) ends the campaign through its finally, as ^C does
    signal.signal(signal.SIGTERM, _stopped)
    work = Path(tempfile.mkdtemp(prefix="oslens-campaign-"))
    (work / "tmp").mkdir()
    db = work / "store.db"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
        "OSLENS_DB": str(db),
        "TMPDIR": str(work / "tmp"),
        "OSLENS_RUNTIME_DIR": str(work / "runtime"),
    }
    print(f"seed {seed}; {args.kills} kills, {args.bad} bad invocations; work in {work}", file=sys.stderr)
    try:
        machine.make_user_device(work)
        for why in machine.missing:
            print(f"left out: {why}", file=sys.stderr)
        # one complete run first: bad references have something to miss
        first = [sys.executable, "-m", "oslens", "-q", "scale", "--probe", "getppid", "--workers", "1", *MEASURE]
        subprocess.run(first, env=env, capture_output=True, check=True)
        kills, attempts = kill_campaign(args, env, rng, machine)
        refusals, listed = refusal_campaign(args, env, rng, db, ncpu)
        store = integrity(env, db)
    finally:
        for sid in LIVE_SESSIONS:  # stopped mid-kill: end that session and sweep before the ledgers go
            try:
                os.killpg(sid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if LIVE_SESSIONS:
            sweep(env)
        machine.remove_user_device()
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nseed {seed}")
    for why in machine.missing:
        print(f"left out: {why}")
    ok = report_kills(kills, attempts, args) if kills else True
    ok = (report_refusals(refusals, listed) if refusals else True) and ok
    ok = report_store(store) and ok
    return 0 if ok else 1


def report_kills(rows: list[dict], attempts: int, args) -> bool:
    by = defaultdict(Counter)
    for r in rows:
        by[r["command"]][(r["target"], r["signal"])] += 1
    cols = [(t, s) for t in TARGETS for s in sorted(SIGNALS)]
    print(f"kills by command, target and signal ({len(rows)} kills, {attempts} attempts)")
    print(f"{'command':<10}" + "".join(f"{t[:6] + '/' + s[3:]:>13}" for t, s in cols) + f"{'total':>7}")
    for c in sorted(by):
        print(f"{c:<10}" + "".join(f"{by[c][k]:>13}" for k in cols) + f"{sum(by[c].values()):>7}")
    print(f"{'total':<10}" + "".join(f"{sum(by[c][k] for c in by):>13}" for k in cols) + f"{len(rows):>7}")

    hung = sum(1 for r in rows if r.get("hung"))
    tracebacks = sum(1 for r in rows if r["traceback"])
    ignored = sum(1 for r in rows if r["ignored"])
    clean = sum(1 for r in rows if not (any(r["leaks"].values()) or r.get("hung") or r["traceback"] or r["ignored"]))
    stops = sorted(r["stop_s"] for r in rows if not (r["target"] == "worker" and r["signal"] == "SIGINT"))
    print(f"\nkills: trials {len(rows)}, clean {clean} (nothing left after the next start, no hang, no traceback, "
          f"not ignored)")  # fmt: skip
    print(f"  {'left':<10} {'before the next start':>22} {'after it':>9}")
    for k in LEAK_KINDS:
        before = sum(r["before"][k] for r in rows), sum(1 for r in rows if r["before"][k])
        after = sum(r["leaks"][k] for r in rows), sum(1 for r in rows if r["leaks"][k])
        print(f"  {k:<10} {before[0]:>8} (in {before[1]:>3} kills) {after[0]:>4} (in {after[1]:>3})")
    if stops:
        print(f"  stop time (signal to exit), median {stops[len(stops) // 2]:.2f} s, max {stops[-1]:.2f} s")
    print(f"  hangs: {hung} (still running {HANG_S:g} s after the signal); tracebacks: {tracebacks}")
    print(f"  stops ignored: {ignored} (SIGINT or SIGTERM to the command or its group, and it ended 0)")
    return clean == len(rows)


def report_refusals(rows: list[dict], listed: int) -> bool:
    clean = sum(1 for r in rows if r["clean"])
    print(f"\nbad invocations: trials {len(rows)} (drawn from {listed}), clean {clean} (exit 2, one line, nothing "
          f"stored, refused within {REFUSE_S:g} s)")  # fmt: skip
    print(f"  tracebacks: {sum(r['traceback'] for r in rows)}")
    print(f"  exit status not 2: {sum(r['status'] != 2 for r in rows)}")
    print(f"  more than one line: {sum(r['lines'] != 1 for r in rows)}")
    print(f"  stored runs after a refused input: {sum(r['stored'] for r in rows)}")
    secs = sorted(r["seconds"] for r in rows)
    print(f"  time to refuse: median {secs[len(secs) // 2]:.2f} s, max {secs[-1]:.2f} s")
    return clean == len(rows)


if __name__ == "__main__":
    sys.exit(main())
