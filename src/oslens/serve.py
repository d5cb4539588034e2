"""`oslens serve`: real server software under its load generator, profiled
in steady state, as Zheng et al. profiled CloudSuite.

One repetition of one server: the server is configured in a private
directory and started in a network namespace of its own (servers/netns.py)
on its CPUs; once it listens, the load generator starts in that namespace
on the other CPUs; after the warm-up, `oslens-engine profile --pid` attaches
to the server (its master and workers alike) for the window, and detaches;
the generator is let finish (or stopped), and the server is stopped. Both
sit in cgroups oslens owns, so a kill at any moment leaves nothing the
next oslens does not remove.

Stored per repetition: a `serve` record (the server, its version and
configuration, the generator's command and what it counted, the CPUs),
then the profile's own records, as `oslens profile --pid` stores them."""

from __future__ import annotations

import errno
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from . import cgroups, runtime, servers
from .errors import Interrupted, MeasurementError
from .invocation import Invocation
from .servers import netns

READY_TIMEOUT_S = 10.0  # a server not listening by then failed to start
STOP_TIMEOUT_S = 5.0  # then SIGKILL
OUTPUT_TAIL = 2000  # characters of a failed server's or generator's output kept
# The load goes on this long after the profile has detached, so that the
# whole window was under it; a generator that keeps a time limit of its own
# is given this much more than the warm-up and the window.
TAIL_S = 0.5
GENERATOR_SLACK_S = 60.0


@dataclass(frozen=True)
class ServePoint(Invocation):
    """One repetition of one server, as the runner takes it."""

    server: str
    server_cpus: tuple[int, ...]
    client_cpus: tuple[int, ...]
    connections: int
    warmup: float
    window: float
    rep: int
    # False: the same load for the same window, the server not profiled
    # (bench/serve.py: what profiling costs it)
    profiled: bool = True
    # a job run on a part of the CPUs, one count of its scaling (it has
    # server_cpus only), beside its run on them all
    scaling: bool = False
    reps = 1  # the progress counts repetitions
    check_args = None  # no engine argv to check: the profile's is made here

    @property
    def label(self) -> str:
        on = f" on {len(self.server_cpus)} of the CPUs" if self.scaling else ""
        return f"{self.server}{on}, rep {self.rep + 1}"

    def measure(self) -> Iterator[list[dict]]:
        yield (job_once if servers.get(self.server).job else serve_once)(self)


def _tail(f) -> str:
    f.seek(0)
    return f.read()[-OUTPUT_TAIL:]


def _stop(proc: subprocess.Popen | None, sig: int = signal.SIGTERM, group: bool = False) -> None:
    """Asks a process to end, then makes it; with `group`, its whole process
    group (a job's, in a session of its own: a shell's children would not
    hear of their parent's end), and then whatever of it outlived its leader."""
    if proc is None:
        return

    def send(s: int) -> None:
        if group:
            _signal_group(proc.pid, s)
        elif proc.poll() is None:
            proc.send_signal(s)

    if proc.poll() is None:
        send(sig)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            send(signal.SIGKILL)
            proc.wait()
    if group:
        _signal_group(proc.pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _start(argv: list[str], box: cgroups.Confinement, out, then=None, **popen) -> subprocess.Popen:
    """A process on the box's CPUs, in a session of its own (a terminal's
    Ctrl-C is oslens's to handle, in order), dying with oslens."""

    def enter() -> None:
        box.enter()
        if then:
            then()

    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=runtime.dies_with_parent(signal.SIGTERM, enter),
            **popen,
        )
    except (OSError, subprocess.SubprocessError) as e:  # the child's set-up failed before exec
        raise MeasurementError(f"cannot start {argv[0]}: {e}") from None


def _in_namespace(argv: list[str], pid: int, box: cgroups.Confinement, out) -> subprocess.Popen:
    enter = netns.joiner(pid)
    try:
        return _start(argv, box, out, enter)
    finally:
        os.close(enter.fd)


