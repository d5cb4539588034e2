"""`report` and `export --format parquet`: a report of each kind of run
loads in headless Chromium with no console error and every plot drawn,
strings from the machine or the user cannot inject markup, static figures
are written, and the parquet export holds the records' values."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chromium import load, needs_browser

from conftest import NCPU, one_line_error, oslens

HOSTILE = "<img src=x onerror=alert(1)>"
# The figures a kind's report must hold (by plot id), beyond loading.
EXPECTED_FIGURES = {"scale": {"scale-per-worker"}, "appscale": {"appscale-speedup", "appscale-cpu-time"}}

# One small run of each kind, made once for the module (the real CLI).
RUNS = {
    "scale": [
        "scale",
        "--probe",
        "dup,getppid",
        "--workers",
        f"1,{NCPU}",
        "--duration",
        "0.1",
        "--reps",
        "2",
        "--warmup",
        "0.05",
    ],
    "latency": ["latency", "--probe", "getppid,fault:anon", "--duration", "0.05", "--reps", "2", "--warmup", "0.02"],
    "noise": ["noise", "--duration", "0.3", "--warmup", "0.05"],
    "profile": ["profile", "--", "sh", "-c", "for i in 1 2 3; do ls /proc > /dev/null; done", HOSTILE],
    "appscale": ["appscale", "--workload", "kmeans", "--size", "50000", "--cpu-counts", f"1,{NCPU}", "--reps", "1"],
}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict:
    db = tmp_path_factory.mktemp("report") / "s.db"
    ids = {}
    for kind, args in RUNS.items():
        p = oslens(*args[:1], "-q", "--json", *args[1:], db=db)
        assert p.returncode == 0, p.stderr
        out = p.stdout if kind != "profile" else p.stdout  # profile --json goes to stdout too
        ids[kind] = json.loads(out[out.index("{") :])["run"]
    return {"db": db, "ids": ids}


def report(store: dict, *refs, fmt: str = "html", out: Path) -> list[str]:
    p = oslens("report", "--json", "--format", fmt, "-o", str(out), *map(str, refs), db=store["db"])
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["files"]


@needs_browser
def test_a_comparison_overlays_two_runs(store, browser, tmp_path):
    db = store["db"]
    again = oslens(*RUNS["scale"][:1], "-q", "--json", *RUNS["scale"][1:], db=db)
    second = json.loads(again.stdout)["run"]
    html_file = report(store, store["ids"]["scale"], second, out=tmp_path / "cmp.html")[0]
    page = load(browser, html_file)
    assert page["error"] is None and page["console"] == []
    text = Path(html_file).read_text()
    assert f"run {store['ids']['scale']}" in text and f"run {second}" in text


def test_machine_and_user_strings_are_escaped(store, tmp_path):
    text = Path(report(store, store["ids"]["profile"], out=tmp_path / "p.html")[0]).read_text()
    assert HOSTILE not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text or "\\u003cimg src=x onerror=alert(1)>" in text


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_a_hostile_host_name_cannot_inject(tmp_path):
    db = tmp_path / "s.db"
    env = {**os.environ, "OSLENS_DB": str(db)}
    # hostname(1) refuses such a name; the kernel takes it
    script = (
        f"{sys.executable} -c 'import socket; socket.sethostname(\"<script>document.title=1</script>\")' && "
        f"{sys.executable} -m oslens scale -q --probe getppid --workers 1 --duration 0.05 --reps 1 && "
        f"{sys.executable} -m oslens report last -o {tmp_path}/h.html"
    )
    p = subprocess.run(["unshare", "--uts", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "h.html").read_text()
    assert "<script>document.title" not in text
    assert "&lt;script&gt;document.title" in text


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_static_figures_for_papers(store, tmp_path, fmt):
    files = report(store, store["ids"]["appscale"], fmt=fmt, out=tmp_path / "figs")
    assert {Path(f).stem for f in files} == EXPECTED_FIGURES["appscale"]
    for f in files:
        data = Path(f).read_bytes()
        assert data.startswith(b"\x89PNG") if fmt == "png" else b"<svg" in data[:200]


def test_parquet_export_round_trips(store, tmp_path):
    # Parquet holds the kind's tidy frame (every worker's record of every
    # complete repetition), not the raw union of records.
    import pandas as pd

    from oslens.api import Store as Notebook
    from oslens.records import scale_points
    from oslens.store import Store

    out = tmp_path / "run.parquet"
    run_id = store["ids"]["scale"]
    p = oslens("export", str(run_id), "--format", "parquet", "-o", str(out), db=store["db"])
    assert p.returncode == 0, p.stderr
    frame = pd.read_parquet(out)
    expected = Notebook(store["db"]).run(run_id).frame()
    pd.testing.assert_frame_equal(frame.reset_index(drop=True), expected.reset_index(drop=True), check_dtype=False)
    with Store(store["db"]) as st:
        records = list(st.records(run_id))
    # a repetition the sampler ran late for (a loaded machine) is not counted, nor in the frame
    counted = [w["ops"] for p in scale_points(records) for ws in p.complete for w in ws]
    assert counted and sorted(frame["ops"].astype(int)) == sorted(counted)


@pytest.mark.parametrize(
    "args, word",
    [
        (["report", "999999"], "999999"),
        (["report", "1", "1"], "twice"),
        (["report", "1", "--format", "pdf"], "pdf"),
        (["export", "1", "--format", "parquet"], "-o"),
    ],
)
def test_bad_report_input_is_one_line(store, args, word):
    p = oslens(*args, db=store["db"])
    assert p.returncode == 2
    assert word in one_line_error(p.stderr)


@needs_browser
def test_a_quiet_run_draws_its_tail_at_scale_without_warnings(browser, tmp_path):
    # A quiet CPU (the CI machine's was): no window is delayed by 100 µs or
    # more, so those panels have bands but no point; an empty layer on a
    # log axis without a domain made Vega warn of an infinite extent.
    from oslens.analysis.noise import CpuNoise, Detour, NoiseSummary
    from oslens.report.html import noise as html_noise
    from oslens.report.html.page import Figure, Page, Section

    runtime = 3e8
    detours = [Detour(7, int(i * runtime / 20), 5_000 + 15_000 * (i % 2), {"timer": 5e3}) for i in range(20)]
    cpu = CpuNoise(7, runtime, len(detours), sum(d.duration_ns for d in detours), 20_000, 20, 1e3, 20, {})
    quiet = html_noise.Series("quiet", NoiseSummary([cpu], detours, "bpf", [(7, 0.0, int(runtime))]), 1e6)
    blocks = html_noise._tail([quiet])
    assert any(isinstance(b, Figure) for b in blocks)
    path = tmp_path / "quiet.html"
    path.write_text(Page("quiet", sections=[Section("tail", blocks)]).to_html())
    page = load(browser, str(path))
    assert page["error"] is None
    assert page["console"] == [], page["console"]
    assert page["drawn"] == page["plots"] == 1


def test_the_plotting_libraries_are_bundled_once_and_only_a_private_copy_is_used(every, tmp_path, monkeypatch):
    """Vega's bundle (some 2 s to make) is kept in the user's cache and read
    back by the next report; a copy someone else could have written is never
    put into a page: it is made afresh."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    run = str(every.id("scale"))

    def page(name: str) -> str:
        out = tmp_path / name
        p = oslens("report", run, "-o", str(out), db=every.db)
        assert p.returncode == 0, p.stderr
        return out.read_text()

    first = page("1.html")
    (kept,) = (cache / "oslens").glob("vega-bundle-*.js")
    assert (cache / "oslens").stat().st_mode & 0o777 == 0o700 and kept.stat().st_mode & 0o077 == 0
    assert kept.read_text() in first
    # the next report reads the kept copy: a mark put in it reaches the page
    kept.write_text(kept.read_text() + "\n// kept-copy-mark\n")
    assert "kept-copy-mark" in page("2.html")
    # a copy the group may write is not ours alone: bundled afresh, and replaced
    kept.chmod(0o664)
    third = page("3.html")
    assert "kept-copy-mark" not in third and third == first
    assert "kept-copy-mark" not in kept.read_text() and kept.stat().st_mode & 0o077 == 0
    # a cache directory another user owns is not used at all
    kept.write_text(kept.read_text() + "\n// kept-copy-mark\n")
    os.chown(cache / "oslens", 65534, 65534)
    assert "kept-copy-mark" not in page("4.html")
