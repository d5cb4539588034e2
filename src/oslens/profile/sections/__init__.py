"""The sections of a profile, in report order (the terminal's and the HTML
report's). Each module has `TITLE`, `summarize(recs: Records) -> dict`,
`render(console, section) -> None` and `html(profiles) -> report.html.page.Section`
(what the HTML views share is in html_common); a new section is one module
here plus its place in SECTIONS."""

from __future__ import annotations

from types import ModuleType

from . import counters, faults, interrupts, kernel_functions, locks, run_lengths, switches, syscalls, time

SECTIONS = (time, switches, faults, interrupts, syscalls, run_lengths, locks, kernel_functions, counters)


def section_name(module: ModuleType) -> str:
    """The key of a section in the summary: its module's name ("time", "switches", ...)."""
    return module.__name__.rsplit(".", 1)[-1]
