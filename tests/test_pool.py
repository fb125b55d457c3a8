"""One search's expansions spread over forked processes (search/pool.py): the search is the one of one process,
state for state, and the states really were expanded elsewhere."""
from __future__ import annotations

import os
from collections import deque

import pytest

from pipecheck.core.forks import can_fork_beside
from pipecheck.lang.lower import resolve_roles
from pipecheck.model.system import Model
from pipecheck.pipeline.configurations import config_classes
from pipecheck.pipeline.verify import load_checked
from pipecheck.search import explore as explore_mod
from pipecheck.search import pool
from pipecheck.search.explore import Limits, explore
from pipecheck.search.footprints import Footprints
from pipecheck.search.por import Reduced
from conftest import ROOT

needs_children = pytest.mark.skipif(not can_fork_beside(), reason="no second CPU, fork or Linux: nothing is spread")


class _Where:
    """A reduction that says, in each expansion's note, which process worked it out."""

    def __init__(self, reduced: Reduced):
        self.r = reduced
        self.pids: list[int] = []

    def initial(self):
        return self.r.initial()

    def terminal_findings(self, s):
        return self.r.terminal_findings(s)

    def expand(self, s, order):
        succ, order, note = self.r.expand(s, order)
        return succ, order, (note, os.getpid())

    def count(self, note):
        self.r.count(note[0])
        self.pids.append(note[1])

    def stats(self):
        return self.r.stats()


def _search(spec: str, children: int, limits: Limits) -> tuple:
    sources: dict = {}
    k = load_checked(str(ROOT / spec), {}, sources)
    codes, sites = resolve_roles(k, sources)
    model = Model(k, config_classes(k, codes, "any")[0].classes, sites)
    system = _Where(Reduced(model, Footprints(model), True))
    exp = explore(system, limits, children=children)
    found = sorted((repr(f.finding.key), f.path, f.terminal, f.after_first) for f in exp.found)
    return (exp.complete, exp.states, exp.transitions, exp.depth, exp.stopped, exp.terminals, found,
            {k: v for k, v in exp.extra.items()}), system.pids


@needs_children
@pytest.mark.parametrize("spec,limits", [
    ("specs/cutlass_sm100_2sm_clc_gemm.pipe", Limits(max_states=1500)),
    ("specs/cutlass_sm90_pingpong_bug_early_release.pipe", Limits(stop_at_first=True, after_first=400)),
    ("specs/fa4_forward_sm100.pipe", Limits(max_states=1200)),
])
def test_a_search_spread_over_processes_is_the_search_of_one(monkeypatch, spec, limits):
    """Every frontier is shared from the first state on: the states, transitions, findings with their witnesses and
    the reduction's counts are those of the search in one process, and children expanded many of the states."""
    monkeypatch.setattr(explore_mod, "SPREAD_AFTER", 0.0)
    monkeypatch.setattr(pool, "NARROW", 0)
    one, here = _search(spec, 0, limits)
    spread, pids = _search(spec, 2, limits)
    assert spread == one
    assert set(here) == {os.getpid()}
    elsewhere = sum(1 for p in pids if p != os.getpid())
    assert len(set(pids)) == 3 and elsewhere > len(pids) // 10


def test_an_entry_handed_out_and_not_given_back_is_left_on_the_frontier():
    """A search that stops takes no more entries: those handed to children go back to the head of its frontier, in
    order, so the search still reports them unexpanded."""
    frontier = deque((i, i, 0, ()) for i in range(40))
    gen = pool.spread(frontier, lambda s, order: ([], order, ()), 2)
    taken = [next(gen)[0][0] for _ in range(3)]
    gen.close()
    assert taken == [0, 1, 2]
    assert [e[0] for e in frontier] == list(range(3, 40))


@needs_children
def test_a_child_that_raises_raises_in_the_search_at_that_state():
    def expand(s, order):
        if s == 7:
            raise ValueError("state 7")
        return [], order, ()

    frontier = deque((i, i, 0, ()) for i in range(40))
    seen = []
    with pytest.raises(ValueError, match="state 7"):
        for entry, _ in pool.spread(frontier, expand, 2):
            seen.append(entry[0])
    assert seen == list(range(7))


@needs_children
def test_a_child_that_dies_leaves_its_batches_to_the_search():
    """A child killed mid-search (for memory, by a signal) is not an answer: its batch and everything after it are
    expanded by the search's own process, and every entry comes back once, in order."""
    me = os.getpid()

    def expand(s, order):
        if os.getpid() != me and s == 100:
            os._exit(1)
        return [], order, (s, os.getpid())

    # 200 entries: batches of 48 for this process (0-47), child 0 (48-95), child 1 (96-143, where 100 kills it), ...
    frontier = deque((i, i, 0, ()) for i in range(200))
    got = [(entry[0], result[2][1]) for entry, result in pool.spread(frontier, expand, 2)]
    assert [s for s, _ in got] == list(range(200)) and not frontier
    by = dict(got)
    assert all(by[s] != me for s in range(48, 96))  # child 0 answered before child 1 died
    assert all(by[s] == me for s in range(96, 200))  # from the dead child's batch on, all here


@needs_children
def test_large_states_do_not_stall_the_pipes():
    """States and answers far larger than a pipe holds: the search hands a child its next batch while that child
    hands back the answer to the one before (a child reads its batches as they come). The alarm only turns a stall
    into a failure; nothing here is timed."""
    import signal

    big = b"x" * 400_000

    def expand(s, order):
        return [(s[0], s, ())], order, ()

    class Stalled(Exception):  # (not an OSError, which the pool takes for a dead child)
        pass

    def stalled(*_):
        raise Stalled("the pipes stalled")

    old = signal.signal(signal.SIGALRM, stalled)
    signal.alarm(60)
    try:
        frontier = deque(((i, big), i, 0, ()) for i in range(300))
        got = [entry[0][0] for entry, _ in pool.spread(frontier, expand, 2)]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert got == list(range(300))
