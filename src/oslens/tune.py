"""A machine prepared for measuring, as `pyperf system tune` prepares one:
what makes numbers unstable, read (`show`), set (`apply`) and put back
(`reset`).

Each setting is a set of kernel files (sysfs, procfs) and the value that
steadies a measurement. `apply` writes the state file — every file it will
change, with its contents — before it changes anything, so that `reset`
restores each one byte for byte even after a SIGKILL between the two; a
second `apply` keeps the first one's originals. A file that holds its
original (a write that failed) is nothing to restore: neither `show` nor
`reset` counts it, and `apply` drops it from the state once done. Where a setting cannot be
read or changed (a VM without cpufreq, a kernel without the file, an
interrupt the kernel manages), it says so, per setting.

Root writes what the state file names, so the state is a file no other
user may have chosen: it is read and written only where every directory
on the way is the caller's or root's alone (trust.py), never through a
symbolic link, and `reset` writes only the files that the settings below
declare, with values each one allows, all checked before the first write.

The kernel files are read under $OSLENS_TUNE_ROOT (default /): a model
machine's tree for tests."""

from __future__ import annotations

import errno
import glob
import json
import os
import re
import stat
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Callable

import platformdirs

from . import trust
from .errors import UsageError

STATE_NAME = "tune-state.json"
NEEDS_ROOT = "its settings are files in /sys and /proc that only root may write"
MAX_CPUS = 1 << 16  # more than any kernel's NR_CPUS: a longer range is not a CPU list


def root() -> Path:
    return Path(os.path.abspath(os.environ.get("OSLENS_TUNE_ROOT") or "/"))


def _trusted_root() -> Path:
    """The tune root, refused where another user could change what root reads and writes in it."""
    r = root()
    if why := trust.problem(r):
        raise UsageError(f"OSLENS_TUNE_ROOT={r} is refused: {why}")
    return r


def _needs_root(r: Path) -> bool:
    """On the machine itself only: a model tree is its maker's to change."""
    return os.geteuid() != 0 and r == Path("/")


def state_path() -> Path:
    return Path(platformdirs.user_data_dir("oslens")) / STATE_NAME


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _choice(text: str) -> str:
    """The selected word of a choice file ("always [madvise] never"), or the text."""
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text.strip()


@dataclass(frozen=True)
class Change:
    """One file a setting writes: its path, what to write, what it reads now."""

    path: Path
    want: str
    now: str | None

    @property
    def done(self) -> bool:
        return self.now is not None and _choice(self.now) == self.want


@dataclass(frozen=True)
class Setting:
    name: str
    why: str  # what it does to a measurement when not tuned
    changes: Callable[[Path, tuple[int, ...] | None], tuple[list[Change], str | None]]
    # the tuned state in words, for people
    tuned: str = ""
    # the only files it may write (glob patterns under the tune root), and
    # whether a value is one it may put back in such a file
    files: tuple[str, ...] = ()
    allows: Callable[[Path, str], bool] = lambda path, value: False


@dataclass
class Status:
    name: str
    why: str
    tuned: str
    files: list[Change] = field(default_factory=list)
    unavailable: str | None = None

    @property
    def is_tuned(self) -> bool | None:
        if self.unavailable:
            return None
        return all(c.done for c in self.files)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "tuned": self.is_tuned,
            "unavailable": self.unavailable,
            "wanted": self.tuned,
            "now": sorted({_choice(c.now) for c in self.files if c.now is not None}),
            "files": len(self.files),
        }


# ------------------------------------------------------------ the settings

GOVERNOR = "sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"
NO_TURBO = "sys/devices/system/cpu/intel_pstate/no_turbo"
BOOST = "sys/devices/system/cpu/cpufreq/boost"
IDLE_DISABLE = "sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/disable"
IRQ_AFFINITY = "proc/irq/[0-9]*/smp_affinity_list"
THP = "sys/kernel/mm/transparent_hugepage/enabled"
ASLR = "proc/sys/kernel/randomize_va_space"
NMI_WATCHDOG = "proc/sys/kernel/nmi_watchdog"
PERF_PARANOID = "proc/sys/kernel/perf_event_paranoid"


