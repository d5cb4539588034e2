"""Reading procfs/sysfs the same way in every collector.

Anything that cannot be read becomes {"unavailable": reason}, so a result
always says why a figure is missing instead of dropping the key or writing 0.
The module name starts with an underscore so discovery skips it: it is not a
collector.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def unavailable(reason: str) -> dict:
    return {"unavailable": reason}


def is_unavailable(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"unavailable"}


def read_text(path: str | os.PathLike) -> str:
    # sysfs files can hold bytes that are not UTF-8 (DMI strings from firmware).
    return Path(path).read_text(errors="replace").strip()


def read_or_reason(path: str | os.PathLike, missing: str | None = None) -> str | dict:
    """The stripped contents of `path`, or {"unavailable": why}.

    `missing` replaces the generic "does not exist" message when the absence of
    the file means something specific (a kernel option, a driver).
    """
    try:
        return read_text(path)
    except FileNotFoundError:
        return unavailable(missing or f"{path} does not exist")
    except PermissionError:
        return unavailable(f"permission denied reading {path}")
    except OSError as e:
        return unavailable(f"cannot read {path}: {e.strerror or e}")


def int_or_reason(path: str | os.PathLike, missing: str | None = None) -> int | dict:
    text = read_or_reason(path, missing)
    if is_unavailable(text):
        return text
    try:
        return int(text)
    except ValueError:
        return unavailable(f"{path} holds {text!r}, not an integer")


def bracketed_choice(text: str) -> str:
    """The selected word of a sysfs choice file ("always [madvise] never")."""
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    raise ValueError(f"no [selected] choice in {text!r}")


def read_cpuinfo(path: str | os.PathLike = "/proc/cpuinfo") -> list[dict[str, str]]:
    """/proc/cpuinfo as one dict per processor block.

    Some architectures (arm64) print a trailing block with machine-wide fields;
    it is kept, callers pick the fields they need from the first block that
    has them.
    """
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in read_text(path).splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition(":")
        if sep:
            current[key.strip()] = value.strip()
    if current:
        blocks.append(current)
    return blocks


def cpuinfo_field(blocks: list[dict[str, str]], *names: str) -> str | None:
    """The first value of the first of `names` present in any block."""
    for name in names:
        for block in blocks:
            if name in block:
                return block[name]
    return None


def cpuinfo_flags(blocks: list[dict[str, str]]) -> set[str] | None:
    """The x86 "flags" line as a set; None elsewhere.

    arm64's "Features" line is deliberately not used: the flags callers ask
    about (constant_tsc, hypervisor, ...) are x86 names, and their absence
    from an arm64 list would read as a false "no".
    """
    text = cpuinfo_field(blocks, "flags")
    return None if text is None else set(text.split())
