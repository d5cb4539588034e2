"""A container made for the run by the distribution's runtime (podman, or
Docker): an image built locally from scratch that holds the engines as
installed here and the libraries the dynamic one loads (no registry, no
base image), one container per
run that holds an idle engine, and every engine invocation `exec`'d in it.

The container shares the host's kernel; what differs is what the kernel does
for it — namespaces, its cgroup, seccomp, the runtime's mounts — which is
what `--in container` measures. Its CPU set and memory limit are passed
through (`cpuset=`, `memory=`). Limits this host imposes are read, not
assumed: a runtime may not raise a resource limit beyond this process's, so
the container gets the current ones; crun refuses v1 and hybrid cgroup
hierarchies, so runc is used there when podman would pick crun."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import resource
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from .. import cgroups, owned, runtime
from ..collectors import load
from ..cpulist import format_cpulist, parse_cpulist
from ..errors import MeasurementError, UsageError
from . import INSIDE, engine_files, last_line

KEYS = {
    "runtime": "podman or docker (default: podman if installed, else docker)",
    "cpuset": "the container's CPUs, e.g. 0-7 (default: the CPUs oslens may use)",
    "memory": "its memory limit, e.g. 4g (default: none)",
}
MEMORY_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30}
IMAGE = "localhost/oslens-engine"
RUNTIMES = ("podman", "docker")  # what a `container` line may name
# linux/capability.h, by number
CAPABILITIES = tuple(
    "CAP_" + name
    for name in (
        "CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE "
        "NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT "
        "SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE "
        "AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ "
        "PERFMON BPF CHECKPOINT_RESTORE"
    ).split()
)
START_TIMEOUT_S = 60


def _run(argv: list[str], timeout: float = START_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def _v1_controllers() -> bool:
    """Controllers on v1 hierarchies (v1 or hybrid): crun refuses them."""
    m = cgroups.mounts()
    return m.v1_cpuset is not None or m.v1_cpuacct is not None


def _pid_max() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        return None


def ulimits() -> list[str]:
    """This process's own limits (a runtime that sets higher ones is refused
    without CAP_SYS_RESOURCE); processes no more than there can be pids."""
    out = []
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft, hard = resource.getrlimit(which)
        if which == resource.RLIMIT_NPROC and (cap := _pid_max()):
            soft, hard = (cap if x == resource.RLIM_INFINITY else min(x, cap) for x in (soft, hard))
        if hard == resource.RLIM_INFINITY:
            continue
        out += ["--ulimit", f"{name}={soft if soft != resource.RLIM_INFINITY else hard}:{hard}"]
    return out


class Container:
    name = "container"

    def __init__(self, found: Runtime, cpuset: list[int], memory: str | None):
        self.runtime = found.name
        self.version = found.version
        self.cpuset = cpuset
        self.memory = memory
        self.container: str | None = None
        self.image = ""
        # runc where podman would pick crun on v1 controllers (crun refuses them)
        self.oci_name = found.oci
        self.oci_flags: list[str] = []
        if found.name == "podman" and found.oci == "crun" and _v1_controllers():
            if shutil.which("runc") is None:
                raise UsageError("--in container: crun refuses this host's v1/hybrid cgroups and runc is not installed")
            self.oci_name, self.oci_flags = "runc", ["--runtime", "runc"]
        self.facts: dict = {}

    # -- making it

    def _image(self) -> str:
        files = engine_files("container")
        digest = hashlib.sha256()
        for inside, path in sorted(files.items()):
            digest.update(inside.encode() + b"\0" + path.read_bytes())
        tag = f"{IMAGE}:{digest.hexdigest()[:12]}"
        if _run([self.runtime, "image", "inspect", tag]).returncode == 0:
            self._drop_older_images(tag)
            return tag
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for d in ("tmp", "proc", "sys", "dev"):
                info = tarfile.TarInfo(d)
                info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
                tar.addfile(info)
            for inside, path in files.items():
                tar.add(str(path), arcname=inside.lstrip("/"))
        proc = subprocess.run(
            [self.runtime, "import", "-", tag], input=buf.getvalue(), capture_output=True, timeout=START_TIMEOUT_S
        )
        if proc.returncode != 0:
            raise MeasurementError(f"container: {self.runtime} import failed: {last_line(proc.stderr.decode())}")
        self._drop_older_images(tag)
        return tag

    def _drop_older_images(self, keep: str) -> None:
        """One image of the engine is kept, the newest: older builds' images
        go (one a running container still uses stays: rmi refuses it)."""
        listed = _run([self.runtime, "images", "--format", "{{.Repository}}:{{.Tag}}", IMAGE]).stdout.split()
        older = [t for t in listed if t.startswith(IMAGE + ":") and t != keep]
        if older:
            _run([self.runtime, "rmi", *older])

    def __enter__(self) -> "Container":
        self.image = self._image()
        key = runtime.entry()
        self.container = f"oslens.{key.name if key else os.getpid()}"
        runtime.note("container", f"{self.runtime} {self.container}")
        argv = [
            self.runtime,
            *self.oci_flags,
            "run",
            "--detach",
            "--rm",
            "--name",
            self.container,
            "--network",
            "none",
            "--tmpfs",
            "/tmp:rw,exec,mode=1777",
            "--cpuset-cpus",
            format_cpulist(self.cpuset),
            *ulimits(),
            *(["--memory", self.memory] if self.memory else []),
            self.image,
            INSIDE,
            "hold",
        ]
        proc = _run(argv)
        if proc.returncode != 0:
            self.__exit__()
            raise MeasurementError(f"container: {self.runtime} could not start it: {last_line(proc.stderr)}")
        self.facts = self._inspect()
        return self

    def _inspect(self) -> dict:
        fmt = "{{.Id}} {{.State.Pid}}"
        out = _run([self.runtime, "inspect", "--format", fmt, self.container]).stdout.split()
        facts: dict = {"id": out[0][:12] if out else None}
        if len(out) > 1 and out[1].isdigit():
            try:
                lines = Path(f"/proc/{out[1]}/cgroup").read_text().splitlines()
                facts["cgroup"] = sorted({line.split(":", 2)[2] for line in lines if line.count(":") >= 2})
            except OSError:
                pass
            facts["capabilities"] = _capabilities(out[1])
        return facts

    def __exit__(self, *exc) -> None:
        if self.container:
            remove(f"{self.runtime} {self.container}")

    # -- using it

    def engine_argv(self) -> list[str]:
        return [self.runtime, "exec", "-i", self.container, INSIDE]

    def kallsyms(self) -> None:
        return None  # a container runs on the host's kernel

    def kernel_config(self) -> dict:
        from ..collectors.kernel import build_config

        return build_config()  # the host's kernel

    def describe(self) -> dict:
        return {
            "name": "container",
            "runtime": self.runtime,
            "runtime_version": self.version,
            "oci_runtime": self.oci_name,
            "image": self.image,
            "container": self.facts.get("id"),
            "cgroup": self.facts.get("cgroup"),
            "capabilities": self.facts.get("capabilities"),
            "cpuset": format_cpulist(self.cpuset),
            "memory": self.memory,
            "kernel": "the host's (shared)",
        }


def _capabilities(pid: str) -> list[str] | None:
    """The effective capabilities of the container's first process, which
    every engine exec'd in it gets: what tells "BPF needs CAP_BPF and
    CAP_PERFMON, which the container was not given" from "needs root" when
    the engine inside runs as uid 0. None where it cannot be read."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), 16)
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return [
        CAPABILITIES[bit] if bit < len(CAPABILITIES) else f"CAP_{bit}"
        for bit in range(mask.bit_length())
        if mask >> bit & 1
    ]


