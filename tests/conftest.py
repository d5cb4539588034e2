"""Shared helpers: the real engine, the real CLI, and a way to see leaks."""

from __future__ import annotations

import atexit
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from oslens import engine, leftovers

# Every engine the tests start makes its temporary directory here, so that a
# leak check sees this session's directories only, and the rest is removed.
SESSION_TMP = Path(tempfile.mkdtemp(prefix="tests-tmp-"))
os.environ["TMPDIR"] = str(SESSION_TMP)


SESSION_PID = os.getpid()  # the process that made SESSION_TMP


def _remove_session_tmp() -> None:
    """At exit, not in a session fixture: a session that runs no test (all
    deselected, --collect-only, a collection error) runs no fixture, and
    left its directory in /tmp. Only by the process that made it: a child
    forked by a test exits through here too."""
    if os.getpid() == SESSION_PID:
        shutil.rmtree(SESSION_TMP, ignore_errors=True)


atexit.register(_remove_session_tmp)


def pytest_configure(config):
    """The tests' tmp_path directories go with the session's too: pytest's
    own place (/tmp/pytest-of-USER) keeps the last three sessions' (300 MB
    of devices' images and stores here), failed or not. --basetemp keeps
    them where the caller says."""
    if config.option.basetemp is None:
        config.option.basetemp = str(SESSION_TMP / "pytest")


def _children_get_default_stop_signals() -> None:
    """A shell without job control starts background jobs with SIGINT
    ignored, and nohup ignores SIGHUP; an ignored signal stays ignored
    across exec, and oslens (as nohup asks of every program) leaves it so.
    A suite started that way would send its commands signals they were told
    to ignore, and its stop tests would test the caller's shell. So this
    process ignores them by a handler of its own, which exec resets: every
    command the tests start begins with the default disposition, as one
    typed at a terminal does, wherever the suite was started from."""

    def ignore(signum, frame):
        pass

    for s in (signal.SIGINT, signal.SIGHUP):
        if signal.getsignal(s) == signal.SIG_IGN:
            signal.signal(s, ignore)


_children_get_default_stop_signals()

NCPU = engine.topology()["available"]
TWO = min(2, NCPU)  # "2 workers" on a machine that has them


# Test-sized options for probes whose defaults are sized for real runs (the
# 1 GiB parent of fork:mapped takes ~100 ms a fork).
TEST_OPTS = {"mapped_mb": "64"}


def probe_args(probe_variant: str) -> list[str]:
    """--probe P:V plus test-sized values for whichever options P has."""
    info = engine.probes()[probe_variant.split(":")[0]]
    args = ["--probe", probe_variant] + (["--target", io_target()] if info.needs_target else [])
    for key, value in TEST_OPTS.items():
        if key in info.options:
            args += ["--opt", f"{key}={value}"]
    return args


def io_target() -> str:
    """A file of 8 MiB of this session's for the I/O probes (direct I/O
    needs a filesystem that has it: the session's temporary directory)."""
    path = Path(SESSION_TMP) / "io-target"
    if not path.exists():
        path.write_bytes(os.urandom(8 << 20))
    return str(path)


def engine_bin() -> str:
    return str(engine.engine_path())


@dataclass
class EngineResult:
    rc: int
    records: list[dict]
    stderr: str

    def of(self, kind: str) -> list[dict]:
        return [r for r in self.records if r["type"] == kind]

    @property
    def end(self) -> dict:
        return self.of("end")[-1]


def run_engine(*args: str, timeout: float = 120, env: dict | None = None) -> EngineResult:
    p = subprocess.run([engine_bin(), *args], capture_output=True, text=True, timeout=timeout, env=env)
    recs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    return EngineResult(p.returncode, recs, p.stderr)


def oslens(*args: str, db: Path, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "OSLENS_DB": str(db)}
    return subprocess.run(
        [sys.executable, "-m", "oslens", *args], capture_output=True, text=True, timeout=timeout, env=env, **kw
    )


def table_column(text: str, header: str) -> str:
    """The cells of the first table in `text` with a column headed `header`
    (on one line), as one string: each body line's slice between that
    column's borders, a wrapped cell's lines joined by a space. Flattening
    the whole table instead lets a neighbouring column's text fall between
    two words of the cell, wherever the widths put the wrap."""
    lines = text.splitlines()
    top = next(k for k, line in enumerate(lines) if header in line and "┃" in line)
    at = lines[top].index(header)
    left, right = lines[top].rindex("┃", 0, at), lines[top].index("┃", at)
    cells = []
    for line in lines[top + 1 :]:
        if line.startswith("└"):
            break
        if line.startswith("│"):
            cells.append(line[left + 1 : right].strip())
    return " ".join(c for c in cells if c)


