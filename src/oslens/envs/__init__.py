"""Where the engine runs: natively (the default: nothing to make), in a
container, or in a KVM guest. One module per environment made; each is a context manager that
makes its environment on entry and removes it on exit, and says how to run
the engine inside (`engine_argv`) and how it was made (`describe`).

`--in ENV[:KEY=VALUE,…]` names one. The Python side stays on the host: while
`engine.inside(env)` holds, every engine query (probes, topology, checks)
and every invocation runs inside, and its JSON lines come back here."""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path
from typing import Protocol

from .. import engine
from ..errors import UsageError

# name -> module (envs/<module>.py), each with `KEYS` and `make(opts)`;
# native, the host itself, needs nothing made
ENVIRONMENTS = {"container": "container", "kvm": "kvm"}

# Where the engines are inside an environment, and which: the engines as
# installed here — the dynamic one with the libraries it loads (so that inside
# and native run the same binaries: a static worker's fork copies fewer
# mappings than a dynamic one's), the static one the fork-static probe is
# handed to, and the worker images their fresh workers exec.
INSIDE_DIR = "/oslens"
INSIDE = f"{INSIDE_DIR}/{engine.ENGINE}"
ENGINE_SUFFIXES = ("", "-worker", "-static", "-worker-static")


def _libraries(exe: Path) -> dict[str, Path]:
    """The shared libraries and the loader of a dynamic executable, at the
    paths it asks for them (from ldd), each the file a link there names."""
    out = subprocess.run(["ldd", str(exe)], capture_output=True, text=True).stdout
    found: dict[str, Path] = {}
    for line in out.splitlines():
        parts = line.split()
        path = parts[2] if len(parts) >= 3 and parts[1] == "=>" else parts[0] if parts else ""
        if path.startswith("/"):
            found[path] = Path(path).resolve()
    return found


def engine_files(env: str) -> dict[str, Path]:
    """{path inside: file here} of what an environment's image holds."""
    here = engine.engine_path()
    files = {f"{INSIDE_DIR}/{here.name}{suffix}": here.with_name(here.name + suffix) for suffix in ENGINE_SUFFIXES}
    missing = [p.name for p in files.values() if not p.is_file()]
    if missing:
        raise UsageError(f"--in {env} needs {', '.join(missing)} beside the engine; run 'make install'")
    try:
        libraries = _libraries(here)
    except FileNotFoundError:
        raise UsageError(f"--in {env} needs ldd, to find the libraries the engine loads") from None
    return {**files, **libraries}


class Environment(Protocol):
    name: str

    def __enter__(self) -> "Environment": ...

    def __exit__(self, *exc) -> None: ...

    def engine_argv(self) -> list[str]:
        """The host argv that runs the engine inside (its arguments follow)."""
        ...

    def describe(self) -> dict:
        """Where the run ran and how the environment was made (run metadata)."""
        ...

    def kallsyms(self) -> str | None:
        """/proc/kallsyms of the kernel the engine runs on inside, where that
        is not the host's (a guest's); None where it is (a container)."""
        ...

    def kernel_config(self) -> dict:
        """The build configuration of the kernel the engine runs on inside,
        as collectors.kernel.build_config gives it ({source, options}, or why
        it is unavailable)."""
        ...


def last_line(text: str) -> str:
    """A tool's last non-empty line of output: its reason, when it fails."""
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def made(env: dict) -> str:
    """How an environment was made, from its description (run metadata):
    "qemu, tcg; 16 vCPUs (2×4×2, 2 nodes), 2048 MiB"; "podman, runc"."""
    line = ", ".join(str(env[k]) for k in ("runtime", "oci_runtime", "accel") if env.get(k) not in (None, "default"))
    shape = env.get("shape")
    if shape:
        line += (
            f"; {shape['cpus']} vCPUs ({shape['sockets']}×{shape['cores']}×{shape['threads']}, "
            f"{shape['numa']} nodes), {shape['mem_mib']} MiB"
        )
    return line


def parse_options(text: str, keys: dict[str, str], env: str) -> dict[str, str]:
    """KEY=VALUE,… of an environment, each key one it knows. A part without
    '=' continues the value before it (cpuset=0-3,8)."""
    out: dict[str, str] = {}
    last = None
    for item in filter(None, text.split(",")):
        key, eq, value = item.partition("=")
        if not eq and last is not None:
            out[last] += "," + item
            continue
        if not eq or not value:
            raise UsageError(f"--in {env}: '{item}' is not KEY=VALUE")
        if key not in keys:
            raise UsageError(f"--in {env}: unknown key '{key}' (known: {', '.join(sorted(keys))})")
        if key in out:
            raise UsageError(f"--in {env}: '{key}' given twice")
        out[key] = value
        last = key
    return out


def parse(spec: str, option: str = "--in") -> Environment | None:
    """An environment from `--in` (or another option taking the same specs,
    named in its refusals), checked before anything runs; None for native
    (the engine as installed, on the host)."""
    try:
        return _parse(spec)
    except UsageError as e:
        # the environments word their refusals for --in, the option most
        # commands have; the user is told the option they typed
        raise UsageError(option + str(e).removeprefix("--in")) from None


def planned_cpus(env: Environment | None) -> int | None:
    """How many CPUs a parsed environment will have, known from its spec
    before it is made (a container's cpuset, a guest's vCPUs), so that a
    plan is checked before anything is made; None for native."""
    if env is None:
        return None
    cpuset = getattr(env, "cpuset", None)
    return len(cpuset) if cpuset is not None else env.shape.cpus


def _parse(spec: str) -> Environment | None:
    name, _, rest = spec.partition(":")
    if name == "native":
        if rest:
            raise UsageError("--in native takes no options")
        return None
    if name not in ENVIRONMENTS:
        raise UsageError(f"--in: unknown environment '{name}' (known: native, {', '.join(ENVIRONMENTS)})")
    module = importlib.import_module(f".{ENVIRONMENTS[name]}", __package__)
    return module.make(parse_options(rest, module.KEYS, name))
