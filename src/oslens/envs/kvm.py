"""A KVM guest made for the run: QEMU with KVM, a kernel of the distribution
(a package's /boot/vmlinuz-*, or `kernel=`), and an initramfs made here
that holds the engines, the modules the guest's network card needs, and
`oslens-guest` as its init — no disk image, nothing downloaded.

The guest's init is an agent (engine/guest/agent.c): each engine invocation
is a connection to it through a port QEMU's user-mode network forwards
from 127.0.0.1 (restricted: the guest reaches nothing else), and the host
runs `oslens-guest relay PORT KEYFILE ENGINE ARG…`, which behaves like the
engine run here (its output, its signals, its exit status). So a guest is,
for the runner, one more way to start the engine.

Every local user can connect to that port, and the agent runs what it is
sent as root; so it runs only what comes after the host's half of the
guest's key, and answers with the guest's half before anything else (what
listens at the port is the guest's agent): 2×32 random bytes made for each
guest, built into its initramfs and kept here in the
guest's directory (0700, the file 0600, beside QEMU's monitor socket, which
commands the guest as fully), never on a command line or in an environment
that a process run as someone else could inherit.

SPEC sets the guest's shape — vCPUs, sockets, cores, threads, NUMA nodes,
memory — checked before anything is made. vCPUs are pinned one to a host
CPU where there are enough host CPUs; where there are not, the run says so:
an overcommitted guest is fit to check placement and reports, never to be
timed."""

from __future__ import annotations

import json
import lzma
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import engine, owned, runtime
from ..collectors import load
from ..cpulist import format_cpulist
from ..errors import MeasurementError, UsageError
from ..parse import whole_number
from . import INSIDE, engine_files, last_line

KEYS = {
    "cpus": "vCPUs (default: sockets×cores×threads, or the host CPUs oslens may use)",
    "sockets": "sockets (default 1)",
    "cores": "cores per socket (default: cpus / (sockets×threads))",
    "threads": "threads per core (default 1)",
    "numa": "NUMA nodes, each an equal share of the sockets' vCPUs and of memory (default 1)",
    "mem": "memory, e.g. 2G or 512M (default: 1G and 64M a vCPU)",
    "kernel": "the guest's kernel image (default: the newest /boot/vmlinuz-* with its modules)",
    "accel": "kvm, or tcg: QEMU's emulation, for checking correctness where KVM cannot run the kernel (default kvm)",
}
MAX_CPUS = 255  # QEMU's limit for a guest without an interrupt-remapping IOMMU
GUEST = "oslens-guest"
GUEST_PORT = 5501  # engine/guest/wire.h
KEY_LEN = 2 * 32  # engine/guest/wire.h: two halves of GUEST_KEY_LEN
KEY_INSIDE = "oslens/key"  # engine/guest/wire.h: GUEST_KEY_FILE
NO_AGENT = 75  # the relay's status when no agent answered (not up yet)
# QEMU takes a connection to the forwarded port at once, even while the guest
# boots, and its SYNs to the guest back off (seconds apart, up to 75 s before
# it gives up): a connection made early may wait long after the agent is up.
# So an attempt that has no answer in this long is dropped for a fresh one.
ATTEMPT_S = 10
# The modules the guest's virtio network card needs, with what they need.
MODULES = ("virtio_pci", "virtio_net")
# per architecture: QEMU's machine and the console
ARCH = {"x86_64": ("q35", "ttyS0"), "aarch64": ("virt,gic-version=max", "ttyAMA0")}
OVERCOMMITTED = "overcommitted: timings not meaningful"
# QEMU's most capable emulated CPU, named Intel's so that the guest kernel
# reads its SMT siblings from CPUID leaf 0xB (as AMD's, it would need topoext)
TCG_CPU = "max,vendor=GenuineIntel"
EMULATED = "emulated (TCG), not KVM: timings not meaningful"
# Emulated, every vCPU is taken in turn by one host thread. With a thread per
# vCPU (QEMU's default) the guest kernel livelocked now and then patching its
# own text: seen booting, 15 of 16 vCPUs at sched_clock_tick's patched jump
# with interrupts off for 180 s (QEMU busy, 360 CPU-s), as static keys flip at
# "sched_clock: Marking stable"; and attaching BPF, "BUG: soft lockup". In
# turns it never did, and booted no slower on 2 host CPUs. An emulated guest
# is for correctness, never timings, so its speed on a large host matters less.
TCG_ACCEL = "tcg,thread=single"


