"""The one door to oslens-engine: finding it, asking what it offers (probes,
workloads, limits, topology), spelling its argv, checking an argv before a
run is stored, and running it. No other module starts the engine or knows
its options.

The engine prints JSON lines; this module turns them into dicts as they
arrive and makes sure that, whatever happens to the engine, nothing it made
is left behind (see `EngineRun.close`). An engine exit status of 2 is a
usage error (its one-line message), never a failed measurement."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from . import runtime
from .errors import Interrupted, MeasurementError, UsageError

ENGINE = "oslens-engine"
STOP_GRACE_S = 20.0
LAUNCHER_ABORT_S = 10.0  # mpirun's own abort: SIGTERM to the ranks, SIGKILL a second later


def engine_path() -> Path:
    """The engine inside the installed package, or $OSLENS_ENGINE, or a
    development build in the source tree."""
    candidates = []
    if os.environ.get("OSLENS_ENGINE"):
        candidates.append(Path(os.environ["OSLENS_ENGINE"]))
    here = Path(__file__).resolve().parent
    candidates += [here / "_bin" / ENGINE, here.parents[1] / "engine" / "build" / ENGINE]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise UsageError(f"{ENGINE} not found (looked in {', '.join(map(str, candidates))}); run 'make install'")


MPI_ENGINE = "oslens-engine-mpi"


def mpi_engine_path() -> Path:
    """The MPI build of the engine, beside the plain one (built only where an
    MPI compiler wrapper was when oslens was installed)."""
    path = engine_path().with_name(MPI_ENGINE)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise UsageError(
            f"oslens cluster needs {MPI_ENGINE}, built only where MPI is: install Open MPI "
            "(sh scripts/install-deps.sh cluster, or apt-get install openmpi-bin libopenmpi-dev), then make install"
        )
    return path


@dataclass(frozen=True)
class ProbeInfo:
    name: str
    summary: str
    subsystem: str
    syscalls: tuple[str, ...]
    variants: tuple[str, ...]
    variant_help: dict
    variant_syscalls: dict
    options: dict  # name -> {"default", "min", "max", "help"}
    static: bool
    timed: bool  # has a per-operation latency (latency can measure it)
    needs_target: bool = False  # works on a device or file (`oslens io`'s probes)
    partner: bool = False  # each worker keeps a partner task, the other end of its round trips


USAGE_STATUS = 2  # the engine's exit status for an argv it refuses


def _message(stderr: str) -> str:
    """The engine's own one-line reason, without its name."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1].removeprefix(f"{ENGINE}: ") if lines else ""


# The environment the engine runs in (envs/): None, the host's engine as
# installed; set by `inside` for the span of one command.
_inside = None


def _exe() -> list[str]:
    """The argv that runs the engine where the measurement is."""
    return _inside.engine_argv() if _inside is not None else [str(engine_path())]


def running_path() -> str:
    """The engine's path where it runs: inside an environment, the inside's
    (a command that runs the engine there names it so)."""
    return _exe()[-1]


@contextlib.contextmanager
def inside(env) -> Iterator[None]:
    """Every query and invocation of the engine, while this holds, runs in
    env (a made environment, see envs/): what it offers and the topology it
    sees are the inside's, not the host's."""
    global _inside
    cached = (_listing, limits, attributions, workloads, probes, topology)
    previous, _inside = _inside, env
    for f in cached:
        f.cache_clear()
    try:
        yield
    finally:
        _inside = previous
        for f in cached:
            f.cache_clear()


def kernel_symbols():
    """The symbols of the kernel the engine runs on now: the guest's inside
    a guest, else the host's. Kernel addresses in its records are named by
    these, never by another kernel's (another build, another KASLR offset).
    Read afresh at each call: a module loaded since adds its symbols."""
    from .kallsyms import Kallsyms

    text = _inside.kallsyms() if _inside is not None else None
    return Kallsyms() if text is None else Kallsyms(text=text)


def inside_kernel_config() -> dict | None:
    """The build configuration of the kernel the engine runs on inside an
    environment (envs.Environment.kernel_config), None on the host."""
    return _inside.kernel_config() if _inside is not None else None


def environment() -> dict | None:
    """Where the engine runs now (run metadata), None on the host."""
    return _inside.describe() if _inside is not None else None


