"""Where the engine runs: natively (the default: nothing to make), in a
container, or (later) in a KVM guest. One module per environment made; each is a context manager that
makes its environment on entry and removes it on exit, and says how to run
the engine inside (`engine_argv`) and how it was made (`describe`).

`--in ENV[:KEY=VALUE,…]` names one. The Python side stays on the host: while
`engine.inside(env)` holds, every engine query (probes, topology, checks)
and every invocation runs inside, and its JSON lines come back here."""

from __future__ import annotations

import importlib
from typing import Protocol

from ..errors import UsageError

# name -> module (envs/<module>.py), each with `KEYS` and `make(opts)`;
# native, the host itself, needs nothing made
ENVIRONMENTS = {"container": "container"}


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


def parse(spec: str) -> Environment | None:
    """An environment from `--in`, checked before anything runs; None for
    native (the engine as installed, on the host)."""
    name, _, rest = spec.partition(":")
    if name == "native":
        if rest:
            raise UsageError("--in native takes no options")
        return None
    if name not in ENVIRONMENTS:
        raise UsageError(f"--in: unknown environment '{name}' (known: native, {', '.join(ENVIRONMENTS)})")
    module = importlib.import_module(f".{ENVIRONMENTS[name]}", __package__)
    return module.make(parse_options(rest, module.KEYS, name))
