"""The block devices `oslens io` makes for a run and removes after it: a
zram device (the block layer and a compressor, no disk) or, where the kernel
has no zram, a loop device on a file in tmpfs (the block layer, the loop
driver's worker threads and the page cache of tmpfs). Each is written down in
the runtime entry before it exists (`device zram N`, `device loop FILE`, and
`device zram-unconfirmed N`: the index about to be made, removed only while
unconfigured), so that a run killed outright leaves nothing the next oslens
does not remove: they are an owned resource (oslens.owned), `DEVICE`."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
from pathlib import Path

from .. import owned, runtime
from ..errors import UsageError
from .target import Target, _read, write_random

ZRAM_CONTROL = Path("/sys/class/zram-control")
MADE = ("zram", "loop")
LOOP_FILE = "disk"  # a loop device's backing file, in a private directory of its own
MIN_SIZE = 1 << 20


def _quiet_signals():
    """Holds SIGINT/SIGTERM/SIGHUP while a device is made and written down,
    so that an interruption cannot fall between the two (a SIGKILL still
    can: a window of a few system calls, in which a zram device outlives us)."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


def _fill(path: str, size: int) -> None:
    """Writes the whole device once, with bytes that do not compress (as
    fio's default buffers), so that reads find data and not unwritten
    blocks (zram returns those without touching its store)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        write_random(fd, 0, size)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # the reads start from the device, not this cache
    finally:
        os.close(fd)


def _tmpfs_dir() -> str | None:
    """A tmpfs directory the backing file of a loop device may live in."""
    try:
        mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return None
    for want in ("/dev/shm", "/run"):
        if any(m[1] == want and m[2] == "tmpfs" and os.access(want, os.W_OK) for m in mounts):
            return want
    return None


def available_kinds() -> dict[str, str | None]:
    """zram and loop: None if oslens can make one here, else why not."""
    out: dict[str, str | None] = {}
    if os.geteuid() != 0:
        return {k: "making a block device needs root" for k in MADE}
    if not ZRAM_CONTROL.exists():
        subprocess.run(["modprobe", "zram", "num_devices=0"], capture_output=True)
    out["zram"] = (
        None if (ZRAM_CONTROL / "hot_add").exists() else "this kernel has no zram (no /sys/class/zram-control)"
    )
    if not shutil.which("losetup"):
        out["loop"] = "losetup (util-linux) is not installed"
    elif not _tmpfs_dir():
        out["loop"] = "no writable tmpfs (/dev/shm, /run) for its file"
    elif not Path("/dev/loop-control").exists():
        subprocess.run(["modprobe", "loop"], capture_output=True)
        out["loop"] = None if Path("/dev/loop-control").exists() else "this kernel has no loop devices"
    else:
        out["loop"] = None
    return out


def make(kind: str, size: int) -> Target:
    """A zram or loop device of `size` bytes, written down before it
    exists, filled once. `kind` is one available_kinds() said can be made
    here (the caller asked it: it loads modules, once is enough)."""
    if kind == "zram":
        return _make_zram(size)
    return _make_loop(size)


def _next_zram() -> int:
    """The index the next hot_add gives: the kernel's lowest free one."""
    taken = {int(p.name[4:]) for p in Path("/sys/block").glob("zram*") if p.name[4:].isdigit()}
    return next(i for i in range(len(taken) + 1) if i not in taken)


