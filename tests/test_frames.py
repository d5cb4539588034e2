"""The tidy frames of each kind of run, the Python API that reads them
(`oslens.Store(path).run(N).frame()`), and the exports written from them.

One tiny real run of each kind, made once through the real CLI; every
frame value is checked against what `oslens show N --json` reports, and
every export format is read back with pandas and compared with frame()."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest

import oslens
from oslens import engine, kinds
from oslens.frames import columns

from conftest import one_line_error
from conftest import oslens as cli

RUNS = {
    "scale": ["scale", "--probe", "dup", "--workers", "1", "--duration", "0.1", "--reps", "2"],
    "latency": ["latency", "--probe", "getppid", "--duration", "0.05", "--reps", "2"],
    "noise": ["noise", "--duration", "0.2", "--no-bpf"],
    "profile": ["profile", "--", "/bin/true"],
    "appscale": ["appscale", "--workload", "kmeans", "--size", "20000", "--cpu-counts", "1", "--reps", "2"],
}
# The contracts below hold every kind (kinds.KINDS), each through its run in
# the shared store of tests/every_kind.py; RUNS are the shapes the
# frame-equals-show tests read value by value.
KINDS = sorted(kinds.KINDS)
MAIN = {"scale": "workers", "latency": "hists", "noise": "detours", "profile": "threads", "appscale": "reps",
        "io": "points", "envs": "rounds", "cluster": "ranks", "serve": "reps", "timerlat": "wakeups"}  # fmt: skip
CPUS = {c["cpu"] for c in engine.topology()["cpus"]}

# Snapshots: the main frame's columns and dtypes, per kind. A change here is
# a change of the public frames (and of every CSV and Parquet export).
SNAPSHOT = {
    "scale": {
        "run_id": "int64",
        "probe": "str",
        "variant": "str",
        "mode": "str",
        "placement": "str",
        "fixed": "str",
        "workers": "int64",
        "rep": "int64",
        "worker": "int64",
        "cpu": "int64",
        "cpu_seen": "int64",
        "ops": "int64",
        "seconds": "float64",
        "ops_per_s": "float64",
        "rusage_s": "float64",
        "user_s": "float64",
        "sys_s": "float64",
        "nvcsw": "int64",
        "nivcsw": "int64",
    },
    "latency": {
        "run_id": "int64",
        "operation": "str",
        "probe": "str",
        "variant": "str",
        "phase": "str",
        "rep": "int64",
        "worker": "int64",
        "cpu": "Int64",
        "count": "int64",
        "min_ns": "float64",
        "p50_ns": "float64",
        "p90_ns": "float64",
        "p99_ns": "float64",
        "p99.9_ns": "float64",
        "p99.99_ns": "float64",
        "max_ns": "float64",
        "mean_ns": "float64",
    },
    "noise": {
        "run_id": "int64",
        "phase": "str",
        "cpu": "int64",
        "t_ns": "int64",
        "duration_ns": "int64",
        "cause": "str",
    },
    "timerlat": {
        "run_id": "int64",
        "phase": "str",
        "cpu": "int64",
        "rep": "int64",
        "expiry_ns": "int64",
        "thread_ns": "int64",
        "irq_ns": "Int64",
    },
    "profile": {
        "run_id": "int64",
        "tid": "int64",
        "tgid": "int64",
        "comm": "str",
        "user_ns": "int64",
        "system_ns": "int64",
        "runtime_ns": "int64",
        "kernel_share": "float64",
        "nvcsw": "int64",
        "nivcsw": "int64",
        "min_flt": "int64",
        "maj_flt": "int64",
        "ended": "str",
        "since_begin": "bool",
    },
    "appscale": {
        "run_id": "int64",
        "app": "str",
        "n": "int64",
        "rep": "int64",
        "cpus": "str",
        "status": "str",
        "how": "str",
        "code": "Int64",
        "signal": "Int64",
        "wall_s": "float64",
        "user_s": "float64",
        "system_s": "float64",
        "irq_s": "float64",
        "softirq_s": "float64",
        "nvcsw": "Int64",
        "nivcsw": "Int64",
        "min_flt": "Int64",
        "maj_flt": "Int64",
    },
    "io": {
        "run_id": "int64",
        "series": "str",
        "workers": "int64",
        "rep": "int64",
        "iops": "float64",
        "bytes_per_s": "float64",
    },
    "envs": {
        "run_id": "int64",
        "operation": "str",
        "environment": "str",
        "round": "int64",
        "p50_ns": "float64",
        "p99_ns": "float64",
        "p99.9_ns": "float64",
        "ops_per_s": "float64",
    },
    "cluster": {
        "run_id": "int64",
        "rank": "int64",
        "host": "str",
        "cpus": "str",
        "lost_share": "float64",
        "rate_per_s": "float64",
        "max_ns": "float64",
        "p99_ns": "float64",
        "top_cause": "str",
        "outlier": "bool",
    },
    "serve": {
        "run_id": "int64",
        "server": "str",
        "cpus": "int64",
        "rep": "int64",
        "requests": "Int64",
        "errors": "Int64",
        "counted_by": "str",
        "server_requests": "Int64",
        "latency_p50_ms": "float64",
        "latency_p99_ms": "float64",
        "seconds": "float64",
        "requests_per_s": "float64",
        "kernel_share": "float64",
        "syscalls_per_s": "float64",
        "voluntary_per_s": "float64",
        "involuntary_per_s": "float64",
        "migrations_per_s": "float64",
        "faults_per_s": "float64",
        "lock_wait_ns": "float64",
    },
}


class Runs:
    """The store and one run of each kind, each made on first use."""

    def __init__(self, db):
        self.db = db
        self.ids: dict[str, int] = {}
        self.shown: dict[str, dict] = {}

    def id(self, kind: str) -> int:
        if kind not in self.ids:
            p = cli("-q", *RUNS[kind], db=self.db, stdin=subprocess.DEVNULL)
            assert p.returncode == 0, p.stderr
            self.ids[kind] = oslens.Store(self.db).last(kind=kind).id
        return self.ids[kind]

    def show(self, kind: str) -> dict:
        if kind not in self.shown:
            p = cli("show", str(self.id(kind)), "--json", db=self.db)
            assert p.returncode == 0, p.stderr
            self.shown[kind] = json.loads(p.stdout)
        return self.shown[kind]

    def run(self, kind: str) -> oslens.Run:
        rid = self.id(kind)
        return oslens.Store(self.db).run(rid)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return Runs(tmp_path_factory.mktemp("frames") / "store.db")


def same(a, b) -> bool:
    """One cell equal to another, across what a format keeps: missing is
    None, NaN, NA or an empty text; numbers compare as numbers (a CSV reads
    "0" back as 0), exactly."""

    def missing(v):
        return v is None or v is pd.NA or v == "" or (isinstance(v, float) and math.isnan(v))

    if missing(a) or missing(b):
        return missing(a) and missing(b)
    if isinstance(a, (bool, np.bool_)) or isinstance(b, (bool, np.bool_)):
        return str(a) == str(b)
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def read_csv(path, like: pd.DataFrame) -> pd.DataFrame:
    """A CSV export read back: text columns as text (a thread named "true"
    stays a name), empty cells missing."""
    text = {c: "str" for c, t in like.dtypes.items() if str(t) in ("str", "object")}
    return pd.read_csv(path, keep_default_na=False, na_values=[""], dtype=text)


def assert_same_rows(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert [str(c) for c in got.columns] == [str(c) for c in want.columns]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got.itertuples(index=False), want.itertuples(index=False))):
        bad = [(c, x, y) for c, x, y in zip(want.columns, g, w) if not same(x, y)]
        assert not bad, f"row {i}: {bad[:5]}"


def records_of(rows: list[dict], keys) -> list[tuple]:
    """Rows as tuples; a frame's NaN and a summary's None both mean "not known"."""
    return [tuple(None if isinstance(v, float) and v != v else v for v in (r.get(k) for k in keys)) for r in rows]


# ------------------------------------------------------------ main frames


@pytest.mark.parametrize("kind", KINDS)
def test_main_frame_has_the_documented_columns(every, kind):
    run = every.run(kind)
    frames = run.frames()
    assert next(iter(frames)) == MAIN[kind]
    df = run.frame()
    declared = columns(kind)[MAIN[kind]]
    assert list(df.columns) == ["run_id", *declared]
    assert {c: str(t) for c, t in df.dtypes.items()} == SNAPSHOT[kind]
    assert (df["run_id"] == run.id).all()
    for name, spec in columns(kind).items():  # a cluster run has the frames of what it measured
        if name in frames:
            assert list(frames[name].columns) == ["run_id", *spec], name


def test_every_column_is_documented():
    for kind in KINDS:
        module = importlib.import_module(f"oslens.frames.{kind}")
        for spec in module.COLUMNS.values():
            for col, (_dtype, meaning) in spec.items():
                assert meaning and f"    {col} " in module.__doc__, (kind, col)


def test_scale_frames_equal_show(runs):
    shown = runs.show("scale")
    run = runs.run("scale")
    df, points = run.frame(), run.frame("points")
    assert set(df["cpu"]) <= CPUS and set(df["cpu_seen"]) <= CPUS
    assert (df["ops"] > 0).all() and (df["ops_per_s"] > 0).all()
    [series] = shown["series"]
    for p in series["points"]:
        rows = df[(df["probe"] == series["probe"]) & (df["workers"] == p["workers"])]
        assert len(rows) == p["reps"] * p["workers"]
        totals = rows.groupby("rep")["ops_per_s"].sum()
        assert float(np.median(totals)) == pytest.approx(p["total"]["median"], rel=1e-12)
        [row] = points[points["workers"] == p["workers"]].to_dict("records")
        for name in ("total", "per_worker"):
            for k in ("median", "low", "high"):
                assert row[f"{name}_{k}"] == p[name][k]
        for k in ("imbalance", "sys_share", "nivcsw_per_s", "efficiency", "reps"):
            assert row[k] == p[k]
        assert row["warnings"] == "; ".join(p["warnings"])


def test_latency_frames_equal_show(runs):
    shown = runs.show("latency")
    run = runs.run("latency")
    hists, buckets, summary = run.frame(), run.frame("histogram"), run.frame("summary")
    assert set(hists["cpu"].dropna()) <= CPUS
    ops = shown["operations"] + list(shown["timing_overhead"].values())
    assert len(summary) == len(ops)
    keys = [k for k in ops[0] if k not in ("rep_p50_ns", "warnings", "absent_percentiles")]
    for want in ops:
        [got] = summary[(summary["probe"] == want["probe"]) & (summary["phase"] == want["phase"])].to_dict("records")
        assert got["operation"] == f"{want['probe']}:{want['variant']}"
        assert got["timing_overhead"] == (want["probe"] == "null")
        assert got["absent_percentiles"] == "; ".join(want["absent_percentiles"].values())
        for k in keys:
            assert same(got[k], want[k]), k
        mine = hists[(hists["probe"] == want["probe"]) & (hists["phase"] == want["phase"])]
        assert mine["count"].sum() == want["count"]
        assert mine["min_ns"].min() == want["min_ns"] and mine["max_ns"].max() == want["max_ns"]
    # The long histogram holds every timed operation of every histogram record.
    per_record = buckets.groupby(["operation", "phase", "rep", "worker"])["count"].sum()
    for h in hists.itertuples():
        assert per_record[(h.operation, h.phase, h.rep, h.worker)] == h.count
        assert h.min_ns <= h.p50_ns <= h.p99_ns <= h.max_ns
    assert (buckets["lower_ns"] < buckets["upper_ns"]).all()


def test_noise_frames_equal_show(runs):
    shown = runs.show("noise")
    run = runs.run("noise")
    detours, cpus = run.frame(), run.frame("cpus")
    want = [[phase, *d] for phase, ds in shown["detours"].items() for d in ds]
    assert detours[["phase", "cpu", "t_ns", "duration_ns", "cause"]].values.tolist() == want
    assert set(detours["cpu"]) <= CPUS
    measured = {(phase, c["cpu"]): c for phase, p in shown["phases"].items() for c in p["cpus"]}
    assert set(zip(cpus["phase"], cpus["cpu"])) == set(measured)
    assert {c for _, c in measured} <= CPUS
    for row in cpus.to_dict("records"):
        c = measured[(row["phase"], row["cpu"])]
        for k in (
            "runtime_ns",
            "count",
            "total_ns",
            "max_ns",
            "loop_ns",
            "threshold_ns",
            "kept",
            "steal_ns",
            "lost_share",
            "rate_per_s",
        ):
            assert same(row[k], c[k]), k
        for q, v in c["percentiles_ns"].items():
            assert same(row[f"{q}_ns"], v)
    assert run.frame("causes").empty  # --no-bpf: nothing attributed
    tail = run.frame("tail")
    for phase, p in shown["phases"].items():
        for n, at in (p["tail"].get("nodes") or {}).items():
            for delay, prob in at["p_delayed"].items():
                [row] = tail[(tail["phase"] == phase) & (tail["nodes"] == int(n)) & (tail["delay"] == delay)].to_dict(
                    "records"
                )
                assert (row["p_delayed"], row["expected_slowdown"]) == (prob, at["expected_slowdown"])


def test_profile_frames_equal_show(runs):
    shown = runs.show("profile")
    run = runs.run("profile")
    frames = run.frames()
    sections = shown["sections"]
    threads = sections["time"]["threads"]
    keys = list(SNAPSHOT["profile"])[1:]
    assert records_of(frames["threads"].to_dict("records"), keys) == records_of(threads, keys)
    assert list(frames["sections"]["section"]) == list(sections)
    assert list(frames["sections"]["missing"]) == [s.get("missing") or "" for s in sections.values()]
    sys_rows = sections["syscalls"].get("rows") or []
    if sys_rows:  # BPF loaded: the syscalls table, row for row
        keys = ["name", "count", "errors", "total_ns"]
        assert records_of(frames["syscalls"].to_dict("records"), keys) == records_of(sys_rows, keys)
    figures = frames["figures"]
    wall = figures[(figures["section"] == "target") & (figures["name"] == "wall_s")]["value"]
    assert list(wall) == [shown["target"]["wall_s"]]


def test_appscale_frames_equal_show(runs):
    shown = runs.show("appscale")
    run = runs.run("appscale")
    reps, points = run.frame(), run.frame("points")
    records = [r for r in run.records() if r["type"] == "point"]
    assert len(reps) == len(records) == 2
    assert list(reps["status"]) == [r["status"] for r in records]
    assert all(set(map(int, c.split(","))) <= CPUS for c in reps["cpus"])
    for row in shown["rows"]:
        ok = reps[(reps["n"] == row["n"]) & (reps["status"] == "ok")]
        assert list(ok["wall_s"]) == row["walls_s"]
        [got] = points[points["n"] == row["n"]].to_dict("records")
        assert got["cpus"] == ",".join(map(str, row["cpus"]))
        assert (got["wall_s_median"], got["wall_s_low"], got["wall_s_high"]) == (
            row["wall_s"]["median"],
            row["wall_s"]["low"],
            row["wall_s"]["high"],
        )
        for k in (
            "reps",
            "ok",
            "user_s",
            "system_s",
            "system_share",
            "irq_softirq_s",
            "context_switches",
            "page_faults",
            "speedup",
            "efficiency",
        ):
            assert same(got[k], row[k]), k


# ------------------------------------------------------------------- API


@pytest.mark.parametrize("kind", KINDS)
def test_the_api_reads_every_kind(every, kind):
    run = every.run(kind)
    store = oslens.Store(every.db)
    assert run.kind == kind and run.id in [r.id for r in store.runs(kind=kind)]
    frames = run.frames()
    assert list(frames)[0] == MAIN[kind]
    assert run.frame().equals(frames[MAIN[kind]])
    assert len(run.records()) == run.metadata()["n_records"] > 0


def test_api(runs, monkeypatch):
    for kind in RUNS:
        runs.id(kind)
    monkeypatch.setenv("OSLENS_DB", str(runs.db))
    store = oslens.Store()
    assert store.path == runs.db
    listed = store.runs()
    assert sorted(r.kind for r in listed) == sorted(RUNS)
    assert [r.id for r in listed] == sorted((r.id for r in listed), reverse=True)
    assert [r.id for r in store.runs(kind="noise")] == [runs.id("noise")]
    assert store.last().id == listed[0].id and store.last(kind="scale").id == runs.id("scale")
    with pytest.raises(ValueError, match="nothing"):
        store.runs(kind="nothing")
    run = store.run(runs.id("scale"))
    assert (run.kind, run.status) == ("scale", "complete")
    assert run.machine["topology"]["available"] == engine.topology()["available"]
    assert run.params["reps"] == 2
    assert len(run.records()) == run.metadata()["n_records"]
    shown = runs.show("scale")
    assert run.summary() == {
        k: v for k, v in shown.items() if k not in ("run", "kind", "status", "started", "params", "machine")
    }


def test_api_summary_is_show_json(runs):
    for kind in ("noise", "appscale"):
        shown = runs.show(kind)
        meta = ("run", "kind", "status", "started", "params", "machine")
        assert json.loads(json.dumps(runs.run(kind).summary(), default=str)) == {
            k: v for k, v in shown.items() if k not in meta
        }


def test_a_missing_store_is_an_error_not_a_new_file(tmp_path):
    db = tmp_path / "none.db"
    with pytest.raises(oslens.StoreError, match="none.db"):
        oslens.Store(db)
    assert not db.exists()


def test_import_oslens_stays_light():
    code = (
        "import sys, oslens; assert 'pandas' not in sys.modules and 'oslens.api' not in sys.modules; "
        "oslens.Store; assert 'oslens.api' in sys.modules and 'pandas' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------- exports


@pytest.mark.parametrize("kind", KINDS)
def test_csv_export_round_trips(every, kind, tmp_path):
    run = every.run(kind)
    path = tmp_path / "main.csv"
    path.write_text(every.export(kind, "csv"))
    assert_same_rows(read_csv(path, run.frame()), run.frame())
    # Every frame, each to its own file.
    out = tmp_path / "all"
    p = cli("export", str(run.id), "--format", "csv", "-o", f"{out}/", "--json", db=every.db)
    assert p.returncode == 0, p.stderr
    described = json.loads(p.stdout)["written"]
    frames = run.frames()
    assert [d["frame"] for d in described] == list(frames)
    for d in described:
        assert d["rows"] == len(frames[d["frame"]])
        assert_same_rows(read_csv(d["path"], frames[d["frame"]]), frames[d["frame"]])


@pytest.mark.parametrize("kind", KINDS)
def test_json_export_round_trips(every, kind):
    run = every.run(kind)
    doc = json.loads(every.export(kind, "json"))
    assert doc["run"]["id"] == run.id and doc["run"]["kind"] == kind
    assert doc["records"] == run.records()
    frames = run.frames()
    assert list(doc["frames"]) == list(frames)
    for name, rows in doc["frames"].items():
        want = frames[name]
        got = pd.DataFrame(rows, columns=list(want.columns))
        assert_same_rows(got, want)


@pytest.mark.parametrize("kind", KINDS)
def test_parquet_export_round_trips(every, kind, tmp_path):
    run = every.run(kind)
    out = tmp_path / "main.parquet"
    back = pd.read_parquet(every.export(kind, "parquet"))
    pd.testing.assert_frame_equal(back, run.frame())
    assert {c: str(t) for c, t in back.dtypes.items()} == SNAPSHOT[kind]
    # --frame: another one (the last; a cluster noise run has only its main one), dtypes kept.
    name = list(run.frames())[-1]
    p = cli("export", str(run.id), "--format", "parquet", "--frame", name, "-o", str(out), db=every.db)
    assert p.returncode == 0, p.stderr
    pd.testing.assert_frame_equal(pd.read_parquet(out), run.frame(name))


@pytest.mark.parametrize("kind", KINDS)
def test_export_snapshot(every, kind):
    """Column names per format, stable: CSV header, JSON row keys, Parquet schema."""
    cols = list(SNAPSHOT[kind])
    assert every.export(kind, "csv").splitlines()[0].split(",") == cols
    main = json.loads(every.export(kind, "json"))["frames"][MAIN[kind]]
    assert main and all(list(r) == cols for r in main)
    import pyarrow.parquet as pq

    assert pq.read_schema(every.export(kind, "parquet")).names == cols


def test_export_refusals_are_one_line(runs, tmp_path):
    rid = str(runs.id("noise"))
    for args, word in (
        (["--format", "csv", "--frame", "nope"], "nope"),
        (["--format", "parquet"], "-o"),
        (["--format", "csv", "--json"], "-o"),
        (["--format", "csv", "-o", str(tmp_path / "nodir" / "x.csv")], "nodir"),
    ):
        p = cli("export", rid, *args, db=runs.db)
        assert p.returncode == 2, args
        assert word in one_line_error(p.stderr)
        assert p.stdout == ""


def test_scale_csv_keeps_the_columns_scripts_read(runs):
    """The columns the bare CSV of old had are still there, with the same values."""
    import csv
    import io

    run = runs.run("scale")
    rows = list(csv.DictReader(io.StringIO(cli("export", str(run.id), "--format", "csv", db=runs.db).stdout)))
    workers = [r for r in run.records() if r["type"] == "worker"]
    assert Counter((r["rep"], r["worker"]) for r in rows) == Counter((str(w["rep"]), str(w["worker"])) for w in workers)
    by_key = defaultdict(list)
    for w in workers:
        by_key[(w["rep"], w["worker"])].append(w)
    for r in rows:
        [w] = by_key[(int(r["rep"]), int(r["worker"]))]
        assert (r["run_id"], r["probe"], r["mode"], int(r["ops"]), int(r["cpu"])) == (
            str(run.id),
            "dup",
            "process",
            w["ops"],
            w["cpu"],
        )
        assert float(r["ops_per_s"]) == w["ops_per_sec"] and float(r["seconds"]) == w["seconds"]


def test_appscale_fits_frame_holds_the_fitted_figures():
    """Fits need several CPU counts; a synthetic sweep (no machine needed)."""
    from types import SimpleNamespace

    from oslens.analysis.appscale import summarize
    from oslens.frames.appscale import frames

    def point(n, rep):
        wall = 1e9 * (0.1 + 0.9 / n) * (1 + 0.01 * rep)
        return {
            "type": "point",
            "n": n,
            "cpus": list(range(n)),
            "rep": rep,
            "argv": [],
            "status": "ok",
            "how": "exited",
            "code": 0,
            "signal": None,
            "wall_ns": wall,
            "confinement": "affinity",
            "cpu_source": "rusage",
            "user_ns": wall * n,
            "system_ns": 0,
            "irq_ns": None,
            "softirq_ns": None,
            "nvcsw": 1,
            "nivcsw": 0,
            "min_flt": 1,
            "maj_flt": 0,
        }

    records = [point(n, rep) for n in (1, 2, 4, 8, 16) for rep in range(3)]
    run = SimpleNamespace(id=1, kind="appscale", params={"available_cpus": 16})
    fits = frames(run, records)["fits"]
    want = summarize(records, 16)["fits"]
    for model, fit in want.items():
        mine = fits[fits["model"] == model]
        assert set(mine["fitted"]) == {fit["fitted"]}
        if fit["fitted"]:
            values = dict(zip(mine["name"], mine["value"]))
            assert values["r2"] == fit["r2"]
    assert want["amdahl"]["fitted"]
    values = dict(zip(fits["name"], fits["value"]))
    assert values["serial_fraction"] == pytest.approx(0.1, abs=0.02)


@pytest.mark.parametrize(
    "kind, args",
    [
        ("scale", ["scale", "--probe", "dup", "--workers", "1", "--ops", "500", "--warmup", "0.05", "--reps", "2"]),
        ("profile", ["profile", "--no-bpf", "--", "/bin/true"]),
    ],
    ids=["scale-fixed-work", "profile-without-bpf"],
)
def test_other_shapes_of_run(tmp_path, kind, args):
    """Fixed work (the OSMark timings) and a profile without BPF: same
    frames, same declared columns, values as `show --json`."""
    db = tmp_path / "store.db"
    p = cli("-q", *args, db=db, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    run = oslens.Store(db).last()
    shown = json.loads(cli("show", str(run.id), "--json", db=db).stdout)
    df = run.frame()
    assert {c: str(t) for c, t in df.dtypes.items()} == SNAPSHOT[kind]
    if kind == "scale":
        assert (df["ops"] == 500).all() and len(df) == 2
        [series] = shown["series"]
        [point] = series["points"]
        [row] = run.frame("points").to_dict("records")
        for w in ("fastest_s", "slowest_s", "mean_s"):
            assert (row[f"{w}_median"], row[f"{w}_low"], row[f"{w}_high"]) == (
                point[w]["median"],
                point[w]["low"],
                point[w]["high"],
            )
    else:
        keys = list(SNAPSHOT["profile"])[1:]
        assert records_of(df.to_dict("records"), keys) == records_of(shown["sections"]["time"]["threads"], keys)
        sections = run.frame("sections")
        assert list(sections["section"]) == list(shown["sections"])
    for name, frame in run.frames().items():
        back = json.loads(cli("export", str(run.id), "--format", "json", "--frame", name, db=db).stdout)
        assert_same_rows(pd.DataFrame(back["frames"][name], columns=list(frame.columns)), frame)
