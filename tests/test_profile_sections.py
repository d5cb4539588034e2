"""`profile` analysis: procfs parsing and the arithmetic of every section, on
hand-made records that follow the engine's profile record spec, and the
rendering of each section with and without the BPF aggregates."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from rich.console import Console

from oslens import procfs
from oslens.analysis.histogram import Histogram
from oslens.profile.sections import SECTIONS, section_name
from oslens.profile.sections.switches import kthread_family
from oslens.profile.summary import Records, render, summarize, target_line, thread_times, user_system_ns

MS = 1_000_000
SUB_BITS = 2
VM_ERROR = "not supported by this CPU or hypervisor (perf_event_open: No such file or directory)"


# ---- building records ------------------------------------------------------


def bucket_index(value: int, sub_bits: int = SUB_BITS) -> int:
    """The engine's log-linear bucket of a value (engine/hist.h)."""
    if value < 1 << (sub_bits + 1):
        return value
    shift = value.bit_length() - 1 - sub_bits
    return ((shift + 1) << sub_bits) + (value >> shift) - (1 << sub_bits)


def hist(values: list[int]) -> dict:
    buckets: dict[int, int] = {}
    for v in values:
        buckets[bucket_index(v)] = buckets.get(bucket_index(v), 0) + 1
    return {
        "unit_ns": 1,
        "sub_bucket_bits": SUB_BITS,
        "count": len(values),
        "sum": sum(values),
        "min": min(values, default=0),
        "max": max(values, default=0),
        "buckets": sorted(buckets.items()),
    }


def test_test_histograms_decode_to_their_values():
    values = [3, 500, 2000, 50_000, 7_000_000]
    h = Histogram.from_record(hist(values))
    assert h.count == 5 and h.min == 3 and h.max == 7_000_000
    for q, v in zip((20, 40, 60, 80, 100), values):
        assert h.percentile(q) == pytest.approx(v, rel=2**-SUB_BITS / 2)


STAT_BEGIN = """\
cpu  1300 0 650 9000 10 0 20 5 10 0
cpu0 100 0 50 3000 5 0 0 0 0 0
cpu2 1000 0 500 3000 5 0 20 5 10 0
cpu3 200 0 100 3000 0 0 0 0 0 0
intr 5000 40 0
ctxt 9000
btime 1700000000
processes 300
procs_running 2
softirq 7000 0 100
"""
# cpu0 idle all along; cpu2 busy (guest 10 is inside user 150); cpu3 a quarter busy.
STAT_END = """\
cpu  1500 0 700 9340 10 2 23 10 20 0
cpu0 100 0 50 3200 5 0 0 0 0 0
cpu2 1150 0 540 3000 5 2 23 10 20 0
cpu3 250 0 110 3140 0 0 0 0 0 0
intr 12000 40 0
ctxt 9500
btime 1700000000
processes 310
procs_running 1
softirq 8600 0 100
"""
IRQ_BEGIN = """\
            CPU0       CPU2       CPU3       
   0:         40          0          0   IO-APIC   2-edge      timer
  24:       1000         10         10   PCI-MSI 327680-edge      virtio0-input.0
  25:          5          5          5   PCI-MSI 327681-edge      virtio0-output.0
 NMI:          1          2          3   Non-maskable interrupts
 LOC:      10000      20000      30000   Local timer interrupts
 RES:         10         20         30   Rescheduling interrupts
 ERR:          0
 MIS:          0
"""
IRQ_END = """\
            CPU0       CPU2       CPU3       
   0:         40          0          0   IO-APIC   2-edge      timer
  24:       1900         20         10   PCI-MSI 327680-edge      virtio0-input.0
  25:         15         15         15   PCI-MSI 327681-edge      virtio0-output.0
 NMI:          1          2          3   Non-maskable interrupts
 LOC:      11000      22000      33000   Local timer interrupts
 RES:         10         25         30   Rescheduling interrupts
 ERR:          1
 MIS:          0
"""
SOFTIRQ_BEGIN = """\
                    CPU0       CPU2       CPU3       
          HI:          0          0          0
       TIMER:       1000       2000       3000
      NET_RX:        100         10         10
         RCU:         50         50         50
"""
SOFTIRQ_END = """\
                    CPU0       CPU2       CPU3       
          HI:          0          0          0
       TIMER:       1100       2200       3300
      NET_RX:       1000         15         15
         RCU:         50         50         50
"""
VMSTAT_BEGIN = "nr_free_pages 5000\npgfault 1000\npgmajfault 10\n"
VMSTAT_END = "nr_free_pages 4000\npgfault 2200\npgmajfault 12\n"

FAULT_VALUES = [500] * 1000 + [2000] * 24 + [50_000] * 2
OFFCPU_VALUES = [10_000] * 10 + [1 * MS] * 8


def procfs_record(when: str, stat: str, irqs: str, softirqs: str, vmstat: str) -> dict:
    return {
        "type": "procfs",
        "when": when,
        "t_ns": 1,
        "files": {"/proc/stat": stat, "/proc/interrupts": irqs, "/proc/softirqs": softirqs, "/proc/vmstat": vmstat},
    }