@dataclass(frozen=True)
class Shape:
    cpus: int
    sockets: int
    cores: int
    threads: int
    numa: int
    mem_mib: int

    def node_cpus(self) -> list[tuple[int, int]]:
        """The vCPU range of each NUMA node (QEMU numbers vCPUs socket by
        socket, core by core, thread by thread)."""
        per = self.cpus // self.numa
        return [(i * per, (i + 1) * per - 1) for i in range(self.numa)]


def _int(opts: dict, key: str, default: int | None) -> int | None:
    if key not in opts:
        return default
    n = whole_number(opts[key])
    if n is None or n < 1:
        raise UsageError(f"--in kvm: {key}={opts[key]} is not a whole number of at least 1")
    return n


def _mib(text: str) -> int:
    m = re.fullmatch(r"([0-9]+)([MmGg])?", text)
    if not m:
        raise UsageError(f"--in kvm: mem={text} is not a size like 512M or 4G")
    n = int(m.group(1))
    return n * 1024 if (m.group(2) or "M").upper() == "G" else n


def shape(opts: dict, host_cpus: int) -> Shape:
    """The guest's shape from SPEC, every value checked against the others."""
    sockets = _int(opts, "sockets", 1)
    threads = _int(opts, "threads", 1)
    cores = _int(opts, "cores", None)
    cpus = _int(opts, "cpus", None)
    if cpus is None:
        cpus = sockets * threads * cores if cores else host_cpus
    if cpus > MAX_CPUS:
        raise UsageError(f"--in kvm: cpus={cpus} is more than {MAX_CPUS}, the most QEMU gives a guest here")
    if sockets > cpus:
        raise UsageError(f"--in kvm: sockets={sockets} is more than cpus={cpus}")
    if cores is None:
        if cpus % (sockets * threads):
            raise UsageError(f"--in kvm: cpus={cpus} is not a multiple of sockets×threads ({sockets}×{threads})")
        cores = cpus // (sockets * threads)
    if sockets * cores * threads != cpus:
        raise UsageError(
            f"--in kvm: cpus={cpus} is not sockets×cores×threads ({sockets}×{cores}×{threads} = "
            f"{sockets * cores * threads})"
        )
    numa = _int(opts, "numa", 1)
    if numa > cpus or cpus % numa or (cpus // numa) % threads:
        raise UsageError(
            f"--in kvm: numa={numa} cannot split {cpus} vCPUs into equal nodes of whole cores ({threads} threads each)"
        )
    mem = _mib(opts["mem"]) if "mem" in opts else 1024 + 64 * cpus
    if mem < 256:
        raise UsageError(f"--in kvm: mem={opts.get('mem')} is less than 256M, too little to boot")
    mem -= mem % numa
    available = load._meminfo()["mem_available_bytes"]
    available = available // 2**20 if isinstance(available, int) else None
    if available is not None and mem > available:
        raise UsageError(f"--in kvm: mem={mem}M is more than this host has available ({available}M)")
    return Shape(cpus, sockets, cores, threads, numa, mem)


def guest_kernel(path: str | None) -> tuple[Path, Path]:
    """The guest's kernel image and the modules directory of its release."""
    if path:
        image = Path(path)
        if not image.is_file():
            raise UsageError(f"--in kvm: kernel={path} is not a file")
        release = image.name.removeprefix("vmlinuz-")
        candidates = [image]
    else:
        candidates = sorted(
            Path("/boot").glob("vmlinuz-*"),
            key=lambda p: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p.name)],
            reverse=True,
        )
    for image in candidates:
        release = image.name.removeprefix("vmlinuz-")
        modules = Path("/lib/modules") / release
        if (modules / "modules.dep").is_file() and os.access(image, os.R_OK):
            return image, modules
    if path:
        raise UsageError(f"--in kvm: no /lib/modules/{release}/modules.dep for kernel={path}")
    raise UsageError(
        "--in kvm: no kernel for the guest (a /boot/vmlinuz-* with its /lib/modules): "
        "sh scripts/install-deps.sh envs installs the distribution's"
    )


