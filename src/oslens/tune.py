"""A machine prepared for measuring, as `pyperf system tune` prepares one:
what makes numbers unstable, read (`show`), set (`apply`) and put back
(`reset`).

Each setting is a set of kernel files (sysfs, procfs) and the value that
steadies a measurement. `apply` writes the state file — every file it will
change, with its contents — before it changes anything, so that `reset`
restores each one byte for byte even after a SIGKILL between the two; a
second `apply` keeps the first one's originals. Where a setting cannot be
read or changed (a VM without cpufreq, a kernel without the file, an
interrupt the kernel manages), it says so, per setting.

The kernel files are read under $OSLENS_TUNE_ROOT (default /): a model
machine's tree for tests."""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import platformdirs

from .errors import UsageError

STATE_NAME = "tune-state.json"


def root() -> Path:
    return Path(os.environ.get("OSLENS_TUNE_ROOT") or "/")


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
    for rel, want in (("sys/devices/system/cpu/intel_pstate/no_turbo", "1"),
                      ("sys/devices/system/cpu/cpufreq/boost", "0")):  # fmt: skip
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
    for p in sorted(glob.glob(str(r / "proc/irq/*/smp_affinity_list"))):
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
            out += range(int(a), int(b or a) + 1)
        except ValueError:
            return []
    return out


def _format_cpulist(cpus: list[int]) -> str:
    return ",".join(map(str, cpus))


SETTINGS = (
    Setting("cpufreq governor",
            "a governor other than performance changes the clock during a run",
            _per_file("sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor", _governor,
                      "no cpufreq here (a VM, or no driver): the clock is the host's or fixed"),
            "performance on every CPU"),
    Setting("turbo", "turbo boost makes the clock depend on temperature and on how many cores are busy", _turbo,
            "off"),
    Setting("deep idle states",
            "waking from a deep C-state adds its exit latency to the first operation after a sleep",
            _per_file("sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/disable", _deep_idle,
                      "no cpuidle states deeper than a microsecond here"),
            "every idle state slower than 1 µs to leave disabled"),
    Setting("interrupts off the measured CPUs", "a device interrupt on a measured CPU is a detour in its timings",
            _irq_affinity, "every movable interrupt on the other CPUs"),
    Setting("irqbalance", "it moves interrupts back onto the measured CPUs", _irqbalance, "not running"),
    Setting("transparent huge pages",
            "khugepaged collapses pages in the background, and a fault may take a huge page or not",
            _per_file("sys/kernel/mm/transparent_hugepage/enabled", lambda p, t: "never",
                      "no transparent huge pages in this kernel"),
            "never"),
    Setting("ASLR", "address randomization changes cache and TLB layouts from run to run",
            _per_file("proc/sys/kernel/randomize_va_space", lambda p, t: "0", "no randomize_va_space here"),
            "0 (off)"),
    Setting("NMI watchdog", "its periodic NMI interrupts every CPU",
            _per_file("proc/sys/kernel/nmi_watchdog", lambda p, t: "0", "no NMI watchdog in this kernel"),
            "0 (off)"),
    Setting("perf_event_paranoid", "above 1, an unprivileged profiler sees no kernel time",
            _per_file("proc/sys/kernel/perf_event_paranoid", lambda p, t: "1", "no perf events in this kernel"),
            "1"),
)  # fmt: skip


def status(cpus: tuple[int, ...] | None = None) -> list[Status]:
    """Each setting as the machine has it now."""
    r = root()
    out = []
    for s in SETTINGS:
        files, why = s.changes(r, cpus)
        out.append(Status(s.name, s.why, s.tuned, files, why if not files else None))
    return out


# ------------------------------------------------------------ apply, reset


def _load_state(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {"files": {}}
    except (OSError, ValueError) as e:
        raise UsageError(
            f"the tuning state file {path} cannot be read ({e}): restore by hand, then remove it"
        ) from None


def _write_state(path: Path, state: dict) -> None:
    """Atomically, and on disk, before anything it names is changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _write(path: Path, text: str) -> str | None:
    """Writes a kernel file; None, or why it could not."""
    try:
        with open(path, "w") as f:
            f.write(text)
        return None
    except OSError as e:
        return e.strerror or str(e)


def apply(cpus: tuple[int, ...] | None = None) -> list[dict]:
    """Tunes what can be tuned; each setting's outcome. The originals go to
    the state file first (a second apply keeps the first one's)."""
    path = state_path()
    state = _load_state(path)
    state.setdefault("files", {})
    state["root"] = str(root())
    todo = [(st, c) for st in status(cpus) for c in st.files if not c.done]
    for _, c in todo:
        state["files"].setdefault(str(c.path), c.now)
    if todo:
        _write_state(path, state)
    failed: dict[str, list[str]] = {}
    for st, c in todo:
        why = _write(c.path, c.want)
        if why:
            failed.setdefault(st.name, []).append(f"{c.path}: {why}")
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


def reset() -> list[dict]:
    """Every file the state file names, put back as it was; the state file
    removed once all are back. Each file's outcome."""
    path = state_path()
    state = _load_state(path)
    out = []
    for p, old in state.get("files", {}).items():
        now = _read(Path(p))
        if now == old:
            out.append({"file": p, "restored": True, "why": None})
            continue
        why = _restore(Path(p), old)
        back = _read(Path(p))
        out.append({"file": p, "restored": back == old, "why": why or (None if back == old else f"reads {back!r}")})
    if all(o["restored"] for o in out):
        path.unlink(missing_ok=True)
    return out


def pending() -> dict[str, str]:
    """The files an apply changed and no reset has put back yet."""
    return _load_state(state_path()).get("files", {})
