"""`latency`: every catalogue operation timed, counted exactly, with sane
percentiles, its timing floor, competition and the mixed stream."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

from oslens import engine
from oslens.analysis.histogram import TAIL_RULE, Histogram
from oslens.analysis.latency import OpLatency
from oslens.compete import competing
from oslens.format import ns
from oslens.parse import parse_compete

from conftest import NCPU, TWO, engine_processes, one_line_error, oslens, probe_args, run_engine

CATALOGUE = [
    f"{p.name}:{v}"
    for p in engine.probes().values()
    for v in p.variants
    if p.name != "fork-static" and p.timed and not p.needs_target  # a device's I/O is oslens io's
]
QS = [0, 50, 90, 99, 99.9, 99.99, 100]


@pytest.mark.parametrize("mode", ["process", "thread"])
@pytest.mark.parametrize("probe", CATALOGUE)
def test_every_operation_is_timed_exactly_n_times(probe, mode, no_leaks):
    ops = 20
    r = run_engine(
        "run",
        *probe_args(probe),
        "--mode",
        mode,
        "--workers",
        str(TWO),
        "--ops",
        str(ops),
        "--warmup",
        "0.02",
        "--latency",
    )
    assert r.rc == 0, r.stderr
    hists = r.of("hist")
    assert len(hists) == TWO
    for rec in hists:
        h = Histogram.from_record(rec["hist"])
        assert h.count == ops == sum(h.counts)
        q = h.percentiles(QS)
        assert np.all(np.diff(q) >= 0) and q[0] >= 0
        assert h.min_ns <= q[1] <= h.max_ns


def test_mixed_stream_times_every_operation_every_round(no_leaks):
    ops = 50
    r = run_engine(
        "run",
        "--probe",
        "getppid,dup,open:shared,null",
        "--mix",
        "--latency",
        "--workers",
        str(TWO),
        "--ops",
        str(ops),
        "--warmup",
        "0",
        "--mode",
        "thread",
    )
    assert r.rc == 0, r.stderr
    assert r.of("header")[0]["probe"]["name"] == "mix"
    counts = {(h["worker"], h["probe"]): h["hist"]["count"] for h in r.of("hist")}
    assert len(counts) == 4 * TWO and set(counts.values()) == {ops}


def _cli_json(tmp_path: Path, *args: str) -> dict:
    p = oslens("latency", "-q", "--json", "--reps", "2", "--warmup", "0.02", *args, db=tmp_path / "s.db")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_latency_report_through_the_cli(tmp_path, no_leaks):
    doc = _cli_json(tmp_path, "--probe", "getppid,dup", "--ops", "200")
    ops = {o["probe"]: o for o in doc["operations"]}
    assert set(ops) == {"getppid", "dup"}
    for o in ops.values():
        assert o["count"] == 200 * 2  # ops × reps × one worker
        # 400 operations tell p50 and p90 (TAIL_RULE); p99 and beyond are absent
        chain = [o["min_ns"], o["p50_ns"], o["p90_ns"], o["max_ns"]]
        assert chain == sorted(chain) and chain[0] >= 0
        assert o["p99_ns"] is None and set(o["absent_percentiles"]) == {"p99", "p99.9", "p99.99"}
    floor = doc["timing_overhead"]["alone"]
    assert floor["p50_ns"] > 0 and floor["count"] == 400
    for q in ("p50", "p99"):
        row = dict(doc["variability"]["alone"][q])
        if row.pop("operations") == 0:  # no operation tells its p99 from 400 values
            assert set(row.values()) == {None}
            continue
        shares = list(row.values())
        assert shares[:-1] == sorted(shares[:-1]) and 0 <= shares[-1] <= 1
        assert shares[-2] + shares[-1] == pytest.approx(1)  # ≤10ms and >10ms cover everything
    shown = oslens("show", str(doc["run"]), "--json", db=tmp_path / "s.db")
    assert json.loads(shown.stdout)["operations"] == doc["operations"]


def test_percentiles_the_sample_cannot_tell_are_absent_everywhere(tmp_path, no_leaks):
    # Issue 28, item 11: fault:huge with 9 samples showed p99 = p99.9 = max,
    # unmarked. 30 operations tell p50 (20 needed) and nothing beyond.
    db = tmp_path / "s.db"
    p = oslens("latency", "-q", "--json", "--probe", "getppid", "--ops", "30", "--reps", "1", "--workers", "1", db=db)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["percentile_rule"] == TAIL_RULE  # stated once, for every operation
    (op,) = doc["operations"]
    assert op["count"] == 30 and op["p50_ns"] > 0
    assert [q for q in ("p90", "p99", "p99.9", "p99.99") if op[f"{q}_ns"] is not None] == []
    assert op["absent_percentiles"]["p99"] == "p99 needs 1,000 values (10 beyond it), 30 measured"
    assert set(op["absent_percentiles"]) == {"p90", "p99", "p99.9", "p99.99"}
    # The terminal, the frames and the HTML report say the same.
    shown = oslens("show", str(doc["run"]), db=db).stdout
    row = next(line for line in shown.splitlines() if "getppid" in line).split("│")
    header = next(line for line in shown.splitlines() if "p99.9" in line).split("┃")
    assert row[header.index(" p99 ")].strip() == "–" and row[header.index(" p99.9 ")].strip() == "–"
    assert shown.count(TAIL_RULE.split(",")[0]) == 1
    frames = json.loads(oslens("export", str(doc["run"]), "--format", "json", db=db).stdout)["frames"]
    summary = next(r for r in frames["summary"] if r["probe"] == "getppid")
    assert summary["p99_ns"] is None and "p99 needs 1,000 values" in summary["absent_percentiles"]
    assert all(r["p99_ns"] is None for r in frames["hists"])
    html = tmp_path / "r.html"
    assert oslens("report", str(doc["run"]), "-o", str(html), db=db).returncode == 0
    assert TAIL_RULE.replace("≥", "&ge;") in html.read_text() or TAIL_RULE in html.read_text()


def test_an_operation_never_timed_has_no_maximum():
    # poll:10 with no sample printed "max 0 ns".
    empty = Histogram(1.0, 7, np.zeros(0, np.int64), np.zeros(0, np.int64), 0, 0, 0, 0)
    op = OpLatency("poll", "10", "alone", empty, 1, 1, None, [])
    d = op.to_dict()
    assert (d["max_ns"], d["min_ns"], d["mean_ns"], d["p50_ns"]) == (None, None, None, None)
    assert ns(op.max_ns) == "–"


@pytest.mark.skipif(NCPU < 2, reason="competition needs a CPU the measurement does not use")
def test_competitor_runs_on_the_other_cpus_and_is_gone_after(no_leaks):
    measured = engine.placement(1, "compact")
    with competing(parse_compete("fork"), measured) as context:
        comp = context["competition"]
        assert comp["cpus"] and not set(comp["cpus"]) & set(measured)
        time.sleep(0.2)
        for w in comp["workers"]:
            status = Path(f"/proc/{w['pid']}/task/{w['tid']}/status").read_text()
            assert re.search(r"Cpus_allowed_list:\s*(\S+)", status).group(1) == str(w["cpu"])
            assert w["cpu"] in comp["cpus"]
        pids = [w["pid"] for w in comp["workers"]]
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{p}").exists() for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(Path(f"/proc/{p}").exists() for p in pids)
    assert engine_processes() == []


@pytest.mark.skipif(NCPU < 2, reason="competition needs a CPU the measurement does not use")
def test_cli_measures_alone_and_with_competition(tmp_path, no_leaks):
    doc = _cli_json(tmp_path, "--probe", "getppid", "--duration", "0.1", "--compete", "fork")
    assert len(doc["phases"]) == 2 and doc["phases"][0] == "alone"
    assert doc["phases"][1].startswith("with fork:default on CPUs")
    assert {o["phase"] for o in doc["operations"]} == set(doc["phases"])
    assert set(doc["timing_overhead"]) == set(doc["phases"])


@pytest.mark.parametrize(
    "args,word",
    [
        (["--workers", "1,2"], "one worker count"),
        (["--compete", "nope"], "unknown probe"),
        (["--workers", "max", "--compete", "fork"], "every CPU"),
        (["--compete", f"fork:{NCPU + 3}"], "not available"),
        (["--probe", "getppid", "--ops", "0"], "--ops"),
    ],
)
def test_bad_latency_input(tmp_path, args, word):
    p = oslens("latency", "--probe", "getppid", "--duration", "0.1", *args, db=tmp_path / "s.db")
    assert p.returncode == 2
    assert word in one_line_error(p.stderr)
    assert not (tmp_path / "s.db").exists()


# ------------------------------------------------- one operation in N timed


@pytest.mark.parametrize("mode", ["process", "thread"])
@pytest.mark.parametrize("every", [1, 7, 100])
def test_one_operation_in_n_is_timed_once_per_block(every, mode, no_leaks):
    """--latency-every N: exactly one operation of each whole block of N is
    timed (and at most one of a last partial block), in every worker and
    repetition; the count of operations stays exact."""
    ops, reps = 1000, 2
    r = run_engine("run", "--probe", "getppid", "--mode", mode, "--workers", str(TWO), "--ops", str(ops),
                   "--reps", str(reps), "--warmup", "0.02", "--latency", "--latency-every", str(every))  # fmt: skip
    assert r.rc == 0, r.stderr
    assert r.of("header")[0]["latency_every"] == every
    hists = r.of("hist")
    assert len(hists) == TWO * reps and {(h["rep"], h["worker"]) for h in hists} == {
        (rep, w) for rep in range(reps) for w in range(TWO)
    }
    assert {w["ops"] for w in r.of("worker")} == {ops}
    for rec in hists:
        assert rec["every"] == every
        assert ops // every <= Histogram.from_record(rec["hist"]).count <= -(-ops // every)


def test_auto_times_few_enough_operations_to_cost_half_a_percent_of_the_loop(no_leaks):
    """--latency-every auto: each worker measures what an operation and a
    timing cost and times one in N, N just enough for timing to take at
    most 0.5 % of the loop, and says N and both costs."""
    ops = 200_000
    r = run_engine("run", "--probe", "getppid", "--workers", str(TWO), "--ops", str(ops), "--warmup", "0.05",
                   "--latency", "--latency-every", "auto")  # fmt: skip
    assert r.rc == 0, r.stderr
    assert r.of("header")[0]["latency_every"] == "auto"
    for rec in r.of("hist"):
        every, op_ns, timing_ns = rec["every"], rec["op_ns"], rec["timing_ns"]
        assert op_ns > 0 and timing_ns > 0
        assert timing_ns / (every * op_ns) <= 0.005 < timing_ns / (max(every - 1, 1) * op_ns) or every == 1
        assert ops // every <= Histogram.from_record(rec["hist"]).count <= -(-ops // every)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--latency-every", "4"], "needs --latency"),
        (["--latency", "--latency-every", "0"], "--latency-every"),
        (["--latency", "--latency-every", "often"], "--latency-every"),
        (["--latency", "--mix", "--latency-every", "4"], "can only be 1"),
    ],
)
def test_latency_every_is_refused_where_it_cannot_apply(args, words):
    probe = "getppid,dup" if "--mix" in args else "getppid"
    r = run_engine("run", "--probe", probe, "--ops", "10", *args)
    assert r.rc == 2 and words in one_line_error(r.stderr), r.stderr