def thread(
    tid: int,
    comm: str,
    utime_ms: float,
    stime_ms: float,
    runtime_ms: float,
    nvcsw: int,
    nivcsw: int,
    min_flt: int,
    maj_flt: int,
    when: str = "exit",
    source: str = "bpf",
) -> dict:
    return {
        "type": "thread",
        "when": when,
        "source": source,
        "tid": tid,
        "tgid": 100,
        "comm": comm,
        "utime_ns": int(utime_ms * MS),
        "stime_ns": int(stime_ms * MS),
        "runtime_ns": int(runtime_ms * MS),
        "nvcsw": nvcsw,
        "nivcsw": nivcsw,
        "min_flt": min_flt,
        "maj_flt": maj_flt,
        "cpu": 2,
    }


def counters(hardware: dict[tuple[str, str], int] | None = None) -> dict:
    events = [
        {"name": name, "scope": "all", "value": value, "enabled_ns": 2000 * MS, "running_ns": 2000 * MS, "error": None}
        for name, value in (
            ("task-clock", 54 * MS),
            ("context-switches", 18),
            ("cpu-migrations", 3),
            ("page-faults-min", 1024),
            ("page-faults-maj", 2),
        )
    ]
    for name in ("cycles", "instructions", "stalled-cycles-frontend", "L1-icache-misses", "iTLB-misses"):
        for scope in ("user", "kernel"):
            value = (hardware or {}).get((name, scope))
            events.append(
                {
                    "name": name,
                    "scope": scope,
                    "value": value,
                    "enabled_ns": 2000 * MS,
                    "running_ns": 2000 * MS if value is not None else 0,
                    "error": None if value is not None else VM_ERROR,
                }
            )
    return {"type": "counters", "events": events}


def bpf_aggregates() -> list[dict]:
    return [
        {"type": "cpu_time", "cpus": [{"cpu": 0, "ns": 0}, {"cpu": 2, "ns": 40 * MS}, {"cpu": 3, "ns": 14 * MS}]},
        {
            "type": "switches",
            "voluntary": 12,
            "involuntary": 6,
            "migrations": 3,
            "migrated_switch_ins": 4,
            "switch_ins": 20,
            "wakeups": 12,
            "offcpu": hist(OFFCPU_VALUES),
            "offcpu_voluntary": hist([1 * MS] * 8),
            "offcpu_involuntary": hist([10_000] * 10),
            "runq": hist([5_000] * 18),
            "preempted_by": [
                {"comm": "kworker/2:1", "kthread": True, "workload": False, "count": 2},
                {"comm": "kworker/3:0H", "kthread": True, "workload": False, "count": 1},
                {"comm": "ksoftirqd/2", "kthread": True, "workload": False, "count": 1},
                {"comm": "bash", "kthread": False, "workload": False, "count": 1},
                {"comm": "worker", "kthread": False, "workload": True, "count": 1},
            ],
        },
        {"type": "faults", "minor": 1024, "major": 2, "hist": hist(FAULT_VALUES), "major_hist": hist([50_000] * 2)},
        {
            "type": "irqs",
            "hardirq": [
                {
                    "irq": 25,
                    "name": "virtio0-output.0",
                    "count": 30,
                    "ns": 30_000,
                    "workload_count": 0,
                    "workload_ns": 0,
                },
                {
                    "irq": 24,
                    "name": "virtio0-input.0",
                    "count": 905,
                    "ns": 905 * 2000,
                    "workload_count": 100,
                    "workload_ns": 200_000,
                },
            ],
            "softirq": [
                {
                    "vec": 1,
                    "name": "TIMER",
                    "count": 590,
                    "ns": 590 * 3000,
                    "workload_count": 200,
                    "workload_ns": 600_000,
                },
                {
                    "vec": 3,
                    "name": "NET_RX",
                    "count": 910,
                    "ns": 910 * 10_000,
                    "workload_count": 5,
                    "workload_ns": 50_000,
                },
            ],
            "vectors": [
                {"name": "local_timer", "count": 6000, "ns": 6000 * 1500, "workload_count": 50, "workload_ns": 75_000}
            ],
            "per_cpu": [
                {
                    "cpu": c,
                    "hardirq_count": n,
                    "hardirq_ns": n * 2000,
                    "softirq_count": n,
                    "softirq_ns": n,
                    "vector_count": n,
                    "vector_ns": n,
                }
                for c, n in ((0, 900), (2, 20), (3, 0))
            ],
        },
        {
            "type": "syscalls",
            "rows": [
                {"nr": 0, "name": "read", "count": 10, "errors": 2, "hist": hist([1 * MS] * 10)},
                {"nr": 110, "name": "getppid", "count": 1000, "errors": 0, "hist": hist([100] * 1000)},
                {"nr": 231, "name": "exit_group", "count": 1, "errors": 0, "hist": hist([])},
            ],
        },
        {
            "type": "locks",
            "rows": [
                {
                    "lock": "0xffff888100001000",
                    "lock_name": None,
                    "flags": 0,
                    "kind": "spinlock",
                    "count": 10,
                    "total_ns": 1000,
                    "max_ns": 300,
                    "stack": ["0xffffffff8123abcd", "0xffffffff8123ffff"],
                },
                {
                    "lock": "0xffff888100002000",
                    "lock_name": "mmap_lock",
                    "flags": 0,
                    "kind": "rwsem:W",
                    "count": 5,
                    "total_ns": 5000,
                    "max_ns": 2000,
                    "stack": ["0xffffffff81000000"],
                    "caller": "down_write_killable+0x5c",
                },
            ],
        },
        {"type": "bpf_stats", "lost": 0},
    ]