@dataclass(frozen=True)
class Runtime:
    name: str
    version: str | None
    oci: str | None  # the OCI runtime it would use


def _runtime(name: str) -> Runtime | None:
    """The runtime's own account of itself (`info`), None if it does not run."""
    if shutil.which(name) is None:
        return None
    proc = _run([name, "info", "--format", "json"], timeout=30)
    try:
        info = json.loads(proc.stdout) if proc.returncode == 0 else None
    except ValueError:
        info = None
    if not isinstance(info, dict):
        return None
    if name == "podman":
        return Runtime(
            name, info.get("version", {}).get("Version"), info.get("host", {}).get("ociRuntime", {}).get("name")
        )
    return Runtime(name, info.get("ServerVersion"), info.get("DefaultRuntime"))


def _pick_runtime(wanted: str | None) -> Runtime:
    for name in [wanted] if wanted else RUNTIMES:
        if name not in RUNTIMES:
            raise UsageError(f"--in container: runtime '{name}' is not one of {', '.join(RUNTIMES)}")
        if found := _runtime(name):
            return found
    if wanted:
        raise UsageError(f"--in container: {wanted} is not installed or does not run here")
    raise UsageError(
        "--in container: no container runtime that runs here (install podman: sh scripts/install-deps.sh envs)"
    )