def _module_order(modules: Path, names: tuple[str, ...]) -> list[Path]:
    """The .ko files of these modules, each after those it depends on
    (modules.dep), or nothing for one built into the kernel."""
    deps: dict[str, list[str]] = {}
    for line in (modules / "modules.dep").read_text().splitlines():
        mod, _, needs = line.partition(":")
        deps[mod] = needs.split()
    by_name = {Path(m).name.split(".ko")[0].replace("-", "_"): m for m in deps}
    order: list[str] = []

    def visit(mod: str) -> None:
        if mod in order:
            return
        for d in deps.get(mod, []):
            visit(d)
        order.append(mod)

    for name in names:
        if name in by_name:
            visit(by_name[name])
    return [modules / m for m in order]


def _cpio_newc(entries: list[tuple[str, int, bytes, int]]) -> bytes:
    """An initramfs: the kernel's cpio "newc" format of (path, mode, data,
    rdev) entries, parents before children."""
    out = bytearray()

    def add(name: str, mode: int, data: bytes, rdev: int, ino: int) -> None:
        fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev >> 8, rdev & 0xFF, len(name) + 1, 0)
        out.extend(b"070701" + b"".join(b"%08X" % f for f in fields) + name.encode() + b"\0")
        out.extend(b"\0" * (-len(out) % 4))
        out.extend(data)
        out.extend(b"\0" * (-len(out) % 4))

    for ino, (name, mode, data, rdev) in enumerate(entries, 1):
        add(name, mode, data, rdev, ino)
    add("TRAILER!!!", 0, b"", 0, 0)
    return bytes(out)


def initramfs(guest: Path, modules: list[Path], key: bytes) -> bytes:
    files = {**engine_files("kvm"), **{f"/lib/modules/{m.name}": m for m in modules}}
    dirs = {"dev", "proc", "sys", "tmp", "oslens"}
    for inside in files:
        parts = inside.strip("/").split("/")[:-1]
        dirs |= {"/".join(parts[: i + 1]) for i in range(len(parts))}
    entries = [(d, 0o40755, b"", 0) for d in sorted(dirs)]
    entries.append(("dev/console", 0o20600, b"", 5 << 8 | 1))  # the kernel opens it for init
    entries.append(("init", 0o100755, guest.read_bytes(), 0))
    entries += [(inside.lstrip("/"), 0o100755, path.read_bytes(), 0) for inside, path in sorted(files.items())]
    listing = "".join(f"/lib/modules/{m.name}\n" for m in modules).encode()
    entries.append(("oslens/modules", 0o100644, listing, 0))
    entries.append((KEY_INSIDE, 0o100600, key, 0))
    return _cpio_newc(entries)


def _write_private(path: Path, data: bytes) -> None:
    """A new file that only this user can read."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with open(fd, "wb") as f:
        f.write(data)


def _config_path(image: Path) -> Path:
    """Where a kernel's package installs its build configuration: beside the image."""
    return image.parent / image.name.replace("vmlinuz-", "config-")


def _config(image: Path) -> list[str]:
    """The kernel's build configuration, or [] where there is none."""
    try:
        return _config_path(image).read_text().splitlines()
    except OSError:
        return []


def _uncompressed(image: Path, into: Path) -> Path | None:
    """The ELF kernel inside a compressed x86 image, for a kernel that QEMU
    can enter directly (PVH): the decompressor, seconds of memory traffic
    under emulation, is skipped. None where that cannot be done."""
    if "CONFIG_PVH=y" not in _config(image):
        return None
    try:
        data = image.read_bytes()
    except OSError:
        return None
    for magic, decompressor in ((b"\xfd7zXZ\x00", lzma.LZMADecompressor), (b"\x1f\x8b\x08", _gunzip)):
        at = data.find(magic)
        if at < 0:
            continue
        try:
            elf = decompressor().decompress(data[at:])
        except (lzma.LZMAError, zlib.error):
            continue
        if elf[:4] == b"\x7fELF":
            out = into / "vmlinux"
            out.write_bytes(elf)
            return out
    return None


def _gunzip():
    return zlib.decompressobj(16 + zlib.MAX_WBITS)


