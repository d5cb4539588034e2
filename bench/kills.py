#!/usr/bin/env python3
"""A campaign of random kills (issue 13, item 10): not a test, a figure.

Runs short `scale`, `latency`, `noise`, `profile` and `appscale` commands
and, at a random moment of each, sends SIGINT, SIGTERM or SIGKILL to the top
oslens process, to an engine, to a worker (an engine's child: a probe's
worker, or the profiled command) or to the whole process group. Then starts
one more oslens (`oslens runs`, which sweeps what dead ones left) and counts
what is still there from the killed run: processes of its session, SysV
semaphore sets its engines wrote down, temporary directories, its cgroups,
the BPF programs its processes held. At the end: the store's
`PRAGMA integrity_check`, and every completed run read back with `show`.

    PYTHONPATH=src .venv/bin/python bench/kills.py --kills 100 --seed 1

Everything goes to a private store, TMPDIR and runtime directory (as root,
cgroups and BPF are the machine's). Exit status 0 if nothing leaked and no
run is damaged, 1 otherwise, 2 for bad usage."""

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
from pathlib import Path

# run from a checkout as well as from the installed package
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from oslens import engine, leftovers, runtime  # noqa: E402

SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}
TARGETS = ("top", "engine", "worker", "group")
LEAK_KINDS = ("processes", "sems", "tmpdirs", "cgroups", "bpf")


def commands(ncpu: int) -> dict[str, list[list[str]]]:
    two = "1,2" if ncpu >= 2 else "1"
    scale = [
        ["scale", "--probe", p, "--workers", two, "--duration", "0.5", "--reps", "2", "--warmup", "0"]
        for p in ("sem", "semop", "mmap:own-file", "fault:file", "fork", "socket:unix", "open:shared")
    ]
    scale.append(["scale", "--probe", "sem,pingpong:pipe", "--mode", "thread", "--workers", two, "--duration", "0.5"])
    latency = [["latency", "--probe", "semop,getppid,fault:file", "--duration", "0.5", "--reps", "1"]]
    if ncpu >= 2:
        latency.append(["latency", "--probe", "getppid", "--compete", "sem", "--duration", "1", "--reps", "1"])
    return {
        "scale": scale,
        "latency": latency,
        "noise": [["noise", "--cpus", "0", "--duration", "2"]],
        "profile": [["profile", "--", "sh", "-c", "for i in 1 2 3 4 5 6; do ls -R /usr/lib >/dev/null; done"]],
        "appscale": [
            ["appscale", "--workload", "psearchy", "--cpu-counts", two, "--reps", "1", "--size", "2000"],
            ["appscale", "--cpu-counts", "1", "--reps", "1", "--", "sleep", "2"],
        ],
    }


# ------------------------------------------------------------- looking


def targets(sid: int, engine: str) -> dict[str, list[int]]:
    procs = leftovers.session_processes(sid)
    engines = [p for p in procs if leftovers.exe_of(p).startswith(engine) and p != sid]
    workers = [p for p, st in procs.items() if int(st[2]) in engines]
    return {"top": [sid] if sid in procs else [], "engine": engines, "worker": workers, "group": [sid] if procs else []}


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


