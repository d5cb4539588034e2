"""Runs a plan's engine invocations into the store, with a progress bar.

Every completed repetition is committed as soon as the engine reports it, so
a run cut short keeps what it measured and is marked incomplete."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from . import collectors, engine, runtime, stopsignals
from .errors import Interrupted, MeasurementError, UsageError
from .format import plural
from .invocation import Invocation
from .records import JobRanks, from_first_rank
from .store import Store, StoreError


@contextmanager
def _signals_stop_in_order():
    """SIGINT, SIGTERM (a scheduler, a timeout) and SIGHUP end the run: an
    engine being read is asked to end its repetition, and is read to its end
    (its records kept, never blocked on a full pipe); anywhere else the
    signal raises Interrupted at once."""

    def handler(signum, frame):
        if not engine.stop_in_order(signum):
            raise Interrupted(signum)

    with stopsignals.handled_by(handler):
        yield


def execute(
    store: Store,
    kind: str,
    argv: list[str],
    params: dict,
    invocations: Iterable[Invocation],
    total: int,
    console: Console,
    quiet: bool,
    checked: bool = False,
) -> int:
    """Measures every invocation; returns the run id. Raises Interrupted or
    MeasurementError after marking the run incomplete or failed, and
    UsageError, storing nothing, if the engine refuses an invocation."""
    invocations = list(invocations)
    runtime.entry()  # the engines record what they make there
    if not checked:
        check(invocations)
    run_id = store.begin_run(kind, argv, params, collectors.machine_metadata())
    progress = Progress(
        TextColumn("{task.description:<28}", markup=False),  # labels hold user strings
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
        transient=True,
    )
    try:
        with _signals_stop_in_order(), progress:
            task = progress.add_task("", total=total)
            for inv in invocations:
                progress.update(task, description=inv.label)
                _run_one(store, run_id, inv, progress, task)
        store.finish_run(run_id, "complete")
    except Interrupted as e:
        mark_ended(store, run_id, "incomplete", str(e))
        e.run_kept, e.run_id = True, run_id
        raise
    except MeasurementError as e:
        mark_ended(store, run_id, "failed", str(e))
        raise
    except StoreError as e:
        raise store_failed(store, run_id, e) from None
    except UsageError as e:
        # Refused input measures nothing; a refusal after some points were
        # measured keeps them, as a failed run.
        if store.records(run_id, "rep"):
            store.finish_run(run_id, "failed", str(e))
        else:
            store.delete_run(run_id)
        raise
    return run_id


def mark_ended(store: Store, run_id: int, status: str, reason: str) -> None:
    """Ends a run that did not complete, if the store still can (full, it
    may not: `runs` then tells it from its dead process)."""
    try:
        store.finish_run(run_id, status, reason)
    except StoreError:
        pass


def store_failed(store: Store, run_id: int, e: StoreError) -> MeasurementError:
    """The store itself failed mid-run (a full disk): the run failed, it is
    no usage error, and it is marked as far as the store still allows."""
    mark_ended(store, run_id, "failed", str(e))
    return MeasurementError(f"run {run_id} could not be stored: {e}")


def check(invocations: list[Invocation]) -> None:
    """Has the engine validate the invocations before anything is stored
    (its --dry-run parses and checks argv as a real run would). Points that
    differ only in their worker count are checked at the largest count."""
    largest: dict[tuple, tuple[int, tuple[str, ...]]] = {}
    for inv in invocations:
        args = inv.check_args
        if args is None:
            continue
        key, workers = [], 0
        for i, a in enumerate(args):
            if i > 0 and args[i - 1] == "--workers":
                workers = int(a)
            else:
                key.append(a)
        if tuple(key) not in largest or workers > largest[tuple(key)][0]:
            largest[tuple(key)] = (workers, tuple(args))
    for _, args in largest.values():
        engine.check(list(args))


def _run_one(store: Store, run_id: int, inv: Invocation, progress: Progress, task) -> None:
    try:
        _measure_one(store, run_id, inv, progress, task)
    finally:
        # What an engine killed outright (its whole group, SIGKILL) could not remove.
        runtime.reap_engines()


def _measure_one(store: Store, run_id: int, inv: Invocation, progress: Progress, task) -> None:
    measured = inv.measure()
    if measured is not None:
        for batch in measured:
            store.add_records(run_id, batch)
        progress.advance(task)
        return
    with inv.surroundings() as context:
        store.add_records(run_id, [context.record])
        _run_engine(store, run_id, inv, progress, task)
        store.add_records(run_id, context.after())


def _named(rec: dict, syms: list) -> dict:
    """An `explain` record with its lock callers named now: kernel addresses
    mean nothing on another boot (KASLR), so names are what is stored."""
    if rec["type"] == "explain" and rec.get("available"):
        from .kallsyms import resolve_charges

        if not syms:
            syms.append(engine.kernel_symbols())
        resolve_charges(rec, syms[0])
    return rec


def _run_engine(store: Store, run_id: int, inv: Invocation, progress: Progress, task) -> None:
    launch = inv.launcher()
    er = engine.EngineRun(list(inv.args), launch=list(launch) if launch else None)
    syms: list = []  # /proc/kallsyms, read once if needed
    try:
        batch: list[dict] = []
        job = JobRanks()  # a job's ranks, by the records they sent
        for rec in er.read_to_end():
            batch.append(_named(rec, syms))
            job.add(rec)
            if rec["type"] == "rep":
                store.add_records(run_id, batch)
                batch = []
                if from_first_rank(rec):  # a job's ranks end each repetition together
                    progress.advance(task)
        store.add_records(run_id, batch)
    finally:
        rc = er.close()
    if er.stopped_by:
        raise Interrupted(er.stopped_by)
    # a rank of a job stopped by a signal that was not ours: the job failed there
    if er.end and er.end.get("status") == "interrupted" and not launch:
        raise Interrupted(er.end.get("signal", signal.SIGINT))
    failure = (launch_failure(er.stderr, job.hosts, job.stopped, er.end) if launch else None) or er.failure()
    if er.refused and not job.stopped:
        raise UsageError(failure)
    if rc != 0 or job.stopped:
        raise MeasurementError(f"{inv.label}: {failure}")
    if er.cut_records:
        raise MeasurementError(f"{inv.label}: {plural(er.cut_records, 'record')} of the engine's came cut short")


def launch_failure(stderr: str, hosts: dict[int, str], stopped: dict[int, int], end: dict | None) -> str | None:
    """Which rank of a job failed, on which host, and the engine's words:
    the ranks a signal stopped, from their own records, else from what the
    launcher printed (Open MPI's wording; None otherwise)."""
    import re

    if stopped:
        return "; ".join(
            f"rank {r}{f' on {hosts[r]}' if r in hosts else ''} was stopped by {_signal_name(s)}"
            for r, s in sorted(stopped.items())
        )
    said = [m.group(1) for m in re.finditer(r"^oslens-engine: (.+)$", stderr, re.M)]
    # a rank stopped alone ends the job (engine/cluster/cluster_mpi.c), in its own words (those
    # of mpirun that follow, MPI_ABORT's, it sometimes fails to print)
    alone = [w for w in said if re.match(r"rank \d+ on \S+ was stopped by SIG\w+ alone", w)]
    if alone:
        return alone[0]
    signal_ = re.search(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \((.+?)\))?", stderr)
    if signal_:
        rank, host, sig, name = signal_.groups()
        return f"rank {rank} on {host} was killed by signal {sig}" + (f" ({name})" if name else "")
    status = re.search(r"Process name: \[\[\d+,\d+\],(\d+)\]\s+Exit code:\s+(\d+)", stderr)
    if status:
        rank, code = status.groups()
        on = f" on {hosts[int(rank)]}" if int(rank) in hosts else ""
        return f"rank {rank}{on} exited with status {code}" + (f": {said[0]}" if said else "")
    if end is None and not said:
        # mpirun ends so when it is sent SIGINT, SIGTERM or SIGHUP itself:
        # it kills the ranks and stops relaying their records mid-line
        return "the launcher ended the job before its ranks reported their end, without a word"
    return None


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
