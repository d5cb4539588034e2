"""No other local user can steer what oslens does as root.

Each test here is an attack made by `nobody`, as the attack campaign made
it (issue 51): a watcher that, for every new process of root's running
oslens, makes in advance the directories an oslens of old made under
predictable names (`oslens.PID.START` in the temporary directory,
`oslens.PID.START.mpi|kbuild|loop` in /dev/shm, Open MPI's
`ompi.HOST.UID`), mode 0777, and watches them for anything of root's.
Root's command must then succeed, or refuse in one line, and nothing of
root's may ever appear in a directory `nobody` owns. docs/security.md
lists every place these tests stand for."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from oslens import runtime
from oslens.errors import UsageError

from conftest import can_run_as_nobody, one_line_error

needs_nobody = pytest.mark.skipif(not can_run_as_nobody(), reason="needs root, setpriv and a 'nobody' user")

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"

# The watcher, run as nobody: plants the predictable names for every new
# root process whose command line names oslens, and records every entry
# not its own that shows up in what it planted.
WATCHER = r"""
import json, os, sys, time
tmp, shm, host, out, stop = sys.argv[1:6]
me = os.getuid()
planted, seen, handled = [], {}, set()


def start_of(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def plant(pid, start):
    names = [f"{tmp}/oslens.{pid}.{start}", f"{tmp}/ompi.{host}.0"]
    names += [f"{shm}/oslens.{pid}.{start}.{p}" for p in ("mpi", "kbuild", "loop")]
    for n in names:
        try:
            os.mkdir(n)
            os.chmod(n, 0o777)
            planted.append(n)
        except OSError:
            pass


while not os.path.exists(stop):
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{d}").st_uid
            cmd = open(f"/proc/{d}/cmdline", "rb").read()
        except OSError:
            continue
        start = start_of(d)
        if uid == 0 and b"oslens" in cmd and start and (d, start) not in handled:
            handled.add((d, start))
            plant(d, start)
    for p in planted:
        try:
            for e in os.listdir(p):
                st = os.lstat(f"{p}/{e}")
                if st.st_uid != me:
                    seen[f"{p}/{e}"] = st.st_uid
        except OSError:
            pass
    time.sleep(0.001)
with open(out, "w") as f:
    json.dump({"planted": planted, "handled": sorted(int(p) for p, _ in handled), "seen": seen}, f)
"""


class Watcher:
    """The attacker: started before root's command, stopped after it."""

    def __init__(self, shared: Path):
        self.shared, self.out, self.stop = shared, shared / "watcher.json", shared / "stop"
        self.proc = subprocess.Popen(
            [*AS_NOBODY, SYSTEM_PYTHON, "-c", WATCHER, str(shared), "/dev/shm", socket.gethostname(),
             str(self.out), str(self.stop)],
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while not self._running() and time.monotonic() < deadline:
            time.sleep(0.01)

    def _running(self) -> bool:
        try:
            return os.stat(f"/proc/{self.proc.pid}").st_uid == pwd.getpwnam("nobody").pw_uid
        except OSError:
            return False

    def finish(self) -> dict:
        self.stop.touch()
        assert self.proc.wait(timeout=30) == 0
        found = json.loads(self.out.read_text())
        for p in found["planted"]:
            shutil.rmtree(p, ignore_errors=True)
        return found


@pytest.fixture
def shared():
    """A directory every user can write in, as /tmp is (sticky, 1777), where
    root's oslens is told (TMPDIR) to keep its temporary files."""
    d = Path(tempfile.mkdtemp(prefix="oslens-test-shared.", dir="/tmp"))
    os.chmod(d, 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def attacked(
    shared: Path, tmp_path: Path, *args: str, timeout: float = 600
) -> tuple[subprocess.CompletedProcess, dict]:
    """Root's `oslens ARGS` run with the watcher on; its outcome and what the watcher saw."""
    watcher = Watcher(shared)
    try:
        env = {**os.environ, "TMPDIR": str(shared), "OSLENS_DB": str(tmp_path / "store.db")}
        proc = subprocess.Popen([sys.executable, "-m", "oslens", *args], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        out, err = proc.communicate(timeout=timeout)
    finally:
        found = watcher.finish()
    p = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    # the watcher saw root's command and planted its names: else this test could not fail
    assert proc.pid in found["handled"], (found, err)
    assert any(f"oslens.{proc.pid}." in x for x in found["planted"]), found
    return p, found


def _mpi() -> str | None:
    from oslens import engine

    if not shutil.which("mpirun"):
        return "mpirun (Open MPI) is not installed"
    try:
        engine.mpi_engine_path()
    except UsageError as e:
        return str(e)
    return None


def _servers() -> str | None:
    from oslens import servers

    lacking = [x for x in ("redis-server", "redis-benchmark") if servers.find(x) is None]
    return f"{' and '.join(lacking)} not installed" if lacking else None


def _loop() -> str | None:
    """Checked apart from oslens's own word on it (devices.available_kinds)."""
    if not shutil.which("losetup"):
        return "losetup (util-linux) is not installed"
    return None if Path("/dev/loop-control").exists() else "this kernel has no loop devices"


def _guest() -> str | None:
    """QEMU and a kernel of the distribution's to boot, checked apart from oslens's own word on them."""
    if not shutil.which(f"qemu-system-{os.uname().machine}"):
        return f"qemu-system-{os.uname().machine} is not installed"
    return None if list(Path("/boot").glob("vmlinuz-*")) else "no kernel in /boot to boot a guest of"


def _container() -> str | None:
    ok = shutil.which("podman") and subprocess.run(["podman", "info"], capture_output=True, timeout=60).returncode == 0
    return None if ok else "podman is not installed or does not run here"


def _kbuild() -> str | None:
    """The distribution's kernel source and a compiler, checked apart from oslens's own word (kbuild)."""
    if not list(Path("/usr/src").glob("linux-source-*.tar.*")):
        return "no Linux source in /usr/src (Debian's linux-source package)"
    lacking = [t for t in ("make", "gcc", "flex", "bison", "bc") if not shutil.which(t)]
    return f"{', '.join(lacking)} not installed" if lacking else None


RUNS = {
    "scale": (["scale", "--probe", "getppid,dup", "--workers", "1", "--duration", "0.1", "--reps", "1",
               "--warmup", "0.05"], lambda: None),
    "io": (["io", "--target", "loop", "--engine", "pread", "--workers", "1", "--duration", "0.2",
            "--warmup", "0.05", "--reps", "1"], _loop),
    "latency": (["latency", "--probe", "getppid", "--duration", "0.05", "--reps", "1", "--warmup", "0.02"],
                lambda: None),
    "noise": (["noise", "--duration", "0.3", "--warmup", "0.05"], lambda: None),
    "profile": (["profile", "--", "sh", "-c", "ls /proc > /dev/null"], lambda: None),
    "appscale": (["appscale", "--workload", "kmeans", "--size", "50000", "--cpu-counts", "1", "--reps", "1"],
                 lambda: None),
    "envs": (["envs", "getppid", "--envs", "native", "--ops", "2000", "--rounds", "1"], lambda: None),
    "study kernels": (["study", "kernels", "--apps", "gmake", "--build-target", "lib/math/", "--cpu-counts", "1",
                       "--reps", "1"], _kbuild),
    "timerlat": (["timerlat", "--duration", "0.3", "--warmup", "0.05", "--period-us", "500"], lambda: None),
    "cluster noise": (["cluster", "noise", "--launch", "mpirun -n 2 --oversubscribe --allow-run-as-root",
                       "--duration", "0.3"], _mpi),
    "serve redis": (["serve", "--server", "redis", "--duration", "0.5", "--warmup", "0.3", "--reps", "1"], _servers),
    "container": (["scale", "--in", "container", "--probe", "getppid", "--workers", "1", "--ops", "3000",
                   "--reps", "1"], _container),
    "kvm guest": (["scale", "--in", "kvm:cpus=1,accel=tcg", "--probe", "getppid", "--workers", "1",
                   "--ops", "10"], _guest),
}  # fmt: skip


@needs_nobody
@pytest.mark.parametrize("what", RUNS)
def test_a_stranger_who_makes_oslens_names_first_gets_nothing_of_roots(what, shared, tmp_path):
    args, lacking = RUNS[what]
    if why := lacking():
        pytest.skip(f"{what} cannot run here: {why}")
    p, found = attacked(shared, tmp_path, *args)
    assert p.returncode == 0, p.stderr
    assert found["seen"] == {}, f"root's files in directories nobody made: {found['seen']}"
    # and what root made in the shared directory is its own, private, and gone at exit
    left = [e for e in shared.iterdir() if e.name not in ("watcher.json", "stop")]
    assert not [e for e in left if os.lstat(e).st_uid == 0], left


@needs_nobody
def test_a_temporary_directory_another_user_can_change_is_refused_in_one_line(tmp_path):
    """TMPDIR pointing into a directory of nobody's: refused before anything runs."""
    theirs = Path(tempfile.mkdtemp(prefix="oslens-test-theirs.", dir="/tmp"))
    try:
        os.chown(theirs, pwd.getpwnam("nobody").pw_uid, -1)
        env = {**os.environ, "TMPDIR": str(theirs), "OSLENS_DB": str(tmp_path / "store.db")}
        p = subprocess.run([sys.executable, "-m", "oslens", "scale", "--probe", "getppid", "--workers", "1",
                            "--duration", "0.05", "--reps", "1"], env=env, capture_output=True, text=True,
                           timeout=120)  # fmt: skip
        assert p.returncode == 2, p.stderr
        line = one_line_error(p.stderr)
        assert str(theirs) in line and "nobody" in line, line
        assert not list(theirs.iterdir()) and not (tmp_path / "store.db").exists()
    finally:
        shutil.rmtree(theirs, ignore_errors=True)


@needs_nobody
def test_a_private_directory_is_never_one_that_existed_before(monkeypatch, tmp_path):
    """Every name runtime.private_dir tries is made by mkdir: a name taken
    by someone else first (here: all of the first tries) is passed over for
    another, and the one handed out is a new directory of ours, mode 0700."""
    base = tmp_path / "base"
    base.mkdir()
    taken: list[Path] = []
    real_mkdir = os.mkdir

    def squatted(path, mode=0o777):
        if len(taken) < 3:  # the stranger got there first
            real_mkdir(path, 0o777)
            os.chown(path, pwd.getpwnam("nobody").pw_uid, -1)
            taken.append(Path(path))
        return real_mkdir(path, mode)

    assert runtime.entry() is not None  # made before the stranger's mkdir is in place
    monkeypatch.setattr(os, "mkdir", squatted)
    d = runtime.private_dir(base, "test")
    monkeypatch.undo()
    assert d is not None and d not in taken and len(taken) == 3
    st = os.lstat(d)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
    # the squatted names are not written down as ours: no sweep would remove another's directory
    owns = (runtime.entry() / runtime.OWNS).read_text()
    assert str(d) in owns and not any(str(t) in owns for t in taken)


@needs_nobody
def test_a_sweep_leaves_a_strangers_directory_of_an_oslens_name_alone(shared):
    """A directory named as a dead oslens's, made by nobody: not ours, so
    the sweep, which runs as root at every start, does not remove it (nor
    anything it holds, a link to root's files say)."""
    dead = f"oslens.{2**22 + 7}.1"  # above any pid_max: a process that is gone
    theirs = [shared / dead, Path(f"/dev/shm/{dead}.mpi")]
    for d in theirs:
        subprocess.run([*AS_NOBODY, "mkdir", "-m", "0777", str(d)], check=True)
    try:
        code = "from oslens import runtime; print(runtime.sweep()[0])"
        p = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(shared)},
                           capture_output=True, text=True, timeout=60)  # fmt: skip
        assert p.returncode == 0, p.stderr
        assert all(d.is_dir() for d in theirs), p.stdout
        # the same sweep does remove a dead oslens's directory of root's (else this test could not fail)
        ours = shared / f"oslens.{2**22 + 8}.1"
        ours.mkdir(mode=0o700)
        p = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(shared)},
                           capture_output=True, text=True, timeout=60)  # fmt: skip
        assert not ours.exists() and all(d.is_dir() for d in theirs), p.stdout
    finally:
        for d in theirs:
            shutil.rmtree(d, ignore_errors=True)


