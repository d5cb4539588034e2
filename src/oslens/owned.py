"""The registry of what a run owns: every type of thing an oslens process
makes and must remove (a temporary directory, a SysV semaphore set, a
cgroup, a block device, a disk's I/O scheduler, a container, a guest),
declared once, here.

A type is one `Resource` in the module that makes such things, and one
entry below naming it. The process writes a line `KIND WHAT` in its
runtime entry before it makes the thing (`runtime.note`); whatever ends
it, the line is read back by the one code that removes: its own exit
(`runtime.release`), the sweep every oslens does at start of what dead
ones left, and `oslens doctor`, which is that sweep saying what it found.
`leftovers.py`, what the leak tests count, asks the same types what of
theirs exists now.

Types are named as "module:attribute" and imported only when a line of
theirs is read, so a start with nothing to sweep imports none of them.

This module imports nothing of oslens: every layer may register."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Iterable

# kind -> where its Resource is, in the order things are removed: what holds
# or uses the others first (a container's or a guest's processes, a cgroup's),
# a disk's scheduler put back before the device it is on goes, the temporary
# directories last (a guest's kernel and keys, a loop device's neighbours).
TYPES: dict[str, str] = {
    "container": ".envs.container:CONTAINER",
    "guest": ".envs.kvm:QEMU",
    "cgroup": ".cgroups:CGROUP",
    "scheduler": ".blockdev.scheduler:SCHEDULER",
    "device": ".blockdev.devices:DEVICE",
    "sem": ".runtime:SEM",
    "tmpdir": ".runtime:TMPDIR",
}

# Types that also find by name what a dead oslens made and never wrote down
# (an older oslens, or one with no usable runtime directory): every sweep
# loads them to ask.
SCANNED = ("cgroup", "tmpdir")

# The word of the line that, in an entry, names where a registered type is.
TYPE_LINE = "type"


def _as_is(what: str) -> str:
    return what


@dataclass(frozen=True)
class Resource:
    """How one type of owned thing is found and removed, from the argument
    of its line (`WHAT` in `KIND WHAT`)."""

    # Removes it, and says what became of it: "removed" (or "restored",
    # "stopped"), "gone" (nothing to do: not listed), "left alone" (not
    # ours after all), or "failed: why".
    remove: Callable[[str], str]
    # How doctor and the leak checks name it.
    describe: Callable[[str], str] = _as_is
    # (arguments of its lines, written on this boot?) -> the things they
    # name that are there now, to remove; by default all of them. Called only
    # for lines of this boot unless across_boots.
    present: Callable[[list[str], bool], list[str]] | None = None
    # Whether a line written on an earlier boot still names something: a
    # directory on disk does; a device, a process, a SysV id do not (they
    # went with the boot, and their names come again).
    across_boots: bool = False
    # () -> (owner, what) of those a dead oslens made that no line names;
    # only for a type in SCANNED.
    stale: Callable[[], list[tuple[str, str]]] | None = None
    # () -> what of this type exists now, any oslens's: what leak checks count.
    existing: Callable[[], list[str]] | None = None
    # What doctor --dry-run says it would do.
    would: str = "would remove"

    def there(self, args: list[str], same_boot: bool) -> list[str]:
        """What of the things these lines name is to be removed now."""
        if not same_boot and not self.across_boots:
            return []
        return self.present(args, same_boot) if self.present else list(args)


class UnknownType(LookupError):
    """A kind no entry of TYPES names and no one registered."""


_added: dict[str, str] = {}  # kind -> "module:attribute", registered at run time
_loaded: dict[str, Resource] = {}


def register(kind: str, where: str) -> None:
    """A type not in TYPES (a plugin's, a test's): `where` is
    "module:attribute" of its Resource, a module any oslens here can import.
    An entry that holds a line of it also holds `type KIND WHERE`, so the
    oslens that sweeps it after this process is dead loads the type too.
    Removed before the types of TYPES."""
    if kind == TYPE_LINE or not kind or " " in kind or kind in TYPES:
        raise ValueError(f"oslens.owned: '{kind}' cannot be registered")
    module, _, attr = where.partition(":")
    if not module or not attr or module.startswith("."):
        raise ValueError(f"oslens.owned: '{where}' is not module:attribute")
    _added[kind] = where
    _loaded.pop(kind, None)


def where(kind: str) -> str:
    """Where the type of kind is; UnknownType if nowhere."""
    found = TYPES.get(kind) or _added.get(kind)
    if found is None:
        raise UnknownType(f"oslens.owned: no type '{kind}' (an entry of TYPES, or register())")
    return found


def get(kind: str, at: str | None = None) -> Resource:
    """The type of kind, imported now; `at`: where an entry said it is, for a
    type this process has not registered. UnknownType if there is none, or
    an ImportError/AttributeError if it cannot be loaded."""
    if kind in _loaded:
        return _loaded[kind]
    spec = TYPES.get(kind) or _added.get(kind) or at
    if spec is None:
        raise UnknownType(f"oslens.owned: no type '{kind}'")
    module, _, attr = spec.partition(":")
    found = getattr(importlib.import_module(module, __package__), attr)
    if not isinstance(found, Resource):
        raise TypeError(f"oslens.owned: {spec} is not a Resource")
    _loaded[kind] = found
    return found


def ordered(kinds: Iterable[str]) -> list[str]:
    """The kinds given, in the order their things are removed: those not in
    TYPES first (as given), then TYPES' own order."""
    kinds = list(dict.fromkeys(kinds))
    rank = {k: i for i, k in enumerate(TYPES)}
    return [k for k in kinds if k not in rank] + sorted((k for k in kinds if k in rank), key=rank.__getitem__)
