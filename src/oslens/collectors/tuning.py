"""How the machine was tuned for measuring (oslens tune): each setting of
tune.py as the run found it.

Keys: one per setting name, each {tuned: true|false, now: [values],
wanted}, or {unavailable: why it cannot be read or changed here}; and
`pending`, how many files an `oslens tune apply` changed that no reset has
put back."""

from __future__ import annotations

NAME = "tuning"


def collect() -> dict:
    from .. import tune

    out: dict = {}
    for s in tune.status():
        d = s.to_dict()
        out[s.name] = {"unavailable": s.unavailable} if s.unavailable else {k: d[k] for k in ("tuned", "now", "wanted")}
    out["pending"] = len(tune.pending())
    return out