def _query(*args: str) -> list[dict]:
    proc = subprocess.run([*_exe(), *args], capture_output=True, text=True)
    if proc.returncode == USAGE_STATUS:
        raise UsageError(_message(proc.stderr) or f"{ENGINE} refused: {' '.join(args)}")
    if proc.returncode != 0:
        raise MeasurementError(f"{ENGINE} {' '.join(args)} failed: {proc.stderr.strip()}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


@functools.lru_cache(maxsize=1)
def _listing() -> tuple[dict, ...]:
    return tuple(_query("list"))


@functools.lru_cache(maxsize=1)
def limits() -> dict:
    """The bounds the engine enforces on its argv, as it publishes them:
    {command: {"--option": {"min", "max", "unit"}}}. Python checks user
    input against these, never against a copy."""
    for r in _listing():
        if r.get("type") == "limits":
            return {k: v for k, v in r.items() if k != "type"}
    raise MeasurementError(f"{ENGINE} list publishes no limits: an engine older than this oslens")


def limit(command: str, option: str) -> dict:
    return limits()[command][option]


@functools.lru_cache(maxsize=1)
def attributions() -> dict[str, dict]:
    """`run`'s attributions as the engine lists them, by option name
    ("explain"): whether each loads BPF programs, and the period it samples
    at unless given one ("sample_period_ns", absent where it samples
    nothing) — the engine's defaults, never a copy of them."""
    out = {
        r["name"]: {k: v for k, v in r.items() if k not in ("type", "name")}
        for r in _listing()
        if r.get("type") == "attribution"
    }
    if not out:
        raise MeasurementError(f"{ENGINE} list publishes no attributions: an engine older than this oslens")
    return out


def check(args: list[str]) -> dict:
    """Validates an engine argv exactly as a real invocation would
    (--dry-run), without measuring anything; returns the parsed
    configuration. Raises UsageError with the engine's one line if refused."""
    cmd, *rest = args
    return _query(cmd, "--dry-run", *rest)[-1]


@functools.lru_cache(maxsize=1)
def workloads() -> dict[str, dict]:
    """The engine's built-in applications (appscale --workload)."""
    return {r["name"]: r for r in _query("app", "list") if r.get("type") == "app_info"}


@functools.lru_cache(maxsize=1)
def probes() -> dict[str, ProbeInfo]:
    out = {}
    for r in _listing():
        if r.get("type", "probe") != "probe" or "name" not in r:
            continue
        out[r["name"]] = ProbeInfo(
            name=r["name"],
            summary=r["summary"],
            subsystem=r["subsystem"],
            syscalls=tuple(r["syscalls"]),
            variants=tuple(v["name"] for v in r["variants"]),
            variant_help={v["name"]: v["help"] for v in r["variants"]},
            variant_syscalls={v["name"]: tuple(v["syscalls"]) for v in r["variants"]},
            options={o["name"]: o for o in r["options"]},
            static=r["static"],
            timed=r["timed"],
            needs_target=r.get("needs_target", False),
            partner=r.get("partner", False),
        )
    return out


def descriptions() -> dict[str, str]:
    """Titles in words: each probe's summary under its name, and under
    "probe:variant" the summary followed by that variant's own help, so that
    a table of one variant says what that variant does."""
    out = {}
    for p in probes().values():
        out[p.name] = p.summary
        for v in p.variants:
            out[f"{p.name}:{v}"] = f"{p.summary}; {v}: {p.variant_help[v]}" if p.variant_help.get(v) else p.summary
    return out


@functools.lru_cache(maxsize=1)
def topology() -> dict:
    return _query("topology")[0]


def placement(n: int, policy: str) -> list[int]:
    """The CPUs the engine would give n workers under `policy`."""
    return _query("plan", str(n), policy)[0]["cpus"]


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


# `--explain [MODE]`: full times every system call and fault (exact calls
# per op, a cost that grows with their rate); light times only lock waits,
# CPU waits, sleeps and interrupts and splits the rest of the time on a CPU
# by samples (engine/bpf/explain.h). The default is chosen by measurement
# (README, "--explain light"): light, whose cost was below full's on every
# probe measured and within 5 % on the system-call-bound ones (bench/explain.py).
EXPLAIN_MODES = ("full", "light")
DEFAULT_EXPLAIN = "light"
# Each mode's attribution in the engine: its option, and its entry in
# attributions(), whose default period (where the measurement that chose
# it is stated: engine/bpf/explain.h) is each mode's default rate. A sample
# is a timer interrupt and a stack walk, some 15-20 µs in a VM, so the rate
# sets the cost, and a sampled share's error shrinks with the square root
# of the samples; the engine bounds the period (limit("run", "--sample-period")).
_ATTRIBUTION = {"full": "explain", "light": "explain-light"}


@dataclass(frozen=True)
class Explain:
    """How an explained run attributes: its mode (EXPLAIN_MODES) and the rate
    of the clocks that sample its threads' stacks and, in light mode, split
    their time."""

    mode: str = DEFAULT_EXPLAIN
    sample_hz: int | None = None  # None: the mode's (default_hz)

    def __post_init__(self):
        if self.mode not in EXPLAIN_MODES:
            raise ValueError(f"explain mode {self.mode!r}")
        if self.sample_hz is None:
            object.__setattr__(self, "sample_hz", self.default_hz(self.mode))  # frozen: set once, here
        if not isinstance(self.sample_hz, int) or self.sample_hz < 1:
            raise ValueError(f"sample rate {self.sample_hz!r} Hz")

    @staticmethod
    def default_hz(mode: str) -> int:
        """The rate a mode samples at unless asked: its engine attribution's."""
        return round(1e9 / attributions()[_ATTRIBUTION[mode]]["sample_period_ns"])

    @staticmethod
    def most_hz() -> int:
        """The highest rate the engine takes: its shortest period."""
        return int(1e9 // limit("run", "--sample-period")["min"])

    @property
    def period_ns(self) -> int:
        return round(1e9 / self.sample_hz)

    def argv(self) -> list[str]:
        return [f"--{_ATTRIBUTION[self.mode]}", "--sample-period", str(self.period_ns)]

    @staticmethod
    def params(explain: Explain | None) -> dict:
        """What a plan keeps of it: the mode (False: not explained), and the rate."""
        return {"explain": explain.mode, "sample_hz": explain.sample_hz} if explain else {"explain": False}

    def __str__(self) -> str:
        return f"{self.mode}, {self.sample_hz:,} Hz"


# Per-operation timing beside a throughput (an explained point and its
# plain twin): one operation in N timed, N chosen by each worker so that
# timing takes at most 0.5 % of its loop. Timing every one costs two
# serialised clock reads, a third of a null system call in a VM.
SAMPLED_TIMING = "auto"


def run_argv(
    *,
    probe: str,
    workers: int | None = None,
    cpus: list[int] | tuple[int, ...] | None = None,
    mode: str | None = None,
    placement: str | None = None,
    reps: int | None = None,
    warmup: float | None = None,
    interval: float | None = None,
    duration: float | None = None,
    ops: int | None = None,
    time_limit: float | None = None,
    opts: dict | None = None,
    latency: bool = False,
    latency_every: int | str | None = None,
    mix: bool = False,
    trace: bool = False,
    explain: Explain | None = None,
    target: str | None = None,
    completions: bool = False,
) -> list[str]:
    """`oslens-engine run …`: workers (a count, placed by policy) or cpus
    (an explicit list); fixed time (duration) or fixed work (ops); explain:
    None, or how the run is attributed; latency_every: with latency, time
    one operation in N (SAMPLED_TIMING: N chosen so that timing takes at
    most 0.5 % of the loop), else every one."""
    args = ["run", "--probe", probe]
    if workers is not None:
        args += ["--workers", str(workers)]
    if cpus is not None:
        args += ["--cpus", ",".join(map(str, cpus))]
    for flag, value in (
        ("--mode", mode),
        ("--placement", placement),
        ("--reps", reps),
        ("--warmup", warmup),
        ("--interval", interval),
        ("--time-limit", time_limit),
        ("--duration", duration),
        ("--ops", ops),
    ):
        if value is not None:
            args += [flag, _num(value)]
    for k, v in (opts or {}).items():
        args += ["--opt", f"{k}={v}"]
    if target is not None:
        args += ["--target", target]
    flags = (
        ("--latency", latency), ("--mix", mix), ("--trace", trace), ("--completions", completions),
    )  # fmt: skip
    args += [flag for flag, on in flags if on]
    if latency and latency_every is not None:
        args += ["--latency-every", str(latency_every)]
    return args + (explain.argv() if explain else [])


def profile_argv(
    *,
    command: list[str] | None = None,
    pid: int | None = None,
    duration: float | None = None,
    time_limit: float | None = None,
    bpf: bool = True,
    syscalls: bool = True,
    counters: bool = True,
    out_fd: int | None = None,
    cpus: list[int] | None = None,
    stdout_to_stderr: bool = False,
) -> list[str]:
    """`oslens-engine profile …` of a command (held before exec) or of a
    running pid. cpus: the command starts on these; stdout_to_stderr: its
    output leaves stdout to the records (where no --out-fd reaches us)."""
    args = ["profile"]
    if out_fd is not None:
        args += ["--out-fd", str(out_fd)]
    args += [
        flag
        for flag, off in (("--no-syscalls", not syscalls), ("--no-bpf", not bpf), ("--no-counters", not counters))
        if off
    ]
    if cpus:
        args += ["--cpus", ",".join(map(str, cpus))]
    if stdout_to_stderr:
        args.append("--stdout-to-stderr")
    if duration:
        args += ["--duration", repr(duration)]
    if time_limit:
        args += ["--time-limit", repr(time_limit)]
    return args + (["--pid", str(pid)] if pid is not None else ["--", *command])


def app_argv(
    workload: str, *, workers: int | str, mode: str, size: int | None = None, data_dir: str | None = None
) -> list[str]:
    """`oslens-engine app NAME …`, with the engine's own path where it runs:
    a command that appscale runs under `profile` like any other."""
    args = [running_path(), "app", workload, "--workers", str(workers), "--mode", mode]
    if size:
        args += ["--size", str(size)]
    if data_dir is not None:
        args += ["--dir", data_dir]
    return args


def check_app(workload: str, *, workers: int, mode: str, size: int | None = None, data_dir: str | None = None) -> None:
    """Has the engine check an app's options (`--dry-run`: every check, nothing
    run), so that a size it refuses is refused before any repetition runs.
    Raises UsageError with the engine's own reason."""
    argv = app_argv(workload, workers=workers, mode=mode, size=size, data_dir=data_dir)[1:]
    _query(*argv, "--dry-run")


def prepare_app(workload: str, data_dir: str, size: int | None = None) -> None:
    """Makes a workload's input files in data_dir (where the engine runs), untimed."""
    args = ["app", workload, "--prepare", data_dir] + (["--size", str(size)] if size else [])
    proc = subprocess.run([*_exe(), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise MeasurementError(f"preparing {workload}'s input: {proc.stderr.strip()}")


_echo = None


def echo_invocations(say) -> None:
    """With -v: `say(argv)` before each engine is started."""
    global _echo
    _echo = say


def spawn(args: list[str], launch: list[str] | None = None, **popen: object) -> subprocess.Popen:
    """Starts the engine with these arguments (the only place that does);
    with `launch`, the MPI engine as ranks of a job that launcher starts.
    The engine dies with us: SIGTERM when we die, however we die (it then
    ends in order and removes what it made), never an orphan measuring on."""
    exe = [*launch, str(mpi_engine_path())] if launch else _exe()
    then = popen.get("preexec_fn")
    if launch:
        # A launcher in our process group would take a ^C (a signal to the
        # group) as an abort and kill the ranks before they report: it gets
        # its own group, and is stopped by us, in order (stop_in_order). It
        # reads no terminal: mpirun would relay stdin to a rank.
        popen.setdefault("stdin", subprocess.DEVNULL)
        then = _own_group(then)
        mark = None
        if tuple(launch) in _jobs_here:
            mark = secrets.token_hex(8)
            env = {**(popen.get("env") or os.environ), JOB_MARK: mark}
            if shm := runtime.shm_dir():
                env.update(dict.fromkeys(MPI_FILES, shm))
            popen["env"] = env
    popen["preexec_fn"] = runtime.dies_with_parent(signal.SIGTERM, then)
    if _echo is not None:
        _echo([*exe, *args])
    proc = subprocess.Popen([*exe, *args], **popen)
    if launch:
        proc.job_mark = mark  # type: ignore[attr-defined]
    return proc


# In the environment of every process of a job whose ranks all run on this
# host, a secret of its own: a rank can outlive the launcher that aborted
# the job, spinning in a collective until its time limit (fresh-clone run
# 73: a rank of a job one rank had aborted, still running after oslens
# returned, 98 % of the CPUs busy for the tests after it). oslens
# launched the job, so once the launcher has exited, oslens ends what is
# left of it (end_job_leftovers).
JOB_MARK = "OSLENS_JOB"
JOB_LEFTOVER_GRACE_S = 2.0


def _marked(mark: str) -> list[int]:
    """The live processes whose environment holds this job's mark."""
    from .leftovers import proc_stat

    needle = f"\0{JOB_MARK}={mark}\0".encode()
    found = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            marked = needle in b"\0" + (d / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if marked and (st := proc_stat(int(d.name))) and st[1] != "Z":
            found.append(int(d.name))
    return found


def end_job_leftovers(proc: subprocess.Popen) -> None:
    """After a launcher has exited: what is left of its job on this host
    (ranks, daemons) gets SIGTERM, then SIGKILL past a grace."""
    mark = getattr(proc, "job_mark", None)
    if not mark:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = _marked(mark)
        if not left:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + JOB_LEFTOVER_GRACE_S
        while _marked(mark) and time.monotonic() < deadline:
            time.sleep(0.02)


# Open MPI's shared-memory segments (4 MiB a rank, in /dev/shm) and session
# directory, which a job killed outright leaves, go to a directory oslens
# owns (runtime.shm_dir), removed when it exits or, killed, by the next
# oslens. Left to themselves they go to predictable names in shared places
# (/tmp/ompi.HOST.UID, /dev/shm/vader_segment.HOST.JOB.RANK), which another
# local user can make first, and Open MPI takes an existing session
# directory as its own. Only for jobs whose ranks all run on this host
# (there the directory exists): a launcher passes OMPI_MCA_* to every host.
MPI_FILES = ("OMPI_MCA_btl_vader_backing_directory", "OMPI_MCA_orte_tmpdir_base")
MPI_ROOT_OPT_IN = "--allow-run-as-root"  # Open MPI refuses to start ranks as root without it
_jobs_here: set[tuple[str, ...]] = set()


def job_on_this_host(launch: list[str] | tuple[str, ...], here: bool = True) -> None:
    """Says that this launcher starts every rank on this host, or (here=False)
    that it does not after all (plan/cluster.py)."""
    if here:
        _jobs_here.add(tuple(launch))
    else:
        _jobs_here.discard(tuple(launch))


def run_job(args: list[str], launch: list[str], timeout: float) -> subprocess.CompletedProcess:
    """A short job run to its end, its output read whole. Stopped by a
    signal or past `timeout`, the launcher first ends the job itself."""
    proc = spawn(args, launch, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        proc.send_signal(signal.SIGTERM)  # mpirun's abort: the ranks go with it
        try:
            proc.communicate(timeout=LAUNCHER_ABORT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        raise
    finally:
        end_job_leftovers(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _own_group(then):
    def preexec() -> None:
        os.setpgid(0, 0)
        if then:
            then()

    return preexec


# How an engine is asked to end its repetition. A job's ranks get SIGUSR1:
# a launcher forwards it to every rank (which takes it as SIGINT), whereas
# a SIGINT or SIGTERM to mpirun aborts the job, killing the ranks before
# they report; if the launcher has not ended the job within the grace,
# SIGTERM has it do so.
STOP_ENGINE = signal.SIGINT
STOP_JOB = signal.SIGUSR1


# The engine whose records are being read to their end (read_to_end): a
# signal sent to us asks it to end in order rather than raising mid-read.
_reading: "EngineRun | None" = None


def stop_in_order(signum: int) -> bool:
    """For a signal handler: asks the engine being read to end its
    repetition (SIGINT; it then reports it and exits), to be read to its end
    (an engine that has exited may still have its last records in the pipe).
    False if none is (or it was asked already: a second signal insists),
    and the caller raises. Its end is bounded: past STOP_GRACE_S, SIGALRM
    raises Interrupted and `close` kills it."""
    er = _reading
    if er is None or er.stopped_by:
        return False
    er.stopped_by = signum
    if er.proc.poll() is None:
        er.proc.send_signal(er.stop_signal)
        signal.setitimer(signal.ITIMER_REAL, STOP_GRACE_S)
    return True


class EngineRun:
    """One engine process; iterate it for its records.

    Signals: a signal sent to us while its records are read (read_to_end)
    asks it to end its repetition, and it is read to its end
    (stop_in_order); after an exception, `close` sends SIGINT and waits for
    the engine's own clean-up, reading what it still writes. Only if the
    engine cannot clean up (SIGKILL) do we remove what its `resources`
    records announced."""

    def __init__(self, args: list[str], confine_to: list[int] | None = None, launch: list[str] | None = None):
        """confine_to: CPUs the whole engine, its master included, must stay on
        (a competitor's master must never wake on the CPUs being measured).
        launch: an MPI launcher's argv; the ranks' records come through it."""
        self.args = list(args)
        self.launch = launch
        confine = (lambda: os.sched_setaffinity(0, confine_to)) if confine_to else None
        self.proc = spawn(
            self.args,
            launch,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            preexec_fn=confine,
        )
        self.resources: dict = {}
        self.end: dict | None = None
        self.stopped_by: int | None = None  # the signal that asked us to stop it (stop_in_order)
        self._closed = False
        self.errors: list[str] = []
        self.cut_records = 0  # lines that were not whole records (see __iter__)
        self.stderr = ""
        # what an engine inside an environment made is that environment's to remove
        self.on_host = _inside is None

    @property
    def stop_signal(self) -> int:
        return STOP_JOB if self.launch else STOP_ENGINE

    def __iter__(self) -> Iterator[dict]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                # a record cut short: the engine, or the launcher relaying
                # a rank's records, was killed while writing it
                self.cut_records += 1
                continue
            if not isinstance(rec, dict):
                self.cut_records += 1
                continue
            kind = rec.get("type")
            if kind == "resources":
                self.resources = rec
            elif kind == "error":
                self.errors.append(rec["message"])
            elif kind == "end":
                self.end = rec
            yield rec

    def read_to_end(self) -> Iterator[dict]:
        """Its records, as iteration gives them; meanwhile a signal sent to
        us stops the engine in order (stop_in_order) and its last records
        still come."""
        global _reading

        def too_late(_signum, _frame):
            raise Interrupted(self.stopped_by)

        _reading = self
        old_alarm = signal.signal(signal.SIGALRM, too_late)
        try:
            yield from self
        finally:
            _reading = None
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_alarm)

    def close(self) -> int:
        """Waits for the engine (stopping it if still running) and removes
        anything it could not; returns its exit status."""
        if self._closed:
            return self.proc.returncode
        self._closed = True
        if self.proc.poll() is None:
            # asked in order already and still running: past its grace, or told twice
            self._stop(grace=1.0 if self.stopped_by else STOP_GRACE_S)
        rc = self.proc.wait()
        end_job_leftovers(self.proc)
        if self.proc.stderr is not None:
            self.stderr = self.proc.stderr.read().strip()
            self.proc.stderr.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if self.end is None and self.on_host:
            self._remove_leftovers()
        return rc

    def _stop(self, grace: float) -> None:
        """Its stop signal, then its clean-up, reading what it still writes:
        an engine blocked on a full pipe would never see its stop flag."""
        drain = threading.Thread(target=self._discard_output, daemon=True)
        drain.start()
        # a launcher killed outright would leave its ranks running: it is
        # first told to abort the job itself (SIGTERM)
        steps = [(self.stop_signal, grace)] + ([(signal.SIGTERM, LAUNCHER_ABORT_S)] if self.launch else [])
        for sig, wait_s in steps:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            # The engine's workers die with it (PR_SET_PDEATHSIG).
            self.proc.kill()
            self.proc.wait()
        drain.join(timeout=1.0)

    def _discard_output(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            for _ in self.proc.stdout or ():
                pass

    def _remove_leftovers(self) -> None:
        """What an engine that did not end in order reported making, removed
        as the registry of owned things removes it (owned.py)."""
        tmpdir = self.resources.get("tmpdir")
        if tmpdir and Path(tmpdir).name.startswith("oslens."):
            runtime.TMPDIR.remove(tmpdir)
        for semid in self.resources.get("sysv_sem", []):
            runtime.SEM.remove(str(semid))

    def failure(self) -> str:
        """The engine's own words for why it failed."""
        if self.errors:
            return "; ".join(self.errors)
        return _message(self.stderr) or f"{ENGINE} exited with status {self.proc.returncode}"

    @property
    def refused(self) -> bool:
        """The engine refused its argv (exit 2): a usage error, not a failed measurement."""
        return self.proc.returncode == USAGE_STATUS

    def __enter__(self) -> "EngineRun":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
