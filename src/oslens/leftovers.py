"""What a run of oslens can leave behind, seen from outside: the live
processes of a session and the BPF programs they hold; and, for every type
of oslens.owned that can say, what of it exists now (its `existing`): the
leak tests and bench/campaign.py count leftovers with these (SysV sets and
engine ledgers: oslens.runtime)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from . import owned


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
    """Ids of the BPF programs that processes of session sid hold, directly
    or through a link, as their descriptors say (/proc/PID/fdinfo:
    `prog_id`), read in this process: asking another program (bpftool)
    needs that program to be run, and a measurement's workers can keep a
    newly started task off every CPU until they end."""
    ids = set()
    for pid in session_processes(sid):
        for info in glob.glob(f"/proc/{pid}/fdinfo/*"):
            try:
                text = Path(info).read_text()
            except OSError:  # closed meanwhile, or the process gone
                continue
            ids |= {int(line.split()[1]) for line in text.splitlines() if line.startswith("prog_id:")}
    return ids


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


def existing(kind: str) -> list[str]:
    """What of an owned type exists now, any oslens's, as the type counts it."""
    found = owned.get(kind).existing
    if found is None:
        raise LookupError(f"oslens.owned type '{kind}' cannot say what of it exists")
    return found()


def everything() -> dict[str, list[str]]:
    """existing() of every type of oslens.owned that can say."""
    return {k: existing(k) for k in owned.TYPES if owned.get(k).existing is not None}


def cgroup_dirs(pid: int) -> list[str]:
    """The cgroups oslens process pid made, in every hierarchy it uses."""
    return [d for d in existing("cgroup") if os.path.basename(d).startswith(f"oslens.{pid}.")]


def block_devices() -> set[str]:
    """zram devices and bound loop devices that exist now, and the backing
    files of loop devices oslens made."""
    return set(existing("device"))


def guests() -> list[str]:
    """QEMU processes oslens started (named `-name oslens.…`), as `pid name`."""
    return existing("guest")


def containers(runtime_name: str | None) -> list[str]:
    """Containers oslens started (named oslens.…), running or not, for a
    container runtime (podman, docker); none without one."""
    if not runtime_name:
        return []
    return [w.split(" ", 1)[1] for w in existing("container") if w.startswith(runtime_name + " ")]
