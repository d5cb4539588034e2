"""The registry of what a run owns (oslens.owned): a type of resource
registered by a test, and nowhere else, is swept after its owner is
SIGKILLed; a line of a type no one can load is left alone and said, never
dropped; the registry sits at the bottom of the package."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from oslens import owned, runtime
from test_imports import SRC, imports_of

# A type of resource no module of oslens knows: a file, removed by unlinking it.
SYNTHETIC = """
import os

from oslens import owned


def _remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        return "gone"
    return "removed"


RESOURCE = owned.Resource(remove=_remove, describe=lambda path: f"synthetic file {path}")
"""

# Its owner: registers the type, writes its file down, makes it, and is killed.
OWNER = """
import os, signal, sys
from oslens import owned, runtime
owned.register("synthetic", "synthetic_resource:RESOURCE")
runtime.start()
runtime.note("synthetic", sys.argv[1])
open(sys.argv[1], "w").close()
os.kill(os.getpid(), signal.SIGKILL)
"""


def _env(tmp_path: Path, with_type: bool = True) -> dict:
    """The environment of an oslens with (or without) the synthetic type's
    module on its path, and the test's own runtime directory and store."""
    plugin = tmp_path / "plugin"
    plugin.mkdir(exist_ok=True)
    (plugin / "synthetic_resource.py").write_text(SYNTHETIC)
    path = [str(plugin)] if with_type else []
    path += [str(SRC), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    (tmp_path / "rt").mkdir(exist_ok=True)
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(path),
        "OSLENS_RUNTIME_DIR": str(tmp_path / "rt"),
        "OSLENS_DB": str(tmp_path / "r.db"),
    }


def _killed_owner(tmp_path: Path) -> Path:
    made = tmp_path / "made-by-the-dead"
    p = subprocess.run([sys.executable, "-c", OWNER, str(made)], env=_env(tmp_path), capture_output=True, text=True)
    assert p.returncode == -signal.SIGKILL, p.stderr
    assert made.exists()
    return made


def _oslens(tmp_path: Path, *args: str, with_type: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "oslens", *args],
        env=_env(tmp_path, with_type),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_type_registered_in_a_test_is_swept_after_a_sigkill_of_its_owner(tmp_path):
    made = _killed_owner(tmp_path)
    (entry,) = (tmp_path / "rt").iterdir()
    assert (entry / "owns").read_text().splitlines()[-2:] == [
        "type synthetic synthetic_resource:RESOURCE",
        f"synthetic {made}",
    ]

    p = _oslens(tmp_path, "doctor", "--dry-run", "--json")
    assert p.returncode == 0, p.stderr
    found = [x for x in json.loads(p.stdout)["leftovers"] if x["kind"] == "synthetic"]
    assert found == [
        {"owner": entry.name, "kind": "synthetic", "what": f"synthetic file {made}", "action": "would remove"}
    ]
    assert made.exists()

    p = _oslens(tmp_path, "workloads")  # any command sweeps first
    assert p.returncode == 0, p.stderr
    assert not made.exists()
    assert not entry.exists()


def test_a_line_of_a_type_that_cannot_be_loaded_is_left_alone_and_said(tmp_path):
    made = _killed_owner(tmp_path)
    (entry,) = (tmp_path / "rt").iterdir()
    p = _oslens(tmp_path, "doctor", "--json", with_type=False)  # its module is not there
    assert p.returncode == 0, p.stderr
    (found,) = [x for x in json.loads(p.stdout)["leftovers"] if x["kind"] == "synthetic"]
    assert found["what"] == str(made) and found["action"].startswith("left alone: ")
    assert made.exists() and entry.exists(), "kept, for an oslens that can load the type"
    assert _oslens(tmp_path, "workloads").returncode == 0
    assert not made.exists() and not entry.exists()


def test_a_kind_no_type_removes_is_refused_before_anything_is_made():
    with pytest.raises(owned.UnknownType):
        runtime.note("no-such-kind", "/nowhere")


@pytest.mark.parametrize("kind", sorted(owned.TYPES))
def test_every_declared_type_loads_and_is_its_modules_only_use_of_the_name(kind):
    assert isinstance(owned.get(kind), owned.Resource)
    # assigned once at the top of its module: a Resource given a name the
    # module already used (kvm's GUEST, its agent's file name) replaces it
    module, _, attr = owned.TYPES[kind].partition(":")
    path = SRC / "oslens" / (module.lstrip(".").replace(".", "/") + ".py")
    tree = ast.parse(path.read_text())
    assigned = [node.targets for node in tree.body if isinstance(node, ast.Assign)]
    names = [t.id for targets in assigned for t in targets if isinstance(t, ast.Name)]
    names += [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert names.count(attr) == 1, f"{path.name} binds {attr} {names.count(attr)} times"


def test_types_are_removed_in_the_tables_order_registered_ones_first():
    assert owned.ordered(["tmpdir", "device", "mine", "scheduler", "container"]) == [
        "mine",
        "container",
        "scheduler",
        "device",
        "tmpdir",
    ]


def test_the_registry_imports_nothing_of_oslens():
    assert imports_of(SRC, "oslens")["oslens.owned"] == set()
