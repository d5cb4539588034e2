"""`oslens cluster`: a single-node measurement, or the bulk-synchronous loop,
on every rank of an MPI job at once. The launcher is MPI's own (mpirun,
srun …), never one of ours; it is checked by launching a job that does
nothing before anything is measured or stored."""

from __future__ import annotations

import math
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field

from .. import engine
from ..errors import UsageError
from . import Plan

ROOT_OPT_IN = "--allow-run-as-root"  # Open MPI refuses root without it


@dataclass(frozen=True)
class ClusterPoint:
    """One job: the engine's argv, run on every rank by the launcher."""

    label: str
    args: tuple[str, ...]
    launch: tuple[str, ...] = field(compare=False)
    check_args: tuple[str, ...] | None = field(default=None, compare=False)  # checked by the plain engine


def launcher(launch: str | None, ranks: int | None) -> tuple[list[str], int | None, str | None]:
    """The launcher's argv, the rank count when oslens chose it, and a note
    on what it added. The default is `mpirun -n RANKS` on this host, ranks
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
        return argv, None, None
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
    return argv, n, note


def check_launcher(argv: list[str]) -> None:
    """Launches a job whose ranks exit at once: a launcher that cannot start
    the MPI engine says so here, in one line, before anything is stored."""
    exe = str(engine.mpi_engine_path())
    try:
        proc = subprocess.run([*argv, exe, "true"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise UsageError(f"--launch: '{shlex.join(argv)}' did not start a job within 60 s") from None
    except OSError as e:
        raise UsageError(f"--launch: {e.strerror}: {argv[0]}") from None
    if proc.returncode != 0:
        text = proc.stderr + proc.stdout
        if "run as root" in text or "allow-run-as-root" in text:
            raise UsageError(
                f"--launch: the launcher refuses to start ranks as root; Open MPI needs {ROOT_OPT_IN} in --launch"
            )
        lines = [x.strip() for x in text.splitlines() if x.strip() and not set(x.strip()) <= set("-")]
        why = lines[0] if lines else f"exit status {proc.returncode}"
        raise UsageError(f"--launch: '{shlex.join(argv)}' failed: {why}")


def plan_run(inner: Plan, what: str, launch: list[str], params: dict) -> Plan:
    """A single-node plan's engine invocations, each as one job on every rank."""
    points = []
    for p in inner.points:
        args = list(p.args)
        if "--cpus" in args:  # this host's CPUs: each rank measures its own share instead
            at = args.index("--cpus")
            del args[at : at + 2]
        points.append(ClusterPoint(f"{what} {p.label}", tuple(args), tuple(launch), check_args=tuple(args)))
    inner_params = {k: v for k, v in inner.params.items() if k != "cpus"}
    return Plan(points, inner.reps, {**inner_params, **params})


def plan_bsp(
    *,
    compute_us: int,
    iterations: int,
    collective: str,
    threshold_ns: int | None,
    attribution: bool,
    launch: list[str],
    params: dict,
) -> Plan:
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
            **params,
            "compute_us": compute_us,
            "iterations": iterations,
            "collective": collective,
            "threshold_ns": threshold_ns,
            "attribution": attribution,
        },
    )
