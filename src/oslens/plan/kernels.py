"""`oslens study kernels`: the applications of Luo et al.'s re-run of
MOSBENCH and PHOENIX, each an `appscale` application of one run: a real
kernel build, psearchy in threads and in processes, and the PHOENIX
kernels, every one on every CPU count."""

from __future__ import annotations

import re
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from typing import Iterator

from .. import engine, kbuild
from ..errors import UsageError
from ..parse import parse_worker_counts
from . import Plan, check_reps
from .appscale import DIR_PLACEHOLDER, AppPoint, substitute

# where the kernel tree goes in a gmake point's argv, until it is unpacked
TREE = "{kbuild}"
OUT = "{kbuild-out}"
CONFIG, PAPER_CONFIG = "tinyconfig", "defconfig"


@dataclass(frozen=True)
class Application:
    name: str
    what: str
    workload: str | None  # the engine's built-in; None: the kernel build
    mode: str = "thread"
    placement: str = "compact"
    # its size: about a second on one CPU of a slow machine, and with --paper several
    # seconds, as the paper's large inputs ran (a workload's own default is a quick check)
    size: int | None = None
    paper_size: int | None = None


APPLICATIONS = {
    a.name: a
    for a in (
        Application("gmake", "MOSBENCH gmake: make -j of the Linux source", None),
        Application("psearchy-threads", "MOSBENCH psearchy: one process, a thread per CPU", "psearchy", "thread",
                    size=16000, paper_size=100000),
        Application("psearchy-processes", "psearchy: a process per CPU, CPUs taken socket by socket", "psearchy",
                    "process", size=16000, paper_size=100000),
        Application("psearchy-processes-rr", "psearchy: a process per CPU, CPUs taken round robin over sockets",
                    "psearchy", "process", "spread", size=16000, paper_size=100000),
        Application("kmeans", "PHOENIX kmeans", "kmeans", size=500000, paper_size=5000000),
        Application("wordcount", "PHOENIX word_count", "wordcount", size=8000000, paper_size=100000000),
        Application("linreg", "PHOENIX linear_regression", "linreg", size=1 << 27, paper_size=1 << 28),
        Application("matmul", "PHOENIX matrix_multiply", "matmul", size=1000, paper_size=2000),
        Application("pca", "PHOENIX pca", "pca", size=3000, paper_size=6000),
        Application("strmatch", "PHOENIX string_match", "strmatch", size=20000000, paper_size=1 << 28),
    )
}  # fmt: skip


# --build-target: a relative path inside the kernel tree or a make target,
# given to `make -C TREE` as one argument; checked before anything is unpacked
BUILD_TARGET_CHARS = re.compile(r"[A-Za-z0-9_./-]+")
BUILD_TARGET_MAX = 200
BUILD_TARGET_ACCEPTED = (
    "give a directory of the kernel tree such as kernel/ or lib/math/, or a make target such as vmlinux "
    "(letters, digits, '_', '.', '-' and '/'; relative, inside the tree)"
)


def check_build_target(text: str) -> str:
    """`text` if it names a part of the kernel tree to build: a relative
    path inside the tree (kernel/, lib/math/) or a make target (vmlinux);
    else a UsageError saying why and what is accepted. No absolute path,
    no '..', '.' or empty part (one trailing '/' is a directory's), no
    leading '-' (make would read an option), nothing but [A-Za-z0-9_./-]
    (no '=' of a variable, no shell or make syntax)."""
    shown = text if text.isprintable() else text.encode("unicode_escape").decode()
    parts = (text[:-1] if text.endswith("/") else text).split("/")
    if not text.strip():
        why = "is empty"
    elif len(text) > BUILD_TARGET_MAX:
        why = f"is longer than {BUILD_TARGET_MAX} characters"
    elif not BUILD_TARGET_CHARS.fullmatch(text):
        why = "has a character other than letters, digits, '_', '.', '-' and '/'"
    elif text.startswith("/"):
        why = "is an absolute path, not one inside the kernel tree"
    elif text.startswith("-"):
        why = "starts with '-', which make would take for an option"
    elif ".." in parts:
        why = "goes up out of the kernel tree ('..')"
    elif "" in parts or "." in parts:
        why = "has an empty or '.' part"
    else:
        return text
    raise UsageError(f"--build-target: '{shown}' {why}: {BUILD_TARGET_ACCEPTED}")


# Why the kernel build cannot run in a guest (study kernels --kernels)
NO_BUILD_IN_GUEST = "a guest holds only the engine: no compiler and no kernel source to build"


# psearchy's input files are 1-8 KiB each (engine/apps/psearchy.c), held in a guest's memory
PSEARCHY_FILE_MAX = 8 << 10


def check_in_guests(apps: str | None, cpus: str | None, guest_cpus: int, guest_mib: int, paper: bool) -> None:
    """Refuses, before any guest is made, what cannot run in the guests:
    an application unknown or needing what a guest lacks, CPU counts the
    guest has not, an input larger than half the guest's memory."""
    # 2 sockets: whether round robin over sockets differs is the guest's to say
    chosen, _ = _chosen(apps, sockets=2, in_guest=True)
    try:
        parse_worker_counts(cpus, guest_cpus, option="--cpu-counts")
    except UsageError as e:
        raise UsageError(f"{e}: the machine here is each guest, of {guest_cpus} vCPUs (--guest cpus=N)") from None
    sizes = [a.paper_size if paper else a.size for a in chosen if a.workload == "psearchy"]
    need_mib = max(sizes, default=0) * PSEARCHY_FILE_MAX >> 20
    if 2 * need_mib > guest_mib:
        raise UsageError(f"--guest: psearchy's input (up to {need_mib:,} MiB) needs a guest of mem={2 * need_mib}M "
                         f"or more, not {guest_mib:,} MiB")  # fmt: skip


