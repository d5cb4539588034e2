"""The registry of kinds of run: each kind declared once, here.

A kind of run is one module per layer, and one entry below naming them:

    command   the CLI command (click), which plans and measures: commands/<kind>.py
    plan      the planner, from options to engine invocations: plan/<kind>.py
    analyze   (run, records) -> a summary with .to_dict(): what `show --json`
              prints and the store keeps: analysis/<kind>.py
    render    (console, run, summary) -> the terminal tables: report/<kind>.py
    sections  (list of report.html.RunData) -> HTML sections: report/html/<kind>.py
    metrics   (run, records) -> {name: Metric}, what `compare` can test
    frames    (run, records) -> {name: pandas.DataFrame}, the tidy tables of
              the Python API and of `export`: frames/<kind>.py
    columns   {frame: {column: (dtype, meaning)}}, every frame's columns
              declared: frames/<kind>.py's COLUMNS
    what      (params) -> one short line for `oslens runs`

and the facts generic code asks of a kind:

    once      why its runs cannot be tested against each other, when they
              measure once (a profile is one run of a command): `compare`
              shows their changes and says this instead of judging them
    in_envs   it takes `--in ENV` (envs/); the others refuse it, in a
              sentence made from this table
    studies   the published studies (STUDIES.md) re-run as runs of this
              kind: `oslens study NAME`, and the verdicts its summary carries
    stacks    (run, records) -> {point: analysis.kstacks.PointSamples}, its
              sampled kernel functions per point, when it samples stacks:
              `compare` lists the functions that changed most

Layers are named as "module:attribute" and imported only when used, so
listing runs never loads numpy, pandas or the plotting libraries. `show`,
`runs`, the printers, `compare`, `report`, `export` and the API read this
registry and nothing else about kinds."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from .cpulist import format_cpulist
from .errors import UsageError


def _load(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module, __package__), attr)


@dataclass(frozen=True)
class Study:
    """A published experiment re-run as a run of its kind: `command` (click)
    plans and measures it, marking the run's params with `study: name`;
    `verdicts` (summary, run, records) -> [{…}] sets the paper's findings
    beside what was measured, carried in the summary as `study`; `context`
    (run) -> [line], what a reader needs beside them (the CPU's
    mitigations, for a table of call costs)."""

    name: str
    command: str
    verdicts: str
    context: str = ""
    paper: str = ""  # who found what, where: what `oslens study` lists
    findings: str = ""  # its findings file in studies/ (the shared columns), if it has one
    # ([(kernel, environment, records)] of runs) -> a verdict row: its finding that one run cannot
    # tell (kernels compared), judged by `compare` of two of its runs
    across: str = ""

    def load(self, part: str) -> Any:
        return _load(getattr(self, part))


@dataclass(frozen=True)
class Kind:
    name: str
    description: str
    command: str
    plan: str
    analyze: str
    render: str
    sections: str
    metrics: str
    frames: str
    columns: str
    what: Callable[[dict], str]
    once: str = ""
    in_envs: bool = False
    studies: tuple[Study, ...] = ()
    stacks: str = ""

    def load(self, layer: str) -> Any:
        """The layer's object, imported now."""
        return _load(getattr(self, layer))

    @property
    def repeated(self) -> bool:
        """Its runs repeat the measurement, so `compare` can test a difference."""
        return not self.once


def _command_line(p: dict) -> str:
    return f"pid {p['pid']}" if p.get("pid") is not None else " ".join(p.get("command") or [])


def _app(p: dict) -> str:
    if p.get("apps"):
        return ", ".join(p["apps"]) if len(p["apps"]) <= 4 else f"{len(p['apps'])} applications"
    return f"workload {p['workload']}" if p.get("workload") else " ".join(p.get("command") or [])


def _probes(p: dict) -> str:
    probes = p.get("probes", [])
    return ",".join(probes) if len(probes) <= 5 else f"{len(probes)} operations"


