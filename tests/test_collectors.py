import json
import os
import platform
from datetime import datetime
from pathlib import Path

import pytest

import oslens
from oslens import collectors, cpulist
from oslens.collectors import _read, cpu, kernel, load, software, virt

DOCUMENTED_KEYS = {
    "kernel": {
        "config",
        "release",
        "version",
        "cmdline",
        "clocksource",
        "preemption",
        "mitigations",
        "thp",
        "numa_balancing",
        "btf_vmlinux",
        "perf_event_paranoid",
    },
    "cpu": {
        "model_name",
        "vendor",
        "arch",
        "flags",
        "online_cpus",
        "possible_cpus",
        "online_list",
        "allowed_cpus",
        "topology",
        "frequency",
        "cpuinfo_mhz",
        "turbo",
        "smt",
        "cpuidle",
    },
    "virt": {"vm", "container", "systemd_detect_virt", "hypervisor_flag", "hypervisor_type", "dmi", "container_hints"},
    "load": {
        "loadavg",
        "tasks_running",
        "tasks_total",
        "window_s",
        "busy_share",
        "steal_share",
        "busiest_cpu",
        "mem_total_bytes",
        "mem_available_bytes",
        "uptime_s",
        "hostname",
        "timestamp",
        "timestamp_unix",
    },
    "software": {"python", "oslens", "libc", "distribution"},
}
TOPOLOGY_KEYS = {
    "packages",
    "dies",
    "cores",
    "threads_per_core",
    "cores_per_package",
    "package_cpus",
    "numa_nodes",
    "node_cpus",
}


@pytest.fixture(scope="module")
def machine():
    return collectors.collect_machine()


def unavailable(value):
    return isinstance(value, dict) and set(value) == {"unavailable"}


def walk(value, path=""):
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk(v, f"{path}[{i}]")


# ---- the whole machine ----------------------------------------------------


def test_every_collector_is_discovered(machine):
    names = {m.NAME for m in collectors.collector_modules()}
    assert names >= set(DOCUMENTED_KEYS)
    assert set(machine) == names


@pytest.mark.parametrize("name", sorted(DOCUMENTED_KEYS))
def test_collector_returns_every_documented_key(machine, name):
    assert not unavailable(machine[name]), machine[name]
    assert set(machine[name]) == DOCUMENTED_KEYS[name]


def test_nothing_silently_missing(machine):
    json.dumps(machine, allow_nan=False)  # no NaN, only JSON types
    for path, value in walk(machine):
        assert value is not None, f"{path} is None: say why instead"
        if isinstance(value, dict) and "unavailable" in value:
            assert unavailable(value), f"{path} mixes a reason with data"
            assert isinstance(value["unavailable"], str) and value["unavailable"], path


def test_raising_collector_becomes_unavailable(monkeypatch):
    def boom():
        raise RuntimeError("sysfs exploded")

    monkeypatch.setattr(software, "collect", boom)
    monkeypatch.setattr(virt, "collect", lambda: ["not", "a", "dict"])
    monkeypatch.setattr(load, "collect", lambda: {"stubbed": True})  # skip the 200 ms window
    result = collectors.collect_machine()
    assert result["software"] == {"unavailable": "RuntimeError: sysfs exploded"}
    assert result["virt"]["unavailable"].startswith("TypeError: ")
    assert result["load"] == {"stubbed": True}
    assert result["kernel"]["release"] == os.uname().release


def test_a_stop_signal_during_collection_is_not_a_collector_failure(monkeypatch):
    """A SIGTERM while the machine is described raises Interrupted in
    whatever collector runs then: it must end the command, not be stored as
    that collector being unavailable while the run goes on (the kill campaign
    saw a SIGTERMed scale run to its end and exit 0)."""
    import signal

    from oslens.errors import Interrupted

    def stopped():
        raise Interrupted(signal.SIGTERM)

    monkeypatch.setattr(software, "collect", stopped)
    monkeypatch.setattr(load, "collect", lambda: {"stubbed": True})
    with pytest.raises(Interrupted):
        collectors.collect_machine()


# ---- kernel ---------------------------------------------------------------


