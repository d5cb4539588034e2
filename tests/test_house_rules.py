"""The house rules a newcomer can run: ruff (lint and format) for Python,
clang-format (.clang-format, the kernel's style) for C. They run with the
tests so that a change that breaks them fails CI."""

from __future__ import annotations

import re
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


# The version the tree is formatted with: another major version may wrap a
# few lines differently, which says nothing about the code.
CLANG_FORMAT_MAJOR = 14


def c_files() -> list[str]:
    p = subprocess.run(["git", "ls-files", "*.c", "*.h"], cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip("not a git checkout: the C files are the ones git tracks")
    return p.stdout.split()


def test_c_is_in_the_house_style():
    exe = shutil.which("clang-format")
    if exe is None:
        pytest.skip("clang-format is not installed (scripts/install-deps.sh test installs it)")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    major = re.search(r"version (\d+)", version)
    if not major or int(major.group(1)) != CLANG_FORMAT_MAJOR:
        pytest.skip(f"the tree is formatted with clang-format {CLANG_FORMAT_MAJOR}; this is {version.strip()}")
    files = c_files()
    assert any(f.startswith("engine/") for f in files)
    p = subprocess.run([exe, "--dry-run", "--Werror", *files], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]


def test_the_venv_runs_on_an_interpreter_anyone_may_run():
    """`make` builds .venv on the system's python3: one under root's home
    (pyenv, mode 700) would make `.venv/bin/oslens` root's alone."""
    import stat
    import sys

    cfg = Path(sys.prefix) / "pyvenv.cfg"
    if not cfg.exists():
        pytest.skip("not running from a venv")
    home = next(line.split("=", 1)[1].strip() for line in cfg.read_text().splitlines() if line.startswith("home"))
    path = Path(home).resolve()
    for d in [path, *path.parents]:
        assert d.stat().st_mode & stat.S_IXOTH, f"{d} is not searchable by other users: the venv's interpreter is not"


def test_the_readme_links_only_to_what_a_clone_has_and_names_real_commands():
    from click.testing import CliRunner

    from oslens.cli import cli

    root = Path(__file__).parents[1]
    text = (root / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if "://" not in target:
            assert (root / target).resolve().is_relative_to(root), f"README links outside the clone: {target}"
            assert (root / target).exists(), f"README links to a missing file: {target}"
    listed = CliRunner().invoke(cli, ["--help"]).output
    for command in set(re.findall(r"`oslens ([a-z]+)", text)):
        assert re.search(rf"^\s+{command}\b", listed, re.M), f"README names 'oslens {command}', which does not exist"


def test_the_readmes_examples_name_probes_the_engine_has():
    # pingpong:pipe-same, a variant that never existed, was an example a reader copied
    from oslens.parse import parse_probes

    text = (ROOT / "README.md").read_text()
    named = re.findall(r"oslens [^\n`]*?--probe ([\w:,-]+)", text)
    named += [",".join(m.split()) for m in re.findall(r"oslens envs((?: [a-z][\w:-]*)+)", text)]
    assert named
    for probes in named:
        parse_probes(probes)  # raises on a probe or variant the engine does not have
