"""Stopping a run, whoever asks and whenever: the engine is read to its end
(never left blocked on a full pipe), the interrupted repetition's records
are kept, a signal in the engine's first moments is an interruption like
any other, an engine never outlives its oslens, and every interruption is
worded and exits alike (issue 17, items 1, 8, 9, 11). Real engine, real
kernel."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sqlite3
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from oslens import engine, leftovers
from oslens.compete import COMPETITOR_LIMIT_S

from conftest import SESSION_TMP, TWO, engine_bin, oslens, oslens_tmp

FIRST_CPU = min(os.sched_getaffinity(0))


def _many_records_argv() -> list[str]:
    # hundreds of short repetitions: far more output than a pipe holds
    # (64 KiB by default), whatever the machine
    return engine.run_argv(probe="getppid", cpus=[FIRST_CPU], reps=400, duration=0.002, warmup=0) + ["--latency"]


def _pipe_bytes(fd: int) -> int:
    import array

    n = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, n)
    return n[0]


def test_an_engine_stopped_while_its_output_pipe_is_full_ends_at_once():
    er = engine.EngineRun(_many_records_argv())
    try:
        fd = er.proc.stdout.fileno()
        deadline, last = time.monotonic() + 30, -1
        while (n := _pipe_bytes(fd)) != last or n < 32768:  # full: it no longer grows
            assert er.proc.poll() is None, "the engine ended before its pipe was full"
            assert time.monotonic() < deadline, f"the pipe never filled ({n} bytes)"
            last = n
            time.sleep(0.2)
        t0 = time.monotonic()
        er.close()
        took = time.monotonic() - t0
    finally:
        if er.proc.poll() is None:
            er.proc.kill()
            er.proc.wait()
    # it was read while it stopped: no wait for a grace period, then SIGKILL
    assert took < engine.STOP_GRACE_S / 4, f"close() took {took:.1f} s"
    assert er.proc.returncode == 128 + signal.SIGINT


def test_a_signal_while_an_engine_is_read_stops_it_in_order_and_keeps_its_last_records():
    er = engine.EngineRun(_many_records_argv())
    recs = []
    with er:
        for rec in er.read_to_end():
            recs.append(rec)
            if rec["type"] == "rep" and rec["rep"] == 2:
                assert engine.stop_in_order(signal.SIGTERM)
                assert not engine.stop_in_order(signal.SIGTERM), "asked twice: the caller raises"
    assert er.stopped_by == signal.SIGTERM
    end = [r for r in recs if r["type"] == "end"]
    assert end and end[0]["status"] == "interrupted", "the engine's last record was read"
    reps = [r["rep"] for r in recs if r["type"] == "rep"]
    assert 3 <= len(reps) < 400 and reps == sorted(set(reps))
    assert not engine.stop_in_order(signal.SIGTERM), "no engine is being read any more"


def _runs(db: Path) -> list[dict]:
    return json.loads(oslens("runs", "--json", db=db).stdout)


def _record_types(db: Path, run_id: int) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [r[0] for r in con.execute("SELECT type FROM record WHERE run_id = ?", (run_id,))]
    finally:
        con.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_noise_interrupted_mid_window_ends_at_once_and_keeps_the_repetition(sig, tmp_path):
    db = tmp_path / "db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "oslens", "-q", "noise", "--cpus", str(FIRST_CPU), "--duration", "30"],
        env={**os.environ, "OSLENS_DB": str(db)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not [p for p in leftovers.session_processes(proc.pid) if leftovers.exe_of(p).startswith(engine_bin())]:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    time.sleep(3)  # its BPF loaded, inside the measured window
    proc.send_signal(sig)
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - t0
    assert proc.returncode == 128 + sig
    assert err.strip() == f"oslens: interrupted by {sig.name}; the run is kept as incomplete"
    assert took < engine.STOP_GRACE_S / 4, f"took {took:.1f} s to stop"
    (run,) = _runs(db)
    assert run["status"] == "incomplete"
    types = _record_types(db, run["id"])
    # the repetition that was cut short is stored, as far as it went
    assert {"events", "rep", "end"} <= set(types), sorted(set(types))


def test_a_signal_before_the_engine_is_ready_is_an_interruption():
    """A signal pending when the engine starts (here: blocked and raised in
    the child before exec, so that it is there from the first instruction)
    ends the engine as interrupted, before it makes anything."""

    def pending_sigterm():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        os.kill(os.getpid(), signal.SIGTERM)

    before = oslens_tmp()
    p = subprocess.run(
        [engine_bin(), "run", "--probe", "sem", "--workers", str(TWO), "--duration", "5", "--reps", "1"],
        preexec_fn=pending_sigterm,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(SESSION_TMP)},
    )
    assert p.returncode == 128 + signal.SIGTERM, p.stderr
    recs = [json.loads(line) for line in p.stdout.splitlines()]
    assert recs[-1] == {"type": "end", "status": "interrupted", "signal": signal.SIGTERM}
    assert not [r for r in recs if r["type"] == "started"], "nothing measured"
    assert oslens_tmp() == before


def test_an_interrupted_profile_is_worded_and_exits_as_every_interrupted_command(tmp_path):
    """The profiled command signals its oslens (its parent's parent) and
    ends at once: the profile is cut short after the command ended, yet it
    is an interruption like any other, 128+N and one wording."""
    db = tmp_path / "db"
    p = oslens("-q", "profile", "--", "sh", "-c", "kill -TERM $(ps -o ppid= -p $PPID)", db=db, timeout=120)
    assert p.returncode == 128 + signal.SIGTERM, p.stderr
    # (the report goes to stderr: the command owns stdout) then the one line
    assert p.stderr.strip().splitlines()[-1] == "oslens: interrupted by SIGTERM; the run is kept as incomplete"
    (run,) = _runs(db)
    assert (run["status"], run["reason"]) == ("incomplete", "interrupted by SIGTERM")


def _as_under_nohup():
    # what nohup does before exec, in a session of its own so that the
    # hangup below reaches this group only
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    os.setsid()


def test_a_hangup_ignored_by_the_caller_as_under_nohup_does_not_end_the_run(tmp_path):
    """nohup ignores SIGHUP so that a closed terminal leaves the run going:
    a hangup sent to the whole group (oslens, its engine) while it measures
    is ignored by both, and the run completes."""
    db = tmp_path / "db"
    args = ["-q", "scale", "--probe", "getppid", "--workers", "1", "--duration", "1.5", "--reps", "2"]
    proc = subprocess.Popen([sys.executable, "-m", "oslens", *args], env={**os.environ, "OSLENS_DB": str(db)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_as_under_nohup)  # fmt: skip
    deadline = time.monotonic() + 60
    while not [p for p in leftovers.session_processes(proc.pid) if leftovers.exe_of(p).startswith(engine_bin())]:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    time.sleep(0.5)  # inside a repetition
    os.killpg(proc.pid, signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    (run,) = _runs(db)
    assert run["status"] == "complete"


def test_a_profiled_command_starts_with_the_signals_its_caller_ignored(tmp_path):
    """The command runs as it would without oslens: ignoring what nohup
    made it ignore, with every other signal at its default."""
    probe = "import signal; print([signal.getsignal(s).name for s in (signal.SIGHUP, signal.SIGTERM)])"
    argv = [sys.executable, "-m", "oslens", "-q", "profile", "--no-syscalls", "--", sys.executable, "-c", probe]
    p = subprocess.run(argv, env={**os.environ, "OSLENS_DB": str(tmp_path / "db")}, capture_output=True, text=True,
                       timeout=120, preexec_fn=_as_under_nohup)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "['SIG_IGN', 'SIG_DFL']"


@pytest.mark.skipif(TWO < 2, reason="a competitor needs a CPU of its own")
def test_a_competitor_that_dies_fails_the_measurement_it_was_to_disturb(tmp_path):
    """Measured 'with competition' while the competitor was dead is not what
    was asked: the run fails, in one line, saying so."""
    db = tmp_path / "db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "oslens", "-q", "latency", "--probe", "getppid", "--compete", "sem", "--duration", "2",
         "--reps", "1"],
        env={**os.environ, "OSLENS_DB": str(db)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    deadline, competitor = time.monotonic() + 60, None
    while competitor is None:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        for p in leftovers.session_processes(proc.pid):
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0") if Path(f"/proc/{p}").exists() else []
            # the competitor: the engine asked to run for hours, until stopped
            if leftovers.exe_of(p).startswith(engine_bin()) and str(COMPETITOR_LIMIT_S).encode() in argv:
                competitor = p
        time.sleep(0.05)
    time.sleep(0.5)
    os.kill(competitor, signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "the competitor ended during the measurement" in err and len(err.strip().splitlines()) == 1, err
    (run,) = _runs(db)
    assert run["status"] == "failed"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_while_oslens_is_still_starting_is_one_line_never_a_traceback(sig, tmp_path):
    """A signal in the first moments, while the package is imported (about
    half a second), ended in a KeyboardInterrupt traceback (SIGINT) or a
    death without a word (SIGTERM, SIGHUP). From the moment the CLI's
    libraries are imported (Python's import log says when: click is the
    first), at every moment after, the stop is worded as any other, 128+N.
    (The interpreter's own start, before any line of oslens runs, is
    Python's.)"""
    # a command that runs on long after its start: the signal never meets the interpreter's own end
    # (which puts the default dispositions back, and dies of a signal then without a word)
    argv = [sys.executable, "-m", "oslens", "-q", "noise", "--no-bpf", "--cpus", str(FIRST_CPU), "--duration", "30"]
    env = {**os.environ, "OSLENS_DB": str(tmp_path / "db"), "PYTHONPROFILEIMPORTTIME": "1"}
    for delay in (0.0, 0.01, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3, 0.45):
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in proc.stderr:  # the import log, until the CLI's own libraries are being imported
            if line.rstrip().split("|")[-1].strip() == "click":
                break
        time.sleep(delay)
        proc.send_signal(sig)
        rest, _ = proc.stderr.read(), proc.wait(timeout=60)
        err = "\n".join(x for x in rest.splitlines() if not x.startswith("import time:"))
        assert "Traceback" not in err, (delay, err)
        assert proc.returncode == 128 + sig, (delay, err)
        # before a run begins, or (a fast machine) once it has
        said = f"oslens: interrupted by {sig.name}"
        assert err.strip() in (said, f"{said}; the run is kept as incomplete"), (delay, err)
