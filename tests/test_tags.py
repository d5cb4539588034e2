"""Tagged runs: `--tag KEY=VALUE` on a measuring command is kept with the
run; `runs --tag/--kind/--since` return exactly the runs selected;
`tag:KEY=VALUE` names runs wherever a run id goes (show, compare, export:
the newest so tagged; report: every one); the API selects by tag too."""

from __future__ import annotations

import json

import pytest

import oslens as api

from conftest import one_line_error, oslens

QUICK = ("latency", "--probe", "getppid", "--duration", "0.05", "--reps", "1", "-q")


@pytest.fixture(scope="module")
def tagged(tmp_path_factory):
    """Four runs: two tagged kernel=a (one also box=x), one kernel=b, one untagged."""
    db = tmp_path_factory.mktemp("tags") / "t.db"
    for tags in (["kernel=a", "box=x"], ["kernel=a"], ["kernel=b"], []):
        p = oslens(*QUICK, *(x for t in tags for x in ("--tag", t)), db=db)
        assert p.returncode == 0, p.stderr
    return db


def ids(db, *args: str) -> list[int]:
    p = oslens("runs", "--json", *args, db=db)
    assert p.returncode == 0, p.stderr
    return [r["id"] for r in json.loads(p.stdout)]


def test_each_filter_returns_exactly_the_runs_it_selects(tagged):
    assert ids(tagged) == [4, 3, 2, 1]
    assert ids(tagged, "--tag", "kernel=a") == [2, 1]
    assert ids(tagged, "--tag", "kernel=a", "--tag", "box=x") == [1]  # every tag given
    assert ids(tagged, "--tag", "kernel=c") == []
    assert ids(tagged, "--kind", "latency") == [4, 3, 2, 1] and ids(tagged, "--kind", "scale") == []
    started = json.loads(oslens("runs", "--json", db=tagged).stdout)[1]["started"]  # run 3's
    assert ids(tagged, "--since", started) == [4, 3]
    assert ids(tagged, "--since", "2999-01-01") == []
    rows = json.loads(oslens("runs", "--json", db=tagged).stdout)
    assert [r["tags"] for r in rows] == [{}, {"kernel": "b"}, {"kernel": "a"}, {"kernel": "a", "box": "x"}]
    assert "kernel=a box=x" in oslens("runs", db=tagged).stdout


def test_a_tag_names_the_newest_run_so_tagged_where_one_run_goes(tagged, tmp_path):
    shown = json.loads(oslens("show", "tag:kernel=a", "--json", db=tagged).stdout)
    assert shown["run"] == 2 and shown["params"]["tags"] == {"kernel": "a"}
    doc = json.loads(oslens("compare", "tag:kernel=a", "tag:kernel=b", "--json", db=tagged).stdout)
    assert (doc["a"]["run"], doc["b"]["run"]) == (2, 3)
    out = tmp_path / "e.csv"
    p = oslens("export", "tag:kernel=b", "--format", "csv", "-o", str(out), db=tagged)
    assert p.returncode == 0, p.stderr
    p = oslens("show", "tag:kernel=nosuch", db=tagged)
    assert p.returncode == 2 and "no run tagged kernel=nosuch" in one_line_error(p.stderr)


def test_a_report_of_a_tag_holds_every_run_so_tagged(tagged, tmp_path):
    p = oslens("report", "tag:kernel=a", "--json", "-o", str(tmp_path / "r.html"), db=tagged)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["runs"] == [1, 2]


def test_the_api_selects_by_tag(tagged):
    with api.Store(tagged) as store:
        assert [r.id for r in store.runs(tag="kernel=a")] == [2, 1]
        assert [r.id for r in store.runs(kind="latency", tag={"kernel": "a", "box": "x"})] == [1]
        assert store.run("tag:kernel=b").tags == {"kernel": "b"}


@pytest.mark.parametrize(
    "tag, says",
    [
        ("kernel", "is not KEY=VALUE"),
        ("=6.1", "is not KEY=VALUE"),
        ("ker nel=6.1", "is not KEY=VALUE"),
        ("kernel=", "printable characters"),
        ("kernel=" + "x" * 201, "printable characters"),
    ],
)
def test_a_bad_tag_is_refused_before_anything_runs(tmp_path, tag, says):
    p = oslens(*QUICK, "--tag", tag, db=tmp_path / "t.db")
    assert p.returncode == 2 and says in one_line_error(p.stderr)
    assert not (tmp_path / "t.db").exists()


def test_one_key_twice_with_two_values_is_refused(tmp_path):
    p = oslens(*QUICK, "--tag", "k=1", "--tag", "k=2", db=tmp_path / "t.db")
    assert p.returncode == 2 and "k given twice" in one_line_error(p.stderr)


# ------------------------------------------------------- comparing many runs


def _appscale_run(store, walls: list[float], tags: dict | None = None) -> int:
    """A stored appscale run at 1 CPU with these wall times (s), one per repetition."""
    from test_study_kernels import reps

    params = {"command": ["true"], "cpus": [1], "reps": len(walls), **({"tags": tags} if tags else {})}
    run_id = store.begin_run("appscale", ["oslens", "appscale"], params, {"kernel": {"release": "test"}})
    store.add_records(run_id, [{k: v for k, v in r.items() if k != "app"} for r in reps("", {1: walls})])
    store.finish_run(run_id, "complete")
    return run_id


WALLS = [1.00, 1.03, 0.98, 1.05, 0.99, 1.02, 1.01, 0.97]


def test_a_a_a_reports_no_change_and_a_shifted_run_is_flagged_alone(tmp_path):
    from oslens.store import Store

    db = tmp_path / "m.db"
    with Store(db) as store:
        a, b, c = (_appscale_run(store, WALLS, {"set": "s"}) for _ in range(3))
        slow = _appscale_run(store, [w * 1.3 for w in WALLS], {"set": "s"})
    # three runs of the same values: nothing significant, whatever the adjustment
    doc = json.loads(oslens("compare", str(a), str(b), str(c), "--json", db=db).stdout)
    assert [r["run"] for r in doc["runs"]] == [b, c] and doc["baseline"]["run"] == a
    verdicts = {m["metric"]: {v["verdict"] for v in m["vs"]} for m in doc["metrics"]}
    assert verdicts["appscale/1 CPUs/wall s"] == {"not significant"}, verdicts
    # (the system share is 0 in every repetition: identical values, not testable, never a change)
    assert not {"regression", "improvement", "within threshold"} & set().union(*verdicts.values()), verdicts
    # a run 30 % slower among them is the one regression, the others stay unflagged; exit 1 for CI
    p = oslens("compare", "tag:set=s", "--json", "--fail-on-regression", db=db)
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    (wall,) = [m for m in doc["metrics"] if m["metric"].endswith("wall s")]
    by_run = {v["run"]: v["verdict"] for v in wall["vs"]}
    assert by_run == {b: "not significant", c: "not significant", slow: "regression"}, by_run
    assert "Benjamini-Hochberg over every metric of every run" in doc["test"]
    shown = oslens("compare", str(a), str(b), str(c), str(slow), db=db).stdout
    assert f"run {slow}" in shown and "regression ▲" in shown


def test_many_runs_of_different_kinds_or_one_run_are_refused(tagged, tmp_path):
    p = oslens("compare", "tag:kernel=b", db=tagged)
    assert p.returncode == 2 and "names one run" in one_line_error(p.stderr)
    p = oslens("compare", "1", "2", "2", db=tagged)
    assert p.returncode == 2 and "named twice" in one_line_error(p.stderr)
