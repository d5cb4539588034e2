"""CPU lists in the kernel's format ("0-3,8,10-11"): the one parser and
printer of the package, for sysfs files and for what users type alike. It
imports nothing of oslens."""

from __future__ import annotations

import re
from typing import Iterable

# ASCII digits only: str.isdigit() also accepts '²', which int() refuses.
_PART = re.compile(r"^([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?$")
# No kernel numbers a CPU this high (NR_CPUS is at most 8192 today): a bound,
# so that a mistyped range is refused rather than expanded until memory runs out.
MAX_CPU = 65535


def expand(text: str) -> list[int]:
    """Every CPU of a list, in the order written, repeats kept (so a caller
    can refuse them). Raises ValueError naming the part that is not a CPU or
    a range; ranges may carry a stride (":step", the cmdline form)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        m = _PART.match(part)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))) or m.group(3) == "0":
            raise ValueError(part)
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi > MAX_CPU:
            raise ValueError(f"{part} (no CPU is numbered above {MAX_CPU})")
        cpus.extend(range(lo, hi + 1, int(m.group(3) or 1)))
    return cpus


def parse_cpulist(text: str) -> list[int]:
    """The CPUs of a list, sorted, each once (empty text: none)."""
    return sorted(set(expand(text)))


def format_cpulist(cpus: Iterable[int]) -> str:
    """The inverse of parse_cpulist: compact ranges, as the kernel prints them."""
    ordered = sorted(set(cpus))
    parts = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def format_siblings(groups: Iterable[Iterable[int]]) -> str:
    """SMT siblings used together, one group per core ("0+48"); runs of
    pairs that both go up by one are written as ranges ("0-15+48-63": 0 with
    48, 1 with 49, … 15 with 63), as Intel numbers them."""
    gs = sorted(tuple(sorted(g)) for g in groups)
    parts, i = [], 0
    while i < len(gs):
        j = i
        while (
            len(gs[i]) == 2
            and j + 1 < len(gs)
            and len(gs[j + 1]) == 2
            and gs[j + 1][0] == gs[j][0] + 1
            and gs[j + 1][1] == gs[j][1] + 1
        ):
            j += 1
        parts.append(f"{gs[i][0]}-{gs[j][0]}+{gs[i][1]}-{gs[j][1]}" if j > i else "+".join(map(str, gs[i])))
        i = j + 1
    return ",".join(parts)