def profile(
    bpf: bool = True,
    bpf_missing: list[str] | None = None,
    hardware: dict | None = None,
    extra_threads: list[dict] | None = None,
) -> list[dict]:
    """A two-second profile of ./app (pid 100) and its thread 'worker', on a
    machine whose CPU 1 is offline; with BPF aggregates or without BPF at all."""
    threads = [
        thread(100, "app", 30, 10, 50, 10, 5, 1000, 2),  # tick samples 3:1, scaled to 50 ms runtime
        thread(101, "worker", 0, 0, 4, 2, 1, 24, 0),
    ]  # never sampled by a tick: all user
    if not bpf:  # without BPF, only threads alive at the end are seen, through /proc
        threads = [thread(101, "worker", 3, 1, 4, 2, 1, 24, 0, when="end", source="proc")]
    return [
        {
            "type": "header",
            "command": "profile",
            "mode": "command",
            "argv": ["./app", "--fast"],
            "pid": None,
            "cpus_possible": 4,
            "cpus_online": [0, 2, 3],
            "clk_tck": 100,
            "page_size": 4096,
        },
        {
            "type": "bpf",
            "loaded": bpf,
            "why": None if bpf else "not root (needs CAP_BPF and CAP_PERFMON)",
            "missing": bpf_missing or [],
        },
        procfs_record("begin", STAT_BEGIN, IRQ_BEGIN, SOFTIRQ_BEGIN, VMSTAT_BEGIN),
        {"type": "target", "pid": 100, "t_ns": 2},
        *threads,
        *(extra_threads or []),
        {"type": "end_target", "how": "exited", "code": 0, "signal": None, "wall_ns": 2_000_000_000},
        procfs_record("end", STAT_END, IRQ_END, SOFTIRQ_END, VMSTAT_END),
        counters(hardware),
        *(bpf_aggregates() if bpf else []),
        {"type": "end", "status": "ok"},
    ]


def sections(records: list[dict]) -> dict:
    return summarize(records)["sections"]


# ---- procfs ----------------------------------------------------------------


def test_proc_stat_per_cpu_ticks_and_counters():
    stat = procfs.parse_stat(STAT_BEGIN)
    assert sorted(stat.cpus) == [0, 2, 3]  # CPU 1 offline: no line
    assert stat.cpus[2] == {
        "user": 1000,
        "nice": 0,
        "system": 500,
        "idle": 3000,
        "iowait": 5,
        "irq": 0,
        "softirq": 20,
        "steal": 5,
        "guest": 10,
        "guest_nice": 0,
    }
    assert stat.total["idle"] == 9000
    assert stat.counters["ctxt"] == 9000 and stat.counters["intr"] == 5000 and stat.counters["softirq"] == 7000


def test_proc_stat_of_an_old_kernel_keeps_the_fields_it_has():
    stat = procfs.parse_stat("cpu  10 0 5 100\ncpu0 10 0 5 100\n")
    assert stat.cpus[0] == {"user": 10, "nice": 0, "system": 5, "idle": 100}


def test_proc_interrupts_with_an_offline_cpu():
    irqs = procfs.parse_interrupts(IRQ_BEGIN)
    assert irqs["24"].counts == {0: 1000, 2: 10, 3: 10} and irqs["24"].total == 1020
    assert irqs["24"].description == "PCI-MSI 327680-edge virtio0-input.0"
    assert irqs["24"].numbered and not irqs["LOC"].numbered
    assert irqs["LOC"].counts == {0: 10000, 2: 20000, 3: 30000}
    assert irqs["LOC"].description == "Local timer interrupts"
    assert irqs["ERR"].counts == {} and irqs["ERR"].total == 0
    delta = procfs.diff_interrupts(irqs, procfs.parse_interrupts(IRQ_END))
    assert delta["24"].counts == {0: 900, 2: 10, 3: 0} and delta["24"].total == 910
    assert delta["ERR"].total == 1 and delta["LOC"].total == 6000


def test_proc_interrupts_description_may_start_with_a_number():
    irqs = procfs.parse_interrupts("     CPU0 CPU1\n 30:  1  2  2  edge  1234-dev\n")
    assert irqs["30"].counts == {0: 1, 1: 2} and irqs["30"].description == "2 edge 1234-dev"


def test_proc_softirqs_and_vmstat():
    soft = procfs.parse_softirqs(SOFTIRQ_BEGIN)
    assert soft["TIMER"] == {0: 1000, 2: 2000, 3: 3000}
    delta = procfs.diff_softirqs(soft, procfs.parse_softirqs(SOFTIRQ_END))
    assert delta["NET_RX"] == {0: 900, 2: 5, 3: 5}
    vm = procfs.diff_vmstat(procfs.parse_vmstat(VMSTAT_BEGIN), procfs.parse_vmstat(VMSTAT_END))
    assert vm == {"nr_free_pages": -1000, "pgfault": 1200, "pgmajfault": 2}


