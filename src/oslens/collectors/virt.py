"""Whether we run in a virtual machine, a container, both or neither.

Keys:
  vm, container      verdicts: a technology name, "none", or for vm
                     "unidentified hypervisor" when only the CPU flag says so
  systemd_detect_virt {vm, container}: `systemd-detect-virt --vm` and
                     `--container`, asked separately because the plain command
                     reports only the container and would hide a VM underneath
  hypervisor_flag    x86 cpuinfo "hypervisor" flag
  hypervisor_type    /sys/hypervisor/type (Xen and some others)
  dmi                {sys_vendor, product_name}
  container_hints    {dockerenv, containerenv: bool, cgroup {hierarchy: path}}
"""

from __future__ import annotations

import shutil
import subprocess

from ._read import cpuinfo_flags, is_unavailable, read_cpuinfo, read_or_reason, read_text, unavailable

NAME = "virt"

DETECT_TIMEOUT_S = 5


def _detect(kind: str, exe: str) -> str | dict:
    try:
        proc = subprocess.run([exe, f"--{kind}"], capture_output=True, text=True, timeout=DETECT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return unavailable(f"systemd-detect-virt --{kind} did not answer within {DETECT_TIMEOUT_S} s")
    except OSError as e:
        return unavailable(f"cannot run {exe}: {e.strerror or e}")
    answer = proc.stdout.strip()
    # It exits 1 and prints "none" when nothing is detected: that is an answer.
    if answer:
        return answer
    return unavailable(
        f"systemd-detect-virt --{kind} exited {proc.returncode} without output: {proc.stderr.strip()[:200]}"
    )


def _systemd_detect_virt() -> dict:
    exe = shutil.which("systemd-detect-virt")
    if exe is None:
        reason = unavailable("systemd-detect-virt is not installed")
        return {"vm": reason, "container": reason}
    return {"vm": _detect("vm", exe), "container": _detect("container", exe)}


def _hypervisor_flag() -> bool | dict:
    try:
        flags = cpuinfo_flags(read_cpuinfo())
    except OSError as e:
        return unavailable(f"cannot read /proc/cpuinfo: {e.strerror or e}")
    if flags is None:
        return unavailable("no x86 flags line in /proc/cpuinfo")
    return "hypervisor" in flags


def parse_cgroup(text: str) -> dict[str, str]:
    """/proc/self/cgroup as {hierarchy: path}; "unified" names the v2 line
    ("0::/path"), v1 lines are keyed by their controller list."""
    paths = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hier_id, controllers, path = parts
        key = "unified" if hier_id == "0" and controllers == "" else controllers or f"hierarchy {hier_id}"
        paths[key] = path
    return paths


def _container_hints() -> dict:
    cgroup = read_or_reason("/proc/self/cgroup")
    if not is_unavailable(cgroup):
        cgroup = parse_cgroup(cgroup)
    exists = {}
    for key, path in (("dockerenv", "/.dockerenv"), ("containerenv", "/run/.containerenv")):
        try:
            read_text(path)
            exists[key] = True
        except FileNotFoundError:
            exists[key] = False
        except OSError:
            exists[key] = True  # present, merely unreadable (a directory or root-only)
    return {**exists, "cgroup": cgroup}


def _verdicts(detected: dict, flag, hv_type, hints: dict) -> tuple[str, str]:
    vm = detected["vm"]
    if is_unavailable(vm):
        if not is_unavailable(hv_type):
            vm = hv_type
        elif flag is True:
            vm = "unidentified hypervisor"
        elif flag is False:
            vm = "none"
        else:
            vm = "unknown (no systemd-detect-virt, no x86 hypervisor flag to check)"
    container = detected["container"]
    if is_unavailable(container):
        if hints["dockerenv"]:
            container = "docker"
        elif hints["containerenv"]:
            container = "podman"
        else:
            container = "none (no /.dockerenv or /run/.containerenv; systemd-detect-virt unavailable)"
    return vm, container


def collect() -> dict:
    detected = _systemd_detect_virt()
    flag = _hypervisor_flag()
    hv_type = read_or_reason(
        "/sys/hypervisor/type", "/sys/hypervisor/type does not exist (no Xen-style hypervisor interface)"
    )
    dmi = {
        name: read_or_reason(
            f"/sys/class/dmi/id/{name}", f"/sys/class/dmi/id/{name} does not exist (no DMI/SMBIOS tables)"
        )
        for name in ("sys_vendor", "product_name")
    }
    hints = _container_hints()
    vm, container = _verdicts(detected, flag, hv_type, hints)
    return {
        "vm": vm,
        "container": container,
        "systemd_detect_virt": detected,
        "hypervisor_flag": flag,
        "hypervisor_type": hv_type,
        "dmi": dmi,
        "container_hints": hints,
    }
