"""How a contended kernel lock is called, in `profile`'s lock table and in
`--explain`'s causes alike."""

from __future__ import annotations

from .format import plural

# Why a static lock (a kernel variable such as tasklist_lock) has no name:
# kallsyms lists only functions without CONFIG_KALLSYMS_ALL.
NO_DATA_SYMBOLS = (
    "kallsyms lists no data symbols (CONFIG_KALLSYMS_ALL is off): a static lock is named only by its callers"
)


def lock_label(name: str | None, symbol: str | None, callers: list[str], address: str) -> str:
    """The name the BPF side gave the lock from where it lives (the waiter's
    mmap_lock, a CPU's rq_lock: engine/bpf/locknames.h), else its kernel
    symbol (a static lock, where kallsyms lists data symbols), else the code
    that waited for it; its address only when none of these is known."""
    if name or symbol:
        return name or symbol
    return f"a lock taken in {callers[0]}" if callers else f"lock {address}"


def stacks_lost_note(waits: int, what: str = "wait") -> str:
    """What a count of lock waits whose stack was not kept means: who waited
    there is not known. kstack_take (engine/bpf/kstack.bpf.h) fails when its
    table is full, and, rarely, when the kernel gives no stack."""
    return (
        f"no stack kept for {plural(waits, what)} (the kernel's stack table was full, or gave no stack): "
        "who waited is not known there"
    )