@needs_nobody
def test_a_link_planted_where_a_loop_devices_file_was_made_is_not_written_through(tmp_path):
    """An older oslens made a loop device's backing file under a name of its
    pid in /dev/shm: a link planted by nobody at that name must not lead
    root's write of the device's contents into a file of root's."""
    if why := _loop():
        pytest.skip(f"no loop device here: {why}")
    victim = tmp_path / "victim"
    victim.write_text("root's own\n")
    env = {**os.environ, "OSLENS_DB": str(tmp_path / "store.db")}
    proc = subprocess.Popen([sys.executable, "-m", "oslens", "io", "--target", "loop", "--engine", "pread",
                             "--workers", "1", "--duration", "0.1", "--warmup", "0.02", "--reps", "1"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    start = None
    while start is None and proc.poll() is None:
        start = runtime.proc_start(proc.pid)
    link = Path(f"/dev/shm/oslens.{proc.pid}.{start}.loop")
    subprocess.run([*AS_NOBODY, "ln", "-s", str(victim), str(link)], check=True)
    try:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert os.path.islink(link)  # still there: the attack was in place for the whole run
    finally:
        link.unlink(missing_ok=True)
    assert victim.read_text() == "root's own\n"


@needs_nobody
def test_a_runtime_directory_another_user_can_write_is_refused_in_one_line(tmp_path):
    """The runtime directory's entries tell the sweep, which runs as root,
    what to remove and which engines to stop: one in a directory of
    nobody's is refused before anything runs."""
    theirs = Path(tempfile.mkdtemp(prefix="oslens-test-theirs.", dir="/tmp"))
    try:
        os.chown(theirs, pwd.getpwnam("nobody").pw_uid, -1)
        env = {**os.environ, "OSLENS_RUNTIME_DIR": str(theirs / "runtime"), "OSLENS_DB": str(tmp_path / "s.db")}
        p = subprocess.run([sys.executable, "-m", "oslens", "scale", "--probe", "getppid", "--workers", "1",
                            "--duration", "0.05", "--reps", "1"], env=env, capture_output=True, text=True,
                           timeout=120)  # fmt: skip
        assert p.returncode == 2, p.stderr
        line = one_line_error(p.stderr)
        assert "OSLENS_RUNTIME_DIR" in line and "nobody" in line, line
        assert not list(theirs.iterdir()) and not (tmp_path / "s.db").exists()
    finally:
        shutil.rmtree(theirs, ignore_errors=True)


@needs_nobody
def test_removing_a_directory_named_by_an_engine_leaves_a_strangers_alone(shared):
    """What an engine that did not end in order said it made is removed by
    name (runtime.TMPDIR): a directory of that name that is not ours is
    left alone, with what is in it; one of ours goes."""
    theirs, ours = shared / "oslens.1.1.theirs", shared / "oslens.1.1.ours"
    subprocess.run([*AS_NOBODY, "mkdir", "-m", "0777", str(theirs)], check=True)
    subprocess.run([*AS_NOBODY, "touch", str(theirs / "their-file")], check=True)
    ours.mkdir(mode=0o700)
    assert runtime.TMPDIR.remove(str(theirs)).startswith("left alone")
    assert (theirs / "their-file").exists()
    assert runtime.TMPDIR.remove(str(ours)) == "removed" and not ours.exists()


@needs_nobody
@pytest.mark.parametrize("place", ["a directory of nobody's", "a file of nobody's", "a link of nobody's"])
def test_a_store_another_user_can_change_is_refused_in_one_line(place, shared, tmp_path):
    """The results store, read and written by root: in a directory another
    user owns, or a file (or link, whose journal SQLite would write through)
    that another user made in /tmp first, it is refused before anything runs."""
    if place == "a directory of nobody's":
        subprocess.run([*AS_NOBODY, "mkdir", "-m", "0755", str(shared / "theirs")], check=True)
        db = shared / "theirs" / "store.db"
    elif place == "a file of nobody's":
        db = shared / "store.db"
        subprocess.run([*AS_NOBODY, "touch", str(db)], check=True)
    else:
        victim = tmp_path / "victim"
        victim.write_text("root's own\n")
        db = shared / "store.db"
        subprocess.run([*AS_NOBODY, "ln", "-s", str(victim), str(db)], check=True)
    for args in (["scale", "--probe", "getppid", "--workers", "1", "--duration", "0.05", "--reps", "1"], ["runs"]):
        p = subprocess.run([sys.executable, "-m", "oslens", "--db", str(db), *args], capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
        assert p.returncode == 2, p.stderr
        assert "nobody" in one_line_error(p.stderr)
    assert not [e for e in shared.rglob("*") if os.lstat(e).st_uid == 0]
    if place == "a link of nobody's":
        assert victim.read_text() == "root's own\n"


def test_a_figure_named_by_a_stored_string_stays_in_the_directory_it_is_written_to(tmp_path):
    """`report --format svg -o DIR` names a file after each figure, whose id
    holds a stored probe's name: one an imported store chose ('../x') is
    written inside DIR, under a name of its own."""
    import altair as alt

    from oslens.report.html.page import Figure, Page, Section

    chart = alt.Chart(alt.Data(values=[{"x": 1}])).mark_point().encode(x="x:Q")
    ids = ["../../escaped", "/etc/x", ".hidden", "a/b", "a_b", "plain"]
    page = Page("t", sections=[Section("s", [Figure(i, i, chart) for i in ids])])
    out = tmp_path / "figures"
    written = page.write_static(out, "svg")
    assert len(set(written)) == len(ids)
    assert all(p.parent == out and not p.name.startswith(".") for p in written), written
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in written)
    assert not (tmp_path / "escaped.svg").exists()