def test_diff_keeps_only_what_both_snapshots_have():
    begin = procfs.ProcSnapshot.from_files({"/proc/stat": STAT_BEGIN, "/proc/interrupts": IRQ_BEGIN})
    # CPU 3 went offline and IRQ 25's device went away before the end.
    end_stat = "\n".join(line for line in STAT_END.splitlines() if not line.startswith("cpu3"))
    end_irqs = "\n".join(line for line in IRQ_END.splitlines() if not line.strip().startswith("25:"))
    end = procfs.ProcSnapshot.from_files(
        {"/proc/stat": end_stat, "/proc/interrupts": end_irqs, "/proc/vmstat": VMSTAT_END}
    )
    delta = procfs.diff(begin, end)
    assert sorted(delta.stat.cpus) == [0, 2]
    assert delta.stat.cpus[2]["user"] == 150 and delta.stat.counters["ctxt"] == 500
    assert "25" not in delta.interrupts
    assert delta.vmstat is None and delta.softirqs is None  # absent at one end or both


# ---- threads ---------------------------------------------------------------


def test_tick_sampled_times_are_scaled_to_the_runtime_as_the_kernel_does():
    assert user_system_ns(30 * MS, 10 * MS, 50 * MS) == (37_500_000, 12_500_000)
    assert user_system_ns(0, 0, 4 * MS) == (4 * MS, 0)
    assert user_system_ns(0, 5 * MS, 4 * MS) == (0, 4 * MS)


def test_attached_threads_count_only_what_they_did_since_the_profile_began():
    recs = [
        thread(7, "srv", 100, 50, 150, 10, 2, 500, 1, when="begin", source="proc"),
        thread(7, "srv", 130, 60, 190, 15, 3, 520, 1, when="end", source="proc"),
        thread(8, "srv-new", 30, 10, 50, 1, 0, 5, 0, when="exit", source="bpf"),
        thread(7, "srv", 1, 1, 2, 1, 0, 0, 0, when="exit", source="bpf"),
    ]  # tid 7 reused later
    old, new, reused = thread_times(recs)
    assert (old.user_ns, old.system_ns, old.runtime_ns) == (30 * MS, 10 * MS, 40 * MS)
    assert (old.nvcsw, old.nivcsw, old.min_flt, old.maj_flt) == (5, 1, 20, 0) and old.since_begin
    assert (new.user_ns, new.system_ns) == (37_500_000, 12_500_000) and not new.since_begin
    assert reused.runtime_ns == 2 * MS and not reused.since_begin


# ---- sections --------------------------------------------------------------


def test_time_per_thread_total_and_cpu_split_over_the_cpus_the_workload_ran_on():
    s = sections(profile())["time"]
    assert s["missing"] is None and s["threads_count"] == 2
    assert [t["comm"] for t in s["threads"]] == ["app", "worker"]
    assert s["threads"][0]["kernel_share"] == pytest.approx(0.25)
    total = s["total"]
    assert (total["user_ns"], total["system_ns"], total["runtime_ns"]) == (41_500_000, 12_500_000, 54 * MS)
    assert total["kernel_share"] == pytest.approx(12.5 / 54)
    assert total["cpus_busy"] == pytest.approx(0.054 / 2)
    split = s["cpu_split"]
    assert split["cpus"] == [2, 3] and "ran on" in split["basis"]
    # cpu2 + cpu3: 400 ticks elapsed; guest ticks are inside user, not added.
    assert split["all"]["ticks"]["user"] == 200 and split["all"]["elapsed_ns"] == 400 * 10 * MS
    shares = split["all"]["shares"]
    assert shares["user"] == pytest.approx(0.5) and shares["system"] == pytest.approx(0.125)
    assert shares["idle"] == pytest.approx(0.35) and shares["steal"] == pytest.approx(5 / 400)
    assert shares["irq"] == pytest.approx(2 / 400) and shares["softirq"] == pytest.approx(3 / 400)
    assert split["per_cpu"][0]["workload_share"] == pytest.approx(40 * MS / (200 * 10 * MS))
    check = next(c for c in s["crosschecks"] if "CPU time" in c["what"])
    assert check["values"] == {"threads' runtime": 54 * MS, "task-clock counter": 54 * MS} and check["spread"] == 0


def test_time_without_bpf_splits_all_online_cpus_and_says_why():
    s = sections(profile(bpf=False))["time"]
    # 4 ms of runtime is less than 3 ticks of 10 ms: the tick-sampled split is withheld
    assert s["total"]["runtime_ns"] == 4 * MS and s["total"]["user_ns"] is None
    assert s["total"]["kernel_share"] is None and any("tick-sampled" in n for n in s["notes"])
    split = s["cpu_split"]
    assert split["cpus"] == [0, 2, 3] and "not root" in split["basis"]
    assert split["all"]["shares"]["user"] == pytest.approx(200 / 600)


