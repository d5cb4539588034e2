"""The processor: identity, TSC properties, CPU counts, topology (packages,
dies, cores, SMT, NUMA nodes), frequency scaling and idle driver.

Keys:
  model_name, vendor, arch
  flags            {constant_tsc, nonstop_tsc, hypervisor, rdtscp: bool} (x86 only)
  online_cpus, possible_cpus (int), online_list (kernel cpulist text)
  allowed_cpus     {count, list}: this process's affinity mask, which a
                   container's cpuset may make smaller than the online set
  topology         packages, dies, cores, threads_per_core, cores_per_package,
                   package_cpus {package: [cpu]}, numa_nodes, node_cpus {node: [cpu]}
                   threads_per_core / cores_per_package are an int when every
                   core / package has the same count, otherwise a dict
                   {count: how many cores (packages) have it} (hybrid CPUs,
                   partly offlined siblings)
  frequency        driver {name: [cpu]}, governor {name: [cpu]}, min_mhz, max_mhz
                   (lowest policy minimum, highest policy maximum), cur_mhz
                   {min, median, max}, cpus_without_cpufreq [cpu]
  cpuinfo_mhz      {min, median, max} of "cpu MHz" in /proc/cpuinfo
  turbo            bool: frequency boost allowed
  smt              {active: bool, control: text}
  cpuidle          {driver, governor}

Only online CPUs are described: offline ones have no topology in sysfs.
"""

from __future__ import annotations

import os
import platform
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from ..cpulist import format_cpulist, parse_cpulist
from ._read import cpuinfo_field, cpuinfo_flags, is_unavailable, read_cpuinfo, read_or_reason, read_text, unavailable

NAME = "cpu"

# Tests point this at a fabricated tree to describe machines this one is not.
ROOT = Path("/")

FLAGS_OF_INTEREST = ("constant_tsc", "nonstop_tsc", "hypervisor", "rdtscp")


def _cpu_dir() -> Path:
    return ROOT / "sys/devices/system/cpu"


def _node_dir() -> Path:
    return ROOT / "sys/devices/system/node"


def _cpulist(path: Path) -> list[int] | dict:
    text = read_or_reason(path)
    return text if is_unavailable(text) else parse_cpulist(text)


