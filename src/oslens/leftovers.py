"""What a run of oslens can leave behind, seen from outside: the live
processes of a session, the BPF programs they hold, a process's cgroups.
The leak tests and bench/campaign.py count leftovers with these (SysV sets
and engine ledgers: oslens.runtime)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import time
from pathlib import Path


def proc_stat(pid: int) -> list[str] | None:
    """[comm, state, ppid, pgrp, session, …] of /proc/PID/stat, None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    head, tail = text.rsplit(")", 1)
    return [head.split(" (", 1)[1], *tail.split()]


def session_processes(sid: int) -> dict[int, list[str]]:
    """The live (not zombie) processes of session sid, with their stat."""
    out = {}
    for d in glob.glob("/proc/[0-9]*"):
        pid = int(d.rsplit("/", 1)[1])
        st = proc_stat(pid)
        if st and st[1] not in ("Z", "X") and int(st[4]) == sid:
            out[pid] = st
    return out


def exe_of(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def bpf_programs() -> list[dict]:
    """Loaded BPF programs of ours (all named oslens_*), as bpftool shows
    them; none where bpftool is missing. A bpftool that fails raises: it
    would otherwise read as nothing left."""
    if shutil.which("bpftool") is None:
        return []
    p = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"bpftool prog show failed ({p.returncode}): {p.stderr.strip()}")
    return [prog for prog in json.loads(p.stdout or "[]") if str(prog.get("name", "")).startswith("oslens")]


def bpf_of_session(sid: int) -> set[int]:
    """Ids of our BPF programs that processes of session sid hold."""
    return {
        p["id"]
        for p in bpf_programs()
        if any((st := proc_stat(h["pid"])) and int(st[4]) == sid for h in p.get("pids", []))
    }


def bpf_still_loaded(ids: set[int] | None = None, settle_s: float = 5.0) -> set[int]:
    """Which of these programs (all of ours if None) are still loaded once
    the kernel has had time to free those of exited processes (some ms later)."""
    deadline = time.monotonic() + settle_s
    while True:
        left = {p["id"] for p in bpf_programs()}
        left = left if ids is None else left & ids
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def cgroup_dirs(pid: int) -> list[str]:
    """The cgroups oslens process pid made, in every hierarchy it uses."""
    from . import cgroups

    m = cgroups.mounts()
    return [str(d) for r in (m.v2, m.v1_cpuset, m.v1_cpuacct) if r for d in r.glob(f"oslens.{pid}.*")]


def block_devices() -> set[str]:
    """zram devices and bound loop devices that exist now, and the backing
    files of loop devices oslens made (a made device shows up here; unbound
    loop nodes, which any machine has in numbers, do not)."""
    out = set()
    for p in Path("/sys/block").iterdir():
        if p.name.startswith("zram") or (p.name.startswith("loop") and (p / "loop" / "backing_file").exists()):
            out.add(p.name)
    for d in ("/dev/shm", "/run"):
        out |= set(glob.glob(f"{d}/oslens.*.loop"))
    return out


def guests() -> list[str]:
    """QEMU processes oslens started (named `-name oslens.…`), as `pid name`."""
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
                out.append(f"{p.name} {name[0].decode(errors='replace')}")
    return out


def containers(runtime_name: str | None) -> list[str]:
    """Containers oslens started (named oslens.…), running or not, for a
    container runtime (podman, docker); none without one."""
    if not runtime_name or shutil.which(runtime_name) is None:
        return []
    p = subprocess.run([runtime_name, "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True, timeout=60)
    return [n for n in p.stdout.split() if n.startswith("oslens.")]
