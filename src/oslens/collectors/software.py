"""The user-space software a result was produced with.

Keys: python, oslens, libc, distribution.
"""

from __future__ import annotations

import os
import platform
import shlex

from ..version import __version__
from ._read import unavailable

NAME = "software"

# The os-release specification: /etc wins, /usr/lib is the vendor fallback.
OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")


def _libc() -> str | dict:
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        version = None
    if version:
        return version
    # musl and other C libraries do not answer this glibc-specific name.
    return unavailable("os.confstr('CS_GNU_LIBC_VERSION') gave nothing (not glibc)")


def parse_os_release(text: str) -> dict[str, str]:
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            try:
                words = shlex.split(value)
            except ValueError:
                words = [value]
            fields[key.strip()] = " ".join(words)
    return fields


def _distribution() -> str | dict:
    for path in OS_RELEASE:
        try:
            with open(path, errors="replace") as f:
                fields = parse_os_release(f.read())
        except FileNotFoundError:
            continue
        except OSError as e:
            return unavailable(f"cannot read {path}: {e.strerror or e}")
        for key in ("PRETTY_NAME", "NAME"):
            if fields.get(key):
                return fields[key]
        return unavailable(f"{path} has neither PRETTY_NAME nor NAME")
    return unavailable(f"none of {', '.join(OS_RELEASE)} exists")


def collect() -> dict:
    return {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "oslens": __version__,
        "libc": _libc(),
        "distribution": _distribution(),
    }
