"""`oslens cluster`: a single-node measurement, or the bulk-synchronous loop,
on every rank of an MPI job at once. The launcher is MPI's own (mpirun,
srun …), never one of ours; it is checked by launching a job that does
nothing before anything is measured or stored."""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import signal
import subprocess
from dataclasses import dataclass, field

from .. import engine
from ..errors import MeasurementError, UsageError
from ..invocation import Invocation
from ..parse import parse_worker_counts
from . import Plan

ROOT_OPT_IN = engine.MPI_ROOT_OPT_IN


@dataclass(frozen=True)
class ClusterPoint(Invocation):
    """One job: the engine's argv, run on every rank by the launcher."""

    label: str
    args: tuple[str, ...]
    launch: tuple[str, ...] = field(compare=False)
    # a job's argv is checked by the plain engine where it can be (`run`; not `bsp`: None)
    check_args: tuple[str, ...] | None = field(default=None, compare=False)

    def launcher(self) -> tuple[str, ...]:
        return self.launch


def launcher(launch: str | None, ranks: int | None) -> tuple[list[str], str | None]:
    """The launcher's argv and a note on what oslens added to it. The default is `mpirun -n RANKS` on this host, ranks
    left unbound (each engine takes its slice of the CPUs)."""
    if launch is not None:
        if ranks is not None:
            raise UsageError("--ranks and --launch are exclusive: the launcher says how many ranks")
        try:
            argv = shlex.split(launch)
        except ValueError as e:
            raise UsageError(f"--launch: {e}") from None
        if not argv:
            raise UsageError("--launch: an empty command")
        if not shutil.which(argv[0]):
            raise UsageError(f"--launch: {argv[0]} not found")
        if names_no_other_host(argv):  # its check job too keeps its files in oslens's directory
            engine.job_on_this_host(argv)
        return argv, None
    mpirun = shutil.which("mpirun")
    if not mpirun:
        raise UsageError(
            "no MPI launcher: mpirun not found; install Open MPI (sh scripts/install-deps.sh cluster) or give --launch"
        )
    n = 2 if ranks is None else ranks
    cpus = len(os.sched_getaffinity(0))
    if not 1 <= n <= cpus:
        raise UsageError(f"--ranks: {n} is not from 1 to {cpus}, the CPUs of this host (one rank per CPU at most)")
    argv = [mpirun, "-n", str(n), "--bind-to", "none"]
    note = None
    if os.geteuid() == 0:
        argv.append(ROOT_OPT_IN)
        note = f"ranks run as root: launched with Open MPI's {ROOT_OPT_IN}"
    engine.job_on_this_host(argv)
    return argv, note


OPEN_MPI_LAUNCHERS = ("mpirun", "mpiexec", "orterun")
# Open MPI's options that name hosts, and the batch systems whose allocation it reads
HOST_OPTIONS = ("-H", "--host", "-host", "--hostfile", "-hostfile", "--machinefile", "-machinefile",
                "--default-hostfile", "-default-hostfile", "--rankfile", "-rf")  # fmt: skip
ALLOCATIONS = ("SLURM_JOB_NODELIST", "PBS_NODEFILE", "LSB_DJOB_HOSTFILE", "LSB_HOSTS", "PE_HOSTFILE", "FLUX_URI")


def names_no_other_host(argv: list[str]) -> bool:
    """An Open MPI launcher given no host and run outside any batch
    allocation, which starts every rank here: known before its first job,
    so that job's session files too are kept private."""
    if os.path.basename(argv[0]) not in OPEN_MPI_LAUNCHERS or any(os.environ.get(v) for v in ALLOCATIONS):
        return False
    return not any(a.split("=", 1)[0] in HOST_OPTIONS or "hostfile" in a for a in argv[1:])


@dataclass(frozen=True)
class Job:
    """What the launcher starts: each rank's host and the CPUs of its share."""

    launch: tuple[str, ...]
    ranks: dict[int, tuple[str, int]]  # rank -> (host, CPUs)

    @property
    def hosts(self) -> int:
        return len({h for h, _ in self.ranks.values()})

    @property
    def fewest(self) -> tuple[int, int]:
        """The rank with the fewest CPUs, and how many: what a worker count per rank may reach."""
        rank = min(self.ranks, key=lambda r: (self.ranks[r][1], r))
        return rank, self.ranks[rank][1]

    def describe(self) -> str:
        counts = sorted({c for _, c in self.ranks.values()})
        cpus = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
        return f"{len(self.ranks)} rank(s) on {self.hosts} host(s), {cpus} CPU(s) each"


