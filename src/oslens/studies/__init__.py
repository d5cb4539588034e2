"""The published experiments oslens re-runs, their findings kept as data
(one CSV per study, beside this module), never as prose in code; verdict.py
sets a finding beside this machine's measurement."""

from __future__ import annotations

import csv
import io
from importlib import resources


def findings(study: str) -> list[dict[str, str]]:
    """The rows of a study's findings table."""
    text = resources.files(__package__).joinpath(f"{study}.csv").read_text()
    return list(csv.DictReader(io.StringIO(text)))


def load(study: str) -> list:
    """A study's findings as verdict.Finding (the shared columns: README of the project's shared/studies)."""
    from .verdict import Finding

    return [Finding.of(row) for row in findings(study)]
