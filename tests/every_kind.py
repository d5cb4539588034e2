"""One small run of every kind of run (kinds.KINDS), made on first use in
one store for the whole session: the recipes that hold every kind to the
same contracts (strict JSON, numbers as a person reads them, non-empty
exports, a report that loads). A kind without a recipe fails the suite; a
recipe whose prerequisite this machine lacks (root for a block device, MPI,
podman) is skipped with the reason, never passed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

import oslens
from oslens import engine

from conftest import NCPU, io_target
from conftest import oslens as cli


def _mpi() -> str | None:
    try:
        engine.mpi_engine_path()
    except Exception as e:  # UsageError: says what to install
        return str(e)
    return None if shutil.which("mpirun") else "mpirun (Open MPI) is not installed"


def _servers() -> str | None:
    from oslens import servers

    missing = [exe for exe in ("nginx", "wrk") if servers.find(exe) is None]
    return f"{' and '.join(missing)} not installed (scripts/install-deps.sh servers)" if missing else None


# A string a user may type that is markup if a report forgets to escape it.
HOSTILE = "<img src=x onerror=alert(1)>"


@dataclass(frozen=True)
class Recipe:
    args: Callable[[], list[str]]
    lacking: Callable[[], str | None] = lambda: None  # why this machine cannot make it, or None


RECIPES: dict[str, Recipe] = {
    "scale": Recipe(lambda: ["scale", "--probe", "dup,getppid", "--workers", f"1,{NCPU}", "--duration", "0.1",
                             "--reps", "2", "--warmup", "0.05"]),
    "latency": Recipe(lambda: ["latency", "--probe", "getppid,fault:anon", "--duration", "0.05", "--reps", "2",
                               "--warmup", "0.02"]),
    "noise": Recipe(lambda: ["noise", "--duration", "0.3", "--warmup", "0.05"]),
    "timerlat": Recipe(lambda: ["timerlat", "--duration", "0.3", "--warmup", "0.05", "--period-us", "500"]),
    "profile": Recipe(lambda: ["profile", "--", "sh", "-c", "for i in 1 2 3; do ls /proc > /dev/null; done", HOSTILE]),
    "appscale": Recipe(lambda: ["appscale", "--workload", "kmeans", "--size", "50000", "--cpu-counts", f"1,{NCPU}",
                                "--reps", "1"]),
    "io": Recipe(lambda: ["io", "--target", io_target(), "--engine", "pread", "--workers", f"1,{NCPU}",
                          "--duration", "0.2", "--warmup", "0.05", "--reps", "2"]),
    "envs": Recipe(lambda: ["envs", "getppid", "--envs", "native", "--ops", "2000", "--rounds", "2"]),
    "cluster": Recipe(lambda: ["cluster", "noise", "--duration", "0.3", "--ranks", "2"], _mpi),
    "serve": Recipe(lambda: ["serve", "--server", "nginx", "--warmup", "0.3", "--duration", "0.5"], _servers),
}  # fmt: skip


class EveryKind:
    """The store and one run of each kind, each made on first use."""

    def __init__(self, db: Path):
        self.db = db
        self.ids: dict[str, int] = {}
        self.made: dict[tuple[str, str], str | Path] = {}  # (what, kind) -> output, made once

    def id(self, kind: str) -> int:
        recipe = RECIPES[kind]
        why = recipe.lacking()
        if why:
            pytest.skip(f"no {kind} run here: {why}")
        if kind not in self.ids:
            p = cli("-q", *recipe.args(), db=self.db, stdin=subprocess.DEVNULL)
            assert p.returncode == 0, p.stderr
            self.ids[kind] = oslens.Store(self.db).last(kind=kind).id
        return self.ids[kind]

    def run(self, kind: str) -> oslens.Run:
        """The kind's run, read through the Python API."""
        run_id = self.id(kind)
        return oslens.Store(self.db).run(run_id)

    def again(self, kind: str) -> int:
        """A second run of the same recipe (to compare with the first)."""
        self.id(kind)
        p = cli("-q", *RECIPES[kind].args(), db=self.db, stdin=subprocess.DEVNULL)
        assert p.returncode == 0, p.stderr
        return oslens.Store(self.db).last(kind=kind).id

    def _once(self, what: str, kind: str, make: Callable[[int], str | Path]) -> str | Path:
        """An output of the kind's run, made by the first test that reads it:
        the run does not change, so neither does what is made of it."""
        if (what, kind) not in self.made:
            self.made[what, kind] = make(self.id(kind))
        return self.made[what, kind]

    def show_json(self, kind: str) -> str:
        def make(run_id: int) -> str:
            p = cli("show", str(run_id), "--json", db=self.db)
            assert p.returncode == 0, p.stderr
            return p.stdout

        return self._once("show --json", kind, make)

    def show_text(self, kind: str) -> str:
        """What `show` prints, at a width that folds no figure."""

        def make(run_id: int) -> str:
            env = {**os.environ, "OSLENS_DB": str(self.db), "COLUMNS": "220"}
            p = subprocess.run([sys.executable, "-m", "oslens", "show", str(run_id)], capture_output=True, text=True,
                               env=env, timeout=300)  # fmt: skip
            assert p.returncode == 0, p.stderr
            return p.stdout + p.stderr

        return self._once("show", kind, make)

    def export(self, kind: str, fmt: str) -> str | Path:
        """The main frame exported as `fmt`: the text printed for csv and json,
        the file written for parquet (which is never printed)."""

        def make(run_id: int) -> str | Path:
            out = self.db.parent / f"main-{kind}.parquet"
            p = cli("export", str(run_id), "--format", fmt, *(["-o", str(out)] if fmt == "parquet" else []), db=self.db)
            assert p.returncode == 0, p.stderr
            return out if fmt == "parquet" else p.stdout

        return self._once(f"export {fmt}", kind, make)

    def report(self, kind: str) -> Path:
        """The kind's HTML report, beside the store."""

        def make(run_id: int) -> Path:
            page = self.db.parent / f"report-{kind}.html"
            p = cli("report", str(run_id), "-o", str(page), db=self.db)
            assert p.returncode == 0, p.stderr
            return page

        return self._once("report", kind, make)


def strict_json(text: str):
    """json.loads that refuses NaN and ±Infinity, as strict parsers do."""

    def refuse(word):
        raise ValueError(f"not JSON: {word}")

    return json.loads(text, parse_constant=refuse)