def one_kill(args, env: dict, cmd: list[str], target: str, sig: str, rng: random.Random) -> dict:
    tmp = Path(env["TMPDIR"])
    runtime_dir = Path(env["OSLENS_RUNTIME_DIR"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "oslens", "-q", *cmd],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    sid = proc.pid
    LIVE_SESSIONS.add(sid)
    row = {"command": cmd[0], "argv": " ".join(cmd), "target": target, "signal": sig, "delivered": False}
    known: set[tuple[int, int]] = set()
    moment = time.monotonic() + rng.uniform(args.min_delay, args.max_delay)
    victim = None
    while proc.poll() is None:
        known |= ledger_sems(runtime_dir)
        if time.monotonic() >= moment:
            candidates = targets(sid, args.engine)[target]
            if candidates:
                victim = rng.choice(candidates)
                break
        time.sleep(0.01)
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
    try:
        proc.wait(timeout=args.stop_timeout)
    except subprocess.TimeoutExpired:
        row["hung"] = True  # the top did not end: itself a finding; end it
        os.killpg(sid, signal.SIGKILL)
        proc.wait()
    row["status"] = proc.returncode
    known |= ledger_sems(runtime_dir)
    progs |= leftovers.bpf_of_session(sid)

    # The next start: it sweeps what the dead left.
    sweep(env)
    LIVE_SESSIONS.discard(sid)
    have = runtime.sysv_sems()
    row["leaks"] = {
        "processes": len(leftovers.session_processes(sid)),
        "sems": sum(1 for i, k in known if have.get(i) == k),
        "tmpdirs": len(glob.glob(f"{tmp}/oslens.*")),
        "cgroups": len(leftovers.cgroup_dirs(sid)),
        "bpf": len(leftovers.bpf_still_loaded(progs | leftovers.bpf_of_session(sid))),
    }
    if row["leaks"]["processes"]:  # leave nothing for the next kill to be charged with
        os.killpg(sid, signal.SIGKILL)
    for d in glob.glob(f"{tmp}/oslens.*"):
        shutil.rmtree(d, ignore_errors=True)
    return row


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
        print(f"kills.py: {message}", file=sys.stderr)
        sys.exit(2)


def main() -> int:
    ap = OneLineParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=positive_int, default=100, help="signals delivered (default 100)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: chosen and printed)")
    ap.add_argument("--min-delay", type=float, default=0.2, help=argparse.SUPPRESS)
    ap.add_argument("--max-delay", type=float, default=3.0, help=argparse.SUPPRESS)
    ap.add_argument("--stop-timeout", type=float, default=90.0, help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="also print every kill as JSON lines")
    args = ap.parse_args()
    if not 0 <= args.min_delay <= args.max_delay:
        ap.error("--min-delay must be between 0 and --max-delay")
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    rng = random.Random(seed)

    args.engine = str(engine.engine_path())
    ncpu = engine.topology()["available"]
    cmds = commands(ncpu)

    # SIGTERM (a job's time limit, `timeout`) ends the campaign through its finally, as ^C does
    signal.signal(signal.SIGTERM, _stopped)
    work = Path(tempfile.mkdtemp(prefix="oslens-kills-"))
    (work / "tmp").mkdir()
    db = work / "store.db"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
        "OSLENS_DB": str(db),
        "TMPDIR": str(work / "tmp"),
        "OSLENS_RUNTIME_DIR": str(work / "runtime"),
    }
    print(f"seed {seed}; {args.kills} kills; work in {work}", file=sys.stderr)
    rows, attempts = [], 0
    try:
        while len(rows) < args.kills and attempts < 4 * args.kills:
            attempts += 1
            kind = rng.choice(sorted(cmds))
            cmd = rng.choice(cmds[kind])
            target, sig = rng.choice(TARGETS), rng.choice(sorted(SIGNALS))
            row = one_kill(args, env, cmd, target, sig, rng)
            if not row["delivered"]:
                continue  # it ended first, or had no such process then: draw again
            rows.append(row)
            bad = {k: v for k, v in row["leaks"].items() if v}
            print(
                f"{len(rows):3d} {kind:<8} {target:<6} {sig:<7} exit {row['status']:>4}"
                + (" HUNG" if row.get("hung") else "")
                + (f"  LEFT {bad}" if bad else ""),
                file=sys.stderr,
            )
            if args.json:
                print(json.dumps(row))
        store = integrity(env, db)
    finally:
        for sid in LIVE_SESSIONS:  # stopped mid-kill: end that session and sweep before the ledgers go
            try:
                os.killpg(sid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if LIVE_SESSIONS:
            sweep(env)
        shutil.rmtree(work, ignore_errors=True)

    # -- the figures
    by = defaultdict(Counter)
    for r in rows:
        by[r["command"]][(r["target"], r["signal"])] += 1
    cols = [(t, s) for t in TARGETS for s in sorted(SIGNALS)]
    print(f"\nkills by command, target and signal (seed {seed}, {len(rows)} kills, {attempts} attempts)")
    print(f"{'command':<10}" + "".join(f"{t[:6] + '/' + s[3:]:>13}" for t, s in cols) + f"{'total':>7}")
    for c in sorted(by):
        print(f"{c:<10}" + "".join(f"{by[c][k]:>13}" for k in cols) + f"{sum(by[c].values()):>7}")
    print(f"{'total':<10}" + "".join(f"{sum(by[c][k] for c in by):>13}" for k in cols) + f"{len(rows):>7}")

    total = {k: sum(r["leaks"][k] for r in rows) for k in LEAK_KINDS}
    runs_with = {k: sum(1 for r in rows if r["leaks"][k]) for k in LEAK_KINDS}
    hung = sum(1 for r in rows if r.get("hung"))
    print("\nleftovers after the next start")
    for k in LEAK_KINDS:
        print(f"  {k:<10} {total[k]:>4}  (in {runs_with[k]} kills)")
    print(f"  {'hung':<10} {hung:>4}  (the top process did not end within {args.stop_timeout:g} s)")
    print("\nstore")
    print(f"  PRAGMA integrity_check: {store['integrity_check']}")
    print(f"  runs: {store['runs']} {store.get('statuses', {})}; still 'running': {store['running']}")
    print(f"  completed runs unreadable: {len(store['unreadable'])} {store['unreadable'] or ''}")
    ok = not any(total.values()) and not hung and store["integrity_check"] in ("ok", "no store")
    ok = ok and not store["unreadable"] and not store["running"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
