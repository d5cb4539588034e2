"""The device or file `oslens io` measures.

By default a RAM-backed block device made for the run and removed after it:
a zram device (the block layer and a compressor, no disk) or, where the
kernel has no zram, a loop device on a file in tmpfs (the block layer, the
loop driver's worker threads and the page cache of tmpfs). Both are written
down in the runtime entry before they exist (runtime.py), so that a run
killed outright leaves nothing the next oslens does not remove: they, and a
disk's scheduler set for a run, are owned resources (oslens.owned).

A user's device or file is read freely. It is written only if it holds
nothing that writing would destroy — no filesystem or partition table
signature (blkid), no data in a regular file — or if the user says so with
--allow-overwrite; and never while it is mounted, swap, or held by another
device (the kernel's O_EXCL says so), whatever the flag.

The kernel's own account of the device (/sys/block/*/stat: I/Os and
sectors completed) and the interrupts of its hardware queues
(/proc/interrupts) are read around each point, for the analysis to set
beside what the engine counted."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import signal
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import owned, runtime
from .collectors import bracketed_choice, read_text
from .errors import UsageError
from .profile.procfs import IrqRow, parse_interrupts

ZRAM_CONTROL = Path("/sys/class/zram-control")
MADE = ("zram", "loop")
MIN_SIZE = 1 << 20
FILL_CHUNK = 1 << 20
# /sys/block/*/stat (Documentation/block/stat.rst): the fields kept
STAT_FIELDS = ("reads", "read_merges", "read_sectors", "read_ms", "writes", "write_merges", "write_sectors",
               "write_ms", "in_flight", "io_ms", "queue_ms")  # fmt: skip
SECTOR = 512  # the unit of /sys/block/*/stat, whatever the device's block size


def parse_size(text: str, what: str = "--size") -> int:
    """'256M', '4k', '1G', '4096' -> bytes."""
    m = re.fullmatch(r"([0-9]+)([kKmMgGtT]?)(?:i?[bB])?", text.strip())
    if not m:
        raise UsageError(f"{what}: '{text}' is not a size (e.g. 4k, 256M, 1G)")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[m.group(2).lower()]


def _read(path: Path) -> str | None:
    try:
        return read_text(path)
    except OSError:
        return None


def _selected(text: str | None) -> str | None:
    """The [selected] word of a sysfs choice file; a file of one unbracketed
    choice ("none", a bio-based device's scheduler) is that choice."""
    if not text:
        return None
    try:
        return bracketed_choice(text)
    except ValueError:
        return text


def _choices(text: str | None) -> list[str]:
    """Every word of a sysfs choice file, the selected one unbracketed."""
    return [w.strip("[]") for w in text.split()] if text else []


@dataclass
class Target:
    """A block device or regular file, and where the kernel accounts its I/O."""

    path: str  # what the engine opens
    made: str | None = None  # "zram" or "loop" when oslens made it for the run
    backing: str | None = None  # a made loop device's file
    saved_scheduler: str | None = field(default=None, repr=False)  # to restore after --scheduler

    @property
    def made_line(self) -> str | None:
        """How the runtime entry names a made device (remove_device's argument)."""
        if self.made == "zram":
            return f"zram {self.path.removeprefix('/dev/zram')}"
        return f"loop {self.backing}" if self.made == "loop" else None

    @property
    def is_block(self) -> bool:
        return stat.S_ISBLK(os.stat(self.path).st_mode)

    @property
    def devno(self) -> tuple[int, int]:
        """The block device the I/Os reach: the device itself, or a file's filesystem's."""
        st = os.stat(self.path)
        dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
        return os.major(dev), os.minor(dev)

    @property
    def sysfs(self) -> Path | None:
        """/sys/class/block/NAME of the device (a partition's own), None if there is none (tmpfs, NFS)."""
        p = Path(f"/sys/dev/block/{self.devno[0]}:{self.devno[1]}")
        return p.resolve() if p.exists() else None

    @property
    def disk(self) -> Path | None:
        """The whole disk's sysfs directory: where queue/ is."""
        s = self.sysfs
        if s is None:
            return None
        return s.parent if (s / "partition").exists() else s

    def size(self) -> int:
        with open(self.path, "rb") as f:
            return f.seek(0, os.SEEK_END)

    def describe(self) -> dict:
        """What a reader of the results needs to know of the target."""
        d: dict = {"path": self.path, "made": self.made, "kind": "block device" if self.is_block else "file"}
        d["size_bytes"] = self.size()
        if self.backing:
            d["backing"] = self.backing
        disk, part = self.disk, self.sysfs
        if disk is None:
            d["device"] = None
            d["note"] = "no block device under this file: the I/Os are its filesystem's alone"
            return d
        d["device"] = part.name
        if part != disk:
            d["disk"] = disk.name
        q = disk / "queue"
        sched = _read(q / "scheduler")
        d["scheduler"] = _selected(sched)
        d["schedulers"] = _choices(sched)
        d["blk_mq"] = (disk / "mq").is_dir()
        d["hw_queues"] = len(list((disk / "mq").iterdir())) if d["blk_mq"] else None
        for key, name in (
            ("logical_block_size", "logical_block"),
            ("rotational", "rotational"),
            ("nr_requests", "nr_requests"),
            ("nomerges", "nomerges"),
            ("rq_affinity", "rq_affinity"),
        ):
            v = _read(q / key)
            d[name] = int(v) if v and v.lstrip("-").isdigit() else v
        d["model"] = _read(disk / "device" / "model")
        driver = disk / "device" / "driver"
        d["driver"] = os.path.basename(os.readlink(driver)) if driver.is_symlink() else None
        if disk.name.startswith("zram"):
            d["compressor"] = _selected(_read(disk / "comp_algorithm"))
        if disk.name.startswith("loop"):
            d["loop_direct_io"] = _read(disk / "loop" / "dio") == "1"
            d["backing"] = d.get("backing") or _read(disk / "loop" / "backing_file")
        return d

    def counters(self) -> dict | None:
        """The kernel's counters of the device the I/Os reach (a partition's own)."""
        s = self.sysfs
        text = _read(s / "stat") if s else None
        if not text:
            return None
        return dict(zip(STAT_FIELDS, map(int, text.split())))

    def irqs(self) -> dict[int, str]:
        """The interrupts of the device's hardware (MSI vectors of its PCI
        function, or its one line), by number; {} for a device that has
        none (zram, loop: it completes in software)."""
        disk = self.disk
        dev = disk / "device" if disk else None
        if dev is None or not dev.exists():
            return {}
        names = {int(r.name): r.description for r in _interrupts().values() if r.numbered}
        for p in [dev.resolve(), *dev.resolve().parents][:6]:
            msi = p / "msi_irqs"
            if msi.is_dir():
                nums = sorted(int(x.name) for x in msi.iterdir() if x.name.isdigit())
                return {n: names.get(n, "") for n in nums}
            irq = _read(p / "irq")
            if irq and irq.isdigit() and int(irq) > 0:
                return {int(irq): names.get(int(irq), "")}
        return {}


def _interrupts() -> dict[str, IrqRow]:
    try:
        return parse_interrupts(Path("/proc/interrupts").read_text())
    except OSError:
        return {}


def interrupts(irqs) -> dict[str, IrqRow]:
    """The rows of /proc/interrupts of the irqs given (numbers)."""
    wanted = {str(n) for n in irqs}
    return {name: row for name, row in _interrupts().items() if name in wanted}


# ---- the user's target: what may be done to it


def _mounted_devices() -> set[tuple[int, int]]:
    out = set()
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            majmin = line.split()[2]
            a, _, b = majmin.partition(":")
            out.add((int(a), int(b)))
    except (OSError, ValueError, IndexError):
        pass
    return out


def _swaps() -> set[str]:
    try:
        lines = Path("/proc/swaps").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {os.path.realpath(line.split()[0]) for line in lines if line.split()}


def in_use(target: Target) -> str | None:
    """Why the device is in use (mounted, swap, held by another device,
    or a partition of it is), or None."""
    sysfs = target.sysfs
    if sysfs is None:
        return None
    majmin = target.devno
    mounted = _mounted_devices()
    parts = [sysfs] + [p for p in sysfs.iterdir() if (p / "partition").exists()]
    for p in parts:
        dev = _read(p / "dev")
        num = tuple(map(int, dev.split(":"))) if dev else None
        what = "it" if p == sysfs else f"its partition {p.name}"
        if num in mounted:
            return f"{what} is mounted"
        if f"/dev/{p.name}" in _swaps() or (num == majmin and os.path.realpath(target.path) in _swaps()):
            return f"{what} is swap"
        holders = list((p / "holders").iterdir()) if (p / "holders").is_dir() else []
        if holders:
            return f"{what} is held by {holders[0].name}"
    return None


def signature(path: str) -> str | None:
    """A filesystem, RAID member or partition table on the device, as blkid
    names it (low-level probing, not the cache), or None."""
    blkid = shutil.which("blkid") or "/sbin/blkid"
    try:
        p = subprocess.run([blkid, "-p", "-o", "export", path], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown (blkid could not probe it: {e})"
    if p.returncode == 2:  # nothing found
        return None
    if p.returncode != 0:
        return f"unknown (blkid: {p.stderr.strip() or p.returncode})"
    tags = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    kind = tags.get("TYPE") or tags.get("PTTYPE")
    return (
        f"a {kind} {'partition table' if 'PTTYPE' in tags and 'TYPE' not in tags else 'signature'}"
        if kind
        else "a signature"
    )


def check_user_target(path: str, writing: bool, allow_overwrite: bool) -> Target:
    """The user's device or file, refused (UsageError) if it is not one, or
    if writing is asked and it would destroy data or corrupt a live user."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise UsageError(f"--target {path}: {e.strerror}") from None
    if not (stat.S_ISBLK(st.st_mode) or stat.S_ISREG(st.st_mode)):
        raise UsageError(f"--target {path}: neither a block device nor a regular file")
    if stat.S_ISREG(st.st_mode) and st.st_size == 0:
        raise UsageError(f"--target {path}: an empty file (give it the size to measure, e.g. with fallocate)")
    if not os.access(path, os.R_OK):
        raise UsageError(f"--target {path}: not readable by this user")
    try:
        # access() answers by the file's mode; the kernel may still refuse the
        # open itself (an LSM guarding the root disk answers EPERM to root)
        os.close(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
    except OSError as e:
        raise UsageError(f"--target {path}: cannot open it: {e.strerror}") from None
    target = Target(os.path.realpath(path) if stat.S_ISBLK(st.st_mode) else os.path.abspath(path))
    if not writing:
        return target
    if not os.access(path, os.W_OK):
        raise UsageError(f"--target {path}: not writable by this user")
    if stat.S_ISBLK(st.st_mode):
        busy = in_use(target)
        if busy:
            raise UsageError(f"--target {path}: {busy}; oslens never writes to a device in use")
        sig = signature(path)
        if sig and not allow_overwrite:
            raise UsageError(
                f"--target {path}: holds {sig}; writing would destroy it (--allow-overwrite to write anyway)"
            )
    elif st.st_size and not allow_overwrite:
        raise UsageError(
            f"--target {path}: a file of {st.st_size} bytes; writing would overwrite its data "
            f"(--allow-overwrite to write anyway)"
        )
    return target


def _hole_ranges(fd: int, end: int):
    """The [start, stop) ranges of [0, end) that hold no data, as
    SEEK_DATA/SEEK_HOLE say: holes, and extents allocated but never
    written (fallocate), which the filesystem also answers with zeros
    without a device I/O."""
    pos = 0
    while pos < end:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: no data past pos
                raise
            data = end
        if data > pos:
            yield pos, min(data, end)
        if data >= end:
            return
        pos = os.lseek(fd, data, os.SEEK_HOLE)


def hole_bytes(path: str, end: int) -> int:
    """Bytes of [0, end) of a regular file that hold no data; where the
    filesystem cannot say where, the blocks it allocated (st_blocks)
    against the size give a lower bound."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return sum(stop - start for start, stop in _hole_ranges(fd, end))
    except OSError:
        st = os.fstat(fd)
        return max(0, min(st.st_size, end) - st.st_blocks * 512)
    finally:
        os.close(fd)


def lay_out(path: str, end: int) -> None:
    """Writes every hole of [0, end) of the file once, as a made device is
    filled (its data untouched), so that each read reaches the device."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        ranges = list(_hole_ranges(fd, end))  # before any is written
        for start, stop in ranges:
            _write_random(fd, start, stop - start)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


# ---- the targets oslens makes


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
        _write_random(fd, 0, size)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # the reads start from the device, not this cache
    finally:
        os.close(fd)


def _write_random(fd: int, start: int, length: int) -> None:
    """`length` bytes that do not compress (as fio's default buffers) from `start`."""
    end = start + length
    while start < end:
        start += os.pwrite(fd, os.urandom(min(FILL_CHUNK, end - start)), start)


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


def _make_zram(size: int) -> Target:
    # Reading hot_add makes the device; its index is known only then. So the
    # index it will give is written down first, as unconfirmed (a SIGKILL
    # between the read and the confirmed line would otherwise leak it), with
    # the control file locked so that another oslens cannot take that index.
    # A held SIGINT/SIGTERM is delivered as the mask is lifted: inside the
    # block that removes the device again.
    old = _quiet_signals()
    n = None
    try:
        try:
            fd = os.open(ZRAM_CONTROL / "hot_add", os.O_RDONLY | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                runtime.note("device", f"zram-unconfirmed {_next_zram()}")
                n = int(os.read(fd, 32))
                runtime.note("device", f"zram {n}")
            finally:
                os.close(fd)
        except (OSError, ValueError) as e:
            raise UsageError(f"--target zram: cannot add a zram device: {e}") from None
        target = Target(f"/dev/zram{n}", made="zram")
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        Path(f"/sys/block/zram{n}/disksize").write_text(str(size))
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
    d = _tmpfs_dir()
    start = runtime.proc_start(os.getpid())
    backing = f"{d}/oslens.{os.getpid()}.{start}.loop"
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
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
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
    if kind == "zram-unconfirmed" and arg.isdigit():
        # ours only while unconfigured: a configured one is someone else's
        # (ours is confirmed by a line of its own before it is configured)
        if _read(Path(f"/sys/block/zram{arg}/disksize")) != "0":
            return "gone"
        kind = "zram"
    if kind == "zram" and arg.isdigit():
        if not Path(f"/sys/block/zram{arg}").exists():
            return "gone"
        try:
            Path(f"/sys/block/zram{arg}/reset").write_text("1")
        except OSError:
            pass  # never configured, or still open: hot_remove says which
        try:
            (ZRAM_CONTROL / "hot_remove").write_text(arg)
        except OSError as e:
            return f"failed: {e.strerror}"
        return "removed"
    if kind == "loop" and os.path.basename(arg).startswith("oslens."):
        action = "gone"
        for lo in Path("/sys/block").glob("loop*"):
            if _read(lo / "loop" / "backing_file") in (arg, f"{arg} (deleted)"):
                p = subprocess.run(["losetup", "--detach", f"/dev/{lo.name}"], capture_output=True, text=True)
                action = "removed" if p.returncode == 0 else f"failed: {p.stderr.strip()}"
        try:
            os.unlink(arg)
            action = "removed" if action == "gone" else action
        except FileNotFoundError:
            pass
        return action
    return "left alone"


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
    return sorted(out)


DEVICE = owned.Resource(remove=remove_device, existing=existing)
SCHEDULER = owned.Resource(remove=restore_line, would="would restore")