def test_the_split_threshold_is_the_kernels_tick_not_user_hz():
    """utime and stime are sampled at CONFIG_HZ's tick, kept with the run;
    USER_HZ (10 ms) only when the kernel's configuration was not known."""
    worker = thread(101, "worker", 1, 3, 4, 2, 1, 24, 0)  # 4 ms: 4 ticks at 1000 Hz, under 3 at 100 Hz

    def time_of(hz: int | None) -> dict:
        records = [r for r in profile() if r["type"] != "thread"] + [worker]
        return sections([*records, {"type": "kernel_config", "irq_time": None, "hz": hz}])["time"]

    total = time_of(1000)["total"]
    assert total["kernel_share"] == pytest.approx(0.75) and total["split_why"] is None
    for hz, why in ((250, "(12 ms, the tick at CONFIG_HZ=250)"), (None, "(30 ms, USER_HZ=100")):
        total = time_of(hz)["total"]
        assert total["user_ns"] is None and total["kernel_share"] is None and total["runtime_ns"] == 4 * MS
        assert why in total["split_why"], total["split_why"]


def test_a_short_commands_rusage_gets_no_user_kernel_split():
    """The rusage of a 2 ms command: no "0 ns kernel, 0.0 %", its precise sum and why."""
    records = [r for r in profile(bpf=False) if r["type"] != "thread"]
    end = next(r for r in records if r["type"] == "end_target")
    end["rusage"] = {"utime_ns": 2 * MS, "stime_ns": 0, "min_flt": 1, "maj_flt": 0, "nvcsw": 1, "nivcsw": 0}
    records.append({"type": "kernel_config", "irq_time": None, "hz": 250})
    summary = summarize(records)
    total = summary["sections"]["time"]["total"]
    assert (total["user_ns"], total["system_ns"], total["kernel_share"]) == (None, None, None)
    assert total["runtime_ns"] == 2 * MS and "less than 3 ticks (12 ms" in total["split_why"]
    check = next(c for c in summary["sections"]["time"]["crosschecks"] if "CPU time" in c["what"])
    assert check["values"]["rusage (wait4)"] == 2 * MS
    out = render_text(summary)
    row = next(line for line in out.splitlines() if "total (rusage)" in line)
    assert "%" not in row and "0 ns" not in row and "2 ms" in row
    assert "no user/kernel split" in out


def test_proc_stat_shares_need_a_few_units():
    """/proc/stat counts whole 1/USER_HZ units: a CPU where 2 elapsed has no
    shares (one of them would read "50 % system"), and the report says why."""
    records = profile()
    end = next(r for r in records if r["type"] == "procfs" and r["when"] == "end")
    end["files"]["/proc/stat"] = STAT_END.replace("cpu3 250 0 110 3140", "cpu3 201 0 100 3001")
    summary = summarize(records)
    split = summary["sections"]["time"]["cpu_split"]
    cpu2, cpu3 = split["per_cpu"]
    assert cpu2["split"] and cpu2["shares"]["user"] is not None
    assert not cpu3["split"] and set(cpu3["shares"].values()) == {None} and cpu3["workload_share"] is None
    assert "CPU 3: no split, less than 3 units of 10 ms" in render_text(summary)


def render_text(summary: dict) -> str:
    out = io.StringIO()
    render(Console(file=out, width=200), summary)
    return out.getvalue()


def test_without_bpf_the_thread_figures_say_they_are_partial():
    s = sections(profile(bpf=False))
    for name in ("time", "switches"):
        assert any("threads that exited are not counted" in n for n in s[name]["notes"]), name
    assert "shown instead" in s["switches"]["missing"]


def test_time_without_any_thread_says_so():
    records = [r for r in profile(bpf=False) if r["type"] != "thread"]
    s = sections(records)["time"]
    assert s["total"] is None and "not root" in s["missing"]


def test_kernel_thread_families():
    assert kthread_family("kworker/1:2") == "kworker/*"
    assert kthread_family("kworker/u8:3-events_unbound") == "kworker/*"
    assert kthread_family("ksoftirqd/0") == "ksoftirqd/*"
    assert kthread_family("migration/3") == "migration/*"
    assert kthread_family("rcuc/5") == "rcuc/*"
    assert kthread_family("rcu_preempt") == "rcu_preempt"


def test_switches_rates_preemptions_and_off_cpu_time():
    s = sections(profile())["switches"]
    c = s["counts"]
    assert c["voluntary_per_s"] == 6 and c["involuntary_per_s"] == 3 and c["migrations_per_s"] == 1.5
    assert c["migrated_share"] == pytest.approx(0.2)
    p = s["preemptions"]
    assert (p["total"], p["kernel_threads"], p["other_applications"], p["workload"]) == (6, 4, 1, 1)
    kworker = p["kernel_thread_families"][0]
    assert kworker["family"] == "kworker/*" and kworker["count"] == 3
    assert kworker["members"] == [{"comm": "kworker/2:1", "count": 2}, {"comm": "kworker/3:0H", "count": 1}]
    assert p["kernel_thread_families"][1] == {
        "family": "ksoftirqd/*",
        "count": 1,
        "members": [{"comm": "ksoftirqd/2", "count": 1}],
    }
    off = s["latency"]["offcpu"]
    assert off["count"] == 18 and off["min_ns"] == 10_000 and off["max_ns"] == 1 * MS
    assert off["p50_ns"] == pytest.approx(10_000, rel=0.125)  # 10 of 18 at 10 µs
    assert off["avg_ns"] == pytest.approx((10 * 10_000 + 8 * MS) / 18)
    assert off["distribution"]["10–100 µs"] == pytest.approx(10 / 18)
    assert off["distribution"]["0.1–1 ms"] + off["distribution"]["1–10 ms"] == pytest.approx(8 / 18)
    check = next(c for c in s["crosschecks"] if c["what"] == "context switches")
    assert check["values"] == {"BPF": 18, "threads' nvcsw+nivcsw": 18, "context-switches counter": 18}


