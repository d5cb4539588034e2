"""Every kind of run held to the same contracts (tests/every_kind.py makes
one run of each): `show --json` is strict JSON, what a person reads has no
number in exponent form and no Python literal, the main tidy frame and its
exports are never empty, the HTML report loads in Chromium with no console
warning, and two runs of a kind compare."""

from __future__ import annotations

import html
import io
import json
import re

import pandas as pd
import pytest

import oslens
from chromium import load
from every_kind import RECIPES, strict_json
from oslens import kinds
from test_report import EXPECTED_FIGURES

from conftest import SESSION_TMP
from conftest import oslens as cli

KINDS = sorted(kinds.KINDS)
# 1.5e+03, 2e-05: a float as repr() or '{:g}' writes it
EXPONENT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?e[+-]?\d+\b")
# what str() of a Python value writes where a figure was meant
LITERAL = re.compile(r"\b(?:True|False|None|nan|NaN|inf|Infinity)\b")


def test_every_kind_has_a_recipe():
    assert set(RECIPES) == set(kinds.KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_show_json_is_strict_json(every, kind):
    doc = strict_json(every.show_json(kind))
    assert doc["kind"] == kind and doc["status"] == "complete"


def _visible_text(page: str) -> str:
    """What the page shows as text: no scripts (the inlined libraries and
    the charts' data), no styles, no tags."""
    page = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", page)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def _offenders(text: str) -> list[str]:
    found = []
    for pattern in (EXPONENT, LITERAL):
        for m in pattern.finditer(text):
            found.append(text[max(0, m.start() - 60) : m.end() + 20].replace("\n", " "))
    return found


@pytest.mark.parametrize("kind", KINDS)
def test_the_apis_summary_is_what_show_json_prints_beside_the_runs_fields(every, kind):
    shown = strict_json(every.show_json(kind))
    summary = json.loads(json.dumps(oslens.Store(every.db).run(every.id(kind)).summary(), allow_nan=False))
    own = ("run", "kind", "status", "started", "params", "machine")
    assert summary == {k: v for k, v in shown.items() if k not in own}


@pytest.mark.parametrize("kind", KINDS)
def test_numbers_read_as_a_person_reads_them(every, kind):
    assert _offenders(every.show_text(kind)) == []
    assert _offenders(_visible_text(every.report(kind).read_text())) == []


@pytest.mark.parametrize("kind", KINDS)
def test_the_main_frame_and_its_exports_are_never_empty(every, kind):
    run = oslens.Store(every.db).run(every.id(kind))
    frame = run.frame()
    assert len(frame) > 0, f"{kind}: the main frame is empty"
    csv = pd.read_csv(io.StringIO(every.export(kind, "csv")))
    assert len(csv) == len(frame) == len(pd.read_parquet(every.export(kind, "parquet")))
    strict_json(every.export(kind, "json"))


@pytest.mark.parametrize("kind", KINDS)
def test_the_report_loads_in_chromium_with_no_console_warning(every, kind, browser):
    shown = load(browser, every.report(kind))
    browser.save_screenshot(str(SESSION_TMP / f"report-{kind}.png"))
    assert shown["error"] is None and shown["console"] == [], shown["console"]
    assert shown["plots"] > 0, f"{kind}: no plot"
    assert shown["drawn"] == shown["plots"], f"{shown['plots'] - shown['drawn']} of {shown['plots']} plots not drawn"
    assert shown["injected"] == 0  # the profiled command's hostile argument is text, not markup
    ids = set(browser.execute_script("return Array.from(document.querySelectorAll('div.plot')).map(e => e.id)"))
    assert all(i.startswith(kind) for i in ids), ids
    assert EXPECTED_FIGURES.get(kind, set()) <= ids
    # an axis of CPUs or workers is ticked at whole counts (appscale's showed 1.1, 1.2, …)
    axes = browser.execute_script(
        "return Array.from(document.querySelectorAll('g.role-axis')).map(a => ["
        "  (a.querySelector('g.role-axis-title text') || {}).textContent || '',"
        "  Array.from(a.querySelectorAll('g.role-axis-label text')).map(t => t.textContent)])"
    )
    counted = [(title, labels) for title, labels in axes if re.fullmatch(r"(submitting )?(CPUs|workers)", title)]
    assert all(re.fullmatch(r"[0-9,]+", x) for _, labels in counted for x in labels), counted


@pytest.mark.parametrize("kind", KINDS)
def test_two_runs_of_a_kind_compare(every, kind):
    first = every.id(kind)
    second = every.again(kind)
    p = cli("compare", "--json", str(first), str(second), db=every.db)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["metrics"], f"{kind}: no metric in common"
