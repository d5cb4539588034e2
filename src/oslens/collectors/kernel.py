"""The running kernel: identity, boot options and the settings that move
results (clocksource, preemption model, mitigations, THP, NUMA balancing), and
whether BPF attribution (BTF) and perf events are open to us.

Keys: release, version, cmdline, clocksource {current, available},
preemption {build, current}, mitigations {name: text}, thp {enabled, defrag},
numa_balancing, btf_vmlinux, perf_event_paranoid, config {source, options}:
the build options that decide what can be measured at all (IRQ time
accounting, HZ, the preemption model, NO_HZ_FULL, lock statistics, BTF,
kallsyms with data symbols, ...), from /proc/config.gz or /boot/config-*.
"""

from __future__ import annotations

import functools
import gzip
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


# Build options that change what a measurement can see: accounting of IRQ time
# (else /proc/stat's irq and softirq stay near 0), the tick, the preemption
# model, tickless CPUs, lock statistics, BTF for CO-RE, data symbols in
# kallsyms (to name static locks), schedstats and delay accounting.
CONFIG_OPTIONS = (
    "CONFIG_IRQ_TIME_ACCOUNTING",
    "CONFIG_VIRT_CPU_ACCOUNTING_GEN",
    "CONFIG_VIRT_CPU_ACCOUNTING_NATIVE",
    "CONFIG_TICK_CPU_ACCOUNTING",
    "CONFIG_PARAVIRT_TIME_ACCOUNTING",
    "CONFIG_HZ",
    "CONFIG_PREEMPT_NONE",
    "CONFIG_PREEMPT_VOLUNTARY",
    "CONFIG_PREEMPT",
    "CONFIG_PREEMPT_RT",
    "CONFIG_PREEMPT_DYNAMIC",
    "CONFIG_NO_HZ_IDLE",
    "CONFIG_NO_HZ_FULL",
    "CONFIG_LOCK_STAT",
    "CONFIG_LOCKDEP",
    "CONFIG_DEBUG_INFO_BTF",
    "CONFIG_KALLSYMS_ALL",
    "CONFIG_SCHEDSTATS",
    "CONFIG_TASK_DELAY_ACCT",
    "CONFIG_BPF_SYSCALL",
)


def parse_config(text: str) -> dict[str, str]:
    """CONFIG_X=value lines and '# CONFIG_X is not set' (as "n") for CONFIG_OPTIONS."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("# CONFIG_") and line.endswith(" is not set"):
            key, value = line[2:].split()[0], "n"
        elif line.startswith("CONFIG_") and "=" in line:
            key, value = line.split("=", 1)
            value = value.strip('"')
        else:
            continue
        if key in CONFIG_OPTIONS:
            found[key] = value
    return {key: found.get(key, "n") for key in CONFIG_OPTIONS}  # absent from a config: not set


@functools.lru_cache(maxsize=1)
def build_config(release: str | None = None) -> dict:
    """{source, options} of the running kernel's build configuration, or why it cannot be read."""
    release = release or os.uname().release
    candidates = [Path("/proc/config.gz"), Path(f"/boot/config-{release}"), Path(f"/lib/modules/{release}/config")]
    for path in candidates:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as e:
            return unavailable(f"cannot read {path}: {e.strerror or e}")
        text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode(errors="replace")
        return {"source": str(path), "options": parse_config(text)}
    return unavailable(
        "no kernel configuration found (/proc/config.gz needs CONFIG_IKCONFIG_PROC; "
        f"/boot/config-{release} is not there)"
    )


def irq_time_unavailable(config: dict | None = None) -> str | None:
    """Why /proc/stat's irq and softirq times are not real (they stay about 0
    on a kernel that accounts CPU time by tick without IRQ time accounting),
    or None when they are — or when the configuration is unknown (then the
    figures are shown as they are)."""
    config = build_config() if config is None else config
    if is_unavailable(config):
        return None
    o = config["options"]
    if "y" in (
        o["CONFIG_IRQ_TIME_ACCOUNTING"],
        o["CONFIG_VIRT_CPU_ACCOUNTING_GEN"],
        o["CONFIG_VIRT_CPU_ACCOUNTING_NATIVE"],
    ):
        return None
    return (
        "unavailable: kernel built without CONFIG_IRQ_TIME_ACCOUNTING "
        "(hard-IRQ time is never counted; softirq only when a tick lands in one)"
    )


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
        "config": build_config(),
        "perf_event_paranoid": int_or_reason(
            "/proc/sys/kernel/perf_event_paranoid",
            "/proc/sys/kernel/perf_event_paranoid does not exist (kernel without perf events)",
        ),
    }