def test_kernel_identity(machine):
    k = machine["kernel"]
    assert k["release"] == os.uname().release
    assert k["version"] == os.uname().version
    assert isinstance(k["btf_vmlinux"], bool)
    assert k["btf_vmlinux"] == Path("/sys/kernel/btf/vmlinux").exists()
    cs = k["clocksource"]
    if not unavailable(cs["current"]) and not unavailable(cs["available"]):
        assert cs["current"] in cs["available"]
    if not unavailable(k["perf_event_paranoid"]):
        assert -1 <= k["perf_event_paranoid"] <= 4
    if not unavailable(k["numa_balancing"]):
        assert 0 <= k["numa_balancing"] <= 3
    for setting in ("enabled", "defrag"):
        v = k["thp"][setting]
        assert unavailable(v) or v in {
            "always",
            "madvise",
            "never",
            "defer",
            "defer+madvise",
            "within_size",
            "advise",
            "inherit",
        }
    if not unavailable(k["mitigations"]):
        assert all(isinstance(v, str) or unavailable(v) for v in k["mitigations"].values())


def test_preemption_build_from_uname():
    assert kernel.preempt_build("#1 SMP PREEMPT_DYNAMIC Tue") == "PREEMPT_DYNAMIC"
    assert kernel.preempt_build("#1 SMP PREEMPT PREEMPT_RT Tue") == "PREEMPT_RT"
    assert kernel.preempt_build("#1 SMP PREEMPT Tue") == "PREEMPT"
    assert kernel.preempt_build("#1 SMP Tue").startswith("none or voluntary")


def test_preemption_current_has_a_value_or_reason(machine):
    current = machine["kernel"]["preemption"]["current"]
    assert unavailable(current) or current in {"none", "voluntary", "full", "lazy"}


# ---- cpu: this machine ----------------------------------------------------


def test_cpu_counts_agree_with_os(machine):
    c = machine["cpu"]
    assert c["online_cpus"] == os.cpu_count()
    assert cpulist.parse_cpulist(c["online_list"]) == sorted(
        int(p.name[3:]) for p in Path("/sys/devices/system/cpu").glob("cpu[0-9]*") if (p / "topology").is_dir()
    )
    assert unavailable(c["possible_cpus"]) or c["possible_cpus"] >= c["online_cpus"]
    allowed = os.sched_getaffinity(0)
    assert c["allowed_cpus"]["count"] == len(allowed)
    assert cpulist.parse_cpulist(c["allowed_cpus"]["list"]) == sorted(allowed)


def check_topology(topo, online):
    """Relations that hold on any machine, whatever its shape."""
    assert set(topo) == TOPOLOGY_KEYS
    package_lists = topo["package_cpus"].values()
    assert sorted(c for cpus in package_lists for c in cpus) == online  # a partition
    assert topo["packages"] == len(topo["package_cpus"]) >= 1
    if isinstance(topo["threads_per_core"], int):
        assert topo["cores"] * topo["threads_per_core"] == len(online)
    else:
        hist = topo["threads_per_core"]
        assert sum(hist.values()) == topo["cores"]
        assert sum(int(t) * n for t, n in hist.items()) == len(online)
    if isinstance(topo["cores_per_package"], int):
        assert topo["packages"] * topo["cores_per_package"] == topo["cores"]
    else:
        hist = topo["cores_per_package"]
        assert sum(hist.values()) == topo["packages"]
        assert sum(int(c) * n for c, n in hist.items()) == topo["cores"]
    if not unavailable(topo["dies"]):
        assert topo["packages"] <= topo["dies"] <= topo["cores"]
    if not unavailable(topo["node_cpus"]):
        assert topo["numa_nodes"] == len(topo["node_cpus"])
        for cpu_ in online:
            owners = [n for n, cpus in topo["node_cpus"].items() if cpu_ in cpus]
            assert len(owners) == 1, f"cpu {cpu_} in nodes {owners}"


def test_cpu_topology_is_consistent(machine):
    c = machine["cpu"]
    assert not unavailable(c["topology"]), c["topology"]
    check_topology(c["topology"], cpulist.parse_cpulist(c["online_list"]))


def test_cpu_frequency_and_flags(machine):
    c = machine["cpu"]
    if platform.machine() in ("x86_64", "i686"):
        assert set(c["flags"]) == set(cpu.FLAGS_OF_INTEREST)
        assert all(isinstance(v, bool) for v in c["flags"].values())
    f = c["frequency"]
    if not unavailable(f):
        online = cpulist.parse_cpulist(c["online_list"])
        covered = sorted(x for cpus in f["governor"].values() for x in cpus)
        assert sorted(covered + f["cpus_without_cpufreq"]) == online
    else:
        assert not any(
            Path(f"/sys/devices/system/cpu/cpu{i}/cpufreq").is_dir() for i in cpulist.parse_cpulist(c["online_list"])
        )
    assert unavailable(c["smt"]["active"]) or isinstance(c["smt"]["active"], bool)