def test_switches_without_bpf_fall_back_to_proc_and_say_why():
    s = sections(profile(bpf=False))["switches"]
    assert s["missing"].startswith("not measured without BPF: not root")
    assert s["counts"]["voluntary"] == 2 and s["counts"]["involuntary_per_s"] == 0.5
    assert s["counts"]["migrations"] == 3  # cpu-migrations counter
    assert s["preemptions"] is None and s["latency"] == {}


def test_faults_rates_and_latency_table():
    s = sections(profile())["faults"]
    c = s["counts"]
    assert c["source"] == "BPF" and c["minor_per_s"] == 512 and c["major_per_s"] == 1 and c["all"] == 1026
    lat = s["latency"]["all"]
    assert lat["count"] == 1026 and lat["min_ns"] == 500 and lat["max_ns"] == 50_000
    assert lat["avg_ns"] == pytest.approx(sum(FAULT_VALUES) / 1026)
    assert lat["p50_ns"] == 500 and lat["p99_ns"] == pytest.approx(2000, rel=0.125)
    # from bucket midpoints: within the bucket resolution of the exact value
    assert lat["std_ns"] == pytest.approx(np.std(FAULT_VALUES, ddof=1), rel=lat["resolution"])
    assert s["latency"]["major"]["p50_ns"] == 50_000
    assert s["system_wide"] == {"minor": 1198, "major": 2}
    minor = next(c for c in s["crosschecks"] if c["what"] == "minor faults")
    assert minor["values"] == {"BPF": 1024, "page-faults-min counter": 1024, "threads' min_flt": 1024}


def test_faults_without_bpf_count_from_the_counters_and_have_no_latency():
    s = sections(profile(bpf=False))["faults"]
    assert s["counts"]["source"].startswith("page-faults") and s["counts"]["minor"] == 1024
    assert s["latency"] is None and "not root" in s["missing"]


def test_interrupts_rates_handler_time_softirqs_and_spread():
    s = sections(profile())["interrupts"]
    hard = s["hardirq"]
    assert hard["total"]["count"] == 935 and hard["total"]["per_s"] == 467.5
    assert hard["rows"][0]["irq"] == 24 and hard["rows"][0]["avg_ns"] == 2000  # costliest first
    assert hard["total"]["workload_per_s"] == 50
    soft = {r["name"]: r for r in s["softirq"]["rows"]}
    assert soft["NET_RX"]["ns"] == 9_100_000 and soft["NET_RX"]["procfs_count"] == 910
    assert soft["TIMER"]["procfs_count"] == 600 and soft["TIMER"]["avg_ns"] == 3000
    assert s["vectors"]["rows"][0]["per_s"] == 3000
    spread = {r["irq"]: r for r in s["spread"]["rows"]}
    assert spread["24"]["cpus"] == [0, 2] and spread["24"]["top_cpu"] == 0 and spread["24"]["concentrated"]
    assert spread["24"]["top_share"] == pytest.approx(900 / 910)
    assert not spread["25"]["concentrated"] and spread["25"]["cpus"] == [0, 2, 3]
    assert "0" not in spread  # no interrupt during the profile
    assert s["spread"]["device_irqs"] == 940 and s["spread"]["cpus"] == [0, 2, 3]
    checks = {c["what"]: c["values"] for c in s["crosschecks"]}
    assert checks["device interrupts, all CPUs"] == {"BPF": 935, "/proc/interrupts": 940}
    assert checks["local timer interrupts, all CPUs"] == {"BPF": 6000, "/proc/interrupts LOC": 6000}
    assert checks["softirqs run, all CPUs"] == {"BPF": 1500, "/proc/softirqs": 1510}


def test_interrupts_without_bpf_keep_the_procfs_counts():
    s = sections(profile(bpf=False))["interrupts"]
    assert s["hardirq"] is None and "not root" in s["missing"]
    soft = {r["name"]: r for r in s["softirq"]["rows"]}
    assert soft["NET_RX"]["procfs_per_s"] == 455 and soft["NET_RX"]["count"] is None
    assert s["spread"]["device_irqs_per_s"] == 470


