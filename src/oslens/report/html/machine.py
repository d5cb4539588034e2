"""Where the runs were made, side by side, and what about the machine makes
their numbers less trustworthy."""

from __future__ import annotations

from ...envs import made
from ...format import pct, size
from .page import Note, Section, Table

LOAD_LIMIT = 0.10


def _get(d: dict, *path, default="–"):
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return default
        d = d[p]
    if isinstance(d, dict) and "unavailable" in d:
        return f"unavailable: {d['unavailable']}"
    return d


def _as(fmt, x, *args):
    """A figure through its formatter; what _get said instead of one, as it is."""
    return fmt(x, *args) if isinstance(x, (int, float)) and not isinstance(x, bool) else x


def _governors(freq) -> str:
    if not isinstance(freq, dict) or "governor" not in freq:
        return _get({"f": freq}, "f")
    return ", ".join(f"{g} (CPUs {','.join(map(str, cpus))})" for g, cpus in freq["governor"].items())


def rows(m: dict) -> list[tuple[str, object]]:
    cpu, kernel, load = m.get("cpu", {}), m.get("kernel", {}), m.get("load", {})
    mitigations = kernel.get("mitigations", {})
    vulnerable = [k for k, v in mitigations.items() if isinstance(v, str) and v.startswith("Vulnerable")]
    env = m.get("environment") or {}
    where = f"a {env['name']} ({made(env)})" if env else "native"
    return [
        ("where it ran", where),
        ("host", _get(load, "hostname")),
        ("kernel", _get(kernel, "release")),
        ("kernel build", _get(kernel, "version")),
        ("CPU", _get(cpu, "model_name")),
        ("CPUs online / allowed", f"{_get(cpu, 'online_cpus')} / {_get(cpu, 'allowed_cpus', 'count')}"),
        (
            "sockets · cores · threads per core",
            f"{_get(cpu, 'topology', 'packages')} · {_get(cpu, 'topology', 'cores')}"
            f" · {_get(cpu, 'topology', 'threads_per_core')}",
        ),
        ("NUMA nodes", _get(cpu, "topology", "numa_nodes")),
        ("SMT active", _get(cpu, "smt", "active")),
        ("frequency governor", _governors(cpu.get("frequency"))),
        ("turbo", _get(cpu, "turbo")),
        ("clock source", _get(kernel, "clocksource", "current")),
        ("preemption", _get(kernel, "preemption", "build")),
        ("THP", _get(kernel, "thp", "enabled")),
        ("vulnerable to", ", ".join(vulnerable) or "nothing listed"),
        ("load before the run (busy share)", _as(pct, _get(load, "busy_share"), 1)),
        ("memory available", _as(size, _get(load, "mem_available_bytes"))),
    ]


def warnings(m: dict) -> list[str]:
    """What, about the machine, makes a number less trustworthy."""
    out = []
    if (m.get("environment") or {}).get("note"):
        out.append(f"in a {m['environment']['name']}: {m['environment']['note']}")
    cpu, load = m.get("cpu", {}), m.get("load", {})
    freq = cpu.get("frequency", {})
    if isinstance(freq, dict) and "governor" in freq:
        loose = [g for g in freq["governor"] if g != "performance"]
        if loose:
            out.append(
                f"frequency governor {', '.join(loose)} (not 'performance'): the clock may change during the run"
            )
    elif isinstance(freq, dict) and "unavailable" in freq:
        out.append(
            f"CPU frequency is not under the kernel's control here ({freq['unavailable']}): the host may change it"
        )
    if _get(cpu, "smt", "active") is True:
        out.append("SMT is active: workers placed on sibling threads share a core (scale runs mark such points)")
    busy = load.get("busy_share")
    if isinstance(busy, (int, float)) and busy > LOAD_LIMIT:
        out.append(f"the machine was {busy:.0%} busy just before the run: others competed for the CPUs")
    if cpu.get("flags", {}).get("hypervisor"):
        out.append("a virtual machine: steal time and a virtual clock may distort short measurements")
    tuning = m.get("tuning") or {}
    loose = [name for name, t in tuning.items() if isinstance(t, dict) and t.get("tuned") is False]
    if loose:
        out.append(f"not tuned for measuring: {', '.join(loose)} (oslens tune show says what each does; "
                   "oslens tune apply sets them)")  # fmt: skip
    return out


def sections(runs) -> list[Section]:
    labels = [r.short for r in runs]
    names = [n for n, _ in rows(runs[0].run.machine)]
    values = [[v for _, v in rows(r.run.machine)] for r in runs]
    table_rows = [[name, *(vals[i] for vals in values)] for i, name in enumerate(names)]
    blocks = [Table("machine and kernel", ["", *labels], table_rows)]
    for r in runs:
        blocks.append(
            Note(
                f"{r.short}: {r.run.kind}, {r.run.status}, started {r.run.started}; "
                f"command: {' '.join(map(str, r.run.argv))}"
            )
        )
        if r.run.status != "complete":
            blocks.append(
                Note(f"{r.short} is {r.run.status}" + (f": {r.run.reason}" if r.run.reason else ""), warning=True)
            )
        for w in warnings(r.run.machine):
            blocks.append(Note(f"{r.short}: {w}", warning=True))
    return [Section("Machine", blocks)]
