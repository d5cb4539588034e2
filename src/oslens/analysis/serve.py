"""A `serve` run: per server, what its load generator counted (requests,
errors, their rate, its latency percentiles) and where the server's time
went while it was profiled, from each repetition's profile (the sections
of `oslens profile`, profile/summary.py), with the repetitions' headline
figures side by side and their median.

The records of a repetition are its `serve` record and the profile's
records after it, up to the next `serve` record."""

from __future__ import annotations

import statistics
from collections import defaultdict

from .. import kinds
from ..format import plural
from ..profile.summary import dig
from . import DictSummary
from .metrics import HIGHER, LOWER, Metrics

# The headline figures of a server's profile: (key, path in the profile
# summary, unit, label). What the scale-out study reads, and `compare` tests.
HEADLINES = (
    ("kernel_share", ("sections", "time", "total", "kernel_share"), "share", "kernel share of the server's CPU time"),
    ("syscalls_per_s", ("sections", "syscalls", "total", "per_s"), "/s", "system calls per second"),
    ("voluntary_per_s", ("sections", "switches", "counts", "voluntary_per_s"), "/s", "voluntary switches per second"),
    ("involuntary_per_s", ("sections", "switches", "counts", "involuntary_per_s"), "/s", "preemptions per second"),
    ("migrations_per_s", ("sections", "switches", "counts", "migrations_per_s"), "/s", "migrations per second"),
    ("faults_per_s", ("sections", "faults", "counts", "all_per_s"), "/s", "page faults per second"),
    ("lock_wait_ns", ("sections", "locks", "total", "total_ns"), "ns", "kernel lock wait in the window"),
)


def repetitions(records: list[dict]) -> list[tuple[dict, list[dict]]]:
    """Each repetition's `serve` record and its profile's records."""
    out: list[tuple[dict, list[dict]]] = []
    for r in records:
        if r.get("type") == "serve":
            out.append((r, []))
        elif out:
            out[-1][1].append(r)
    return out


class ServeSummary(DictSummary):
    """{servers: [...]} and, for a study, its verdicts under `study`."""

    def nothing_measured(self) -> list[str]:
        """The servers whose load generator saw no request answered: a run that profiled an idle server."""
        return [s["server"] for s in self["servers"] if not s["requests"]]


def _answered(load: dict) -> bool:
    return bool(load.get("requests")) and load.get("errors") == 0


def describe(s: dict) -> str:
    """What ran where, for people: a server with its generator, or a job."""
    from ..cpulist import format_cpulist

    v = s["versions"]
    if s["job"]:
        seconds = [r["seconds"] for r in s["reps"] if r["seconds"] is not None]
        took = f", {statistics.median(seconds):.1f} s a run (median)" if seconds else ""
        return (f"{s['label']}: {s['what']}; {s['server']} {v.get('server') or '?'} on CPUs "
                f"{format_cpulist(s['server_cpus'])}, run by {s.get('launcher') or '?'}{took}. "
                f"Not: {s['limits']}")  # fmt: skip
    counted = s["reps"][0]["counted_by"] if s["reps"] else "?"
    return (f"{s['label']}: {s['what']}; server {v.get('server') or '?'} on CPUs {format_cpulist(s['server_cpus'])}, "
            f"generator {v.get('client') or '?'} on {format_cpulist(s['client_cpus'])}, {s['connections']} "
            f"connections; requests counted by {counted}. Not: {s['limits']}")  # fmt: skip


def rep_notes(s: dict) -> list[tuple[str, str]]:
    """What a reader must know of each repetition of a server, as (text,
    level: note, warning or failure): the generator's output unread, what
    it said qualifies its count, a server that died or a job that failed."""
    out = []
    for r in s["reps"]:
        rep = f"{s['label']} rep {r['rep'] + 1}"
        if r.get("unread"):
            out.append((f"{rep}: {r['unread']}", "warning"))
        out += [(f"{rep}: {n}", "note") for n in r.get("notes") or []]
        if r.get("server_alive") is False:
            out.append((f"{rep}: " + ("the job failed" if s["job"] else "the server died under load"), "failure"))
    return out


