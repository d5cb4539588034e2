"""A disk's I/O scheduler, set for a run (`oslens io --scheduler`) and put
back after it. The old one is written down in the runtime entry before the
new one is set (`scheduler PATH OLD`), so that a run killed outright has it
put back by the next oslens: an owned resource (oslens.owned), `SCHEDULER`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .. import owned, runtime
from ..errors import UsageError
from .target import Target, _choices, _read, _selected


def _scheduler_file(target: Target) -> tuple[Path | None, str | None]:
    disk = target.disk
    path = disk / "queue" / "scheduler" if disk else None
    return path, _read(path) if path else None


def check_scheduler(name: str, target: Target | None) -> None:
    """Refuses (UsageError) a scheduler the target does not offer; with no
    target yet (a loop device to be made), one this kernel has none of: the
    elevators any request-based disk here lists, and those a module would
    add when asked (the kernel loads NAME-iosched)."""
    if target is not None:
        text = _scheduler_file(target)[1]
        if not text:
            raise UsageError(f"--scheduler: {target.path} has no I/O scheduler (a bio-based device such as zram)")
        if name not in (have := _choices(text)):
            raise UsageError(f"--scheduler: {target.path} offers {', '.join(have)}, not '{name}'")
        return
    have = sorted({w for p in Path("/sys/block").glob("*/queue/scheduler") for w in _choices(_read(p))})
    if name in have:
        return
    modprobe = shutil.which("modprobe") or "/sbin/modprobe"
    try:
        loadable = subprocess.run([modprobe, "-n", "-q", f"{name}-iosched"], capture_output=True).returncode == 0
    except OSError:
        loadable = False
    if not loadable:
        raise UsageError(f"--scheduler: this kernel has no I/O scheduler '{name}' (it has {', '.join(have) or 'none'})")


def set_scheduler(target: Target, name: str) -> None:
    """Sets the disk's I/O scheduler for the run; the old one is written
    down first and put back by restore_scheduler (or the next oslens)."""
    check_scheduler(name, target)
    path, text = _scheduler_file(target)
    old = _selected(text)
    if old == name:
        return
    runtime.note("scheduler", f"{path} {old}")
    target.saved_scheduler = old
    try:
        path.write_text(name)
    except OSError as e:
        raise UsageError(f"--scheduler {name}: {e.strerror}") from None


def restore_scheduler(target: Target) -> None:
    if target.saved_scheduler and target.disk:
        restore_line(f"{target.disk / 'queue' / 'scheduler'} {target.saved_scheduler}")
        target.saved_scheduler = None


def restore_line(what: str) -> str:
    """`PATH NAME` (a runtime line): a disk's scheduler put back."""
    path, _, name = what.rpartition(" ")
    if not path.startswith("/sys/") or not path.endswith("/queue/scheduler") or not Path(path).exists():
        return "gone"
    try:
        Path(path).write_text(name)
    except OSError as e:
        return f"failed: {e.strerror}"
    return "restored"


SCHEDULER = owned.Resource(remove=restore_line, would="would restore")
