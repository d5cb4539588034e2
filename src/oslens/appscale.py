"""`oslens appscale`: an application run on 1, 2, 4, … CPUs, each time
confined to that many CPUs (a cpuset where there is one, affinity always),
timed, with the user/system split of its whole process tree.

Each run goes through `oslens-engine profile --no-bpf --no-counters`: the
engine starts the command held before exec, so the wall time runs from
exec to reaping, and it snapshots /proc/stat around it for the interrupt
time on the CPUs used. Repetitions are interleaved (every CPU count once,
then again) so that drift hits all counts alike."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Iterator

from . import cgroups, engine
from .collectors import kernel as kernel_config
from .envs import INSIDE_DIR
from .errors import Interrupted, MeasurementError
from .invocation import Invocation
from .plan import Plan
from .plan.appscale import DIR_PLACEHOLDER, AppPoint
from .procfs import parse_stat

OUTPUT_TAIL = 2000  # characters of a failed command's output kept


@dataclass(frozen=True)
class AppRun(Invocation):
    """One repetition of one point, as the runner takes it."""

    point: AppPoint
    rep: int
    time_limit: float | None
    reps = 1  # the progress counts repetitions
    check_args = None  # no engine argv: the command is run and timed here

    @property
    def label(self) -> str:
        return f"{self.point.label}, rep {self.rep + 1}"

    def measure(self) -> Iterator[list[dict]]:
        yield [run_point(self.point, self.rep, self.time_limit, f"{self.point.n}.{self.rep}")]


def runs(points: list[AppPoint], reps: int, time_limit: float | None) -> list[AppRun]:
    """Every count once, then again: drift (thermal, a neighbour) hits all alike."""
    return [AppRun(p, r, time_limit) for r in range(reps) for p in points]


@contextmanager
def workload_input(workload: str, size: int | None) -> Iterator[str]:
    """A directory of the workload's input files (psearchy's), made once,
    untimed, where the engine runs: a private one here, removed at the end
    whatever happens; inside an environment, one there, which goes with it."""
    if engine.environment() is not None:
        d = f"{INSIDE_DIR}/input.{workload}"
        engine.prepare_app(workload, d, size)
        yield d
        return
    d = tempfile.mkdtemp(prefix="oslens.appscale.")
    try:
        engine.prepare_app(workload, d, size)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextmanager
def prepared(plan: Plan):
    """The plan's points, with their workload's input made (workload_input)."""
    workload = plan.params["workload"]
    if not workload or not any(DIR_PLACEHOLDER in a for p in plan.points for a in p.argv):
        yield plan.points
        return
    with workload_input(workload, plan.params["size"]) as d:
        yield [replace(pt, argv=tuple(a.replace(DIR_PLACEHOLDER, d) for a in pt.argv)) for pt in plan.points]


def _irq_ns(begin: str, end: str, cpus: tuple[int, ...], clk_tck: int) -> tuple[int | None, int | None]:
    """Hard-IRQ and softirq time on `cpus` between two /proc/stat texts
    (the kernel's tick-sampled accounting: 0 without IRQ time accounting)."""
    a, b = parse_stat(begin), parse_stat(end)
    irq = softirq = 0
    for c in cpus:
        if c not in a.cpus or c not in b.cpus:
            return None, None
        irq += b.cpus[c]["irq"] - a.cpus[c]["irq"]
        softirq += b.cpus[c]["softirq"] - a.cpus[c]["softirq"]
    tick = 1e9 / clk_tck
    return int(irq * tick), int(softirq * tick)


def _prepare(point: AppPoint, rep: int) -> dict | None:
    """Runs the point's --prepare command, untimed; the repetition's failed
    `point` record if it fails, else None."""
    if not point.prepare:
        return None
    p = subprocess.run(point.prepare, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if p.returncode == 0:
        return None
    return {
        **_identity(point, rep),
        "status": "failed",
        "how": "prepare",
        "code": p.returncode if p.returncode >= 0 else None,
        "signal": -p.returncode if p.returncode < 0 else None,
        "wall_ns": None,
        "output_tail": (p.stdout + p.stderr)[-OUTPUT_TAIL:],
    }


def _identity(point: AppPoint, rep: int) -> dict:
    return {
        "type": "point",
        **({"app": point.app} if point.app else {}),
        "n": point.n,
        "cpus": list(point.cpus),
        "rep": rep,
        "argv": list(point.argv),
    }


def run_point(point: AppPoint, rep: int, time_limit: float | None, label: str) -> dict:
    """Runs the command once on the point's CPUs, after its --prepare
    command; returns its `point` record."""
    failed = _prepare(point, rep)
    if failed:
        return failed
    measured = _inside(point, time_limit) if engine.environment() else _on_host(point, time_limit, label)
    return _point_record(point, rep, measured)


@dataclass(frozen=True)
class _Measured:
    rc: int
    records: list[dict]
    output_tail: str
    times: cgroups.CpuTimes | None  # the confining cgroup's, where one counted
    method: str
    accounting: str | None


def _on_host(point: AppPoint, time_limit: float | None, label: str) -> _Measured:
    """In a cgroup of the point's CPUs (affinity where none can be made),
    the records on a descriptor of their own."""
    with (
        cgroups.Confinement(list(point.cpus), label) as box,
        tempfile.TemporaryFile("w+") as records,
        tempfile.TemporaryFile("w+") as output,
    ):
        args = engine.profile_argv(
            command=list(point.argv), time_limit=time_limit, bpf=False, counters=False, out_fd=records.fileno()
        )
        proc = engine.spawn(
            args,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            pass_fds=(records.fileno(),),
            preexec_fn=box.enter,
        )
        try:
            rc = proc.wait()
        except BaseException:
            # Ctrl-C reached the engine too; it ends the command and reports
            proc.send_signal(signal.SIGTERM)
            proc.wait()
            raise
        times = box.cpu_times()
        records.seek(0)
        recs = [json.loads(line) for line in records if line.strip()]
        output.seek(0)
        return _Measured(rc, recs, output.read()[-OUTPUT_TAIL:], times, box.method, box.accounting)


def _inside(point: AppPoint, time_limit: float | None) -> _Measured:
    """In an environment (a guest, a container), where no cgroup of ours and
    no descriptor but stdout and stderr reach: the engine starts the command
    on the point's CPUs (affinity, which its threads and children inherit),
    the records on stdout, the command's output on stderr. A signal to us
    stops it in order, as any engine run (engine.stop_in_order)."""
    args = engine.profile_argv(
        command=list(point.argv),
        time_limit=time_limit,
        bpf=False,
        counters=False,
        cpus=list(point.cpus),
        stdout_to_stderr=True,
    )
    with engine.EngineRun(args) as er:
        recs = list(er.read_to_end())
    if er.stopped_by:
        raise Interrupted(er.stopped_by)
    where = (engine.environment() or {}).get("name", "environment")
    return _Measured(er.proc.returncode, recs, er.stderr[-OUTPUT_TAIL:], None, f"affinity (inside the {where})", None)


def _point_record(point: AppPoint, rep: int, m: _Measured) -> dict:
    rc, recs, out_tail, times, method, accounting = m.rc, m.records, m.output_tail, m.times, m.method, m.accounting
    by = {r["type"]: r for r in recs}
    end = by.get("end_target")
    if rc != 0 or end is None:
        errors = [r["message"] for r in recs if r["type"] == "error"]
        raise MeasurementError(f"{point.label}: {'; '.join(errors) or f'the engine exited with status {rc}'}")
    ru = end.get("rusage") or {}
    ok = end["code"] == 0 and end["how"] == "exited"
    procfs = [r for r in recs if r["type"] == "procfs"]
    irq = softirq = None
    irq_why = kernel_config.irq_time_unavailable(engine.inside_kernel_config())
    if len(procfs) == 2 and not irq_why:
        irq, softirq = _irq_ns(
            procfs[0]["files"].get("/proc/stat", ""),
            procfs[1]["files"].get("/proc/stat", ""),
            point.cpus,
            by["header"]["clk_tck"],
        )
    rec = {
        **_identity(point, rep),
        "status": "ok" if ok else "failed",
        "how": end["how"],
        "code": end["code"],
        "signal": end["signal"],
        "wall_ns": end["wall_ns"] if ok else None,
        "confinement": method,
        "cpu_source": accounting or "rusage (the command and the descendants it waited for)",
        "user_ns": times.user_ns if times else ru.get("utime_ns"),
        "system_ns": times.system_ns if times else ru.get("stime_ns"),
        "usage_ns": times.usage_ns if times else None,
        "irq_ns": irq,
        "softirq_ns": softirq,
        "irq_unavailable": irq_why,
        "nvcsw": ru.get("nvcsw"),
        "nivcsw": ru.get("nivcsw"),
        "min_flt": ru.get("min_flt"),
        "maj_flt": ru.get("maj_flt"),
        "maxrss_kb": ru.get("maxrss_kb"),
    }
    if not ok:
        rec["output_tail"] = out_tail
    return rec