# ---- cpu: machines this one is not ---------------------------------------


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n")


def fake_machine(root: Path, packages=2, cores=4, threads=2, nodes=True, cpufreq=True, skip_threads_on=()):
    """A sysfs tree numbered like Intel servers: cpu p*cores+c is the first
    thread of core c in package p, its SMT sibling is that plus the count of
    cores. `skip_threads_on` lists cores whose second thread is offline."""
    ncores = packages * cores
    online = []
    per_core = {}
    for p in range(packages):
        for c in range(cores):
            first = p * cores + c
            sibs = [first + t * ncores for t in range(threads) if t == 0 or first not in skip_threads_on]
            per_core[first] = (p, c, sibs)
            online += sibs
    online.sort()
    base = "sys/devices/system/cpu"
    write(root, f"{base}/online", cpulist.format_cpulist(online))
    write(root, f"{base}/possible", f"0-{ncores * threads - 1}")
    blocks = []
    for p, c, sibs in per_core.values():
        for cpu_ in sibs:
            t = f"{base}/cpu{cpu_}/topology"
            write(root, f"{t}/physical_package_id", str(p))
            write(root, f"{t}/die_id", "0")
            write(root, f"{t}/core_id", str(c))
            write(root, f"{t}/thread_siblings_list", cpulist.format_cpulist(sibs))
            if cpufreq:
                d = f"{base}/cpu{cpu_}/cpufreq"
                write(root, f"{d}/scaling_driver", "intel_pstate")
                write(root, f"{d}/scaling_governor", "performance" if p == 0 else "powersave")
                write(root, f"{d}/scaling_min_freq", "800000")
                write(root, f"{d}/scaling_max_freq", "3500000")
                write(root, f"{d}/scaling_cur_freq", str(2000000 + 1000 * cpu_))
            blocks.append(
                f"processor\t: {cpu_}\nvendor_id\t: GenuineIntel\n"
                f"model name\t: Fake Xeon\ncpu MHz\t\t: {2000 + cpu_}.000\n"
                f"flags\t\t: fpu tsc rdtscp constant_tsc nonstop_tsc\n"
            )
    write(root, "proc/cpuinfo", "\n".join(blocks))
    write(root, f"{base}/smt/active", "1" if threads > 1 else "0")
    write(root, f"{base}/smt/control", "on")
    write(root, f"{base}/intel_pstate/no_turbo", "1")
    if nodes:
        write(root, "sys/devices/system/node/online", f"0-{packages}")
        for p in range(packages):
            mine = [x for x in online if per_core[x % ncores][0] == p]
            write(root, f"sys/devices/system/node/node{p}/cpulist", cpulist.format_cpulist(mine))
        # A memory-only node (CXL): no CPUs, still a node.
        write(root, f"sys/devices/system/node/node{packages}/cpulist", "")
    return online


def test_two_socket_smt_machine(tmp_path, monkeypatch):
    online = fake_machine(tmp_path)
    monkeypatch.setattr(cpu, "ROOT", tmp_path)
    c = cpu.collect()
    assert set(c) == DOCUMENTED_KEYS["cpu"]
    assert c["online_cpus"] == 16 and c["possible_cpus"] == 16
    assert c["model_name"] == "Fake Xeon" and c["vendor"] == "GenuineIntel"
    assert c["flags"] == {"constant_tsc": True, "nonstop_tsc": True, "hypervisor": False, "rdtscp": True}
    topo = c["topology"]
    check_topology(topo, online)
    assert (topo["packages"], topo["dies"], topo["cores"]) == (2, 2, 8)
    assert topo["threads_per_core"] == 2 and topo["cores_per_package"] == 4
    assert topo["package_cpus"]["0"] == [0, 1, 2, 3, 8, 9, 10, 11]
    assert topo["numa_nodes"] == 3 and topo["node_cpus"]["2"] == []
    f = c["frequency"]
    assert f["driver"] == {"intel_pstate": online}
    assert f["governor"] == {"performance": [0, 1, 2, 3, 8, 9, 10, 11], "powersave": [4, 5, 6, 7, 12, 13, 14, 15]}
    assert (f["min_mhz"], f["max_mhz"]) == (800.0, 3500.0)
    assert f["cur_mhz"] == {"min": 2000.0, "median": 2007.5, "max": 2015.0}
    assert f["cpus_without_cpufreq"] == []
    assert c["cpuinfo_mhz"]["max"] == 2015.0
    assert c["turbo"] is False
    assert c["smt"] == {"active": True, "control": "on"}


