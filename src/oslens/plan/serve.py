"""`oslens serve`: which servers, on which CPUs, under how much load, for
how long — all checked, and every server and generator found installed,
before anything starts or is stored."""

from __future__ import annotations

import os
import resource

from .. import engine, servers
from ..errors import UsageError
from . import Plan, check_reps, check_seconds

DEFAULT_SERVERS = "nginx,redis"
DEFAULT_CONNECTIONS = 64
MAX_CONNECTIONS = 10_000
OTHER_FILES = 64  # a process's own files beside its connections
INSTALL = "scripts/install-deps.sh servers installs them"


def _servers(spec: str) -> list[servers.Server]:
    names = [n.strip() for n in spec.split(",")]
    if any(not n for n in names):
        raise UsageError(f"--server: '{spec}' has an empty name (the servers are {', '.join(servers.SERVERS)})")
    chosen = [servers.get(n) for n in dict.fromkeys(names)]
    for s in chosen:
        for exe, package in ((s.server_exe, s.server_package), (s.client_exe, s.client_package)):
            if servers.find(exe) is None:
                raise UsageError(f"--server {s.name}: {exe} is not installed (Debian package {package}; {INSTALL})")
        if s.unavailable and (why := s.unavailable()):
            raise UsageError(f"--server {s.name}: {why}; {INSTALL}")
    return chosen


def _most_connections() -> int:
    """Connections the generator and the server can each hold open: their
    open-file limit (ours, which they inherit), less some for their other files."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return MAX_CONNECTIONS if soft == resource.RLIM_INFINITY else max(1, min(MAX_CONNECTIONS, soft - OTHER_FILES))


def split_cpus(ordered: list[int], server_cpus: int | None) -> tuple[list[int], list[int]]:
    """The server's CPUs and the generator's, from the CPUs in the engine's
    compact order (a socket filled first): the server takes `server_cpus`
    (default half, at least one), the generator the rest; on one CPU both
    share it."""
    n = server_cpus if server_cpus is not None else max(1, len(ordered) // 2)
    if not 1 <= n <= len(ordered):
        raise UsageError(f"--server-cpus: {n} is not a number of CPUs from 1 to {len(ordered)}")
    return ordered[:n], ordered[n:] or ordered[:n]


def plan(
    *,
    server: str,
    server_cpus: int | None,
    connections: int,
    warmup: float,
    duration: float,
    reps: int,
    scaling: tuple[str, ...] = (),
    scaling_counts: tuple[int, ...] = (),
) -> Plan:
    """`scaling`: jobs also run on 1, 2, 4 … of the CPUs (parse.default_worker_counts), compact,
    and on `scaling_counts` (a paper's) where the machine has more."""
    from ..parse import default_worker_counts
    from ..serve import ServePoint

    chosen = _servers(server)
    if os.geteuid() != 0:
        raise UsageError("serve starts each server in a network namespace of its own (out of other users' reach), "
                         "which needs root")  # fmt: skip
    check_reps(reps)
    check_seconds("--warmup", warmup, engine.limit("profile", "--duration")["max"], zero_allowed=True)
    check_seconds("--duration", duration, engine.limit("profile", "--duration")["max"])
    most = _most_connections()
    if not 1 <= connections <= most:
        raise UsageError(f"--connections: {connections:,} is not a number from 1 to {most:,} (each is an open file "
                         "of the generator and of the server: `ulimit -n` bounds them)")  # fmt: skip
    available = engine.placement(engine.topology()["available"], "compact")
    s_cpus, c_cpus = split_cpus(available, server_cpus)
    for name in scaling:
        if name not in [s.name for s in chosen if s.job]:
            raise UsageError(f"scaling: '{name}' is not a job of this run")
    counts = sorted({n for n in (*default_worker_counts(len(available)), *scaling_counts) if n < len(available)})
    # every server and every count once, then again: drift hits all alike
    points = [
        point
        for rep in range(reps)
        for point in (
            *(ServePoint(s.name, tuple(s_cpus), tuple(c_cpus), connections, warmup, duration, rep) for s in chosen),
            *(ServePoint(name, tuple(available[:n]), (), connections, warmup, duration, rep, scaling=True)
              for name in scaling for n in counts),
        )
    ]  # fmt: skip
    params = {
        "servers": [s.name for s in chosen],
        "server_cpus": s_cpus,
        "client_cpus": c_cpus,
        "shared_cpus": c_cpus == s_cpus,
        "connections": connections,
        "warmup_s": warmup,
        "duration_s": duration,
        "reps": reps,
        "scaling": {name: [*counts, len(available)] for name in scaling},
    }
    return Plan(points, reps, params)
