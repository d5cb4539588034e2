"""The house rules a newcomer can run: ruff (lint and format) for Python.
They run with the tests so that a change that breaks them fails CI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PY_TREES = ["src", "tests", "bench"]


def ruff() -> list[str]:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if exe is None:
        pytest.skip("ruff is not installed (pip install '.[test]')")
    return [exe]


def test_ruff_lint_is_clean():
    p = subprocess.run(
        [*ruff(), "check", "--output-format", "concise", *PY_TREES], cwd=ROOT, capture_output=True, text=True
    )
    assert p.returncode == 0, p.stdout + p.stderr


def test_ruff_format_is_clean():
    p = subprocess.run([*ruff(), "format", "--check", *PY_TREES], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