def job_results(s: dict) -> str | None:
    """A job's own results (the median of its repetitions'), for people; None for a server."""
    if not s["job"]:
        return None
    from ..errors import UsageError
    from ..format import sig
    from ..servers import get

    try:
        labels = get(s["server"]).result_labels
    except UsageError:  # a job this oslens no longer knows: its results by their own names
        labels = tuple((k, k) for k in s["reps"][0]["results"]) if s["reps"] else ()
    parts = []
    for key, label in labels:
        values = [r["results"][key] for r in s["reps"] if isinstance(r["results"].get(key), (int, float))]
        if values:
            parts.append(f"{label} {sig(statistics.median(values), 3)}")
    return f"{s['label']}'s results: " + ("; ".join(parts) if parts else "none written")


def summarize(records: list[dict]) -> dict:
    from ..profile.summary import summarize as profile_summary

    # a server, or a job on one set of CPUs (a job's scaling runs it on several)
    by_server: dict[tuple[str, tuple[int, ...]], list[tuple[dict, dict | None]]] = defaultdict(list)
    for serve, recs in repetitions(records):
        key = (serve["server"], tuple(serve["server_cpus"]))
        by_server[key].append((serve, profile_summary(recs) if recs else None))
    several = {name for name, _ in by_server if sum(n == name for n, _ in by_server) > 1}
    servers = []
    for (name, cpus), reps in by_server.items():
        first = reps[0][0]
        rows = []
        for serve, prof in reps:
            load = serve["load"]
            rows.append(
                {
                    "rep": serve["rep"],
                    "requests": load.get("requests"),
                    "errors": load.get("errors"),
                    "per_s": load.get("per_s"),
                    "latency_ms": load.get("latency_ms") or {},
                    "counted_by": load.get("counted_by"),
                    # the other end's count, where the server keeps one beside the generator's
                    "server_requests": (serve.get("server_view") or {}).get("requests"),
                    "unread": load.get("unread"),
                    "notes": load.get("notes") or [],
                    "server_alive": serve.get("server_alive"),
                    # a job's: how long its run took, and what it said of itself
                    "seconds": load.get("seconds") if serve.get("job") else None,
                    "results": serve.get("results") or {},
                    **{key: dig(prof, *path) for key, path, _, _ in HEADLINES},
                }
            )
        figures = {}
        for key, _, _, _ in (*HEADLINES, ("per_s", None, None, None)):
            values = [r[key] for r in rows if isinstance(r[key], (int, float))]
            figures[key] = statistics.median(values) if values else None
        servers.append(
            {
                "server": name,
                # what tells it apart from the same job on other CPUs
                "label": f"{name} on {plural(len(cpus), 'CPU')}" if name in several else name,
                "scaling": bool(first.get("scaling")),
                "what": first["what"],
                "stands_for": first["stands_for"],
                "job": bool(first.get("job")),
                "launcher": first.get("launcher"),
                "limits": first.get("limits"),
                "versions": first.get("versions") or {},
                "server_cpus": first["server_cpus"],
                "client_cpus": first["client_cpus"],
                "connections": first["connections"],
                "requests": sum(r["requests"] or 0 for r in rows),
                "answered": all(_answered(s["load"]) for s, _ in reps),
                "reps": rows,
                "figures": figures,
                # the sections of the last repetition's profile, as `profile` shows them
                "profile": reps[-1][1],
            }
        )
    return {"servers": servers}


def analyze(run, records: list[dict]) -> ServeSummary:
    summary = ServeSummary(summarize(records))
    if (run.params or {}).get("study"):
        summary["study"] = kinds.study(run.params["study"]).load("verdicts")(summary, run, records)
    return summary


def metrics(run, records: list[dict]) -> Metrics:
    out = Metrics()
    for s in summarize(records)["servers"]:
        group = f"{s['label']} ({s['stands_for']})"
        if s["job"]:
            out.add(f"serve/{s['label']}/seconds", [r["seconds"] for r in s["reps"]], "s", LOWER, group,
                    "the job's run")  # fmt: skip
        else:
            out.add(f"serve/{s['label']}/requests per s", [r["per_s"] for r in s["reps"]], "/s", HIGHER, group,
                    "requests answered per second")  # fmt: skip
        for key, _, unit, label in HEADLINES:
            out.add(f"serve/{s['label']}/{key}", [r[key] for r in s["reps"]], unit, LOWER, group, label)
    return out
