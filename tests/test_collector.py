"""A run pauses Python's cycle collector (core/collector.py): that it is on again after the run, where it was, and
that a search makes no reference cycles (what makes the pause free of cost in memory)."""
from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

import pytest
from conftest import ROOT

from pipecheck.core import collector
from pipecheck.pipeline.result import Options
from pipecheck.pipeline.verify import verify_file

T = TypeVar("T")


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


def _collected(work: Callable[[], T]) -> tuple[T, int]:
    """(What `work()` gives, the objects the collector frees in reference cycles from its start on: every pass, its
    automatic ones and the one after `work` alike, counted through `gc.callbacks`.)"""
    gc.collect()
    found: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "stop":
            found.append(info["collected"])

    gc.callbacks.append(count)
    try:
        out = work()
        gc.collect()
    finally:
        gc.callbacks.remove(count)
    return out, sum(found)


def _cyclic(spec: str, overrides: tuple) -> tuple[int, int]:
    """(The states a run explored, the objects it left in reference cycles: what the collector finds once it is on
    again after the run, its first automatic pass and then ours.)"""
    def states() -> int:
        r = verify_file(str(ROOT / spec), replace(Options(), overrides=overrides, jobs=1))
        assert gc.isenabled()
        return sum(run.exploration.states for run in r.runs)

    return _collected(states)


@pytest.mark.parametrize("spec, small, large", [
    ("benchmarks/specs/pingpong_fixed.pipe",  # verified
     (("STAGES", 2), ("K_TILES", 2), ("TILES", 2)), (("STAGES", 4), ("K_TILES", 6), ("TILES", 4))),
    ("benchmarks/specs/pingpong_bug_no_store_drain.pipe",  # findings: causes, report, lockstep re-check
     (("STAGES", 2), ("K_TILES", 2), ("TILES", 2)), (("STAGES", 4), ("K_TILES", 6), ("TILES", 4))),
])
def test_the_cycles_a_run_leaves_do_not_grow_with_its_states(spec, small, large):
    """A run leaves a few hundred objects in reference cycles, made once (its set-up: the parse, the model); its
    search makes none, so the collector it pauses has nothing to find in the states and caches that grow with it."""
    few, left_few = _cyclic(spec, small)
    many, left_many = _cyclic(spec, large)
    assert many > 2 * few
    assert left_many <= left_few + 20


def test_the_cycle_count_sees_cycles_made_while_paused():
    """`_collected` is not blind: cycles made with the collector paused are found once it is on again."""
    def make() -> None:
        with collector.paused():
            for _ in range(1000):
                a: list = []
                a.append(a)
            del a

    _, left = _collected(make)
    assert left >= 1000