def test_syscalls_top_by_count_and_by_time():
    s = sections(profile())["syscalls"]
    assert [r["name"] for r in s["rows"]] == ["getppid", "read", "exit_group"]
    getppid, read = s["rows"][0], s["rows"][1]
    assert getppid["per_s"] == 500 and getppid["p50_ns"] == 100 and getppid["total_ns"] == 100_000
    assert read["errors"] == 2 and read["total_ns"] == 10 * MS and read["p99_ns"] == 1 * MS
    assert max(s["rows"], key=lambda r: r["total_ns"])["name"] == "read"
    assert s["rows"][2]["p50_ns"] is None  # exit_group never returns
    assert s["total"] == {"count": 1011, "errors": 2, "total_ns": 10_100_000, "distinct": 3, "per_s": 505.5}


def test_locks_by_total_wait_with_their_caller():
    s = sections(profile())["locks"]
    first, second = s["rows"]
    assert (first["lock"], first["kind"], first["caller"]) == ("mmap_lock", "rwsem:W", "down_write_killable+0x5c")
    assert first["avg_ns"] == 1000 and first["max_ns"] == 2000
    assert second["lock"] == "lock 0xffff888100001000" and second["caller"] == "0xffffffff8123abcd (unresolved)"
    assert s["total"] == {"locks": 2, "count": 15, "total_ns": 6000}


def test_a_lock_is_called_as_explain_calls_it():
    """The same lock, as the profile's table and --explain's causes call it:
    by the kernel side's name, by its symbol, else by who waited, and the
    note on static locks where kallsyms has no data symbols."""
    from oslens.analysis.explain import _cause

    unnamed = {"lock": "0xffff8881003c4cec", "lock_name": None, "lock_symbol": None}
    for named, symbol, callers, expected in (
        ("rq_lock (cpu 1)", None, ["try_to_wake_up+0x206"], "rq_lock"),
        (None, "tasklist_lock", ["copy_process+0x9a"], "tasklist_lock"),
        (None, None, ["try_to_wake_up+0x4e"], "a lock taken in try_to_wake_up+0x4e"),
    ):
        records = profile()
        locks = next(r for r in records if r["type"] == "locks")
        row = {**locks["rows"][0], **unnamed, "lock_name": named, "lock_symbol": symbol, "callers": callers}
        locks["rows"] = [row]
        locks["lock_symbols_unavailable"] = "kallsyms lists no data symbols"
        s = sections(records)["locks"]
        charge = {"kind": "lock", "id": row["lock"], "name": named, "lock_symbol": symbol, "callers": callers}
        _, label, _ = _cause({**charge, "lock_kind": "spinlock"})
        assert s["rows"][0]["lock"].startswith(expected) and label.startswith(expected), (s["rows"][0], label)
        assert "kallsyms lists no data symbols" in s["notes"]


def test_a_part_this_kernel_lacks_is_named():
    records = [r for r in profile(bpf_missing=["lock_contention"]) if r["type"] != "locks"]
    s = sections(records)
    assert s["locks"]["missing"] == "not measured: this kernel lacks lock_contention"
    assert s["syscalls"]["missing"] is None


def test_counters_in_a_vm_say_why_they_are_unavailable():
    s = sections(profile())["counters"]
    assert s["missing"] == f"hardware counters not available: {VM_ERROR}"
    assert all(m[scope] is None for m in s["hardware"]["metrics"] for scope in ("user", "kernel", "all"))
    software = {e["name"]: e for e in s["software"]}
    assert software["context-switches"]["per_s"] == 9 and software["task-clock"]["value"] == 54 * MS


def test_counters_split_by_privilege():
    hw = {
        ("cycles", "user"): 1_000_000,
        ("cycles", "kernel"): 3_000_000,
        ("instructions", "user"): 2_000_000,
        ("instructions", "kernel"): 1_500_000,
        ("stalled-cycles-frontend", "user"): 100_000,
        ("stalled-cycles-frontend", "kernel"): 900_000,
        ("L1-icache-misses", "user"): 2_000,
        ("L1-icache-misses", "kernel"): 30_000,
        ("iTLB-misses", "user"): 10,
    }  # iTLB-misses kernel: not supported
    s = sections(profile(hardware=hw))["counters"]
    m = {row["metric"]: row for row in s["hardware"]["metrics"]}
    assert m["ipc"]["user"] == 2 and m["ipc"]["kernel"] == 0.5 and m["ipc"]["all"] == pytest.approx(3.5 / 4)
    assert m["frontend_stalls_per_kcycle"]["kernel"] == 300 and m["frontend_stalls_per_kcycle"]["all"] == 250
    assert m["l1i_misses_per_kinstr"]["user"] == 1 and m["l1i_misses_per_kinstr"]["kernel"] == 20
    assert m["itlb_misses"]["user"] == 10 and m["itlb_misses"]["all"] is None
    assert s["hardware"]["kernel_instruction_share"] == pytest.approx(1.5 / 3.5)
    assert s["missing"] is None and s["notes"] == [f"iTLB-misses (kernel) not available: {VM_ERROR}"]


def test_multiplexed_counters_are_noted():
    records = profile(hardware={(n, sc): 1000 for n in ("cycles", "instructions") for sc in ("user", "kernel")})
    ev = next(e for e in next(r for r in records if r["type"] == "counters")["events"] if e["name"] == "cycles")
    ev["running_ns"] = ev["enabled_ns"] // 4
    notes = sections(records)["counters"]["notes"]
    assert "cycles (user) counted 25% of the time (multiplexed) and scaled up" in notes


