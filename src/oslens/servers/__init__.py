"""The real server software `oslens serve` drives, each with the load
generator made for it: one module per server here, holding a small
descriptor (`Server`), and one entry in SERVERS naming it.

A server is the distribution's package, started by oslens in a network
namespace of its own (its loopback is reachable by nothing outside it: no
other user of the machine can talk to the server, whatever port it
listens on), confined with its generator to CPUs of their own, and driven
over that loopback by the generator, started in the same namespace. Both
are in cgroups oslens owns: whatever ends oslens, the next start removes
them (oslens.owned). The descriptor says only what differs between
servers: its packages, how to configure and start it, how to drive it, and
how to read what the generator counted.

Descriptors are named as "module:attribute" and imported only when used."""

from __future__ import annotations

import importlib
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import UsageError

SERVERS: dict[str, str] = {
    "nginx": ".nginx:WEB",
    "streaming": ".nginx:STREAMING",
    "redis": ".redis:REDIS",
    "search": ".search:SEARCH",
    "hpcc": ".hpcc:HPCC",
    "analysis": ".analysis:ANALYSIS",
}


@dataclass
class Load:
    """What a load generator counted over its whole run (warm-up included):
    requests answered, errors (failed connections, reads, writes, time-outs,
    error replies), their rate, and the latency percentiles it reports (ms);
    `counted_by` says whose count it is when the generator keeps none."""

    requests: int | None
    errors: int | None
    seconds: float | None
    per_s: float | None
    latency_ms: dict[str, float] = field(default_factory=dict)
    counted_by: str = "the load generator"
    unread: str | None = None  # why the generator's output could not be read
    notes: list[str] = field(default_factory=list)  # what the generator said that qualifies its count

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


@dataclass(frozen=True)
class Server:
    """One server and its load generator, or a job.

    `configure(workdir, threads)` writes what the server needs under
    workdir and returns its command line, in the foreground;
    `drive(seconds, connections, threads)` the generator's, which runs
    at most `seconds` (it is stopped with SIGINT before); `read(output)`
    what the generator printed, as a Load.

    A job (`job`) has no port and no generator: it runs in workdir on all
    the CPUs to its end, held at its start until the profile has attached,
    so that everything it forks is followed from its birth;
    `results(workdir, seconds)` reads what it wrote, as (Load, {result: value})."""

    name: str
    what: str  # for people: "web serving: nginx serving a static page to wrk"
    stands_for: str  # the CloudSuite workload of Zheng et al. it stands in for
    server_package: str
    client_package: str
    server_exe: str
    client_exe: str
    port: int
    version_argv: tuple[str, ...]
    client_version_argv: tuple[str, ...]
    configure: Callable[[Path, int], list[str]]
    drive: Callable[[float, int, int], list[str]] | None = None
    read: Callable[[str], Load] | None = None
    # the generator prints a count of the requests answered when stopped
    # (SIGINT, once the profile is over); if not, the server's counters are the count
    generator_counts: bool = True
    # argv printing the server's own counters (run in its namespace, before
    # and after the load), and (before, after, seconds) -> Load from them:
    # the other end's count, beside the generator's
    counters: tuple[str, ...] | None = None
    count: Callable[[str, str, float], Load] | None = None
    limits: str = ""  # what it does not stand for, said beside its figures
    # why it cannot run here though its executables are found (a library the
    # generator imports), or None: asked before anything starts
    unavailable: Callable[[], str | None] | None = None
    job: bool = False
    time_limit_s: float = 0.0  # a job's: it is profiled whole (--warmup and --duration are the servers')
    results: Callable[[Path, float], tuple[Load, dict]] | None = None
    result_labels: tuple[tuple[str, str], ...] = ()  # (result, how people read it), in the order shown
    environment: Callable[[], dict[str, str]] | None = None  # variables set for the server (or job) beside ours
    config_files: tuple[str, ...] = ("*.conf",)  # what of workdir the record keeps as its configuration


def get(name: str) -> Server:
    """The server of that name; an unknown name is a usage error."""
    where = SERVERS.get(name)
    if where is None:
        raise UsageError(f"no server '{name}' (the servers are {', '.join(SERVERS)})")
    module, _, attr = where.partition(":")
    return getattr(importlib.import_module(module, __package__), attr)


_made: dict[tuple, tuple] = {}


def made_once(make: Callable[..., tuple], *args) -> tuple:
    """What make(directory, *args) makes — (its path, what else it says) —
    under oslens's private temporary directory: once per process and
    directory (every repetition serves the same index, counts the same
    text), again where its path has gone (a new run made a new directory)."""
    import tempfile

    tmp = tempfile.gettempdir()
    key = (make, tmp, *args)
    got = _made.get(key)
    if got is None or not Path(got[0]).exists():
        got = _made[key] = make(tmp, *args)
    return got


def find(exe: str) -> str | None:
    """A server's or generator's executable: on PATH, or where Debian puts
    daemons (/usr/sbin), which a user's PATH may lack."""
    return shutil.which(exe) or shutil.which(exe, path="/usr/local/sbin:/usr/sbin:/sbin")


def resolved(argv: list[str] | tuple[str, ...]) -> list[str]:
    """argv with its program found (find), or as given when it is not."""
    return [find(argv[0]) or argv[0], *argv[1:]]


def version(text: str) -> str | None:
    """The first version number in a program's words about itself."""
    m = re.search(r"(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else None


_UNIT_MS = {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def duration_ms(text: str) -> float | None:
    """'123.45us', '1.20ms', '2.00s' in milliseconds."""
    m = re.fullmatch(r"\s*([\d.]+)\s*(us|µs|ms|s|m|h)\s*", text)
    return float(m.group(1)) * _UNIT_MS[m.group(2)] if m else None
