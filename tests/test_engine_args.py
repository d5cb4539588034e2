"""Each engine command's argument parser, through --dry-run: argv parsed and
checked exactly as a real invocation would, one `config` record, nothing
measured. Bad argv: exit 2, one line on stderr, nothing on stdout."""

from __future__ import annotations

import itertools
import os
import re

import pytest

from oslens import engine

from conftest import NCPU, run_engine

CPUS = [c["cpu"] for c in engine.topology()["cpus"]]
LIMITS = engine.limits()


def config(*args: str) -> dict:
    r = run_engine(*args)
    assert r.rc == 0, r.stderr
    (rec,) = r.records
    assert rec["type"] == "config"
    return rec


def refused(*args: str) -> str:
    r = run_engine(*args)
    assert r.rc == 2 and r.records == [], (r.rc, r.records)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_run_config_has_what_was_asked():
    c = config(
        "run",
        "--dry-run",
        "--probe",
        "dup",
        "--workers",
        str(NCPU),
        "--mode",
        "thread",
        "--ops",
        "500",
        "--reps",
        "3",
        "--warmup",
        "0.5",
    )
    assert c["command"] == "run" and c["probes"] == [{"name": "dup", "variant": "default", "options": {}}]
    assert (c["workers"], c["mode"], c["fixed"], c["ops"], c["reps"], c["warmup_s"]) == (
        NCPU,
        "thread",
        "ops",
        500,
        3,
        0.5,
    )
    assert sorted(c["cpus"]) == sorted(CPUS)


def test_run_config_with_an_explicit_cpu_list_and_options():
    c = config(
        "run", "--dry-run", "--probe", "mmap:own-file", "--cpus", str(CPUS[-1]), "--opt", "pages=16", "--duration", "2"
    )
    assert c["cpus"] == [CPUS[-1]] and c["placement"] == "explicit" and c["duration_s"] == 2
    assert c["probes"][0]["variant"] == "own-file" and c["probes"][0]["options"]["pages"] == 16


def test_a_dry_run_creates_nothing(tmp_path):
    config("run", "--dry-run", "--probe", "sem", "--workers", "1", "--tmpdir", str(tmp_path))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, word",
    [
        (["--probe", "nope"], "unknown probe"),
        (["--probe", "dup:nope"], "variant"),
        (["--probe", "dup", "--bogus"], "unknown option"),
        (["--probe", "dup", "--duration", "1", "--ops", "5"], "exclusive"),
        (["--probe", "dup", "--reps", "0"], "--reps"),
        (["--probe", "dup", "--reps", "²"], "--reps"),
        (["--probe", "dup", "--workers", "x"], "--workers"),
        (["--probe", "dup", "--cpus", "x"], "--cpus"),
        (["--probe", "dup", "--cpus", str(max(CPUS) + 1000)], "--cpus"),
        (["--probe", "dup", "--duration", "-1"], "--duration"),
        (["--probe", "dup", "--opt", "nokey=1"], "option"),
        (["--probe", "dup", "--mode", "fibre"], "--mode"),
        (["--probe", "dup,getppid"], "--mix"),
        (["--probe", "dup", "--duration", "200", "--interval", "0.0001"], "--interval"),
    ],
)
def test_bad_run_argv(args, word):
    assert word in refused("run", "--dry-run", *args)


def attributions() -> dict[str, bool]:
    """`run`'s attributions as the usage text lists them (made from their
    table): option name -> whether it loads BPF programs."""
    r = run_engine("--help")
    assert r.rc == 2 and r.records == []
    lines = r.stderr.splitlines()
    first = next(i for i, line in enumerate(lines) if "ATTRIBUTION is" in line) + 1
    listed = {}
    for line in lines[first:]:
        m = re.match(r"\s+--([a-z-]+)\s+\S.*?( \[BPF\])?$", line)
        if not m:
            break
        listed[m.group(1)] = m.group(2) is not None
    return listed


@pytest.fixture
def io_target(tmp_path) -> list[str]:
    """An I/O probe and a target, which every attribution may follow."""
    target = tmp_path / "target"
    with open(target, "wb") as f:
        f.truncate(8 << 20)
    return ["--probe", "io:direct", "--target", str(target)]


def test_the_usage_text_lists_every_attributions_option(io_target):
    listed = attributions()
    assert {"trace", "explain", "completions"} <= listed.keys(), listed
    base = ("run", "--dry-run", *io_target)
    assert {name: config(*base)[name] for name in listed} == dict.fromkeys(listed, False)
    for name in listed:
        c = config(*base, f"--{name}")
        assert {other: c[other] for other in listed} == {other: other == name for other in listed}


def test_list_publishes_each_attribution_and_the_period_it_samples_at_unless_given(io_target):
    """`list` and the usage text are made from one table: the same options,
    the same BPF marks; a part that samples states its default period in
    both, within the bounds --sample-period takes, and only such parts take
    the option."""
    published = engine.attributions()
    assert {n: a["bpf"] for n, a in published.items()} == attributions()
    samplers = [n for n, a in published.items() if "sample_period_ns" in a]
    assert {"explain", "explain-light"} <= set(samplers), published
    least, most = (LIMITS["run"]["--sample-period"][k] for k in ("min", "max"))
    usage = run_engine("--help").stderr
    for name in samplers:
        period = published[name]["sample_period_ns"]
        assert least <= period <= most, (name, period)
        assert re.search(rf"--{name} .*\(NS: {period} unless given\)", usage), usage
    line = refused("run", "--dry-run", *io_target, "--sample-period", "4000000")
    assert line.endswith(f"none that samples ({', '.join('--' + n for n in samplers)}) was asked for"), line