def oslens_until(marker: Path, *args: str, db: Path, timeout: float = 30) -> subprocess.Popen:
    """Starts `oslens ARGS` and returns once the command it runs has made
    `marker` (so that a signal then finds it measuring)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "oslens", *args],
        env={**os.environ, "OSLENS_DB": str(db)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    return proc


class StreamingEngine:
    """An engine run read line by line, to act on it while it measures."""

    def __init__(self, *args: str, cmd: list[str] | None = None, env: dict | None = None):
        self.proc = subprocess.Popen(
            cmd or [engine_bin(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.records: list[dict] = []

    def wait_for(self, kind: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        for line in self.proc.stdout:
            rec = json.loads(line)
            self.records.append(rec)
            if rec["type"] == kind:
                return rec
            assert time.monotonic() < deadline, f"no '{kind}' record within {timeout}s"
        raise AssertionError(f"engine ended before a '{kind}' record: {self.proc.stderr.read()}")

    def finish(self, timeout: float = 60) -> int:
        out, err = self.proc.communicate(timeout=timeout)
        self.records += [json.loads(line) for line in out.splitlines() if line.strip()]
        self.stderr = err
        return self.proc.returncode


def sem_ids() -> set[int]:
    # check: an ipcs that fails must not read as "no set left"
    out = subprocess.run(["ipcs", "-s"], capture_output=True, text=True, check=True).stdout
    return {int(f[1]) for f in (line.split() for line in out.splitlines()) if len(f) > 2 and f[1].isdigit()}


def engine_processes() -> list[int]:
    """Every live process running this checkout's engine (dynamic or static),
    its worker image or a relay to a guest's engine; engines of another
    checkout running tests alongside are not ours."""
    ours = {engine_bin() + suffix for suffix in ("", "-static", "-worker", "-worker-static")}
    ours.add(str(Path(engine_bin()).with_name("oslens-guest")))
    found = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            exe = os.readlink(f"{d}/exe")
            state = Path(f"{d}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if exe in ours and state != "Z":
            found.append(int(d.rsplit("/", 1)[1]))
    return found


def bpf_programs(settle_s: float = 3.0) -> int:
    """Our BPF programs still loaded, once the kernel has had time to free
    those of exited processes (some tens of ms later)."""
    return len(leftovers.bpf_still_loaded(settle_s=settle_s))


def oslens_tmp() -> set[str]:
    return set(glob.glob(f"{SESSION_TMP}/oslens.*"))


@pytest.fixture(scope="session")
def every(tmp_path_factory):
    """One small run of every kind (tests/every_kind.py), each made on first
    use, in one store shared by every test file that holds the kinds to the
    same contracts."""
    from every_kind import EveryKind

    return EveryKind(tmp_path_factory.mktemp("every-kind") / "store.db")


@dataclass
class Snapshot:
    sems: set[int]
    tmp: set[str]


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium, one per module that loads reports; the test
    is skipped where Chromium is not installed."""
    import chromium

    driver = chromium.start()
    yield driver
    driver.quit()


@pytest.fixture
def no_leaks():
    """Fails the test if it leaves an engine process, a SysV semaphore set
    or a temporary directory behind."""
    with leaving_nothing():
        yield


@contextmanager
def leaving_nothing():
    """no_leaks around a block (a module's fixture that runs once for its tests)."""
    before = Snapshot(sem_ids(), oslens_tmp())
    yield
    deadline = time.monotonic() + 10
    while engine_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine_processes() == [], "engine processes left running"
    assert sem_ids() - before.sems == set(), "SysV semaphore sets left behind"
    assert oslens_tmp() - before.tmp == set(), "temporary directories left behind"


def one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got: {stderr!r}"
    assert "Traceback" not in stderr
    return lines[0]


def send(proc: subprocess.Popen, sig: signal.Signals) -> None:
    os.kill(proc.pid, sig)


@contextmanager
def engine_for_nobody():
    """A copy of the engine and a TMPDIR that the 'nobody' user can reach,
    wherever this checkout lives (CI clones may sit in 0700 directories);
    yields (command prefix to run as nobody, engine path, environment)."""
    # in /tmp itself: this process's own temporary directory may be a private one of
    # oslens's (a command run in-process, as the API runs them), which nobody cannot enter
    place = Path(tempfile.mkdtemp(prefix="nobody-test-", dir="/tmp"))
    try:
        place.chmod(0o1777)
        exe = place / "oslens-engine"
        shutil.copy2(engine_bin(), exe)
        prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        yield prefix, str(exe), {**os.environ, "TMPDIR": str(place)}
    finally:
        shutil.rmtree(place)


def can_run_as_nobody() -> bool:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    try:
        import pwd

        pwd.getpwnam("nobody")
    except KeyError:
        return False
    return True


def thp_enabled() -> bool:
    """Transparent huge pages can be had here (enabled is not [never])."""
    try:
        return "[never]" not in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False
