"""Talking to oslens-engine: finding it, asking what it offers, running it.

The engine prints JSON lines; this module turns them into dicts as they
arrive and makes sure that, whatever happens to the engine, nothing it made
is left behind (see `EngineRun.close`)."""
from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .errors import MeasurementError, UsageError

ENGINE = "oslens-engine"
STOP_GRACE_S = 20.0


def engine_path() -> Path:
    """The engine inside the installed package, or $OSLENS_ENGINE, or a
    development build in the source tree."""
    candidates = []
    if os.environ.get("OSLENS_ENGINE"):
        candidates.append(Path(os.environ["OSLENS_ENGINE"]))
    here = Path(__file__).resolve().parent
    candidates += [here / "_bin" / ENGINE, here.parents[1] / "engine" / "build" / ENGINE]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise UsageError(f"{ENGINE} not found (looked in {', '.join(map(str, candidates))}); run 'make install'")


@dataclass(frozen=True)
class ProbeInfo:
    name: str
    summary: str
    subsystem: str
    syscalls: tuple[str, ...]
    variants: tuple[str, ...]
    variant_help: dict
    variant_syscalls: dict
    options: dict  # name -> {"default", "min", "max", "help"}
    static: bool
    timed: bool    # has a per-operation latency (latency can measure it)


def _query(*args: str) -> list[dict]:
    proc = subprocess.run([str(engine_path()), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise MeasurementError(f"{ENGINE} {' '.join(args)} failed: {proc.stderr.strip()}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


@functools.lru_cache(maxsize=1)
def probes() -> dict[str, ProbeInfo]:
    out = {}
    for r in _query("list"):
        out[r["name"]] = ProbeInfo(
            name=r["name"], summary=r["summary"], subsystem=r["subsystem"],
            syscalls=tuple(r["syscalls"]),
            variants=tuple(v["name"] for v in r["variants"]),
            variant_help={v["name"]: v["help"] for v in r["variants"]},
            variant_syscalls={v["name"]: tuple(v["syscalls"]) for v in r["variants"]},
            options={o["name"]: o for o in r["options"]}, static=r["static"], timed=r["timed"])
    return out


@functools.lru_cache(maxsize=1)
def topology() -> dict:
    return _query("topology")[0]


def placement(n: int, policy: str) -> list[int]:
    """The CPUs the engine would give n workers under `policy`."""
    return _query("plan", str(n), policy)[0]["cpus"]


class EngineRun:
    """One engine process; iterate it for its records.

    Signals: Ctrl-C reaches the engine through the terminal's process group
    and it stops in order; when we are the ones asked to stop (SIGTERM, or an
    exception), `close` forwards SIGINT and waits for the engine's own
    clean-up. Only if the engine cannot clean up (SIGKILL) do we remove what
    its `resources` records announced."""

    def __init__(self, args: list[str], confine_to: list[int] | None = None):
        """confine_to: CPUs the whole engine, its master included, must stay on
        (a competitor's master must never wake on the CPUs being measured)."""
        self.argv = [str(engine_path()), *args]
        confine = (lambda: os.sched_setaffinity(0, confine_to)) if confine_to else None
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1, preexec_fn=confine)
        self.resources: dict = {}
        self.end: dict | None = None
        self._closed = False
        self.errors: list[str] = []
        self.stderr = ""

    def __iter__(self) -> Iterator[dict]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.strip():
                continue
            rec = json.loads(line)
            kind = rec.get("type")
            if kind == "resources":
                self.resources = rec
            elif kind == "error":
                self.errors.append(rec["message"])
            elif kind == "end":
                self.end = rec
            yield rec

    def close(self) -> int:
        """Waits for the engine (stopping it if still running) and removes
        anything it could not; returns its exit status."""
        if self._closed:
            return self.proc.returncode
        self._closed = True
        if self.proc.poll() is None:
            self._stop()
        rc = self.proc.wait()
        if self.proc.stderr is not None:
            self.stderr = self.proc.stderr.read().strip()
            self.proc.stderr.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if self.end is None:
            self._remove_leftovers()
        return rc

    def _stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            # The engine's workers die with it (PR_SET_PDEATHSIG).
            self.proc.kill()

    def _remove_leftovers(self) -> None:
        tmpdir = self.resources.get("tmpdir")
        if tmpdir and Path(tmpdir).name.startswith("oslens."):
            shutil.rmtree(tmpdir, ignore_errors=True)
        for semid in self.resources.get("sysv_sem", []):
            subprocess.run(["ipcrm", "-s", str(semid)], capture_output=True)

    def failure(self) -> str:
        """The engine's own words for why it failed."""
        if self.errors:
            return "; ".join(self.errors)
        if self.stderr:
            return self.stderr.splitlines()[-1].removeprefix(f"{ENGINE}: ")
        return f"{ENGINE} exited with status {self.proc.returncode}"

    def __enter__(self) -> "EngineRun":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
