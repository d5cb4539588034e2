"""How busy the machine was just before the run: a result measured on a loaded
machine must say so.

Keys:
  loadavg          {1min, 5min, 15min}
  tasks_running, tasks_total        from /proc/loadavg
  window_s         length of the /proc/stat sampling window
  busy_share       share of all CPU time that was busy (all but idle and iowait)
  steal_share      share stolen by the hypervisor
  busiest_cpu      {cpu, busy_share}: one busy CPU spoils a pinned worker even
                   when the machine-wide share is low
  mem_total_bytes, mem_available_bytes
  uptime_s, hostname, timestamp (ISO 8601, UTC), timestamp_unix
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone

from ._read import read_or_reason, read_text, unavailable

NAME = "load"

WINDOW_S = 0.2

# /proc/stat columns after the "cpuN" label. guest and guest_nice are already
# counted inside user and nice, so they are left out of the total.
_USER, _NICE, _SYSTEM, _IDLE, _IOWAIT, _IRQ, _SOFTIRQ, _STEAL = range(8)


def read_stat_cpus() -> dict[str, list[int]]:
    """{"cpu": aggregate ticks, "cpu0": ..., ...} from /proc/stat."""
    ticks = {}
    for line in read_text("/proc/stat").splitlines():
        if line.startswith("cpu"):
            label, *fields = line.split()
            ticks[label] = [int(f) for f in fields]
    return ticks


def shares(before: list[int], after: list[int]) -> tuple[float, float] | None:
    """(busy, steal) shares of the ticks elapsed between two samples, or None
    if no tick elapsed (the window is shorter than the tick)."""
    delta = [a - b for a, b in zip(after[: _STEAL + 1], before[: _STEAL + 1])]
    total = sum(delta)
    if total <= 0:
        return None
    busy = total - delta[_IDLE] - delta[_IOWAIT]
    return busy / total, delta[_STEAL] / total


def _cpu_shares() -> dict:
    try:
        before = read_stat_cpus()
        time.sleep(WINDOW_S)
        after = read_stat_cpus()
    except (OSError, ValueError) as e:
        reason = unavailable(f"cannot read /proc/stat: {e}")
        return {"busy_share": reason, "steal_share": reason, "busiest_cpu": reason}
    if len(before.get("cpu", [])) <= _STEAL:
        reason = unavailable("/proc/stat has no steal column (kernel too old)")
        return {"busy_share": reason, "steal_share": reason, "busiest_cpu": reason}
    total = shares(before["cpu"], after["cpu"])
    if total is None:
        reason = unavailable(f"no CPU tick elapsed in {WINDOW_S} s")
        return {"busy_share": reason, "steal_share": reason, "busiest_cpu": reason}
    per_cpu = []
    for label in before:
        if label != "cpu" and label in after:
            s = shares(before[label], after[label])
            if s is not None:
                per_cpu.append((s[0], int(label[3:])))
    busiest = (
        {"cpu": max(per_cpu)[1], "busy_share": max(per_cpu)[0]}
        if per_cpu
        else unavailable(f"no per-CPU tick elapsed in {WINDOW_S} s")
    )
    return {"busy_share": total[0], "steal_share": total[1], "busiest_cpu": busiest}


def _loadavg() -> dict:
    text = read_or_reason("/proc/loadavg")
    if isinstance(text, dict):
        return {"loadavg": text, "tasks_running": text, "tasks_total": text}
    one, five, fifteen, tasks, _last_pid = text.split()
    running, total = tasks.split("/")
    return {
        "loadavg": {"1min": float(one), "5min": float(five), "15min": float(fifteen)},
        "tasks_running": int(running),
        "tasks_total": int(total),
    }


def _meminfo() -> dict:
    keys = {"MemTotal": "mem_total_bytes", "MemAvailable": "mem_available_bytes"}
    text = read_or_reason("/proc/meminfo")
    if isinstance(text, dict):
        return {k: text for k in keys.values()}
    found = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in keys:
            value, *unit = rest.split()
            found[keys[name]] = int(value) * (1024 if unit == ["kB"] else 1)
    # MemAvailable exists since Linux 3.14.
    return {k: found.get(k, unavailable(f"no {name} in /proc/meminfo")) for name, k in keys.items()}


def _uptime() -> float | dict:
    text = read_or_reason("/proc/uptime")
    return text if isinstance(text, dict) else float(text.split()[0])


def collect() -> dict:
    now = time.time()
    return {
        **_loadavg(),
        "window_s": WINDOW_S,
        **_cpu_shares(),
        **_meminfo(),
        "uptime_s": _uptime(),
        "hostname": os.uname().nodename,
        "timestamp": datetime.fromtimestamp(now, timezone.utc).isoformat(),
        "timestamp_unix": now,
    }
