"""`oslens scale`: every probe × mode × worker count, all repetitions of a point in one invocation."""

from __future__ import annotations

import json
import subprocess

from .. import engine
from ..cpulist import format_cpulist, format_siblings
from ..errors import MeasurementError
from ..parse import landmarks, parse_opts, parse_probes, parse_worker_counts, placement_order
from . import Plan, Point, check_amounts, check_seconds, time_limit


def plan(
    *,
    probe: str | None,
    workers: str | None,
    mode: str,
    placement: str,
    duration: float | None,
    ops: int | None,
    reps: int,
    warmup: float,
    interval: float,
    opts: tuple[str, ...],
    explain: engine.Explain | None = None,
    explain_duration: float | None = None,
    available: int | None = None,
    ops_per_probe: dict[str, int] | None = None,
    work_s: float | None = None,
) -> Plan:
    """With explain (how it attributes), each point is followed by its explained twin: the same
    probe, mode and worker count for the same number of repetitions, fixed
    time (explain_duration, else the measured duration, else 1 s), with every
    worker's time charged to its kernel causes and, where the probe times
    its operations, each operation's latency. Measured apart, so that the
    plain figures stay free of the attribution's cost, and right after, so
    that the two see the same machine; the pair gives that cost.

    available: the CPUs worker counts may reach (default: this machine's;
    `cluster scale` gives the fewest any rank has). ops_per_probe: a fixed
    workload of its own for some probes (by name), in place of ops; work_s:
    what one worker's takes alone, so that the time limit allows n workers'
    work done one after the other (a primitive that does not scale at all)."""
    duration = check_amounts(duration, ops, reps, warmup, interval, default_duration=1.0)
    ncpus = available or engine.topology()["available"]
    counts = parse_worker_counts(workers, ncpus, placement=placement)
    probes = parse_probes(probe)
    probe_opts = parse_opts(opts, probes)
    modes = ["process", "thread"] if mode == "both" else [mode]
    limit = time_limit(reps, (duration or 0) + warmup)
    if explain_duration is not None:  # 0 was taken as "not given" and ran 1 s
        check_seconds("--explain-duration", explain_duration, zero_allowed=False)
    explain_s = explain_duration if explain_duration is not None else duration or 1.0
    # the probes that time their operations, where a point is explained
    catalogue = {k: p for k, p in engine.probes().items() if p.timed} if explain else {}
    points = []
    for name, variant in probes:
        for m in modes:
            for n in counts:
                point = dict(
                    probe=f"{name}:{variant}",
                    workers=n,
                    mode=m,
                    placement=placement,
                    reps=reps,
                    warmup=warmup,
                    interval=interval,
                    opts=probe_opts[name],
                )
                work = (ops_per_probe or {}).get(name, ops)
                serial = time_limit(reps, (work_s or 0) * n + warmup) if work_s else limit
                # an explained point's operations are timed, one in N, on both sides of the pair:
                # the twin then differs from the plain point by its attribution alone
                timing = dict(latency=True, latency_every=engine.SAMPLED_TIMING) if catalogue.get(name) else {}
                args = engine.run_argv(**point, time_limit=max(limit, serial), duration=duration, ops=work, **timing)
                points.append(Point(name, variant, m, n, tuple(args)))
                if explain:
                    args = engine.run_argv(
                        **point,
                        time_limit=time_limit(reps, explain_s + warmup),
                        duration=explain_s,
                        explain=explain,
                        **timing,
                    )
                    points.append(Point(name, variant, m, n, tuple(args), explained=True))
    params = {
        "probes": [f"{n}:{v}" for n, v in probes],
        "workers": counts,
        "modes": modes,
        "placement": placement,
        "duration_s": duration,
        "ops": None if ops_per_probe and all(n in ops_per_probe for n, _ in probes) else ops,
        "ops_per_probe": ops_per_probe or {},
        "reps": reps,
        "warmup_s": warmup,
        "interval_s": interval,
        "opts": probe_opts,
        **engine.Explain.params(explain),
        # what each probe measured, in words, kept with the run: showing it
        # later needs no engine (nor this engine's version of the words)
        "descriptions": _described(probes),
    }
    return Plan(points, reps, params)


