"""Machine and kernel metadata that every result carries.

Each collector is one module in this package exposing `NAME: str` and
`collect() -> dict`; adding a collector means adding a module, nothing else.
Modules whose name starts with an underscore are helpers, not collectors.

A collector that fails is recorded as {"unavailable": "<ExceptionType>: <msg>"}
so one unreadable corner of a machine never costs the whole run its metadata.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

# the sysfs readers the collectors use, for the modules outside that read sysfs too
from ._read import bracketed_choice, read_text, unavailable

__all__ = ["bracketed_choice", "collect_machine", "collector_modules", "machine_metadata", "read_text", "unavailable"]


def _failure(exc: BaseException) -> dict:
    return {"unavailable": f"{type(exc).__name__}: {exc}"}


def _module_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def collector_modules() -> list[ModuleType]:
    """The collector modules of this package, in module-name order."""
    return [importlib.import_module(f"{__name__}.{name}") for name in _module_names()]


def collect_machine() -> dict:
    """Runs every collector: {collector NAME: its dict or {"unavailable": ...}}."""
    result: dict[str, dict] = {}
    for module_name in _module_names():
        try:
            module = importlib.import_module(f"{__name__}.{module_name}")
        except Exception as e:  # a broken module still leaves a trace under its file name
            result[module_name] = _failure(e)
            continue
        name = getattr(module, "NAME", module_name)
        if name in result:
            # Two collectors writing one key would silently lose data: a bug in
            # this package, not a property of the machine, so fail loudly.
            raise RuntimeError(f"collector name {name!r} used by more than one module")
        try:
            data = module.collect()
            if not isinstance(data, dict):
                raise TypeError(f"collect() returned {type(data).__name__}, not dict")
        except Exception as e:
            data = _failure(e)
        result[name] = data
    return result


def machine_metadata() -> dict:
    """What every run stores of its machine: every collector's facts, the
    topology the engine sees and the engine's path; inside an environment
    (--in), the inside's facts, the host's kept beside them."""
    from .. import engine  # the collectors alone read no engine

    meta = collect_machine()
    meta["topology"] = engine.topology()
    meta["engine"] = str(engine.engine_path())
    env = engine.environment()
    if env is not None:  # the topology above is the inside's
        # what the environment saw inside (a guest's kernel) replaces the
        # host's, which is kept beside it
        for name, facts in env.pop("inside", {}).items():
            env.setdefault("host", {})[name] = meta.get(name)
            meta[name] = facts
        meta["environment"] = env
    return meta
