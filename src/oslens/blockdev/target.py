"""The device or file `oslens io` measures, as the user names it (a path,
or one oslens makes: devices.py), and what the kernel says of it.

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
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..collectors import bracketed_choice, read_text
from ..errors import UsageError
from ..procfs import IrqRow, parse_interrupts

FILL_CHUNK = 1 << 20
# /sys/block/*/stat (Documentation/block/stat.rst): the fields kept
# /sys/block/*/stat (Documentation/block/stat.rst): discards since 4.18, flushes since 5.5, absent before.
# A flush that an fsync sends a blk-mq device with a write cache counts twice: as a write of no
# sectors (the empty write carrying REQ_PREFLUSH) and as the flush itself.
STAT_FIELDS = ("reads", "read_merges", "read_sectors", "read_ms", "writes", "write_merges", "write_sectors",
               "write_ms", "in_flight", "io_ms", "queue_ms", "discards", "discard_merges", "discard_sectors",
               "discard_ms", "flushes", "flush_ms")  # fmt: skip
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
    made: str | None = None  # "zram" or "loop" when oslens made it for the run (devices.py)
    backing: str | None = None  # a made loop device's file
    saved_scheduler: str | None = field(default=None, repr=False)  # to restore after --scheduler (scheduler.py)

    @property
    def made_line(self) -> str | None:
        """How the runtime entry names a made device (devices.remove_device's argument)."""
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

    def no_polling(self) -> str | None:
        """Why no I/O to it can be polled, as its disk's queue says (io_poll
        0: no poll queues); None where the queue says it polls, or says
        nothing (the engine's check then asks the kernel with a read)."""
        disk = self.disk
        if disk is None:
            return "no block device under this file, no poll queues to poll"
        if _read(disk / "queue" / "io_poll") == "0":
            return f"{disk.name} has no poll queues (queue/io_poll is 0; nvme's poll_queues gives them)"
        return None

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
            write_random(fd, start, stop - start)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def write_random(fd: int, start: int, length: int) -> None:
    """`length` bytes that do not compress (as fio's default buffers) from `start`."""
    end = start + length
    while start < end:
        start += os.pwrite(fd, os.urandom(min(FILL_CHUNK, end - start)), start)
