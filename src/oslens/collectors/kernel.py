"""The running kernel: identity, boot options and the settings that move
results (clocksource, preemption model, mitigations, THP, NUMA balancing), and
whether BPF attribution (BTF) and perf events are open to us.

Keys: release, version, cmdline, clocksource {current, available},
preemption {build, current}, mitigations {name: text}, thp {enabled, defrag},
numa_balancing, btf_vmlinux, perf_event_paranoid.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._read import bracketed_choice, int_or_reason, is_unavailable, read_or_reason, read_text, unavailable

NAME = "kernel"

CLOCKSOURCE = Path("/sys/devices/system/clocksource/clocksource0")
VULNERABILITIES = Path("/sys/devices/system/cpu/vulnerabilities")
THP = Path("/sys/kernel/mm/transparent_hugepage")
DEBUGFS = Path("/sys/kernel/debug")
BTF_VMLINUX = Path("/sys/kernel/btf/vmlinux")

# scripts/mkcompile_h puts these into `uname -v`; kernels before 5.18 print
# "PREEMPT PREEMPT_RT" together, so the more specific token is looked for first.
_PREEMPT_TOKENS = ("PREEMPT_RT", "PREEMPT_DYNAMIC", "PREEMPT")


def preempt_build(uname_version: str) -> str:
    tokens = uname_version.split()
    for token in _PREEMPT_TOKENS:
        if token in tokens:
            return token
    # The build string names only preemptible configurations.
    return "none or voluntary (uname -v does not tell which)"


def _preempt_current() -> str | dict:
    path = DEBUGFS / "sched" / "preempt"
    try:
        text = read_text(path)
    except FileNotFoundError:
        if not os.path.ismount(DEBUGFS):
            return unavailable(f"debugfs is not mounted at {DEBUGFS}")
        return unavailable(f"{path} does not exist (kernel without PREEMPT_DYNAMIC)")
    except PermissionError:
        return unavailable(f"permission denied reading {path} (needs root)")
    except OSError as e:
        return unavailable(f"cannot read {path}: {e.strerror or e}")
    # The active model is the one in parentheses: "none voluntary (full) lazy".
    for word in text.split():
        if word.startswith("(") and word.endswith(")"):
            return word[1:-1]
    return unavailable(f"no (selected) model in {path}: {text!r}")


def _clocksource() -> dict:
    current = read_or_reason(CLOCKSOURCE / "current_clocksource")
    available = read_or_reason(CLOCKSOURCE / "available_clocksource")
    if not is_unavailable(available):
        available = available.split()
    return {"current": current, "available": available}


def _mitigations() -> dict:
    try:
        entries = sorted(p for p in VULNERABILITIES.iterdir() if p.is_file())
    except FileNotFoundError:
        return unavailable(f"{VULNERABILITIES} does not exist (kernel before 4.15 or not x86/arm64)")
    except OSError as e:
        return unavailable(f"cannot list {VULNERABILITIES}: {e.strerror or e}")
    if not entries:
        return unavailable(f"{VULNERABILITIES} is empty")
    return {p.name: read_or_reason(p) for p in entries}


def _thp_setting(name: str) -> str | dict:
    text = read_or_reason(THP / name, f"{THP / name} does not exist (kernel without transparent huge pages)")
    if is_unavailable(text):
        return text
    try:
        return bracketed_choice(text)
    except ValueError as e:
        return unavailable(str(e))


def collect() -> dict:
    uname = os.uname()
    return {
        "release": uname.release,
        "version": uname.version,
        "cmdline": read_or_reason("/proc/cmdline"),
        "clocksource": _clocksource(),
        "preemption": {"build": preempt_build(uname.version), "current": _preempt_current()},
        "mitigations": _mitigations(),
        "thp": {"enabled": _thp_setting("enabled"), "defrag": _thp_setting("defrag")},
        "numa_balancing": int_or_reason(
            "/proc/sys/kernel/numa_balancing",
            "/proc/sys/kernel/numa_balancing does not exist (kernel without NUMA balancing)",
        ),
        "btf_vmlinux": BTF_VMLINUX.exists(),
        "perf_event_paranoid": int_or_reason(
            "/proc/sys/kernel/perf_event_paranoid",
            "/proc/sys/kernel/perf_event_paranoid does not exist (kernel without perf events)",
        ),
    }
