"""What each oslens process owns, written down before it is made, so that
whatever kills it (SIGKILL of the whole process group, the OOM killer) the
next oslens removes what it left.

Every oslens process that measures has an entry in the runtime directory
(/run/oslens for root, $XDG_RUNTIME_DIR/oslens, or a private directory
under /tmp), named PID.START: its pid and its start time (field 22 of
/proc/PID/stat), so that a reused pid is never taken for the process that
made the entry. In it:

- `owner`: pid, start time, boot id, argv;
- `owns`: a line `KIND WHAT` per thing this process makes or changes,
  written before it does (`note`): KIND is a type of oslens.owned, the
  registry of what a run owns, which says how each is found and removed
  (`tmpdir PATH`, `cgroup PATH`, `device zram N`, `scheduler PATH OLD`,
  `container RUNTIME NAME`, `guest NAME`, …); a type registered at run time
  is preceded by `type KIND MODULE:ATTRIBUTE`, where its sweeper finds it;
- `engine.PID.START`: the ledger of each engine it started (the engine is
  handed the entry in $OSLENS_RUNTIME): `tmpdir PREFIX` (its directory's
  name starts with it), `sem_key KEY` before a SysV semaphore set is
  made, `sem KEY ID` once it is, `sem_key_unused KEY` if it was not; read
  as lines of the types `tmpdir` and `sem` (`engine_lines`).

An entry whose process is dead is swept: its engines still running (an
orphaned competitor, say) are stopped, the things its lines name are
removed, type by type in the registry's order (a semaphore set only if it
still has the key written), then the entry. Nothing named by a live
process's entry is touched. The process's own exit does the same with its
own entry (`release`). The temporary files of the oslens process itself go
to its own directory (tempfile's default while it runs), named in `owns`."""

from __future__ import annotations

import atexit
import ctypes
import glob
import json
import os
import secrets
import shutil
import signal
import stat
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import owned, trust
from .errors import UsageError

ENV = "OSLENS_RUNTIME"  # the entry, for the engines we start
ROOT_ENV = "OSLENS_RUNTIME_DIR"  # overrides where the entries live
OWNS = "owns"
OWNER = "owner"
ENGINE_PREFIX = "engine."
STOP_GRACE_S = 20.0  # an orphaned engine's own clean-up, before SIGKILL
IPC_RMID = 0

PR_SET_PDEATHSIG = 1


def dies_with_parent(sig: int, then=None):
    """A preexec_fn: the child gets sig when we die, however we die (a
    SIGKILL too), so that it never runs on orphaned; then `then`, if given."""
    parent = os.getpid()
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:  # we died before the line above
            os.kill(os.getpid(), sig)
        if then:
            then()

    return preexec


@dataclass
class Leftover:
    """One thing a dead oslens left, and what became of it."""

    owner: str  # the entry: PID.START
    kind: str  # process (an engine), or a type of oslens.owned
    what: str  # as the type describes it
    action: str  # removed, stopped, would remove, gone, left alone, failed: …

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- where


def usable_dir(d: Path, private: bool) -> bool:
    """d exists (made if need be), is a directory of ours and, if private,
    no one else can write into it."""
    try:
        d.mkdir(mode=0o700, parents=not private, exist_ok=True)
        st = os.lstat(d)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return False
    if private and st.st_mode & 0o022:
        return False
    # its entries tell a sweep, run as root, what to remove: no one else may be able to write them
    return trust.problem(d) is None and os.access(d, os.W_OK | os.X_OK)