def test_two_attributions_loading_bpf_are_refused_in_one_line(io_target):
    """Named in the order given, whichever two (or more) they are."""
    bpf = [name for name, loads in attributions().items() if loads]
    assert {"trace", "explain", "completions"} <= set(bpf)
    for a, b in itertools.permutations(bpf, 2):
        line = refused("run", "--dry-run", *io_target, f"--{a}", f"--{b}")
        assert line.endswith(f"--{a} and --{b} are exclusive: each loads its own BPF programs"), line
    line = refused("run", "--dry-run", *io_target, "--completions", "--explain", "--trace")
    assert line.endswith("--completions, --explain and --trace are exclusive: each loads its own BPF programs"), line


def test_a_sample_period_is_taken_only_by_an_attribution_that_samples(io_target):
    base = ("run", "--dry-run", *io_target)
    for part in ("--explain", "--explain-light"):
        assert config(*base, part, "--sample-period", "4000000")["sample_period_ns"] == 4_000_000
        assert config(*base, part, "--sample-period", "0")["sample_period_ns"] == 0  # no sample: their cost
        assert "sample_period_ns" not in config(*base, part)  # the attribution's own
    for other in ([], ["--trace"], ["--completions"]):
        line = refused(*base, *other, "--sample-period", "4000000")
        assert line.endswith("none that samples (--explain, --explain-light) was asked for"), line
    least, most = (int(LIMITS["run"]["--sample-period"][k]) for k in ("min", "max"))  # as published
    assert config(*base, "--explain", "--sample-period", str(least))["sample_period_ns"] == least
    assert config(*base, "--explain", "--sample-period", str(most))["sample_period_ns"] == most
    for bad, word in ((least - 1, f"under {least} ns"), (most + 1, "--sample-period"), (-1, "--sample-period"),
                      ("1e6", "--sample-period")):  # fmt: skip
        line = refused(*base, "--explain", "--sample-period", str(bad))
        assert word in line, line


def test_a_fresh_worker_parses_the_masters_argv_without_its_attributions():
    """Workers exec'd afresh (fork's) parse the master's argv again in an
    image that has no attribution: the master leaves their options out."""
    r = run_engine("run", "--probe", "fork", "--duration", "0.1", "--warmup", "0", "--trace")
    assert r.rc == 0, r.stderr
    assert "--trace" in r.of("header")[0]["argv"]
    (worker,) = r.of("worker")
    assert r.end["status"] == "ok" and worker["image"]["fresh"] and worker["ops"] > 0, r.end


@pytest.mark.parametrize("option", ["--duration", "--reps", "--time-limit", "--warmup"])
def test_published_limits_are_the_parsers_bounds(option):
    bound = LIMITS["run"][option]["max"]
    most = f"{bound:g}" if isinstance(bound, float) and not bound.is_integer() else str(int(bound))
    above = str(int(bound) + 1)
    # a long enough interval keeps the sample count within its own bound
    base = ("run", "--dry-run", "--probe", "dup", "--workers", "1", "--interval", "1")
    config(*base, option, most)
    assert option in refused(*base, option, above)


def test_profile_parser():
    c = config("profile", "--dry-run", "--no-bpf", "--time-limit", "5", "--", "/bin/true")
    assert (c["mode"], c["argv"], c["bpf"], c["time_limit_s"]) == ("command", ["/bin/true"], False, 5)
    assert "either" in refused("profile", "--dry-run")
    assert "--duration" in refused("profile", "--dry-run", "--duration", "1", "--", "/bin/true")
    most = int(LIMITS["profile"]["--time-limit"]["max"])
    assert "--time-limit" in refused("profile", "--dry-run", "--time-limit", str(most + 1), "--", "/bin/true")


def test_app_parser(tmp_path):
    c = config("app", "kmeans", "--dry-run", "--workers", "2", "--mode", "process", "--size", "1000")
    assert (c["name"], c["workers"], c["mode"], c["size"]) == ("kmeans", 2, "process", 1000)
    most = int(LIMITS["app"]["--workers"]["max"])
    assert "--workers" in refused("app", "kmeans", "--dry-run", "--workers", str(most + 1))
    assert "--dir" in refused("app", "psearchy", "--dry-run")
    c = config("app", "psearchy", "--dry-run", "--prepare", str(tmp_path / "in"))
    assert c["prepare"] and not (tmp_path / "in").exists()


def test_trace_parser():
    c = config("trace", "--dry-run", "--cpus", str(CPUS[-1]), "--duration", "2", "--tids", str(os.getpid()))
    assert (c["cpus"], c["tids"], c["duration_s"]) == ([CPUS[-1]], [os.getpid()], 2)
    assert "does not exist" in refused("trace", "--dry-run", "--cpus", "1000000", "--duration", "1")  # > NR_CPUS
    assert "twice" in refused("trace", "--dry-run", "--cpus", f"{CPUS[0]},{CPUS[0]}", "--duration", "1")
    assert "no thread" in refused("trace", "--dry-run", "--cpus", str(CPUS[0]), "--duration", "1", "--tids", "0")
    assert "usage" in refused("trace", "--dry-run", "--cpus", str(CPUS[0]))


def test_inject_parser():
    c = config("inject", "--dry-run", "--cpu", str(CPUS[-1]), "--period-us", "500", "--busy-us", "50")
    assert (c["cpu"], c["period_us"], c["busy_us"]) == (CPUS[-1], 500, 50)
    assert "--busy-us" in refused("inject", "--dry-run", "--cpu", str(CPUS[0]), "--period-us", "50", "--busy-us", "50")
    assert "--duration" in refused("inject", "--dry-run", "--cpu", str(CPUS[0]), "--duration", "-1")
    assert "--cpu" in refused("inject", "--dry-run", "--cpu", "x")


def test_unknown_command_is_one_line():
    assert "unknown command" in refused("frobnicate")