def test_partly_offlined_siblings_and_no_numa_no_cpufreq(tmp_path, monkeypatch):
    online = fake_machine(tmp_path, packages=2, cores=2, threads=2, nodes=False, cpufreq=False, skip_threads_on=(0, 1))
    monkeypatch.setattr(cpu, "ROOT", tmp_path)
    c = cpu.collect()
    topo = c["topology"]
    check_topology(topo, online)
    assert topo["threads_per_core"] == {"1": 2, "2": 2}
    assert topo["cores_per_package"] == 2
    assert unavailable(topo["numa_nodes"]) and unavailable(topo["node_cpus"])
    assert c["frequency"] == {"unavailable": "no cpufreq driver loaded"}


def test_missing_topology_file_is_reported_not_guessed(tmp_path, monkeypatch):
    fake_machine(tmp_path, packages=1, cores=2, threads=1)
    (tmp_path / "sys/devices/system/cpu/cpu1/topology/core_id").unlink()
    monkeypatch.setattr(cpu, "ROOT", tmp_path)
    topo = cpu.collect()["topology"]
    assert unavailable(topo) and "core_id" in topo["unavailable"]


# ---- helpers ---------------------------------------------------------------


def test_cpulist_round_trip():
    assert cpulist.parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert cpulist.parse_cpulist("") == []
    assert cpulist.parse_cpulist("0-8:4") == [0, 4, 8]
    assert cpulist.format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert cpulist.format_cpulist([]) == ""


def test_bracketed_choice():
    assert _read.bracketed_choice("always [madvise] never") == "madvise"
    with pytest.raises(ValueError):
        _read.bracketed_choice("always madvise never")


# ---- load ------------------------------------------------------------------


def test_load_before_the_run(machine):
    ld = machine["load"]
    for key in ("busy_share", "steal_share"):
        assert 0.0 <= ld[key] <= 1.0
    assert ld["steal_share"] <= ld["busy_share"]  # stolen time is not idle time
    assert 0 <= ld["busiest_cpu"]["busy_share"] <= 1
    assert ld["busiest_cpu"]["cpu"] in cpulist.parse_cpulist(machine["cpu"]["online_list"])
    assert set(ld["loadavg"]) == {"1min", "5min", "15min"}
    assert 0 <= ld["tasks_running"] <= ld["tasks_total"]
    assert 0 < ld["mem_available_bytes"] <= ld["mem_total_bytes"]
    assert ld["uptime_s"] > 0
    assert ld["hostname"] == os.uname().nodename
    assert datetime.fromisoformat(ld["timestamp"]).tzinfo is not None


def test_busy_and_steal_shares_by_hand():
    #        user nice sys idle iowait irq softirq steal guest guest_nice
    before = [100, 0, 50, 1000, 10, 0, 0, 5, 40, 0]
    after = [130, 0, 60, 1050, 20, 0, 0, 15, 70, 0]
    busy, steal = load.shares(before, after)
    # delta: user 30 sys 10 idle 50 iowait 10 steal 10 = 110; guest is inside user.
    assert busy == pytest.approx(50 / 110)
    assert steal == pytest.approx(10 / 110)
    assert load.shares(before, before) is None


# ---- virt ------------------------------------------------------------------


def test_virt(machine):
    v = machine["virt"]
    assert isinstance(v["vm"], str) and v["vm"]
    assert isinstance(v["container"], str) and v["container"]
    assert v["container_hints"]["dockerenv"] == os.path.exists("/.dockerenv")
    assert v["container_hints"]["containerenv"] == os.path.exists("/run/.containerenv")
    assert set(v["dmi"]) == {"sys_vendor", "product_name"}


def test_parse_cgroup():
    assert virt.parse_cgroup("0::/user.slice/session-1.scope\n") == {"unified": "/user.slice/session-1.scope"}
    assert virt.parse_cgroup("4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n") == {
        "memory": "/docker/abc",
        "cpu,cpuacct": "/docker/abc",
        "unified": "/",
    }


# ---- software --------------------------------------------------------------


def test_software(machine):
    s = machine["software"]
    assert s["oslens"] == oslens.__version__
    assert s["python"].endswith(platform.python_version())
    libc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
    assert s["libc"] == libc if libc else unavailable(s["libc"])


def test_parse_os_release():
    text = 'NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n# c\nID=debian\n'
    fields = software.parse_os_release(text)
    assert fields["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)"
    assert fields["ID"] == "debian"