def _wait_listening(server: subprocess.Popen, port: int, out) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not netns.listening(server.pid, port):
        if server.poll() is not None:
            raise MeasurementError(f"the server exited with status {server.returncode} before it listened: "
                                   f"{_tail(out).strip() or 'no output'}")  # fmt: skip
        if time.monotonic() > deadline:
            raise MeasurementError(f"the server did not listen on port {port} within {READY_TIMEOUT_S:g} s")
        time.sleep(0.05)


def _alive(when: str, server, server_out, client, client_out) -> None:
    """The window must be under load: a server or generator that ended fails the repetition, in its words."""
    for who, proc, out in (("server", server, server_out), ("load generator", client, client_out)):
        if proc.poll() is not None:
            raise MeasurementError(f"the {who} ended {when} (status {proc.returncode}): "
                                   f"{_tail(out).strip() or 'no output'}")  # fmt: skip


def _counters(srv: servers.Server, pid: int, box: cgroups.Confinement) -> str | None:
    """The server's own counters, read by its client tool in its namespace."""
    if not srv.counters:
        return None
    with tempfile.TemporaryFile("w+") as out:
        proc = _in_namespace(servers.resolved(srv.counters), pid, box, out)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _stop(proc, signal.SIGKILL)
            return None
        return _tail(out) if proc.returncode == 0 else None


def _counted(srv: servers.Server, output: str, before: str | None, after: str | None, seconds: float):
    """(the count, the generator's view, the server's view or None): the
    generator's count, unless it keeps none and the server does."""
    generator = srv.read(output)
    server_view = srv.count(before or "", after or "", seconds) if srv.count else None
    if not srv.generator_counts and server_view is not None:
        return server_view, generator, server_view
    return generator, generator, server_view


def versions(srv: servers.Server) -> dict[str, str | None]:
    """The server's and the generator's versions, in their own words."""
    out = {}
    for role, argv in (("server", srv.version_argv), ("client", srv.client_version_argv)):
        if not argv:  # it says its version only in its output (a job's results)
            out[role] = None
            continue
        try:
            p = subprocess.run(servers.resolved(argv), capture_output=True, text=True, timeout=10)
            out[role] = servers.version(p.stdout + p.stderr)
        except (OSError, subprocess.TimeoutExpired):
            out[role] = None
    return out