def test_summary_target_and_bpf():
    records = profile(bpf=False) + [{"type": "threads_dropped", "count": 3}]
    summary = summarize(records)
    assert summary["target"] == {
        "mode": "command",
        "argv": ["./app", "--fast"],
        "pid": 100,
        "how": "exited",
        "time_limit_s": None,
        "code": 0,
        "signal": None,
        "wall_s": 2.0,
        "status": "ok",
        "error": None,
    }
    assert summary["bpf"]["loaded"] is False and "not root" in summary["bpf"]["why"]
    assert list(summary["sections"]) == [section_name(m) for m in SECTIONS]
    assert any("3 threads exited" in n for n in summary["sections"]["time"]["notes"])
    assert Records(records).wall_s == 2.0


@pytest.mark.parametrize(
    "end, said",
    [
        (
            {"code": None, "signal": 9, "time_limit_s": 0.5},
            "time limit of 500 ms (--time-limit) after 2 s, killed by SIGKILL",
        ),
        ({"code": 3, "signal": None, "time_limit_s": 0.5}, "after 2 s, it exited with code 3 on SIGTERM"),
        ({"code": None, "signal": 15}, "stopped at its time limit after 2 s, killed by SIGTERM"),  # a run stored before
    ],
)
def test_a_command_stopped_at_its_time_limit_is_said_so(end, said):
    records = profile()
    next(r for r in records if r["type"] == "end_target").update(how="time_limit", **end)
    line = target_line(summarize(records)["target"])
    assert said in line and "the figures cover its run until then" in line, line


@pytest.mark.parametrize("variant", ["bpf", "no-bpf", "hardware", "bpf-parts-missing", "empty"])
def test_every_section_renders_and_the_summary_is_json(variant):
    records = {
        "bpf": profile(),
        "no-bpf": profile(bpf=False),
        "hardware": profile(hardware={(n, sc): 1000 for n in ("cycles", "instructions") for sc in ("user", "kernel")}),
        "bpf-parts-missing": [
            r
            for r in profile(bpf_missing=["lock_contention", "page_faults"])
            if r["type"] not in ("locks", "faults", "switches", "irqs")
        ],
        "empty": [],
    }[variant]
    summary = summarize(records)
    json.dumps(summary, allow_nan=False)
    out = io.StringIO()
    console = Console(file=out, width=140)
    render(console, summary)
    text = out.getvalue()
    for module in SECTIONS:
        assert module.TITLE in text
    if variant == "no-bpf":
        assert "not root" in text


def test_machine_strings_are_not_read_as_markup():
    records = profile()
    for r in records:
        if r["type"] == "switches":
            r["preempted_by"][3]["comm"] = "[bold]evil[/bold]"
    out = io.StringIO()
    render(Console(file=out, width=140), summarize(records))
    assert "[bold]evil[/bold]" in out.getvalue()


def test_at_paranoid_2_user_only_counters_are_labelled_and_switches_and_faults_come_from_rusage():
    recs = profile(bpf=False)
    recs = [r for r in recs if r["type"] != "thread"]  # the command ended before /proc saw a thread
    for r in recs:
        if r["type"] == "end_target":
            r["rusage"] = {"utime_ns": 30 * MS, "stime_ns": 20 * MS, "min_flt": 900, "maj_flt": 3, "nvcsw": 40}
            r["rusage"] |= {"nivcsw": 7, "maxrss_kb": 4096}
        if r["type"] == "counters":
            for e in r["events"]:
                if e["scope"] == "all":
                    e["scope_limited"] = "user only: perf_event_paranoid=2"
                    e["value"] = 0 if e["name"] in ("context-switches", "cpu-migrations") else e["value"]
    s = sections(recs)
    sw = {c["name"]: c for c in s["counters"]["software"]}
    assert (
        sw["task-clock"]["value"] == 54 * MS
        and sw["task-clock"]["user_only"] == "user-space only (perf_event_paranoid=2)"
    )
    assert "kernel included" in sw["task-clock"]["means"]
    assert sw["page-faults-min"]["value"] == 1024 and "user mode only" in sw["page-faults-min"]["means"]
    assert sw["context-switches"]["value"] is None and "always 0" in sw["context-switches"]["error"]
    source = "rusage (wait4): the command and the descendants it waited for"
    c = s["switches"]["counts"]
    assert (c["source"], c["voluntary"], c["involuntary"], c["migrations"]) == (source, 40, 7, None)
    assert c["voluntary_per_s"] == 20
    f = s["faults"]["counts"]
    assert (f["source"], f["minor"], f["major"], f["all"]) == (source, 900, 3, 903)
    out = io.StringIO()
    render(Console(file=out, width=200), summarize(recs))
    text = out.getvalue()
    assert "task-clock, user-space only (perf_event_paranoid=2)" in text
    assert "from rusage (wait4)" in text and "not permitted" not in text
    assert "no context-switch count from any source" not in text and "no page-fault count" not in text
