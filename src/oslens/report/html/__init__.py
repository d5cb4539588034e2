"""`oslens report`: runs from the store as one self-contained HTML file (or
their figures as PNG/SVG files). One module per kind of run turns runs of
that kind into sections; `machine` describes where they ran and what makes
their numbers less trustworthy. Several runs of one kind are overlaid, so
`oslens report A B` is a comparison."""

from __future__ import annotations

from dataclasses import dataclass

from ... import kinds
from ...store import Run
from . import machine, study
from .page import Page


@dataclass
class RunData:
    run: Run
    records: list[dict]

    @property
    def label(self) -> str:
        kernel = self.run.machine.get("kernel", {}).get("release", "?")
        return f"run {self.run.id} · {self.run.host} · Linux {kernel}"

    @property
    def short(self) -> str:
        return f"run {self.run.id}"


def build(runs: list[RunData]) -> Page:
    ids = " vs ".join(r.short for r in runs)
    names = sorted({r.run.kind for r in runs})
    page = Page(f"oslens report: {ids}", f"{', '.join(names)} · made by oslens from the results store")
    # a study's report opens with the paper beside this kernel (report/html/study.py: runs that re-ran one)
    page.sections += study.sections(runs)
    page.sections += machine.sections(runs)
    for kind in names:
        of_kind = [r for r in runs if r.run.kind == kind]
        page.sections += kinds.get(kind, of_kind[0].run.id).load("sections")(of_kind)
    return page