def check_launcher(argv: list[str], ours: bool = False) -> Job:
    """Launches a job whose ranks only report their share of their node's
    CPUs: a launcher that cannot start the MPI engine says so here, in one
    line, before anything is stored; one that can tells how many CPUs each
    rank will measure, which worker counts are planned from. The launcher
    oslens made (ours) has no command line of the user's to blame: its
    failures are failures to measure."""
    exe = str(engine.mpi_engine_path())
    try:
        proc = engine.run_job(["topology"], argv, timeout=60)
    except subprocess.TimeoutExpired:
        raise UsageError(f"--launch: '{shlex.join(argv)}' did not start a job within 60 s") from None
    except OSError as e:
        raise UsageError(f"--launch: {e.strerror}: {argv[0]}") from None
    ranks, chatter, started = {}, [], False
    for line in (proc.stderr + proc.stdout).splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            if line.strip() and not set(line.strip()) <= set("-"):
                chatter.append(line.strip())  # the launcher's words
            continue
        started = started or isinstance(r, dict)  # a rank's record, whole or not
        if isinstance(r, dict) and r.get("type") == "topology" and "rank" in r:
            ranks[int(r["rank"])] = (str(r.get("host", "?")), int(r["available"]))
    started = started or any(x.startswith("{") for x in chatter)  # a record cut short
    chatter = [x for x in chatter if not x.startswith("{")]
    if proc.returncode < 0:  # the launcher itself was killed: no fault of the command line
        raise MeasurementError(
            f"the launcher '{shlex.join(argv)}' was killed by {signal.Signals(-proc.returncode).name} "
            "while its job was being checked"
        )
    if proc.returncode != 0:
        text = "\n".join(chatter)
        if "run as root" in text or "allow-run-as-root" in text:
            raise UsageError(
                f"--launch: the launcher refuses to start ranks as root; Open MPI needs {ROOT_OPT_IN} in --launch"
            )
        why = chatter[0] if chatter else f"exit status {proc.returncode}"
        if started or ours:  # it can start the engine's ranks: its job failed, the command line did not
            raise MeasurementError(f"the launcher's check job '{shlex.join(argv)}' failed: {why}")
        raise UsageError(f"--launch: '{shlex.join(argv)}' failed: {why}")
    if not ranks:
        raise UsageError(f"--launch: '{shlex.join(argv)}' started no rank of {exe} (is it an MPI launcher?)")
    engine.job_on_this_host(argv, {h for h, _ in ranks.values()} == {os.uname().nodename})
    return Job(tuple(argv), dict(sorted(ranks.items())))


def _per_rank(args: tuple[str, ...], workers: str | None) -> tuple[str, ...]:
    """A single-node invocation made for any rank: without this host's CPU
    list (each rank places its workers in its own share), with `workers`
    per rank when given, else the invocation's own count."""
    out, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a == "--cpus" or (a == "--workers" and workers is not None):
            skip = True
            continue
        out.append(a)
        if i == 0 and workers is not None:
            out += ["--workers", workers]
    return tuple(out)


def plan_run(inner: Plan, what: str, job: Job, params: dict, workers: str | None = None) -> Plan:
    """A single-node plan's engine invocations, each as one job on every
    rank. Checked by the plain engine here with one worker: the ranks' nodes
    may have more CPUs than this one (their counts were checked against
    `job`)."""
    points = []
    for p in inner.points:
        args = _per_rank(p.args, workers)
        points.append(ClusterPoint(f"{what} {p.label}", args, job.launch, check_args=_per_rank(args, "1")))
    inner_params = {k: v for k, v in inner.params.items() if k != "cpus"}
    return Plan(points, inner.reps, {**inner_params, **params})


def worker_counts(workers: str | None, job: Job, placement: str = "compact", one: bool = False) -> list[int]:
    """Worker counts per rank ('1,2,max', '1-8', max = the fewest CPUs any rank
    has; none given: the single-node default for that many), none beyond
    the rank with the fewest CPUs."""
    rank, fewest = job.fewest
    if workers:  # 'max' is the fewest CPUs, not this machine's
        counts = parse_worker_counts(
            ",".join(str(fewest) if w.strip() == "max" else w for w in workers.split(",")), 1 << 20
        )
    else:
        counts = parse_worker_counts(None, fewest, placement=placement)
    if counts[-1] > fewest:
        host = job.ranks[rank][0]
        raise UsageError(f"--workers: {counts[-1]} workers per rank, but rank {rank} on {host} has {fewest} CPU(s)")
    if one and len(counts) != 1:
        raise UsageError("--workers: one worker count per rank (a number or 'max')")
    return counts


def plan_bsp(
    *,
    compute_us: int,
    iterations: int,
    collective: str,
    threshold_ns: int | None,
    attribution: bool,
    launch: list[str],
) -> Plan:
    """The bsp job; the caller adds the job's own parameters (launch, ranks)
    once the launcher has been checked."""
    if not 1 <= compute_us <= 1_000_000:
        raise UsageError(f"--compute-us: {compute_us} is not a whole number of µs from 1 to 1000000")
    if not 1 <= iterations <= 10_000_000:
        raise UsageError(f"--iterations: {iterations} is not a whole number from 1 to 10000000")
    if threshold_ns is not None and not 1 <= threshold_ns <= 1_000_000_000:
        raise UsageError(f"--threshold-ns: {threshold_ns} is not a whole number from 1 to 1000000000")
    seconds = compute_us * iterations * 1.1 / 1e6
    if not math.isfinite(seconds) or seconds > 7 * 86400:
        raise UsageError("--compute-us × --iterations: more than a week of steps")
    args = ["bsp", "--compute-us", str(compute_us), "--iterations", str(iterations), "--collective", collective]
    if threshold_ns:
        args += ["--threshold-ns", str(threshold_ns)]
    if attribution:
        args.append("--trace")
    point = ClusterPoint(f"bsp {compute_us} µs × {iterations}", tuple(args), tuple(launch))
    return Plan(
        [point],
        1,
        {
            "compute_us": compute_us,
            "iterations": iterations,
            "collective": collective,
            "threshold_ns": threshold_ns,
            "attribution": attribution,
        },
    )
