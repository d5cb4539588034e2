"""The frames of a `serve` run.

`reps` (main): one row per repetition of a server under load: what its
load generator counted and the headline figures of its profile.
`servers`: one row per server: what ran (versions, CPUs, connections) and
the median of its repetitions' figures.

CPU lists are text, comma-separated ("0,1,4").
"""

from __future__ import annotations

from . import describe, joined, table

_FIGURES = {
    "requests_per_s": ("float64", "requests answered per second, as counted (see counted_by)"),
    "kernel_share": ("float64", "kernel share of the server's CPU time in the profiled window"),
    "syscalls_per_s": ("float64", "the server's system calls per second"),
    "voluntary_per_s": ("float64", "its voluntary context switches per second"),
    "involuntary_per_s": ("float64", "its preemptions per second"),
    "migrations_per_s": ("float64", "its migrations between CPUs per second"),
    "faults_per_s": ("float64", "its page faults per second"),
    "lock_wait_ns": ("float64", "its kernel lock wait in the window, ns"),
}

COLUMNS = {
    "reps": {
        "server": ("str", "the server (nginx, streaming, redis, search) or job (analysis, hpcc)"),
        "cpus": ("int64", "the CPUs it ran on (a job's scaling runs it on several counts)"),
        "rep": ("int64", "repetition"),
        "requests": ("Int64", "requests answered during the load"),
        "errors": ("Int64", "errors: failed connections, reads, writes, time-outs, error replies"),
        "counted_by": ("str", "whose count: the load generator's, or the server's own counters"),
        "server_requests": ("Int64", "requests the server's own counters saw, where it keeps some"),
        "latency_p50_ms": ("float64", "the generator's median latency, ms"),
        "latency_p99_ms": ("float64", "its 99th percentile, ms (NaN: it does not report one)"),
        "seconds": ("float64", "a job's run, s (NaN for a server: its window is the run's --duration)"),
        **_FIGURES,
    },
    "servers": {
        "server": ("str", "the server"),
        "cpus": ("int64", "the CPUs it ran on"),
        "stands_for": ("str", "the CloudSuite workload it stands in for"),
        "server_version": ("str", "the server's version"),
        "client_version": ("str", "the load generator's version"),
        "server_cpus": ("str", "the server's CPUs, comma-separated"),
        "client_cpus": ("str", "the load generator's CPUs"),
        "connections": ("Int64", "the generator's connections (none for a job)"),
        "job": ("bool", "a job run to its end, not a server under load"),
        "answered": ("bool", "every repetition answered requests and no error"),
        **{k: (dtype, f"{meaning} (median of the repetitions)") for k, (dtype, meaning) in _FIGURES.items()},
    },
}
__doc__ += describe(COLUMNS)


def frames(run, records: list[dict]) -> dict:
    from ..analysis.serve import summarize

    servers = summarize(records)["servers"]
    reps = [
        {
            "server": s["server"],
            "cpus": len(s["server_cpus"]),
            "rep": r["rep"],
            "requests": r["requests"],
            "errors": r["errors"],
            "counted_by": r["counted_by"],
            "server_requests": r["server_requests"],
            "latency_p50_ms": r["latency_ms"].get("p50"),
            "latency_p99_ms": r["latency_ms"].get("p99"),
            "seconds": r["seconds"],
            "requests_per_s": r["per_s"],
            **{k: r.get(k) for k in _FIGURES if k != "requests_per_s"},
        }
        for s in servers
        for r in s["reps"]
    ]
    rows = [
        {
            "server": s["server"],
            "cpus": len(s["server_cpus"]),
            "stands_for": s["stands_for"],
            "server_version": s["versions"].get("server"),
            "client_version": s["versions"].get("client"),
            "server_cpus": joined(s["server_cpus"], ","),
            "client_cpus": joined(s["client_cpus"], ","),
            "connections": s["connections"],
            "job": s["job"],
            "answered": s["answered"],
            "requests_per_s": s["figures"].get("per_s"),
            **{k: s["figures"].get(k) for k in _FIGURES if k != "requests_per_s"},
        }
        for s in servers
    ]
    return {"reps": table(run.id, reps, COLUMNS["reps"]), "servers": table(run.id, rows, COLUMNS["servers"])}