def work_alone(probes: list[tuple[str, str]], probe_opts: dict[str, dict], seconds: float) -> dict[str, int]:
    """Per probe (by name), the operations one worker does alone in about
    `seconds`: OSMark's fixed workload per worker, sized on this machine
    from a run of one worker for half of it, after a warm-up (an operation
    of mmapbench's size takes some 0.1 s: a few of them). The engine is
    stopped with us."""
    out = {}
    for name, variant in probes:
        args = engine.run_argv(probe=f"{name}:{variant}", workers=1, reps=1, warmup=0.1, duration=seconds / 2,
                               opts=probe_opts.get(name), time_limit=time_limit(1, seconds / 2 + 0.1))  # fmt: skip
        proc = engine.spawn(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            stdout, stderr = proc.communicate()
        except BaseException:
            proc.kill()
            proc.communicate()
            raise
        rates = [r["ops_per_sec"] for r in map(json.loads, stdout.splitlines()) if r.get("type") == "worker"]
        if proc.returncode != 0 or not rates or not rates[0] > 0:
            raise MeasurementError(f"sizing {name}'s work: the engine measured nothing ({stderr.strip()[-200:]})")
        out[name] = max(1, round(rates[0] * seconds))
    return out


def _described(probes: list[tuple[str, str]]) -> dict[str, str]:
    said = engine.descriptions()
    return {f"{n}:{v}": said.get(f"{n}:{v}") or said.get(n, "") for n, v in probes}


def machine_shape() -> dict:
    """The CPUs we may use, as sockets × cores × threads."""
    cpus = engine.topology()["cpus"]
    return {
        "cpus": len(cpus),
        "sockets": len({c["package"] for c in cpus}),
        "cores": len({(c["package"], c["die"], c["core"]) for c in cpus}),
        "threads_per_core": max(c["smt"] for c in cpus) + 1,
    }


def where_workers_run(placed: dict[int, list[int]], placement: str) -> list[dict]:
    """Per worker count, the CPUs the engine gives it (placed: count -> CPUs),
    the sockets they span with the workers on each, the cores whose SMT
    siblings are both (all) used, and the machine boundary the count marks
    under this placement, if any (parse.landmarks)."""
    where = {c["cpu"]: c for c in engine.topology()["cpus"]}
    marks = landmarks(placement_order(len(where), placement), placement) if placement in ("compact", "spread") else {}
    rows = []
    for n, cpus in sorted(placed.items()):
        per_socket: dict[int, int] = {}
        per_core: dict[tuple, list[int]] = {}
        for cpu in cpus:
            c = where[cpu]
            per_socket[c["package"]] = per_socket.get(c["package"], 0) + 1
            per_core.setdefault((c["package"], c["die"], c["core"]), []).append(cpu)
        shared = sorted(sorted(g) for g in per_core.values() if len(g) > 1)
        rows.append(
            {
                "workers": n,
                "cpus": format_cpulist(cpus),
                "cpu_order": list(cpus),
                "sockets": dict(sorted(per_socket.items())),
                "cores": len(per_core),
                "smt_shared": shared,
                "smt_shared_text": format_siblings(shared),
                "landmark": marks.get(n),
            }
        )
    return rows


def dry_run(p: Plan) -> dict:
    """What `scale --dry-run` prints: the plan, where each worker count runs."""
    placement = p.params["placement"]
    placed = {n: engine.placement(n, placement) for n in p.params["workers"]}
    return {
        "dry_run": True,
        "kind": "scale",
        "machine": machine_shape(),
        "params": p.params,
        "invocations": len(p.points),
        "repetitions": p.total_reps,
        "points": where_workers_run(placed, placement),
    }