def _kvm_refusal(kernel: Path) -> str | None:
    """Why KVM here cannot run this kernel, if it is known before booting:
    a host whose KVM is PVM (kvm_pvm: virtualisation without hardware
    support, as in some cloud sandboxes) runs only kernels built as PVM
    guests."""
    modules = {m.name for m in Path("/sys/module").glob("kvm*")}
    if "kvm_pvm" not in modules or modules & {"kvm_intel", "kvm_amd"}:
        return None
    if "CONFIG_PVM_GUEST=y" in _config(kernel):
        return None
    return (
        f"this host's KVM is PVM (kvm_pvm), which runs only kernels built as PVM guests, and {kernel.name} is "
        "not one; accel=tcg emulates the guest (its correctness, not its timings)"
    )


def machine_refusal(accel: str, kernel: Path) -> str | None:
    """Why this host cannot run a guest of this kernel so accelerated: a
    limit of the machine (a study says "cannot tell here" for it), not of
    the input; None when it can."""
    if accel != "kvm":
        return None
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "/dev/kvm is missing or not writable here; accel=tcg emulates the guest"
    return _kvm_refusal(kernel)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _qmp(path: Path, command: str) -> object:
    """One QMP command's answer (QEMU's machine protocol, on its socket)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(path))
        stream = s.makefile("rw")
        stream.readline()  # the greeting
        answer = None
        for cmd in ("qmp_capabilities", command):
            stream.write(json.dumps({"execute": cmd}) + "\n")
            stream.flush()
            while True:
                answer = json.loads(stream.readline())
                if "return" in answer or "error" in answer:
                    break
        if "error" in answer:
            raise MeasurementError(f"kvm: QEMU's {command}: {answer['error'].get('desc')}")
        return answer["return"]


def _cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class Guest:
    name = "kvm"

    def __init__(
        self, spec: Shape, kernel: Path, modules: Path, host_cpus: list[int], qemu: str, guest: Path, accel: str
    ):
        self.shape = spec
        self.accel = accel
        self.kernel = kernel
        self.modules = modules
        self.host_cpus = host_cpus
        self.qemu = qemu
        first = subprocess.run([qemu, "--version"], capture_output=True, text=True).stdout.partition("\n")[0]
        self.qemu_version = first.removeprefix("QEMU emulator version ").strip() or None
        self.guest = guest
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.dir: Path | None = None
        self.key_file: Path | None = None
        self.facts: dict = {}
        self.pinned: dict[int, int] | None = None
        self.boot_s: float | None = None
        self.boot_cpu_s: float | None = None

    @property
    def qemu_accel(self) -> str:
        return "kvm" if self.accel == "kvm" else TCG_ACCEL

    @property
    def overcommitted(self) -> bool:
        return self.shape.cpus > len(self.host_cpus)

    # -- making it

    def _argv(self, kernel: Path, initrd: Path, name: str) -> list[str]:
        s = self.shape
        machine, console = ARCH[platform.machine()]
        options = (
            ("-name", name),
            ("-machine", machine),
            ("-accel", self.qemu_accel),
            ("-cpu", "host" if self.accel == "kvm" else TCG_CPU),
            ("-smp", f"cpus={s.cpus},sockets={s.sockets},cores={s.cores},threads={s.threads}"),
            ("-m", f"{s.mem_mib}M"),
            ("-nodefaults", "-no-user-config", "-no-reboot"),
            ("-display", "none"),
            ("-serial", f"file:{self.dir / 'console.log'}"),
            ("-qmp", f"unix:{self.dir / 'qmp.sock'},server=on,wait=off"),
            ("-netdev", f"user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:{self.port}-:{GUEST_PORT}"),
            ("-device", "virtio-net-pci,netdev=net0"),
            ("-kernel", str(kernel), "-initrd", str(initrd)),
            ("-append", f"console={console} panic=-1 quiet loglevel=4 rdinit=/init"),
        )
        argv = [self.qemu, *(x for option in options for x in option)]
        per_node = s.mem_mib // s.numa
        for node, (first, last) in enumerate(s.node_cpus()):
            argv += [
                "-object",
                f"memory-backend-ram,id=mem{node},size={per_node}M",
                "-numa",
                f"node,nodeid={node},cpus={first}-{last},memdev=mem{node}",
            ]
        return argv

    def _console_tail(self) -> str:
        try:
            lines = (self.dir / "console.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        lines = [line.strip() for line in lines if line.strip()]
        panic = [line for line in lines if "Kernel panic" in line]
        return (panic or lines or [""])[-1]

    def _stuck(self) -> str:
        """What a guest that never answered was doing: whether QEMU ran it
        (its CPU time tells a spinning guest from a waiting one) and the
        kernel's last error on the console (loglevel=4 prints errors: an RCU
        stall, a hung task, a soft lockup)."""
        try:
            state = f"the VM was {_qmp(self.dir / 'qmp.sock', 'query-status').get('status', 'in an unknown state')}"
        except (OSError, ValueError, MeasurementError) as e:
            state = f"QEMU's monitor did not answer ({e})"
        cpu = _cpu_seconds(self.proc.pid)
        used = f", QEMU used {cpu:.1f} CPU-s" if cpu is not None else ""
        said = self._console_tail() or "the kernel printed no error and the agent never said it was ready"
        return f"{state}{used}; {said}"

    def _wait_ready(self, started: float) -> None:
        """Until the agent answers @facts (the guest has booted), QEMU dies,
        or the time a guest of this shape may take is over."""
        deadline = started + 60 + 15 * max(1.0, self.shape.cpus / len(self.host_cpus))
        while True:
            if self.proc.poll() is not None:
                why = last_line(self.proc.stderr.read() if self.proc.stderr else "") or self._console_tail()
                raise MeasurementError(f"kvm: the guest did not start (QEMU exited {self.proc.returncode}): {why}")
            try:
                relay = subprocess.run(
                    [*self.engine_argv()[:-1], "@facts"], capture_output=True, text=True, timeout=ATTEMPT_S
                )
            except subprocess.TimeoutExpired:
                relay = None
            if relay is not None and relay.returncode == 0:
                self.facts = json.loads(relay.stdout.splitlines()[0])
                return
            if relay is not None and relay.returncode != NO_AGENT:
                raise MeasurementError(f"kvm: the guest's agent failed: {last_line(relay.stderr)}")
            if time.monotonic() > deadline:
                raise MeasurementError(f"kvm: the guest did not boot in {deadline - started:.0f} s: {self._stuck()}")
            time.sleep(0.2)

    def _pin(self) -> None:
        """vCPU i on the i-th host CPU oslens may use, if there are enough."""
        if self.overcommitted:
            return
        cpus = _qmp(self.dir / "qmp.sock", "query-cpus-fast")
        pinned = {}
        for c in cpus:
            host = self.host_cpus[c["cpu-index"]]
            os.sched_setaffinity(c["thread-id"], [host])
            pinned[c["cpu-index"]] = host
        self.pinned = pinned

    def __enter__(self) -> "Guest":
        key = runtime.entry()
        name = f"oslens.{key.name if key else os.getpid()}.kvm"
        self.dir = Path(tempfile.mkdtemp(prefix="kvm."))  # 0700
        try:  # from here on, whatever fails (a full disk writing the initramfs) removes what was made
            key = secrets.token_bytes(KEY_LEN)
            self.key_file = self.dir / "key"
            _write_private(self.key_file, key)
            initrd = self.dir / "initramfs.cpio"
            _write_private(initrd, initramfs(self.guest, _module_order(self.modules, MODULES), key))
            kernel = _uncompressed(self.kernel, self.dir) or self.kernel
            self.port = _free_port()
            runtime.note("guest", name)
            started = time.monotonic()
            self.proc = subprocess.Popen(
                self._argv(kernel, initrd, name),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                preexec_fn=runtime.dies_with_parent(signal.SIGKILL),  # a SIGKILLed oslens takes its guest along
            )
            self._wait_ready(started)
            initrd.unlink()  # QEMU loaded it at start; one copy of the key fewer
            self._pin()
        except BaseException:
            self.__exit__()
            raise
        self.boot_s = time.monotonic() - started
        self.boot_cpu_s = _cpu_seconds(self.proc.pid)
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- using it

    def engine_argv(self) -> list[str]:
        return [str(self.guest), "relay", str(self.port), str(self.key_file), INSIDE]

    def kallsyms(self) -> str:
        """The guest kernel's symbols, from its agent: the engine's samples
        there are addresses in that kernel, not the host's."""
        p = subprocess.run([*self.engine_argv()[:-1], "@kallsyms"], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise MeasurementError(f"kvm: the guest's agent gave no kallsyms: {last_line(p.stderr)}")
        return p.stdout

    def kernel_config(self) -> dict:
        """The guest kernel's configuration, as its package installs it beside the image."""
        from ..collectors import unavailable
        from ..collectors.kernel import parse_config

        lines = _config(self.kernel)
        if not lines:
            return unavailable(f"no configuration beside {self.kernel} (config-… where its package puts it)")
        return {"source": str(_config_path(self.kernel)), "options": parse_config("\n".join(lines))}

    def describe(self) -> dict:
        out = {
            "name": "kvm",
            "runtime": "qemu",
            "qemu_version": self.qemu_version,
            "accel": self.accel,
            "qemu_accel": self.qemu_accel,
            "shape": asdict(self.shape),
            "host_cpus": format_cpulist(self.host_cpus),
            "pinned": {str(k): v for k, v in (self.pinned or {}).items()} or None,
            "overcommitted": self.overcommitted,
            "kernel_image": str(self.kernel),
            "guest": {k: v for k, v in self.facts.items() if k not in ("type", "kernel")},
            "inside": {
                "kernel": {**(self.facts.get("kernel") or {}), "seen_from": "inside the guest"},
                "virt": {"vm": "kvm" if self.accel == "kvm" else "qemu (TCG emulation)", "seen_from": "the host"},
            },
            "boot_s": round(self.boot_s, 2) if self.boot_s is not None else None,
            "boot_host_cpu_s": self.boot_cpu_s,
        }
        if self.accel != "kvm":
            out["note"] = EMULATED
        elif self.overcommitted:
            out["note"] = f"{self.shape.cpus} vCPUs on {len(self.host_cpus)} host CPUs: {OVERCOMMITTED}"
        return out


def make(opts: dict[str, str]) -> Guest:
    host_cpus = sorted(os.sched_getaffinity(0))
    spec = shape(opts, len(host_cpus))
    if platform.machine() not in ARCH:
        raise UsageError(f"--in kvm: not made for {platform.machine()} yet (known: {', '.join(ARCH)})")
    accel = opts.get("accel", "kvm")
    if accel not in ("kvm", "tcg"):
        raise UsageError(f"--in kvm: accel={accel} is not kvm or tcg")
    qemu = shutil.which(f"qemu-system-{platform.machine()}")
    if qemu is None:
        raise UsageError(
            f"--in kvm: qemu-system-{platform.machine()} is not installed (sh scripts/install-deps.sh envs)"
        )
    guest = engine.engine_path().with_name(GUEST)
    if not guest.is_file():
        raise UsageError(f"--in kvm needs {GUEST} beside the engine; run 'make install'")
    kernel, modules = guest_kernel(opts.get("kernel"))
    if why := machine_refusal(accel, kernel):
        raise UsageError(f"--in kvm: {why}")
    return Guest(spec, kernel, modules, host_cpus, qemu, guest, accel)


# ---- an owned resource: `guest NAME`, written down before QEMU starts


def _qemus() -> list[tuple[int, str]]:
    """(pid, name) of every QEMU process started with `-name oslens.…`."""
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if os.path.basename(argv[0]).startswith(b"qemu-system") and b"-name" in argv:
            name = argv[argv.index(b"-name") + 1 :][:1]
            if name and name[0].startswith(b"oslens."):
                out.append((int(p.name), name[0].decode(errors="replace")))
    return out


def remove_guest(name: str) -> str:
    """A run's guest: the QEMU process started with `-name NAME`, found by
    its command line (its pid was not known when the line was written),
    killed: a guest holds nothing but memory."""
    if not name.startswith("oslens."):
        return "left alone"
    killed = 0
    for pid, found in _qemus():
        if found == name:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    return "removed" if killed else "gone"


# the guest's QEMU process (GUEST above is the agent's executable)
QEMU = owned.Resource(remove=remove_guest, existing=lambda: [f"{pid} {name}" for pid, name in _qemus()])
