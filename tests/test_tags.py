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
