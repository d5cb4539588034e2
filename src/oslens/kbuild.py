"""A real kernel build to scale: the Linux source of the distribution's
`linux-source` package, unpacked once, configured once, then built with
`make -j{n}` at each CPU count — MOSBENCH's gmake, as the scalability
studies ran it (on tmpfs: /dev/shm here when it has room, else the
temporary directory, and the run says which).

The tree is prepared once (`make prepare`, untimed: the generated headers
and host tools), and each repetition starts from `make clean` (untimed,
appscale's --prepare), which keeps the configuration and what prepare made,
so that every timed build, the first included, does the same work."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from . import runtime
from .errors import MeasurementError

SOURCES = Path("/usr/src")
TARBALL = re.compile(r"^linux-source-(\d+(?:\.\d+)*)\.tar\.(xz|gz|bz2)$")
# what a build of any configuration runs besides the compiler and make
TOOLS = ("make", "gcc", "flex", "bison", "bc", "perl", "tar")
PACKAGE = "linux-source"
INSTALL = "`sh scripts/install-deps.sh studies` installs"
# the room a configured tree and its objects take, at the most, for each configuration offered
ROOM = {"tinyconfig": 2 << 30, "defconfig": 4 << 30}
OUTPUT_TAIL = 2000


@dataclass(frozen=True)
class Tree:
    """A configured kernel tree, built out of the source's own directory in `out`."""

    source: Path
    version: str
    config: str
    on: str  # the file system it is built on ("tmpfs", "ext4", …)

    @property
    def out(self) -> Path:
        return self.source / "oslens-out"

    def describe(self) -> dict:
        return {"version": self.version, "config": self.config, "file_system": self.on}


def tarball() -> Path | None:
    """The newest Linux source tarball the package installed, if any."""
    found = [(tuple(int(x) for x in m.group(1).split(".")), p) for p in _listing() if (m := TARBALL.match(p.name))]
    return max(found)[1] if found else None


def _listing() -> list[Path]:
    try:
        return [p for p in SOURCES.iterdir() if p.is_file()]
    except OSError:
        return []


def unavailable() -> str | None:
    """Why a kernel build cannot run here, or None."""
    if tarball() is None:
        return f"no Linux source in {SOURCES} (Debian's {PACKAGE} package; {INSTALL} it)"
    lacking = [t for t in TOOLS if shutil.which(t) is None]
    if lacking:
        return f"no {', '.join(lacking)} here, which a kernel build needs ({INSTALL} them)"
    return None


def _place(config: str) -> tuple[Path, str]:
    """Where to unpack: a private directory on /dev/shm when it has room for
    the build, else one in the temporary directory; and that file system."""
    shm = runtime.shm_dir("kbuild")
    if shm and shutil.disk_usage(shm).free >= ROOM[config]:
        return Path(shm), "tmpfs"
    d = Path(tempfile.mkdtemp(prefix="oslens.kbuild."))
    return d, _fs_type(d)


def _fs_type(path: Path) -> str:
    best, kind = "", "unknown"
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            _, mnt, fs, *_ = line.split()
            if (str(path).startswith(mnt.rstrip("/") + "/") or str(path) == mnt) and len(mnt) >= len(best):
                best, kind = mnt, fs
    except OSError:
        pass
    return kind


def _run(argv: list[str], what: str, cwd: Path | None = None) -> None:
    p = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if p.returncode != 0:
        tail = " ".join((p.stdout + p.stderr)[-OUTPUT_TAIL:].split())[-300:]
        raise MeasurementError(f"{what} failed (status {p.returncode}): {tail}")


@contextmanager
def configured(config: str = "tinyconfig") -> Iterator[Tree]:
    """The source unpacked and configured (untimed), removed at the end
    whatever happens; a killed oslens's is removed by the next start."""
    why = unavailable()
    if why:
        raise MeasurementError(f"kernel build: {why}")
    src_tar = tarball()
    assert src_tar is not None
    home, on = _place(config)
    try:
        _run(["tar", "-xf", str(src_tar), "-C", str(home)], f"unpacking {src_tar}")
        (source,) = [p for p in home.iterdir() if p.is_dir() and p.name.startswith("linux-source-")]
        tree = Tree(source, TARBALL.match(src_tar.name).group(1), config, on)
        tree.out.mkdir()
        _run(["make", "-s", "-C", str(source), f"O={tree.out}", config], f"make {config}")
        # What the first build makes and `make clean` keeps (generated headers,
        # modpost and the other host tools) is made here, untimed: else the
        # first timed build alone paid for it (lib/math/ on one CPU: 10.9 s,
        # then 4.3 and 4.7 s), and the speedup of later counts was inflated.
        jobs = f"-j{len(os.sched_getaffinity(0))}"
        _run(["make", "-s", "-C", str(source), f"O={tree.out}", jobs, "prepare"], "make prepare")
        yield tree
    finally:
        # /dev/shm's private directory stays this process's until it exits; its contents go now
        for p in [*home.iterdir()] if on == "tmpfs" else [home]:
            shutil.rmtree(p, ignore_errors=True)