@contextlib.contextmanager
def _zram_lock():
    """The lock on zram-control's hot_add that every oslens holds while it
    makes and configures a zram device, and while it removes one: a sweep
    of a dead oslens's unconfirmed index cannot then fall between another
    oslens's hot_add and its configuration, where the device it just made
    looks like nobody's (one such sweep reset a device being made: EBUSY)."""
    fd = os.open(ZRAM_CONTROL / "hot_add", os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def _make_zram(size: int) -> Target:
    # Reading hot_add makes the device; its index is known only then. So the
    # index it will give is written down first, as unconfirmed (a SIGKILL
    # between the read and the confirmed line would otherwise leak it), under
    # the lock, held until the device is configured. Signals are held until
    # the lock is let go (the removal a held SIGINT/SIGTERM leads to takes
    # it again), and delivered as the mask is lifted: inside the block that
    # removes the device again.
    old = _quiet_signals()
    n = None
    try:
        try:
            with _zram_lock() as fd:
                guess = f"zram-unconfirmed {_next_zram()}"
                runtime.note("device", guess)
                n = int(os.read(fd, 32))
                runtime.note("device", f"zram {n}")
                runtime.forget("device", guess)
                Path(f"/sys/block/zram{n}/disksize").write_text(str(size))
        except (OSError, ValueError) as e:
            raise UsageError(f"--target zram: cannot add a zram device: {e}") from None
        target = Target(f"/dev/zram{n}", made="zram")
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        _wait_for(target.path)
        _fill(target.path, size)
    except BaseException:
        if n is not None:
            remove_device(f"zram {n}")
        raise
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return target


def _make_loop(size: int) -> Target:
    # the file lives in a directory of ours made for it: /dev/shm is every user's to write in
    home = runtime.private_dir(Path(_tmpfs_dir() or "/dev/shm"), "loop")
    if home is None:
        raise UsageError(f"--target loop: cannot make a private directory in {_tmpfs_dir()} for its file")
    backing = str(home / LOOP_FILE)
    runtime.note("device", f"loop {backing}")
    try:
        _fill_file(backing, size)
        p = subprocess.run(["losetup", "--find", "--show", backing], capture_output=True, text=True)
        if p.returncode != 0:
            raise UsageError(f"--target loop: losetup failed: {p.stderr.strip()}")
        target = Target(p.stdout.strip(), made="loop", backing=backing)
        _wait_for(target.path)
    except BaseException:
        remove_device(f"loop {backing}")
        raise
    return target


def _fill_file(path: str, size: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.close(fd)
    _fill(path, size)


def _wait_for(path: str, timeout: float = 5.0) -> None:
    """udev may still be making the node: wait for it, briefly."""
    import time

    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise UsageError(f"{path} did not appear")
        time.sleep(0.01)


def remove_device(what: str) -> str:
    """`zram N` or `loop FILE` (a runtime line): the device oslens made,
    removed; what became of it."""
    kind, _, arg = what.partition(" ")
    if kind in ("zram", "zram-unconfirmed") and arg.isdigit():
        if Path(f"/sys/block/zram{arg}").exists():
            with _zram_lock():
                action = _remove_zram(arg, confirmed=kind == "zram")
        else:
            action = "gone"
        if action in ("removed", "gone"):
            runtime.forget("device", what)
        return action
    if kind == "loop" and _ours(arg):
        action = _remove_loop(arg)
        if action in ("removed", "gone"):
            runtime.forget("device", what)
        return action
    return "left alone"


def _ours(backing: str) -> bool:
    """A backing file of oslens's: in a directory of its (DIR/oslens.*/disk),
    or named after it, as an older oslens made them."""
    parent, name = os.path.split(backing)
    return name.startswith("oslens.") or (name == LOOP_FILE and os.path.basename(parent).startswith("oslens."))


def _remove_loop(backing: str) -> str:
    """The loop device bound to oslens's backing file, and the file."""
    action = "gone"
    for lo in Path("/sys/block").glob("loop*"):
        if _read(lo / "loop" / "backing_file") in (backing, f"{backing} (deleted)"):
            p = subprocess.run(["losetup", "--detach", f"/dev/{lo.name}"], capture_output=True, text=True)
            action = "removed" if p.returncode == 0 else f"failed: {p.stderr.strip()}"
    try:
        os.unlink(backing)
        action = "removed" if action == "gone" else action
    except FileNotFoundError:
        pass
    return action


def _remove_zram(n: str, confirmed: bool) -> str:
    """zram device n, under the lock: not if another live oslens's own
    line names it (a dead one's line, or a stale line of ours, may name an
    index the kernel has given again), and an unconfirmed index only while
    unconfigured (ours is confirmed by a line of its own before it is
    configured, under the same lock)."""
    if not Path(f"/sys/block/zram{n}").exists():
        return "gone"
    # a live maker confirms its index under this lock: another's unconfirmed line is stale, its confirmed
    # one is its device (or a line it failed to strike out: left, rather than someone's device destroyed)
    if f"zram {n}" in runtime.claimed_by_others("device"):
        return "left alone: another live oslens names it"
    if not confirmed and _read(Path(f"/sys/block/zram{n}/disksize")) != "0":
        return "gone"
    try:
        Path(f"/sys/block/zram{n}/reset").write_text("1")
    except OSError:
        pass  # never configured, or still open: hot_remove says which
    try:
        (ZRAM_CONTROL / "hot_remove").write_text(n)
    except OSError as e:
        return f"failed: {e.strerror}"
    return "removed"


def existing() -> list[str]:
    """zram devices and bound loop devices that exist now, and the backing
    files of loop devices oslens made (a made device shows up here; unbound
    loop nodes, which any machine has in numbers, do not)."""
    out = set()
    for p in Path("/sys/block").iterdir():
        if p.name.startswith("zram") or (p.name.startswith("loop") and (p / "loop" / "backing_file").exists()):
            out.add(p.name)
    for d in ("/dev/shm", "/run"):
        out.update(str(p) for p in Path(d).glob("oslens.*.loop"))
        out.update(str(p) for p in Path(d).glob(f"oslens.*.loop.*/{LOOP_FILE}"))
    return sorted(out)


DEVICE = owned.Resource(remove=remove_device, existing=existing)
