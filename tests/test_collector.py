"""A run pauses Python's cycle collector (core/collector.py): that it is on again after the run, where it was, and
that a search leaves no reference cycles behind (what makes the pause free of cost in memory)."""
from __future__ import annotations

import gc
from dataclasses import replace

import pytest
from conftest import ROOT

from pipecheck.core import collector
from pipecheck.pipeline.result import Options
from pipecheck.pipeline.verify import verify_file


def test_the_collector_is_off_in_the_block_and_as_it_was_after_it():
    assert gc.isenabled()
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves it as the outer one had it
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with collector.paused():
            raise RuntimeError
    assert gc.isenabled()
    gc.disable()  # a caller that runs without it keeps it off
    try:
        with collector.paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("spec, overrides", [
    ("benchmarks/specs/pingpong_fixed.pipe", (("STAGES", 4), ("K_TILES", 6), ("TILES", 4))),  # verified
    ("specs/cutlass_sm90_pingpong_bug_no_store_tail.pipe", ()),  # findings: causes, report, lockstep re-check
    ("tests/data/ptx/cute_dsl_tma_pipeline.ptx", ()),  # the PTX front end
])
def test_a_run_leaves_no_reference_cycles_and_the_collector_on(spec, overrides):
    """Every object a search makes is freed by reference counting: with the collector paused during the run, what
    it finds after it is what the run left in cycles (a cycle per state would be thousands of objects here)."""
    gc.collect()
    r = verify_file(str(ROOT / spec), replace(Options(), overrides=overrides, jobs=1))
    states = sum(run.exploration.states for run in r.runs)
    assert states > 300
    assert gc.isenabled()
    assert gc.collect() < 50
