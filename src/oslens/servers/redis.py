"""redis-server driven by redis-benchmark (data serving: SETs and GETs of
small values over many connections), the distribution's packages both.

redis-benchmark runs a fixed number of requests per test and prints a
test's rate only when it completes; looped (-l) and stopped at the end of
the window it leaves its last test unreported. The requests are therefore
counted by the server itself (INFO stats, before and after the load), and
the generator's completed tests are kept beside as its own view."""

from __future__ import annotations

import re
from pathlib import Path

from . import Load, Server

PORT = 6379
VALUE_BYTES = 100
KEYS = 100_000
REQUESTS_PER_TEST = 100_000


def _server(workdir: Path, threads: int) -> list[str]:
    """In the foreground, nothing saved, its log and files under workdir;
    I/O threads for a server given more than one CPU (redis's own advice:
    the main thread stays one)."""
    return ["redis-server", "--port", str(PORT), "--bind", "127.0.0.1", "--protected-mode", "yes",
            "--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", str(workdir),
            "--logfile", str(workdir / "redis.log"), "--io-threads", str(max(1, threads))]  # fmt: skip


def _drive(seconds: float, connections: int, threads: int) -> list[str]:
    return ["redis-benchmark", "-h", "127.0.0.1", "-p", str(PORT), "-c", str(connections),
            "--threads", str(threads), "-t", "set,get", "-d", str(VALUE_BYTES), "-r", str(KEYS),
            "-n", str(REQUESTS_PER_TEST), "-l", "-q"]  # fmt: skip


_TEST = re.compile(r"(SET|GET): ([\d.]+) requests per second(?:, p50=([\d.]+) msec)?")


def read_benchmark(out: str) -> Load:
    """The tests redis-benchmark completed: their rates and p50s (the count is the server's: `count`)."""
    tests = _TEST.findall(out.replace("\r", "\n"))
    if not tests:
        return Load(None, None, None, None, unread="redis-benchmark completed no test in its time")
    p50 = [float(p) for _, _, p in tests if p]
    rates = [float(r) for _, r, _ in tests]
    load = Load(None, None, None, sum(rates) / len(rates), counted_by="redis-benchmark's completed tests")
    if p50:
        load.latency_ms["p50"] = sorted(p50)[len(p50) // 2]
    return load


def _stats(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^(\w+):(\d+)\r?$", text, re.M)}


def count(before: str, after: str, seconds: float) -> Load:
    """Commands the server processed during the load, and the errors it
    replied or connections it refused meanwhile (INFO stats)."""
    a, b = _stats(before), _stats(after)
    if "total_commands_processed" not in a or "total_commands_processed" not in b:
        return Load(None, None, None, None, unread="redis-server's INFO stats could not be read")
    # the two INFO commands themselves are counted too
    requests = b["total_commands_processed"] - a["total_commands_processed"] - 1
    errors = sum(b.get(k, 0) - a.get(k, 0) for k in ("total_error_replies", "rejected_connections"))
    return Load(requests, errors, seconds, requests / seconds if seconds else None,
                counted_by="redis-server (INFO stats, before and after the load)")  # fmt: skip


REDIS = Server(
    name="redis",
    what=f"data serving: redis-server answering redis-benchmark's SETs and GETs of {VALUE_BYTES}-byte values",
    stands_for="data serving",
    server_package="redis-server",
    client_package="redis-tools",
    server_exe="redis-server",
    client_exe="redis-benchmark",
    port=PORT,
    version_argv=("redis-server", "--version"),
    client_version_argv=("redis-benchmark", "--version"),
    configure=_server,
    drive=_drive,
    read=read_benchmark,
    generator_counts=False,
    counters=("redis-cli", "-p", str(PORT), "info", "stats"),
    count=count,
    limits="a key-value store under synthetic SETs and GETs, not CloudSuite's Cassandra under YCSB",
)
