"""The kernel's build options that decide what can be measured, and a figure
that such an option makes always 0 shown as unavailable, not as 0."""

from __future__ import annotations

import json

from oslens.collectors import kernel
from oslens.profile import collect
from oslens.profile.records import Records
from oslens.profile.sections import time as time_section

from conftest import oslens

TICK_ONLY = """
CONFIG_TICK_CPU_ACCOUNTING=y
# CONFIG_IRQ_TIME_ACCOUNTING is not set
CONFIG_HZ=250
CONFIG_DEBUG_INFO_BTF=y
"""


def test_config_lines_are_read_and_absent_options_are_not_set():
    o = kernel.parse_config(TICK_ONLY)
    assert o["CONFIG_HZ"] == "250" and o["CONFIG_DEBUG_INFO_BTF"] == "y"
    assert o["CONFIG_IRQ_TIME_ACCOUNTING"] == "n" and o["CONFIG_LOCK_STAT"] == "n"  # absent: not set


def test_irq_time_is_unavailable_only_without_any_irq_time_accounting():
    tick = {"source": "x", "options": kernel.parse_config(TICK_ONLY)}
    assert "CONFIG_IRQ_TIME_ACCOUNTING" in kernel.irq_time_unavailable(tick)
    for option in ("CONFIG_IRQ_TIME_ACCOUNTING", "CONFIG_VIRT_CPU_ACCOUNTING_GEN"):
        accounted = {"source": "x", "options": kernel.parse_config(TICK_ONLY + f"{option}=y\n")}
        assert kernel.irq_time_unavailable(accounted) is None
    # an unreadable configuration claims nothing either way
    assert kernel.irq_time_unavailable({"unavailable": "no config"}) is None


def test_this_kernels_configuration_is_in_the_metadata_or_says_why():
    config = kernel.collect()["config"]
    assert "unavailable" in config or set(config["options"]) == set(kernel.CONFIG_OPTIONS)


def test_profile_and_appscale_say_unavailable_instead_of_an_irq_time_of_0(tmp_path):
    why = kernel.irq_time_unavailable()
    prof = collect.run(["true"], bpf=False)
    split = time_section.summarize(Records(prof.records))["cpu_split"]
    assert split["irq_unavailable"] == why
    p = oslens("appscale", "--cpu-counts", "1", "--reps", "1", "--json", "--", "true", db=tmp_path / "s.db")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["rows"]
    assert rows and all(r["irq_unavailable"] == why for r in rows)
    if why:  # not 0: unavailable
        assert all(r["irq_softirq_s"] is None for r in rows)
    assert json.loads(p.stdout)["machine"]["kernel"]["config"]