def _chosen(apps: str | None, sockets: int, in_guest: bool = False) -> tuple[list[Application], dict[str, str]]:
    """The applications to run, and those of the default set left out, with why."""
    skipped: dict[str, str] = {}
    if apps:
        names = [a.strip() for a in apps.split(",") if a.strip()]
        unknown = [n for n in names if n not in APPLICATIONS]
        if unknown or not names:
            bad = (unknown or [apps])[0]
            raise UsageError(f"--apps: no application '{bad}' (there are: {', '.join(APPLICATIONS)})")
        chosen = [APPLICATIONS[n] for n in dict.fromkeys(names)]
    else:
        chosen = list(APPLICATIONS.values())
    one_socket = "one socket here: round robin over sockets takes the same CPUs as socket by socket"
    no_build = NO_BUILD_IN_GUEST if in_guest else kbuild.unavailable()
    for a in list(chosen):
        why = one_socket if a.placement == "spread" and sockets < 2 else no_build if a.workload is None else None
        if not why:
            continue
        if apps:
            raise UsageError(f"--apps {a.name}: {why}")
        chosen.remove(a)
        skipped[a.name] = why
    return chosen, skipped


def plan(
    *,
    cpus: str | None,
    reps: int,
    apps: str | None,
    paper: bool,
    build_target: str | None = None,
    in_guest: bool = False,
) -> Plan:
    """in_guest: the study runs in a guest of one of --kernels, made already (engine.inside)."""
    if build_target is not None:  # first: nothing is asked of the machine for a target refused
        check_build_target(build_target)
    check_reps(reps)
    topo = engine.topology()
    available, sockets = topo["available"], topo.get("packages", 1)
    counts = parse_worker_counts(cpus, available, option="--cpu-counts")
    chosen, skipped = _chosen(apps, sockets, in_guest)
    if build_target is not None and not any(a.workload is None for a in chosen):
        if "gmake" in skipped:
            raise UsageError(f"--build-target is for the kernel build, which cannot run here: {skipped['gmake']}")
        raise UsageError("--build-target is for the kernel build, which --apps leaves out")
    known = engine.workloads()
    points, sizes = [], {}
    for a in chosen:
        if a.workload is None:
            argv = ["make", "-s", "-C", TREE, f"O={OUT}", "-j{n}", *([build_target] if build_target else [])]
            prepare: list[str] = ["make", "-s", "-C", TREE, f"O={OUT}", "clean"]
        else:
            size = a.paper_size if paper else a.size
            sizes[a.name] = size
            data_dir = DIR_PLACEHOLDER if known[a.workload].get("uses_dir") else None
            engine.check_app(a.workload, workers=max(counts), mode=a.mode, size=size, data_dir=data_dir)
            argv = engine.app_argv(a.workload, workers="{n}", mode=a.mode, size=size, data_dir=data_dir)
            prepare = []
        points += [
            AppPoint(n, tuple(engine.placement(n, a.placement)), substitute(argv, n), a.name, substitute(prepare, n))
            for n in counts
        ]
    params = {
        "study": "kernels",
        "apps": [a.name for a in chosen],
        "what": {a.name: a.what for a in chosen},
        "modes": {a.name: a.mode for a in chosen if a.workload},
        "placements": {a.name: a.placement for a in chosen},
        "skipped": skipped,
        "sizes": sizes,
        "kbuild": {"config": PAPER_CONFIG if paper else CONFIG, "target": build_target or "the whole kernel"}
        if any(a.workload is None for a in chosen)
        else None,
        "cpus": counts,
        "reps": reps,
        "paper": paper,
        "available_cpus": available,
        "sockets": sockets,
    }
    return Plan(points, reps, params)


@contextmanager
def prepared(p: Plan) -> Iterator[list[AppPoint]]:
    """The inputs made once, untimed: psearchy's files, the kernel tree
    unpacked and configured; removed at the end whatever happens."""
    from ..appscale import workload_input

    with ExitStack() as stack:
        swap: dict[str, str] = {}
        workloads = {APPLICATIONS[a].workload for a in p.params["apps"]}
        if "psearchy" in workloads:
            size = min(s for a, s in p.params["sizes"].items() if APPLICATIONS[a].workload == "psearchy")
            swap[DIR_PLACEHOLDER] = stack.enter_context(workload_input("psearchy", size))
        if p.params["kbuild"]:
            tree = stack.enter_context(kbuild.configured(p.params["kbuild"]["config"]))
            p.params["kbuild"].update(tree.describe())
            swap[TREE], swap[OUT] = str(tree.source), str(tree.out)

        def filled(argv: tuple[str, ...]) -> tuple[str, ...]:
            out = []
            for a in argv:
                for token, value in swap.items():
                    a = a.replace(token, value)
                out.append(a)
            return tuple(out)

        yield [replace(pt, argv=filled(pt.argv), prepare=filled(pt.prepare)) for pt in p.points]