def _per_file(pattern: str, want: Callable[[Path, str], str | None], missing: str):
    """Every file matching `pattern` under the root whose wanted value `want(path, text)` gives."""

    def changes(r: Path, cpus) -> tuple[list[Change], str | None]:
        out = []
        for p in sorted(glob.glob(str(r / pattern))):
            text = _read(Path(p))
            if text is None:
                continue
            w = want(Path(p), text)
            if w is not None:
                out.append(Change(Path(p), w, text))
        return out, (None if out else missing)

    return changes


def _governor(path: Path, text: str) -> str | None:
    available = _read(path.with_name("scaling_available_governors")) or ""
    return "performance" if "performance" in available.split() else None


def _deep_idle(path: Path, text: str) -> str | None:
    """An idle state that takes more than a microsecond to leave is disabled."""
    latency = _read(path.with_name("latency"))
    try:
        return "1" if latency is not None and int(latency) > 1 else None
    except ValueError:
        return None


def _turbo(r: Path, cpus) -> tuple[list[Change], str | None]:
    for rel, want in ((NO_TURBO, "1"), (BOOST, "0")):
        text = _read(r / rel)
        if text is not None:
            return [Change(r / rel, want, text)], None
    return [], "neither intel_pstate/no_turbo nor cpufreq/boost is exposed (no turbo control here)"


def _irq_affinity(r: Path, cpus: tuple[int, ...] | None) -> tuple[list[Change], str | None]:
    """Interrupts moved off the measured CPUs (--cpus), to the others."""
    if not cpus:
        return [], "give the measured CPUs (--cpus) to move interrupts off them"
    online = _cpulist(_read(r / "sys/devices/system/cpu/online") or "")
    rest = sorted(set(online) - set(cpus))
    if not rest:
        return [], "--cpus is every online CPU: no CPU is left to take the interrupts"
    out = []
    for p in sorted(glob.glob(str(r / IRQ_AFFINITY))):
        text = _read(Path(p))
        if text is not None and set(_cpulist(text)) & set(cpus):
            out.append(Change(Path(p), _format_cpulist(rest), text))
    return out, None


def _irqbalance(r: Path, cpus) -> tuple[list[Change], str | None]:
    """irqbalance moves interrupts back while it runs: it is reported, never stopped by oslens."""
    for comm in glob.glob(str(r / "proc/[0-9]*/comm")):
        if (_read(Path(comm)) or "").strip() == "irqbalance":
            return [], "irqbalance is running and moves interrupts back: stop its service before measuring"
    return [], None


def _cpulist(text: str) -> list[int]:
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        try:
            lo, hi = int(a), int(b or a)
        except ValueError:
            return []
        if hi - lo > MAX_CPUS:
            return []
        out += range(lo, hi + 1)
    return out


def _format_cpulist(cpus: list[int]) -> str:
    return ",".join(map(str, cpus))


# ---- the values a setting may put back: as the kernel file reads (with its
# newline), or as tune writes it (without)


def _word(value: str) -> str | None:
    m = re.fullmatch(r"(\S+)\n?", value)
    return m.group(1) if m else None


def _integer_in(lo: int, hi: int) -> Callable[[Path, str], bool]:
    def allows(path: Path, value: str) -> bool:
        w = _word(value) or ""
        return re.fullmatch(r"-?[0-9]+", w) is not None and str(int(w)) == w and lo <= int(w) <= hi

    return allows


_flag = _integer_in(0, 1)


def _available_governor(path: Path, value: str) -> bool:
    return _word(value) in (_read(path.with_name("scaling_available_governors")) or "").split()


def _choice_of(words: tuple[str, ...]) -> Callable[[Path, str], bool]:
    """A choice file's value: as read ("always [madvise] never", one word
    chosen) or as written (one word). Its words are those the file offers
    now — the kernel's file lists them all; a model tree's file, once
    written, holds one word, and then the kernel's `words` are offered."""

    def allows(path: Path, value: str) -> bool:
        listed = value.removesuffix("\n").split(" ")
        plain = [w[1:-1] if w[:1] == "[" and w[-1:] == "]" else w for w in listed]
        chosen = [p for w, p in zip(listed, plain) if w != p]
        word = chosen[0] if len(chosen) == 1 else (plain[0] if len(listed) == 1 else None)
        now = (_read(path) or "").replace("[", " ").replace("]", " ").split()
        offered = set(now if len(now) > 1 else words)
        return word in offered and set(plain) <= offered

    return allows


