"""Figures about oslens come from data: every bench/results file the docs
cite is in the repository, says what produced it (the command, the kernel,
the date) and holds rows; where the docs quote the command that writes it,
it is the command the file says wrote it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "engine" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CITED = re.compile(r"bench/results/[\w.-]+\.json")


def cited() -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for doc in DOCS:
        for name in CITED.findall(doc.read_text()):
            out.setdefault(name, []).append(doc)
    return out


def test_the_docs_cite_data_files():
    assert cited(), "no bench/results file is cited: the figures about oslens would come from nowhere"


@pytest.mark.parametrize("name", sorted(cited()))
def test_a_cited_data_file_says_what_produced_it(name):
    doc = json.loads((ROOT / name).read_text())
    assert doc["command"].startswith("python bench/") and f"--out {name}" in doc["command"], doc["command"]
    assert doc["kernel"] and doc["date"] and doc["rows"], name
    for where in cited()[name]:
        # a quoted command that writes this file is the one that did (its words joined across lines)
        text = " ".join(where.read_text().split())
        for quoted in re.findall(r"`(python bench/[^`]*--out " + re.escape(name) + r")`", text):
            assert quoted == doc["command"], (where.name, quoted, doc["command"])