def root() -> Path | None:
    """Where entries live here; None if nowhere is usable (then nothing is
    recorded, as before)."""
    if os.environ.get(ROOT_ENV):
        d = Path(os.environ[ROOT_ENV])
        if why := trust.problem(d):  # what its entries name, a sweep as root removes
            raise UsageError(f"{ROOT_ENV}={d}: not safe to keep oslens's records in: {why}")
        return d if usable_dir(d, private=False) else None
    candidates = []
    if os.geteuid() == 0:
        candidates.append((Path("/run/oslens"), False))
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_dir():
        candidates.append((Path(xdg) / "oslens", False))
    base = Path("/tmp") if Path("/tmp").is_dir() else Path(tempfile.gettempdir())
    candidates.append((base / f"oslens-runtime-{os.geteuid()}", True))
    for d, private in candidates:
        if usable_dir(d, private):
            return d
    return None


def proc_start(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (start time in ticks since boot), or None
    if there is no such process (a zombie counts as gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = text.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _boot_time() -> float:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        pass
    return 0.0


def _key(name: str, prefix: str = "") -> tuple[int, int] | None:
    """PID.START from an entry's or a ledger's name."""
    parts = name.removeprefix(prefix).split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def _alive(key: tuple[int, int]) -> bool:
    return proc_start(key[0]) == key[1]


# ------------------------------------------------------- this process


_entry: Path | None = None
_entry_pid: int | None = None


def entry() -> Path | None:
    """This process's entry, made on first use; the engines it starts from
    now on are handed it. None if there is no usable runtime directory."""
    global _entry, _entry_pid
    if _entry is not None and _entry_pid == os.getpid():
        return _entry
    r = root()
    start = proc_start(os.getpid())
    if r is None or start is None:
        return None
    d = r / f"{os.getpid()}.{start}"
    try:
        d.mkdir(mode=0o700, exist_ok=True)
        (d / OWNER).write_text(
            json.dumps({"pid": os.getpid(), "start": start, "boot_id": _boot_id(), "argv": sys.argv}) + "\n"
        )
    except OSError:
        return None
    _entry, _entry_pid = d, os.getpid()
    os.environ[ENV] = str(d)
    atexit.register(release)
    return d


_typed: set[tuple[Path, str]] = set()  # (entry, kind): its `type` line is written


def note(kind: str, what: str | os.PathLike) -> None:
    """Writes down, before it is made, something this process makes: a
    thing of a type of oslens.owned (a kind no type removes is refused,
    before anything is made)."""
    where = owned.where(kind)
    d = entry()
    if d is None:
        return
    text = f"{kind} {os.fspath(what)}\n"
    if kind not in owned.TYPES and (d, kind) not in _typed:
        text = f"{owned.TYPE_LINE} {kind} {where}\n" + text  # for the oslens that sweeps it, which may not know it
    fd = os.open(d / OWNS, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, text.encode())  # one write: a line is whole or absent
    finally:
        os.close(fd)
    _typed.add((d, kind))


def private_tmp() -> None:
    """From now on tempfile makes this process's temporary files and
    directories in a directory of its own, removed at exit or, if it is
    killed, by the next oslens. Refused, in one line, where the temporary
    directory is one another user can change (a TMPDIR of theirs)."""
    global _private_tmp
    if entry() is None:
        return
    if _private_tmp is not None and _private_tmp[0] == os.getpid() and tempfile.tempdir == str(_private_tmp[1]):
        return  # a second command in this process (the API, tests) keeps the first one's, not one inside it
    here = Path(tempfile.gettempdir())
    if why := trust.problem(here):
        raise UsageError(f"the temporary directory is not safe to work in: {why} (set TMPDIR to a directory of yours)")
    d = private_dir(here)
    if d is not None:
        tempfile.tempdir = str(d)
        _private_tmp = (os.getpid(), d)


_private_tmp: tuple[int, Path] | None = None  # (the process, its directory)
MAKE_TRIES = 8


def private_dir(base: Path, purpose: str | None = None) -> Path | None:
    """A new directory in base that only this process's user can enter:
    oslens.PID.START[.PURPOSE].RANDOM, written down first as this process's,
    then made by mkdir, which fails on any name that exists (made by
    someone else in advance, a link): never an existing path taken for
    ours, never a name another user can predict. None if it cannot be
    made."""
    start = proc_start(os.getpid())
    if entry() is None or start is None:
        return None
    stem = f"oslens.{os.getpid()}.{start}" + (f".{purpose}" if purpose else "")
    for _ in range(MAKE_TRIES):
        d = base / f"{stem}.{secrets.token_hex(6)}"
        note("tmpdir", d)
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            forget("tmpdir", d)  # not ours: the line must not lead a sweep to it
            continue
        except OSError:
            forget("tmpdir", d)
            return None
        if trust.private_dir_problem(d) is None:
            return d
        return None  # umask or a file system that ignores modes: not private; ours all the same, removed at exit
    return None


SHM = Path("/dev/shm")
_shm: dict[str, Path] = {}  # purpose -> this process's directory for it


def shm_dir(purpose: str = "mpi") -> str | None:
    """A directory of this process's in /dev/shm, a tmpfs (made once,
    written down first): where the MPI jobs it launches keep their
    shared-memory segments and session files, which a job killed outright
    leaves behind ("mpi"); where a kernel is built, in memory as the
    scalability studies built it ("kbuild"). Checked private again each
    time it is handed out. None where it cannot be made."""
    if not SHM.is_dir():
        return None
    d = _shm.get(purpose)
    if d is None or not str(d.name).startswith(f"oslens.{os.getpid()}.") or trust.private_dir_problem(d):
        d = private_dir(SHM, purpose)
        if d is None:
            return None
        _shm[purpose] = d
    return str(d)


def release() -> None:
    """At exit: removes this process's entry and what it names (all of it
    ours, and done with), unless an engine it started still runs."""
    global _entry
    if _entry is None or _entry_pid != os.getpid():
        return
    d = _entry
    reap_engines()
    if _live_engines(d):
        return  # a live engine: the next oslens sweeps it once it is gone
    lines, types = _owns(d)
    if _remove(d.name, lines, types, dry_run=False, same_boot=True)[1]:
        shutil.rmtree(d, ignore_errors=True)
    _entry = None


def reap_engines() -> list[Leftover]:
    """Removes what the engines this process started and that are gone
    (ended, or killed) left; called after each engine invocation."""
    if _entry is None or _entry_pid != os.getpid():
        return []
    out: list[Leftover] = []
    for ledger in _ledgers(_entry):
        key = _key(ledger.name, ENGINE_PREFIX)
        if key is None or _alive(key):
            continue
        out += _sweep_ledger(_entry.name, ledger, dry_run=False, same_boot=True)
    return out


# ------------------------------------------------------------ the sweep


def forget(kind: str, what: str | os.PathLike) -> None:
    """Strikes a line out of this process's entry once it has removed the
    thing itself: a line left would name, to its own release at exit or to
    a sweep after a kill, whatever the kernel gives that name next (a zram
    index, a loop device), someone else's by then."""
    if _entry is None or _entry_pid != os.getpid():
        return
    path, line = _entry / OWNS, f"{kind} {os.fspath(what)}"
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return
    kept = [x for x in lines if x != line]
    if len(kept) == len(lines):
        return
    tmp = _entry / f"{OWNS}.new"
    tmp.write_text("".join(x + "\n" for x in kept))
    os.replace(tmp, path)  # whole or not at all, as note()'s single write


def _lines(path: Path) -> list[tuple[str, str]]:
    try:
        text = path.read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        kind, _, what = line.partition(" ")
        if kind and what:
            out.append((kind, what))
    return out


def claimed_by_others(kind: str) -> set[str]:
    """What the live oslens processes other than this one have written down
    of a kind: theirs, whatever a dead one's line says (a device index or a
    name the kernel has given again since)."""
    r = root()
    out: set[str] = set()
    for d, key in _entries(r) if r is not None else []:
        if key[0] != os.getpid() and _alive(key):
            out |= {what for k, what in _lines(d / OWNS) if k == kind}
    return out


def _ledgers(d: Path) -> list[Path]:
    try:
        return sorted(p for p in d.iterdir() if p.name.startswith(ENGINE_PREFIX))
    except OSError:
        return []


def _live_engines(d: Path) -> bool:
    return any(k and _alive(k) for k in (_key(p.name, ENGINE_PREFIX) for p in _ledgers(d)))


def sysv_sems() -> dict[int, int]:
    """semid -> key of every SysV semaphore set we can see."""
    out = {}
    try:
        lines = Path("/proc/sysvipc/sem").read_text().splitlines()[1:]
    except OSError:
        return out
    for line in lines:
        f = line.split()
        if len(f) >= 2:
            out[int(f[1])] = int(f[0])
    return out


def _sem_remove(semid: int) -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.semctl(ctypes.c_int(semid), ctypes.c_int(0), ctypes.c_int(IPC_RMID)) == 0:
        return "removed"
    e = ctypes.get_errno()
    return "removed" if e in (22, 43) else f"failed: {os.strerror(e)}"  # EINVAL/EIDRM: already gone


def _rmtree(path: str) -> str:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "gone"
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return "left alone: not a directory of ours"  # a name another user made in a shared place
    shutil.rmtree(path, ignore_errors=True)
    return "failed" if os.path.lexists(path) else "removed"


def _stop(pid: int, start: int) -> str:
    """An engine whose oslens is dead: SIGTERM lets it clean up after
    itself; SIGKILL if it does not end (its workers die with it)."""
    try:
        if not os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("oslens-engine"):
            return "left alone: not an oslens engine"
    except OSError:
        return "stopped" if proc_start(pid) != start else "failed: cannot tell what it runs"
    for sig, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return "stopped"
        except PermissionError as e:
            return f"failed: {e.strerror}"
        deadline = time.monotonic() + grace
        while proc_start(pid) == start and time.monotonic() < deadline:
            time.sleep(0.02)
        if proc_start(pid) != start:
            return "stopped"
    return "failed: still running"


def _stop_engines(d: Path, dry_run: bool) -> list[Leftover]:
    """Engines still running for an oslens that is gone (any command: run,
    profile, app --prepare), known by the entry they inherited in
    $OSLENS_RUNTIME. Stopped with SIGTERM, they end in order (a profiled
    command is passed the signal). Other programs are left alone."""
    mark = f"\0{ENV}={d}\0".encode()
    out = []
    for proc in glob.glob("/proc/[0-9]*"):
        try:
            if not os.path.basename(os.readlink(f"{proc}/exe")).startswith("oslens-engine"):
                continue
            env = b"\0" + Path(f"{proc}/environ").read_bytes()
        except OSError:
            continue
        pid = int(proc.rsplit("/", 1)[1])
        start = proc_start(pid)
        if mark in env and start is not None:
            out.append(
                Leftover(d.name, "process", f"oslens-engine {pid}", "would stop" if dry_run else _stop(pid, start))
            )
    return out


def ledger_sem_keys(ledger: Path) -> tuple[dict[int, int], set[int]]:
    """From an engine ledger: key -> id of the sets it saw made, and the keys it
    wrote before a semget whose outcome it never wrote (a SIGKILL between)."""
    made: dict[int, int] = {}
    unsure: set[int] = set()
    for kind, what in _lines(ledger):
        f = what.split()
        if kind == "sem_key":
            unsure.add(int(f[0]))
        elif kind == "sem" and len(f) == 2:
            made[int(f[0])] = int(f[1])
            unsure.discard(int(f[0]))
        elif kind == "sem_key_unused":
            unsure.discard(int(f[0]))
    return made, unsure


def engine_lines(ledger: Path) -> list[tuple[str, str]]:
    """An engine's ledger read as lines of owned types: `tmpdir PATH` for
    each directory whose name starts with a prefix it wrote, and its SysV
    sets as `sem KEY ID` (seen made) or `sem KEY` (a semget whose outcome
    it never wrote: a SIGKILL between)."""
    made, unsure = ledger_sem_keys(ledger)
    out = [("sem", f"{key} {semid}") for key, semid in made.items()]
    out += [("sem", str(key)) for key in sorted(unsure)]
    for kind, what in _lines(ledger):
        if kind == "tmpdir":
            out += [("tmpdir", p) for p in sorted(glob.glob(glob.escape(what) + "*"))]
    return out


def _sweep_ledger(owner: str, ledger: Path, dry_run: bool, same_boot: bool, stop: bool = False) -> list[Leftover]:
    out: list[Leftover] = []
    key = _key(ledger.name, ENGINE_PREFIX)
    if key and _alive(key):
        if not stop:
            return out
        out.append(Leftover(owner, "process", f"oslens-engine {key[0]}", "would stop" if dry_run else _stop(*key)))
        if _alive(key):
            return out
    out += _remove(owner, engine_lines(ledger), {}, dry_run, same_boot)[0]
    if not dry_run:
        try:
            ledger.unlink()
        except OSError:
            pass
    return out


def _owns(d: Path) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """An entry's `owns`: its lines, and where the types registered at run
    time that they name are (its `type` lines)."""
    lines, types = [], {}
    for kind, what in _lines(d / OWNS):
        if kind == owned.TYPE_LINE:
            name, _, where = what.partition(" ")
            types[name] = where
        else:
            lines.append((kind, what))
    return lines, types


def _remove(
    owner: str, lines: list[tuple[str, str]], types: dict[str, str], dry_run: bool, same_boot: bool
) -> tuple[list[Leftover], bool]:
    """Removes (dry_run: lists) what these lines name, type by type in the
    registry's order; what was there, and whether every line's type could
    be loaded and asked what is there (if not, its lines are said to be
    left alone, or failed, and the entry is kept for an oslens that can)."""
    by_kind: dict[str, list[str]] = {}
    for kind, what in lines:
        by_kind.setdefault(kind, []).append(what)
    out: list[Leftover] = []
    whole = True
    for kind in owned.ordered(by_kind):
        try:
            res = owned.get(kind, types.get(kind))
        except Exception as e:  # noqa: BLE001 - unknown, or its module will not load here: the next may
            whole = False
            out += [Leftover(owner, kind, what, f"left alone: {e}") for what in by_kind[kind]]
            continue
        try:
            there = res.there(by_kind[kind], same_boot)
        except Exception as e:  # noqa: BLE001 - one type that fails must not stop the others
            whole = False
            out += [Leftover(owner, kind, what, f"failed: {e}") for what in by_kind[kind]]
            continue
        for thing in there:
            out += _act(owner, kind, res, thing, dry_run)
    return out, whole


def _act(owner: str, kind: str, res: owned.Resource, thing: str, dry_run: bool) -> list[Leftover]:
    try:
        action = res.would if dry_run else res.remove(thing)
    except Exception as e:  # noqa: BLE001
        action = f"failed: {e}"
    return [] if action == "gone" else [Leftover(owner, kind, res.describe(thing), action)]


# ------------------------------------------------ the types of this module


def _tmp_present(paths: list[str], same_boot: bool) -> list[str]:
    """The directories among paths (not a link to one) that are ours and,
    for a line of an earlier boot, only those older than this boot."""
    btime = None if same_boot else _boot_time()
    out = []
    for p in paths:
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if btime is not None and st.st_mtime >= btime:
            continue  # made on this boot: not the dead process's
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
            out.append(p)
    return out


def _sems_present(lines: list[str], same_boot: bool) -> list[str]:
    """Ids of the sets that `KEY ID` named and still have the key, and of
    every set whose key a lone `KEY` names."""
    have = sysv_sems()
    out = []
    for line in lines:
        f = [int(x) for x in line.split()]
        if len(f) == 2 and have.get(f[1]) == f[0]:
            out.append(f[1])
        elif len(f) == 1:
            out += [semid for semid, key in have.items() if key == f[0]]
    return [str(i) for i in dict.fromkeys(out)]


# a directory of this process's or of one of its engines
def _tmp_stale() -> list[tuple[str, str]]:
    """(owner, path) of the directories of ours named after a dead oslens
    process (oslens.PID.START.RANDOM, its temporary files or an engine's;
    oslens.PID.START.PURPOSE.RANDOM in /dev/shm; an older oslens's without
    RANDOM) that no entry names any more. Another user's directory of such a
    name is not ours, whatever it is called, and is left alone. An Open MPI process still
    ending when its oslens's directory was removed makes its session path
    again, whole (`ompi.*/pid.N/...`); the entry that named it is gone by
    then. The name says whose it is: a live process's is never touched."""
    out = []
    for where in (Path(tempfile.gettempdir()), SHM):
        for d in where.glob("oslens.*"):
            parts = d.name.split(".")
            key = _key(".".join(parts[1:3]))
            if key is None or len(parts) not in ((4, 5) if where == SHM else (3, 4)):
                continue
            try:
                st = os.lstat(d)
            except OSError:
                continue
            if not _alive(key) and stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
                out.append((f"{key[0]}.{key[1]}", str(d)))
    return out


TMPDIR = owned.Resource(remove=_rmtree, present=_tmp_present, across_boots=True, stale=_tmp_stale)
# a SysV semaphore set an engine made: its ids and keys come again after a boot
SEM = owned.Resource(
    remove=lambda semid: _sem_remove(int(semid)),
    describe=lambda semid: f"SysV semaphore set {semid}",
    present=_sems_present,
)


def _entries(r: Path) -> list[tuple[Path, tuple[int, int]]]:
    try:
        found = [(d, _key(d.name)) for d in r.iterdir() if d.is_dir()]
    except OSError:
        return []
    return sorted((d, k) for d, k in found if k is not None)


def sweep(dry_run: bool = False) -> tuple[list[Leftover], list[str]]:
    """Removes (or, dry_run, lists) what oslens processes that are gone
    left; returns it, and the entries of the live ones (PID.START)."""
    r = root()
    out: list[Leftover] = []
    live: list[str] = []
    if r is not None:
        boot = _boot_id()
        for d, key in _entries(r):
            if _alive(key):
                if key[0] != os.getpid():
                    live.append(d.name)
                continue
            try:
                owner = json.loads((d / OWNER).read_text())
            except (OSError, ValueError):
                owner = {}
            same_boot = owner.get("boot_id", boot) == boot
            if same_boot:
                out += _stop_engines(d, dry_run)
            for ledger in _ledgers(d):
                out += _sweep_ledger(d.name, ledger, dry_run, same_boot, stop=True)
            lines, types = _owns(d)
            found, whole = _remove(d.name, lines, types, dry_run, same_boot)
            out += found
            if dry_run or not whole:
                continue  # a line no type here removes: the entry stays, for an oslens that can
            if _live_engines(d):
                continue  # an engine that would not stop: its ledger stays
            shutil.rmtree(d, ignore_errors=True)
    # What dead oslens processes made and never wrote down (an older oslens,
    # or no runtime directory), found by name.
    seen = {(x.kind, x.what) for x in out}
    for kind in owned.SCANNED:
        res = owned.get(kind)
        for owner_pid, thing in res.stale():
            if (kind, res.describe(thing)) not in seen:
                out += _act(owner_pid, kind, res, thing, dry_run)
    return out, live


def start() -> None:
    """What every oslens command does first: sweep what dead oslens
    processes left, then give this one its entry and its own directory
    for temporary files. Fails the command only where the temporary
    directory is another user's to change (UsageError, one line)."""
    try:
        sweep()
        private_tmp()
    except UsageError:
        raise
    except Exception:  # noqa: BLE001 - a sweep that fails must not stop a measurement
        pass