def _cpus_of_this_machine(path: Path, value: str) -> bool:
    """An interrupt's CPU list as the kernel takes it: possible CPUs only, an online one among them."""
    if not re.fullmatch(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*\n?", value):
        return False
    cpus = set(_cpulist(value))
    online = set(_cpulist(_read(root() / "sys/devices/system/cpu/online") or ""))
    possible = set(_cpulist(_read(root() / "sys/devices/system/cpu/possible") or "")) or online
    return bool(cpus & online) and cpus <= possible


SETTINGS = (
    Setting("cpufreq governor",
            "a governor other than performance changes the clock during a run",
            _per_file(GOVERNOR, _governor, "no cpufreq here (a VM, or no driver): the clock is the host's or fixed"),
            "performance on every CPU", (GOVERNOR,), _available_governor),
    Setting("turbo", "turbo boost makes the clock depend on temperature and on how many cores are busy", _turbo,
            "off", (NO_TURBO, BOOST), _flag),
    Setting("deep idle states",
            "waking from a deep C-state adds its exit latency to the first operation after a sleep",
            _per_file(IDLE_DISABLE, _deep_idle, "no cpuidle states deeper than a microsecond here"),
            "every idle state slower than 1 µs to leave disabled", (IDLE_DISABLE,), _flag),
    Setting("interrupts off the measured CPUs", "a device interrupt on a measured CPU is a detour in its timings",
            _irq_affinity, "every movable interrupt on the other CPUs", (IRQ_AFFINITY,), _cpus_of_this_machine),
    Setting("irqbalance", "it moves interrupts back onto the measured CPUs", _irqbalance, "not running"),
    Setting("transparent huge pages",
            "khugepaged collapses pages in the background, and a fault may take a huge page or not",
            _per_file(THP, lambda p, t: "never", "no transparent huge pages in this kernel"),
            "never", (THP,), _choice_of(("always", "madvise", "never"))),
    Setting("ASLR", "address randomization changes cache and TLB layouts from run to run",
            _per_file(ASLR, lambda p, t: "0", "no randomize_va_space here"), "0 (off)", (ASLR,), _integer_in(0, 2)),
    Setting("NMI watchdog", "its periodic NMI interrupts every CPU",
            _per_file(NMI_WATCHDOG, lambda p, t: "0", "no NMI watchdog in this kernel"), "0 (off)",
            (NMI_WATCHDOG,), _flag),
    Setting("perf_event_paranoid", "above 1, an unprivileged profiler sees no kernel time",
            _per_file(PERF_PARANOID, lambda p, t: "1", "no perf events in this kernel"), "1",
            (PERF_PARANOID,), _integer_in(-1, 4)),
)  # fmt: skip


def status(cpus: tuple[int, ...] | None = None) -> list[Status]:
    """Each setting as the machine has it now."""
    r = _trusted_root()
    out = []
    for s in SETTINGS:
        files, why = s.changes(r, cpus)
        out.append(Status(s.name, s.why, s.tuned, files, why if not files else None))
    return out


def _refusal(path: str, value: str, r: Path) -> str | None:
    """Why tune may not write `value` to `path`, or None: it may where a
    setting declares the file, reached under the tune root without a link
    out of the tree it is declared in, no other user can change it, and the
    setting allows the value there."""
    p = Path(path)
    if not p.is_absolute() or str(p) != path or ".." in p.parts:
        return "not a plain absolute path"
    if r not in p.parents:
        return f"not under {r}"
    rel = p.relative_to(r).parts
    declared = [(s, pat) for s in SETTINGS for pat in s.files if _matches(rel, pat.split("/"))]
    if not declared:
        return "no setting of tune's has that file"
    setting, pattern = declared[0]
    tree = os.path.realpath(r / pattern.split("/")[0])
    if not os.path.realpath(p).startswith(tree + os.sep):
        return f"a symbolic link on the way leads out of {tree}"
    if why := trust.problem(p):
        return why
    if not setting.allows(p, value):
        return f"{value[:40]!r} is not a value of {setting.name}"
    return None


def _matches(parts: tuple[str, ...], pattern: list[str]) -> bool:
    """Name by name, so that no `*` matches across a '/'."""
    return len(parts) == len(pattern) and all(map(fnmatchcase, parts, pattern))


# ------------------------------------------------------------ the state file


def _tmp(path: Path) -> Path:
    return path.with_suffix(".tmp")


def _check_place(path: Path) -> None:
    if why := trust.problem(path):
        raise UsageError(
            f"the tuning state {path} is refused: {why} (tune trusts only a place no other user can change)"
        )


def _errno_words(e: OSError) -> str:
    return "a symbolic link" if e.errno == errno.ELOOP else (e.strerror or str(e))


def _read_state_bytes(path: Path) -> bytes | None:
    """A state file's bytes, None if there is none; never through a link."""
    _check_place(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise UsageError(f"the tuning state {path} is refused: {_errno_words(e)}") from None
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"the tuning state {path} is refused: not a regular file")
        return f.read()


def _checked_state(text: bytes, path: Path, r: Path) -> dict:
    """The state in `text`, every file it names one tune may write with the
    value named: refused whole, in one line, before anything is written."""
    try:
        state = json.loads(text)
    except (ValueError, RecursionError):
        state = None
    files = state.get("files") if isinstance(state, dict) else None
    if not (isinstance(files, dict) and all(isinstance(v, str) for v in files.values())):
        raise UsageError(f"{path} is not a tuning state oslens wrote: restore by hand, then remove it")
    if state.get("root") != str(r):
        raise UsageError(f"{path} is the state of the tree {state.get('root')!r}, not of {r}: nothing was written")
    for p, old in files.items():
        if why := _refusal(p, old, r):
            raise UsageError(f"{path} names {p!r}, which tune may not write ({why}): nothing was written")
    return state


def _load(path: Path, r: Path) -> dict | None:
    text = _read_state_bytes(path)
    return None if text is None else _checked_state(text, path, r)


def _make_private_dir(d: Path) -> None:
    """The state's directory: checked before it is made (0700) and after."""
    _check_place(d)
    missing = [p for p in (d, *d.parents) if not os.path.lexists(p)]
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise UsageError(f"cannot make the tuning state's directory {p}: {_errno_words(e)}") from None
    _check_place(d)


def _fsync_dir(d: Path) -> None:
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _save(path: Path, state: dict) -> None:
    """Atomically and on disk: a new file of ours alone (O_EXCL, mode 0600,
    no link followed) renamed over the old one; none when it names no file."""
    _make_private_dir(path.parent)
    _check_place(path)
    if not state["files"]:
        path.unlink(missing_ok=True)
        return
    tmp = _tmp(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        busy = " (another `oslens tune` at work, or a file to remove)" if e.errno == errno.EEXIST else ""
        raise UsageError(f"cannot make the tuning state {tmp}: {_errno_words(e)}{busy}") from None
    try:
        with open(fd, "w") as f:
            json.dump(state, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write the tuning state {path}: {_errno_words(e)}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _settle_leftover(path: Path, r: Path, say: Callable[[str], None]) -> None:
    """The .tmp a kill left between its writing and its rename: a whole,
    valid state with no state beside it takes its place; any other is
    discarded (what it names beyond the state kept, if any, had not been
    changed yet). Said either way, never reused. What oslens never makes
    there (a link) is refused."""
    tmp = _tmp(path)
    _check_place(path)  # and so every directory on the way to tmp
    try:
        mode = os.lstat(tmp).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if not stat.S_ISREG(mode):
        what = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
        raise UsageError(f"{tmp} is refused: {what}, which oslens never makes; remove it")
    try:
        _checked_state(_read_state_bytes(tmp) or b"", tmp, r)
        why = "the state it was to replace is kept" if os.path.lexists(path) else None
    except UsageError as e:
        why = str(e)
    if why is None:
        os.replace(tmp, path)
        _fsync_dir(path.parent)
        say(f"completed the tuning state an interrupted `oslens tune` left in {tmp}")
    else:
        tmp.unlink()
        say(f"discarded {tmp}, left by an interrupted `oslens tune`: {why}")


# ------------------------------------------------------------ apply, reset


def _write(path: Path, text: str) -> str | None:
    """Writes a kernel file (never through a link at its end, never a file
    it makes, a FIFO or a device); None, or why it could not."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        return _errno_words(e)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file"
        os.write(fd, text.encode())
        return None
    except OSError as e:
        return _errno_words(e)
    finally:
        os.close(fd)


def _still_changed(files: dict[str, str]) -> dict[str, str]:
    """A file that holds its original (a write that failed, or one put back
    by hand) is nothing to restore."""
    return {p: old for p, old in files.items() if _read(Path(p)) != old}


def _quiet(msg: str) -> None:
    pass


def apply(cpus: tuple[int, ...] | None = None, say: Callable[[str], None] = _quiet) -> list[dict]:
    """Tunes what can be tuned; each setting's outcome. The originals go to
    the state file first (a second apply keeps the first one's); once the
    files are written, the state keeps only those that changed."""
    r = _trusted_root()
    if _needs_root(r):
        raise UsageError(f"tune apply needs root: {NEEDS_ROOT}")
    path = state_path()
    _settle_leftover(path, r, say)
    state = _load(path, r) or {"root": str(r), "files": {}}
    files: dict[str, str] = state["files"]
    failed: dict[str, list[str]] = {}
    todo = []
    for st in status(cpus):
        for c in st.files:
            if c.done:
                continue
            # a file whose original reset would refuse to put back is not changed
            why = None if str(c.path) in files else _refusal(str(c.path), c.now or "", r)
            if why:
                failed.setdefault(st.name, []).append(f"{c.path}: left as it is ({why})")
                continue
            files.setdefault(str(c.path), c.now or "")
            todo.append((st, c))
    if todo:
        _save(path, state)
    for st, c in todo:
        if why := _write(c.path, c.want):
            failed.setdefault(st.name, []).append(f"{c.path}: {why}")
    if todo and (changed := _still_changed(files)) != files:
        _save(path, {**state, "files": changed})
    out = []
    for st in status(cpus):
        d = st.to_dict()
        if st.name in failed:
            d["failed"] = failed[st.name]
        out.append(d)
    return out


def _restore(path: Path, old: str) -> str | None:
    """A choice file ("always [madvise] never") takes its selected word back;
    any other file (a model tree's too) its old contents as they were."""
    if _choice(old) != old.strip() and _write(path, _choice(old)) is None and _read(path) == old:
        return None
    return _write(path, old)


def reset(say: Callable[[str], None] = _quiet) -> list[dict]:
    """Every file the state file names, put back as it was (`changed`: it
    was not); the state file removed once all are back. Each file's outcome.
    The whole state is checked before the first write."""
    r = _trusted_root()
    path = state_path()
    if _needs_root(r):
        if os.path.lexists(path) or os.path.lexists(_tmp(path)):
            raise UsageError(f"tune reset needs root: {NEEDS_ROOT}")
        return []
    _settle_leftover(path, r, say)
    state = _load(path, r)
    if state is None:
        return []
    out = []
    for p, old in state["files"].items():
        if _read(Path(p)) == old:
            out.append({"file": p, "changed": False, "restored": True, "why": None})
            continue
        why = _restore(Path(p), old)
        back = _read(Path(p))
        ok = back == old
        out.append({"file": p, "changed": True, "restored": ok, "why": None if ok else why or f"reads {back!r}"})
    if all(o["restored"] for o in out):
        path.unlink(missing_ok=True)
    return out


def pending() -> dict[str, str]:
    """The files an apply changed and no reset has put back yet (read only)."""
    state = _load(state_path(), _trusted_root())
    return _still_changed(state["files"]) if state else {}