def serve_once(pt: ServePoint) -> list[dict]:
    """One repetition: the `serve` record, then the profile's records."""
    from .profile.collect import run as profile

    srv = servers.get(pt.server)
    workdir = Path(tempfile.mkdtemp(prefix=f"oslens.serve.{srv.name}."))  # in oslens's private temporary directory
    label = f"serve.{srv.name}.{pt.rep}"
    try:
        with (
            cgroups.Confinement(list(pt.server_cpus), f"{label}.server") as server_box,
            cgroups.Confinement(list(pt.client_cpus), f"{label}.client") as client_box,
            tempfile.TemporaryFile("w+") as server_out,
            tempfile.TemporaryFile("w+") as client_out,
        ):
            argv = servers.resolved(srv.configure(workdir, len(pt.server_cpus)))
            config = _config(srv, workdir)
            server = _start(argv, server_box, server_out, netns.enter_new, env=_environment(srv))
            client = None
            try:
                _wait_listening(server, srv.port, server_out)
                before = _counters(srv, server.pid, client_box)
                # its own limit, if it keeps one, well past the profile's end: it is stopped once the profile
                # has detached (the engine takes a moment to load before its window), never before
                seconds = pt.warmup + pt.window + GENERATOR_SLACK_S
                # a generator thread per CPU, each with a connection at least
                connections = max(pt.connections, len(pt.client_cpus))
                client_argv = servers.resolved(srv.drive(seconds, connections, len(pt.client_cpus)))
                started = time.monotonic()
                client = _in_namespace(client_argv, server.pid, client_box, client_out)
                time.sleep(pt.warmup)
                _alive("during the warm-up", server, server_out, client, client_out)
                records: list[dict] = []
                if pt.profiled:
                    prof = profile(pid=server.pid, duration=pt.window)
                    if not prof.complete:
                        raise Interrupted(prof.interrupted_by or signal.SIGINT)
                    records = prof.records
                else:
                    time.sleep(pt.window)
                time.sleep(TAIL_S)
                _alive("before the profile's end", server, server_out, client, client_out)
                _stop(client, signal.SIGINT)  # wrk prints its summary then
                elapsed = time.monotonic() - started
                after = _counters(srv, server.pid, client_box)
                alive = server.poll() is None
            finally:
                _stop(client, signal.SIGINT)
                _stop(server)
            load, generator, server_view = _counted(srv, _whole(client_out), before, after, elapsed)
            record = {
                "type": "serve",
                "server": srv.name,
                "what": srv.what,
                "stands_for": srv.stands_for,
                "rep": pt.rep,
                "versions": versions(srv),
                "server_argv": argv,
                "config": config,
                "client_argv": client_argv,
                "server_cpus": list(pt.server_cpus),
                "client_cpus": list(pt.client_cpus),
                "confinement": server_box.method,
                "connections": connections,
                "warmup_s": pt.warmup,
                "window_s": pt.window,
                "profiled": pt.profiled,
                "load": load.to_dict(),
                "generator": generator.to_dict(),
                "server_view": server_view.to_dict() if server_view else None,
                "server_alive": alive,
                "limits": srv.limits,
            }
            if not alive or load.requests in (None, 0):
                record["server_output"] = _tail(server_out)
                record["client_output"] = _tail(client_out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return [record, *records]


def _config(srv: servers.Server, workdir: Path) -> dict[str, str]:
    return {p.name: p.read_text() for pattern in srv.config_files for p in workdir.glob(pattern)}


def _environment(srv: servers.Server) -> dict[str, str] | None:
    return {**os.environ, **srv.environment()} if srv.environment else None


def _gated(argv: list[str], fifo: Path) -> list[str]:
    """argv, started only once a line is written to fifo: the shell waits
    on it, then becomes the job (exec), which keeps the pid the profile
    attached to; whatever the job forks after is followed from its birth."""
    return ["sh", "-c", 'read _ < "$0" && exec "$@"', str(fifo), *argv]


def _release(fifo: Path, job: subprocess.Popen) -> float:
    """Lets a gated job go (_gated): the moment it was let go. The shell
    waits on the fifo at once; one that never does (it died) fails the run
    rather than hold oslens."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: no reader yet
            break
        except OSError as e:
            if e.errno != errno.ENXIO or job.poll() is not None or time.monotonic() > deadline:
                raise MeasurementError(f"the job never waited for its start ({e.strerror})") from None
            time.sleep(0.005)
    try:
        at = time.monotonic()  # before the write: the job may run before this thread does again
        os.write(fd, b"go\n")
    finally:
        os.close(fd)
    return at


class _ExitWatch:
    """The moment a child exits, taken by a thread woken by its pidfd (which
    no wait of the child's Popen can race with), not when it is reaped: the
    profile's end and its symbol resolution come between. The thread may
    wait for the interpreter a few ms (its switch interval) before it takes
    the time. Where pidfd_open is refused (before Linux 5.3, a seccomp
    filter) the time is taken when the child is reaped, and said so."""

    def __init__(self, proc: subprocess.Popen):
        self.at: float | None = None
        self.how = "its exit (pidfd)"
        try:
            self._fd: int | None = os.pidfd_open(proc.pid)  # before anyone reaps it: it is ours, unreaped
        except OSError:
            self._fd, self.how = None, "its reaping (no pidfd here): later than its exit by the profile's end"
        self._thread = threading.Thread(target=self._watch, daemon=True)
        if self._fd is not None:
            self._thread.start()

    def join(self) -> None:
        """Once the child has been reaped: `at` is then set."""
        if self._fd is not None:
            self._thread.join()
        elif self.at is None:
            self.at = time.monotonic()

    def _watch(self) -> None:
        try:
            poll = select.poll()
            poll.register(self._fd, select.POLLIN)
            poll.poll()
            self.at = time.monotonic()
        finally:
            os.close(self._fd)


def _job_versions(srv: servers.Server, said: str | None) -> dict[str, str | None]:
    """The job's version as it says it (in its results, for hpcc) or as its program does, and its launcher's."""
    out = versions(srv)
    return {**out, "server": said or out["server"]}


def _let_go_and_profile(pt: ServePoint, srv: servers.Server, job: subprocess.Popen, fifo: Path, out) -> tuple:
    """Lets the gated job go once the profile has attached (at once when
    it is not profiled) and waits for its end: (the profile's records, the
    moment it was let go)."""
    from .profile.collect import run as profile

    released: list[float] = []
    failed: list[MeasurementError] = []

    def attached(r: dict) -> None:  # the profile's "target" record: everything is attached
        if r.get("type") != "target":
            return
        try:
            released.append(_release(fifo, job))
        except MeasurementError as e:  # never raised into the engine's reading: the job is stopped,
            failed.append(e)  # the engine sees it exit and ends, and then it is said
            _stop(job, group=True)

    records: list[dict] = []
    if pt.profiled:  # until it exits, at most its time limit
        prof = profile(pid=job.pid, duration=srv.time_limit_s, on_record=attached)
        if failed:
            raise failed[0]
        if not prof.complete:
            raise Interrupted(prof.interrupted_by or signal.SIGINT)
        records = prof.records
    else:
        released.append(_release(fifo, job))
    try:
        job.wait(STOP_TIMEOUT_S if pt.profiled else srv.time_limit_s)
    except subprocess.TimeoutExpired:
        raise MeasurementError(f"the job ran past its time limit ({srv.time_limit_s:g} s)") from None
    if not released:
        raise MeasurementError(f"the job ended before it was let go: {_tail(out).strip() or 'no output'}")
    return records, released[0]


def job_once(pt: ServePoint) -> list[dict]:
    """One run of a job (servers.Server.job), held at its start until the
    profile has attached, then profiled until it ends: the `serve` record,
    then the profile's. Its seconds run from its release to its exit."""
    srv = servers.get(pt.server)
    workdir = Path(tempfile.mkdtemp(prefix=f"oslens.serve.{srv.name}."))  # in oslens's private temporary directory
    cpus = sorted(set(pt.server_cpus) | set(pt.client_cpus))  # no generator: the job has every CPU given
    try:
        with (
            cgroups.Confinement(cpus, f"serve.{srv.name}.{len(cpus)}.{pt.rep}.job") as box,
            tempfile.TemporaryFile("w+") as job_out,
        ):
            argv = servers.resolved(srv.configure(workdir, len(cpus)))
            config = _config(srv, workdir)
            fifo = workdir / "go"
            os.mkfifo(fifo, 0o600)
            job = _start(_gated(argv, fifo), box, job_out, netns.enter_new, cwd=workdir, env=_environment(srv))
            exited = _ExitWatch(job)
            try:
                records, released = _let_go_and_profile(pt, srv, job, fifo, job_out)
            finally:
                _stop(job, group=True)
            exited.join()
            elapsed = exited.at - released
            load, found = srv.results(workdir, elapsed)
            job_versions = _job_versions(srv, found.pop("version", None))
            if job.returncode != 0:
                load.errors = (load.errors or 0) + 1
            record = {
                "type": "serve",
                "server": srv.name,
                "what": srv.what,
                "stands_for": srv.stands_for,
                "job": True,
                "scaling": pt.scaling,
                "rep": pt.rep,
                "versions": job_versions,
                "server_argv": argv,
                "config": config,
                "client_argv": None,
                "launcher": " ".join(filter(None, (Path(argv[0]).name, job_versions["client"]))),
                "server_cpus": cpus,
                "client_cpus": [],
                "confinement": box.method,
                "connections": None,
                "warmup_s": 0.0,
                "window_s": elapsed,
                "timed": f"from its release to {exited.how}",
                "profiled": pt.profiled,
                "load": load.to_dict(),
                "generator": None,
                "server_view": None,
                "results": found,
                "exit_status": job.returncode,
                "server_alive": job.returncode == 0,
                "limits": srv.limits,
            }
            if job.returncode != 0 or load.unread:
                record["server_output"] = _tail(job_out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return [record, *records]


def _whole(f) -> str:
    f.seek(0)
    return f.read()