def _summary(values: list[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _uniform_or_histogram(counts: list[int]) -> int | dict:
    histogram = Counter(counts)
    if len(histogram) == 1:
        return counts[0]
    return {str(k): v for k, v in sorted(histogram.items())}


def _identity(blocks: list[dict[str, str]], unread: str | None) -> dict:
    arch = platform.machine()

    def missing(what: str) -> dict:
        return unavailable(unread or f"no {what} in /proc/cpuinfo on {arch}")

    # x86 "model name", POWER "cpu", MIPS "cpu model", 32-bit ARM "Processor".
    model = cpuinfo_field(blocks, "model name", "cpu model", "cpu", "Processor")
    vendor = cpuinfo_field(blocks, "vendor_id", "CPU implementer", "vendor")
    flags = cpuinfo_flags(blocks)
    return {
        "model_name": model if model else missing("model name"),
        "vendor": vendor if vendor else missing("vendor"),
        "arch": arch,
        "flags": ({f: f in flags for f in FLAGS_OF_INTEREST} if flags is not None else missing("x86 flags line")),
    }


def _cpuinfo_mhz(blocks: list[dict[str, str]]) -> dict:
    values = []
    for block in blocks:
        try:
            values.append(float(block["cpu MHz"]))
        except (KeyError, ValueError):
            continue
    if not values:
        return unavailable(f"no 'cpu MHz' in /proc/cpuinfo on {platform.machine()}")
    return _summary(values)


def read_topology(cpus: list[int]) -> dict[int, dict]:
    """Per-CPU package, die (None where the kernel has no die_id), core and
    SMT siblings, for the given (online) CPUs. Raises OSError/ValueError if
    sysfs lacks them: a partial topology would mislead placement."""
    topo = {}
    for cpu in cpus:
        d = _cpu_dir() / f"cpu{cpu}" / "topology"
        try:
            die: int | None = int(read_text(d / "die_id"))
        except FileNotFoundError:
            die = None  # die_id appeared in Linux 5.2
        topo[cpu] = {
            "package": int(read_text(d / "physical_package_id")),
            "die": die,
            "core": int(read_text(d / "core_id")),
            "siblings": tuple(parse_cpulist(read_text(d / "thread_siblings_list"))),
        }
    return topo


def _nodes() -> tuple[int | dict, dict]:
    node_dir = _node_dir()
    if not node_dir.is_dir():
        reason = unavailable(f"{node_dir} does not exist (kernel without NUMA support)")
        return reason, reason
    online = _cpulist(node_dir / "online")
    if is_unavailable(online):
        return online, online
    node_cpus = {}
    for node in online:
        cpus = _cpulist(node_dir / f"node{node}" / "cpulist")
        # A memory-only node (CXL, HBM) legitimately lists no CPU.
        node_cpus[str(node)] = cpus
    return len(online), node_cpus


def _topology(online: list[int]) -> dict:
    try:
        topo = read_topology(online)
    except (OSError, ValueError) as e:
        return unavailable(f"incomplete CPU topology in sysfs: {type(e).__name__}: {e}")

    package_cpus: dict[int, list[int]] = defaultdict(list)
    for cpu, t in topo.items():
        package_cpus[t["package"]].append(cpu)

    # A core is identified by its sibling set: core_id is only unique within a
    # package (and on some architectures within a cluster).
    cores = {t["siblings"]: t["package"] for t in topo.values()}
    cores_in_package = Counter(cores.values())

    if any(t["die"] is None for t in topo.values()):
        dies: int | dict = unavailable("no die_id in sysfs topology (kernel before 5.2)")
    elif any(t["die"] < 0 for t in topo.values()):
        dies = unavailable("the architecture reports no die ids (die_id is -1)")
    else:
        dies = len({(t["package"], t["die"]) for t in topo.values()})

    numa_nodes, node_cpus = _nodes()
    return {
        "packages": len(package_cpus),
        "dies": dies,
        "cores": len(cores),
        "threads_per_core": _uniform_or_histogram([len(s) for s in cores]),
        "cores_per_package": _uniform_or_histogram([cores_in_package[p] for p in sorted(cores_in_package)]),
        "package_cpus": {str(p): sorted(c) for p, c in sorted(package_cpus.items())},
        "numa_nodes": numa_nodes,
        "node_cpus": node_cpus,
    }


def _group(values: dict[int, str]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for cpu, value in sorted(values.items()):
        groups[value].append(cpu)
    return dict(groups)


def _frequency(online: list[int], in_vm: bool) -> dict:
    drivers, governors = {}, {}
    mins, maxs, curs = [], [], []
    without = []
    for cpu in online:
        d = _cpu_dir() / f"cpu{cpu}" / "cpufreq"
        if not d.is_dir():
            without.append(cpu)
            continue
        for name, into in (("scaling_driver", drivers), ("scaling_governor", governors)):
            text = read_or_reason(d / name)
            into[cpu] = text if isinstance(text, str) else text["unavailable"]
        for name, into in (("scaling_min_freq", mins), ("scaling_max_freq", maxs), ("scaling_cur_freq", curs)):
            try:
                into.append(int(read_text(d / name)) / 1000.0)  # sysfs speaks kHz
            except (OSError, ValueError):
                continue  # some drivers print "<unknown>"; the others still count
    if not drivers:
        why = "no cpufreq driver" + (" (typical in VMs)" if in_vm else " loaded")
        return unavailable(why)
    return {
        "driver": _group(drivers),
        "governor": _group(governors),
        "min_mhz": min(mins) if mins else unavailable("scaling_min_freq unreadable on every CPU"),
        "max_mhz": max(maxs) if maxs else unavailable("scaling_max_freq unreadable on every CPU"),
        "cur_mhz": _summary(curs) if curs else unavailable("scaling_cur_freq unreadable on every CPU"),
        "cpus_without_cpufreq": without,
    }


def _turbo() -> bool | dict:
    boost = _cpu_dir() / "cpufreq" / "boost"
    no_turbo = _cpu_dir() / "intel_pstate" / "no_turbo"
    for path, on_value in ((boost, "1"), (no_turbo, "0")):
        try:
            return read_text(path) == on_value
        except OSError:
            continue
    return unavailable("neither cpufreq/boost nor intel_pstate/no_turbo is exposed")


def _smt() -> dict:
    smt = _cpu_dir() / "smt"
    missing = f"{smt} does not exist (kernel without CONFIG_HOTPLUG_SMT)"
    active = read_or_reason(smt / "active", missing)
    if not is_unavailable(active):
        active = active == "1"
    return {"active": active, "control": read_or_reason(smt / "control", missing)}


def _cpuidle() -> dict:
    d = _cpu_dir() / "cpuidle"
    governor = read_or_reason(d / "current_governor")
    if is_unavailable(governor):
        # Before 5.8 the file is current_governor_ro.
        governor = read_or_reason(d / "current_governor_ro", f"{d} has no current governor")
    return {"driver": read_or_reason(d / "current_driver", f"{d} has no current driver"), "governor": governor}


def collect() -> dict:
    cpuinfo = ROOT / "proc/cpuinfo"
    try:
        blocks, unread = read_cpuinfo(cpuinfo), None
    except OSError as e:
        blocks, unread = [], f"cannot read {cpuinfo}: {e.strerror or e}"
    identity = _identity(blocks, unread)

    online_text = read_text(_cpu_dir() / "online")
    online = parse_cpulist(online_text)
    possible = _cpulist(_cpu_dir() / "possible")
    allowed = sorted(os.sched_getaffinity(0))
    flags = identity["flags"]
    in_vm = not is_unavailable(flags) and flags["hypervisor"]

    return {
        **identity,
        "online_cpus": len(online),
        "possible_cpus": possible if is_unavailable(possible) else len(possible),
        "online_list": online_text,
        "allowed_cpus": {"count": len(allowed), "list": format_cpulist(allowed)},
        "topology": _topology(online),
        "frequency": _frequency(online, in_vm),
        "cpuinfo_mhz": _cpuinfo_mhz(blocks) if unread is None else unavailable(unread),
        "turbo": _turbo(),
        "smt": _smt(),
        "cpuidle": _cpuidle(),
    }