def _kind(name: str, description: str, what: Callable[[dict], str], **facts: Any) -> Kind:
    """A kind whose layers are at their usual places."""
    return Kind(
        name=name,
        description=description,
        command=f".commands.{name}:command",
        plan=f".plan.{name}:plan",
        analyze=f".analysis.{name}:analyze",
        render=f".report.{name}:show",
        sections=f".report.html.{name}:sections",
        metrics=f".analysis.{name}:metrics",
        frames=f".frames.{name}:frames",
        columns=f".frames.{name}:COLUMNS",
        what=what,
        **facts,
    )


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        _kind(
            "scale",
            "Does each OS primitive scale with cores? (OSMark-style)",
            _probes,
            in_envs=True,
            studies=(
                Study(
                    "osmark",
                    ".commands.study:osmark",
                    ".analysis.osmark:beside",
                    paper="Cui, Chen and Shi, OSMark: parallel scalability of OS primitives "
                    "(32-core AMD, Linux 2.6.26)",
                ),
                Study(
                    "codesign",
                    ".commands.study:codesign",
                    ".analysis.codesign:beside",
                    ".analysis.codesign:context",
                    paper="Nellans, OS/hardware co-design (dissertation): per-call cost on a Pentium 4, run lengths, "
                    "OS-caused misses, the block layer",
                    findings="nellans-codesign",
                ),
            ),
            stacks=".analysis.scale:stacks",
        ),
        _kind(
            "latency",
            "What does each operation cost, and how variable is it?",
            _probes,
            in_envs=True,
            studies=(
                Study(
                    "variability",
                    ".commands.study:variability",
                    ".analysis.variability:beside",
                    paper="Kocoloski et al., variability in operating systems: every core issuing system calls at "
                    "once, median and p99 tables (64 cores; native, KVM, Docker)",
                    findings="kocoloski-variability",
                ),
            ),
        ),
        _kind(
            "noise",
            "How much does the OS interrupt a thread that only computes, and why?",
            lambda p: f"CPUs {format_cpulist(p.get('cpus', []))}, {p.get('duration_s', '?')} s",
            in_envs=True,
        ),
        _kind(
            "timerlat",
            "How late does a real-time thread wake from a periodic timer, and why?",
            lambda p: (
                f"CPUs {format_cpulist(p.get('cpus', []))}, every {p.get('period_us', '?')} µs, "
                f"{p.get('duration_s', '?')} s"
            ),
            in_envs=True,
        ),
        Kind(
            name="profile",
            description="Where does a workload's time go in the kernel?",
            command=".commands.profile:command",
            plan=".plan.profile:check_target",
            analyze=".profile.summary:analyze",
            render=".profile.summary:show",
            sections=".report.html.profile:sections",
            metrics=".profile.summary:metrics",
            frames=".frames.profile:frames",
            columns=".frames.profile:COLUMNS",
            what=_command_line,
            stacks=".profile.summary:stacks",
            once="a profile is one run of a command: with one value on each side no significance test is "
            "possible; the changes are shown, not judged (repeat the profile, or use appscale, to test them)",
        ),
        _kind(
            "envs",
            "What does a container or a VM cost an operation, in its tail above all?",
            lambda p: f"{_probes(p)} in {', '.join(p.get('envs', []))}",
        ),
        _kind(
            "io",
            "Does the block layer's IOPS grow with the CPUs issuing I/O, and what does each I/O cost?",
            lambda p: f"{','.join(p.get('engines', []))} on {(p.get('target') or {}).get('path', '?')}",
        ),
        _kind(
            "cluster",
            "What does OS noise on each node do to a job that spans them all?",
            lambda p: (
                f"{p.get('measure', '?')} on {p.get('ranks') or 'the'} ranks of '{' '.join(p.get('launch', []))}'"
            ),
        ),
        _kind(
            "serve",
            "Where does real server software spend its time in the kernel, under load?",
            lambda p: f"{','.join(p.get('servers', []))} on CPUs {format_cpulist(p.get('server_cpus', []))}",
            studies=(
                Study(
                    "scaleout",
                    ".commands.study:scaleout",
                    ".analysis.scaleout:beside",
                    paper="Zheng et al., scale-out workloads (CloudSuite) on Linux 2.6.38: kernel time, context "
                    "switches, page faults, interrupts, locks",
                    findings="zheng-scaleout",
                ),
            ),
        ),
        _kind(
            "appscale",
            "Does an application speed up with cores, and is the time lost in the kernel?",
            lambda p: f"{_app(p)} on {','.join(map(str, p.get('cpus', [])))} CPUs",
            in_envs=True,  # the engine's built-in workloads (commands/appscale.py refuses a command)
            studies=(
                Study(
                    "kernels",
                    ".commands.study:kernels",
                    ".analysis.kernels:beside",
                    paper="Luo et al., does the Linux kernel scale for real applications (MOSBENCH, PHOENIX and "
                    "PARSEC on 48 cores; Linux 2.6.32 against 4.10)",
                    findings="luo-kernels",
                    across=".analysis.kernels:across_kernels",
                ),
            ),
        ),
    )
}


def get(name: str, run_id: int | None = None) -> Kind:
    """The kind of that name; a run of a kind this oslens does not know is a usage error."""
    kind = KINDS.get(name)
    if kind is None:
        of = f"run {run_id} is a '{name}' run" if run_id is not None else f"'{name}' is a kind of run"
        raise UsageError(f"{of}, which this oslens does not know (it knows {', '.join(KINDS)})")
    return kind


def study(name: str) -> Study:
    """The study of that name, of whichever kind runs it."""
    for kind in KINDS.values():
        for s in kind.studies:
            if s.name == name:
                return s
    raise UsageError(
        f"no study '{name}' (the studies are {', '.join(s.name for k in KINDS.values() for s in k.studies)})"
    )


def no_environments(name: str) -> str | None:
    """Why the kind `name` refuses --in, or None when it takes it."""
    if KINDS[name].in_envs:
        return None
    takers = [k.name for k in KINDS.values() if k.in_envs]
    return f"{name} takes no environment; --in is for {', '.join(takers[:-1])} and {takers[-1]}"
