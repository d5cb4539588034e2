"""HPC Challenge (Debian's hpcc) on MPI: the HPC compute Zheng et al. set
against the data-center workloads (HPL and FFT, two of hpcc's tests). It is
a job, not a server: one run of hpcc, a rank per CPU, profiled whole, its
launch included — the paper's HPC runs were short, and their ramp-up is
part of what it found (page faults) — with hpcc's own
results kept beside (its summary section: HPL's Tflop/s, the FFTs' Gflop/s…).

hpcc runs its tests one after the other — RandomAccess, PTRANS, DGEMM,
STREAM, FFT, the network's latency and bandwidth, HPL last — in one run,
and sizes every one of them from HPL's problem size: a profile of the run
is of all of them together, which is said beside its figures."""

from __future__ import annotations

import math
import os
import re
import shutil
from pathlib import Path

from .. import engine, runtime
from . import Load, Server

RANK_EXE = "hpcc"
# HPL's problem size for one rank, grown with the ranks so that each holds
# about the same share of the matrix (8 N² bytes in all): seconds of HPL
# on a core of today, and the other tests sized from it with it.
N_PER_RANK = 1500
NB = 80  # HPL's block size: hpcc's example
TIME_LIMIT_S = 600.0  # seconds on a small machine; past this, something is wrong

# hpcc's input: HPL's lines (the example hpcc ships, one problem size and
# one grid), then PTRANS's. {n}, {nb}, {p}, {q} are filled in.
INPUT = """HPLinpack benchmark input file
oslens: HPC Challenge for the scale-out study
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
{n}          Ns
1            # of NBs
{nb}         NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
{p}          Ps
{q}          Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0            Number of additional problem sizes for PTRANS
1200         values of N
0            number of additional blocking sizes for PTRANS
40           values of NB
"""

# hpcc's results kept in the record: (key of its summary, label)
RESULTS = (
    ("HPL_Tflops", "HPL, Tflop/s"),
    ("HPL_time", "HPL, seconds"),
    ("MPIFFT_Gflops", "FFT across the ranks (MPIFFT), Gflop/s"),
    ("StarFFT_Gflops", "FFT on every rank at once (StarFFT), Gflop/s"),
    ("StarDGEMM_Gflops", "DGEMM on every rank at once, Gflop/s"),
    ("StarSTREAM_Triad", "STREAM triad on every rank at once, GB/s"),
    ("MPIRandomAccess_GUPs", "RandomAccess across the ranks, GUP/s"),
    ("PTRANS_GBs", "PTRANS, GB/s"),
    ("Success", "hpcc's own verdict on its results (1: all passed)"),
)


def grid(ranks: int) -> tuple[int, int]:
    """HPL's process grid P × Q = ranks, as square as it divides, P ≤ Q (HPL's advice)."""
    p = max(d for d in range(1, math.isqrt(ranks) + 1) if ranks % d == 0)
    return p, ranks // p


def problem_size(ranks: int) -> int:
    """N per rank's share of the matrix constant, a multiple of the block size."""
    n = N_PER_RANK * math.sqrt(ranks)
    return max(NB, int(n // NB) * NB)


def _job(workdir: Path, ranks: int) -> list[str]:
    p, q = grid(ranks)
    (workdir / "hpccinf.txt").write_text(INPUT.format(n=problem_size(ranks), nb=NB, p=p, q=q))
    # a rank per CPU the job was given, unbound within them; Open MPI counts
    # cores as its slots, and a CPU is an SMT thread where there is SMT
    argv = [shutil.which("mpirun") or "mpirun", "-n", str(ranks), "--bind-to", "none", "--oversubscribe"]
    if os.geteuid() == 0:
        argv.append(engine.MPI_ROOT_OPT_IN)
    return [*argv, RANK_EXE]


def _environment() -> dict[str, str]:
    """Open MPI's shared-memory segments and session files in a directory
    oslens owns (engine.MPI_FILES): a job killed outright leaves nothing."""
    shm = runtime.shm_dir()
    return dict.fromkeys(engine.MPI_FILES, shm) if shm else {}


_SUMMARY = re.compile(r"Begin of Summary section\.\n(.*?)End of Summary section\.", re.S)


def summary(text: str) -> dict[str, float]:
    """The numbers of hpcc's summary section (key=value lines)."""
    m = _SUMMARY.search(text)
    out: dict[str, float] = {}
    for line in (m.group(1) if m else "").splitlines():
        key, _, value = line.partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            continue
    return out


def results(workdir: Path, seconds: float) -> tuple[Load, dict]:
    """What the job did: hpcc's results (and its version, which it says
    only there), and as its Load the run itself (one job, its seconds; an
    error where hpcc's own check of its results failed)."""
    try:
        found = summary((workdir / "hpccoutf.txt").read_text(errors="replace"))
    except OSError:
        found = {}
    kept: dict = {k: found[k] for k, _ in RESULTS if k in found}
    if all(k in found for k in ("VersionMajor", "VersionMinor", "VersionMicro")):
        kept["version"] = f"{found['VersionMajor']:.0f}.{found['VersionMinor']:.0f}.{found['VersionMicro']:.0f}"
    if "Success" not in kept:
        return Load(None, None, seconds, None, unread="hpcc wrote no summary (hpccoutf.txt)"), kept
    return Load(1, 0 if kept["Success"] == 1 else 1, seconds, None, counted_by="hpcc's summary (one run)"), kept


HPCC = Server(
    name="hpcc",
    what="HPC compute: HPC Challenge (hpcc) on MPI, a rank per CPU, profiled from its release to its end, its launch "
    "included",
    stands_for="HPC compute (HPL, FFT)",
    server_package="hpcc",
    client_package="openmpi-bin",
    server_exe=RANK_EXE,
    client_exe="mpirun",
    port=0,
    version_argv=(),  # hpcc says its version only in its output: read from its summary
    client_version_argv=("mpirun", "--version"),
    configure=_job,
    job=True,
    time_limit_s=TIME_LIMIT_S,
    environment=_environment,
    results=results,
    result_labels=RESULTS,
    config_files=("hpccinf.txt",),
    limits="hpcc's seven tests in one run, profiled together: HPL's and FFT's time with RandomAccess's, PTRANS's, "
    "DGEMM's, STREAM's and the network tests'",
)