def _cpuset(text: str, allowed: list[int]) -> list[int]:
    """cpuset= as the CPUs of this host's that oslens may use."""
    beyond = [n for n in re.findall(r"[0-9]+", text) if int(n) > max(allowed)]
    try:
        # a range past every CPU here is refused before it is expanded (0-9999999999 ran out of memory)
        cpuset = [] if beyond else parse_cpulist(text)
    except ValueError as e:
        raise UsageError(f"--in container: cpuset={text}: '{e}' is not a CPU or a range like 0-3") from None
    if not cpuset or not set(cpuset) <= set(allowed):
        raise UsageError(f"--in container: cpuset={text} is not within this host's CPUs {format_cpulist(allowed)}")
    return cpuset


def _memory(text: str) -> str:
    """memory= as the runtimes take it (bytes, or k, m, g of them), checked
    here: a size they refuse ('²' passed str.isdigit()) stopped the run
    after the image was made."""
    m = re.fullmatch(r"([0-9]+)([bkmg]?)", text, re.IGNORECASE)
    if not m or not int(m[1]):
        raise UsageError(f"--in container: memory={text} is not a size like 512m or 4g")
    size = int(m[1]) * MEMORY_UNITS[m[2].lower()]
    total = load._meminfo()["mem_total_bytes"]
    if isinstance(total, int) and size > total:
        raise UsageError(f"--in container: memory={text} is more than this host has ({total // 2**20}m)")
    return text


def make(opts: dict[str, str]) -> Container:
    allowed = sorted(os.sched_getaffinity(0))
    cpuset = _cpuset(opts["cpuset"], allowed) if "cpuset" in opts else allowed
    memory = _memory(opts["memory"]) if "memory" in opts else None
    found = _pick_runtime(opts.get("runtime"))
    engine_files("container")  # what the image will hold, there before anything is made
    return Container(found, cpuset, memory)


# ---- an owned resource: `container RUNTIME NAME`, written down before it is made


def remove(what: str) -> str:
    """`RUNTIME NAME`: a run's container, removed with everything in it —
    its processes, SysV objects and files."""
    runtime_name, _, name = what.partition(" ")
    if runtime_name not in RUNTIMES or not name.startswith("oslens.") or not shutil.which(runtime_name):
        return "left alone"
    try:
        proc = _run([runtime_name, "rm", "--force", name], timeout=60)
    except subprocess.TimeoutExpired:
        return "failed: the runtime did not answer"
    if proc.returncode == 0:
        return "removed"
    return "gone" if "no such container" in proc.stderr.lower() else f"failed: {proc.stderr.strip()[-200:]}"


def existing() -> list[str]:
    """Containers oslens started (named oslens.…), running or not, as
    `RUNTIME NAME`, for every container runtime installed here."""
    out = []
    for name in RUNTIMES:
        if shutil.which(name) is None:
            continue
        proc = _run([name, "ps", "-a", "--format", "{{.Names}}"], timeout=60)
        out += [f"{name} {n}" for n in proc.stdout.split() if n.startswith("oslens.")]
    return out


CONTAINER = owned.Resource(remove=remove, existing=existing)
