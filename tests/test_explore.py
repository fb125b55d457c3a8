"""The explorer on tiny hand-built transition systems: shortest witnesses, limits, determinism."""
from __future__ import annotations

from dataclasses import dataclass

from pipecheck.search.explore import Limits, explore, replay


@dataclass(frozen=True)
class F:
    code: str

    @property
    def key(self):
        return (self.code,)


class Grid:
    """Two counters that each count to n; a finding when both equal k; deadlock-free."""

    def __init__(self, n: int, k: int | None = None):
        self.n, self.k = n, k

    def initial(self):
        return (0, 0)

    def successors(self, s):
        out = []
        for i in range(2):
            if s[i] < self.n:
                t = list(s)
                t[i] += 1
                t = tuple(t)
                found = (F("meet"),) if self.k is not None and t == (self.k, self.k) else ()
                out.append((("inc", i), t, found))
        return out

    def terminal_findings(self, s):
        return () if s == (self.n, self.n) else (F("stuck"),)

    def step(self, s, a):
        for act, t, f in self.successors(s):
            if act == a:
                return t, f
        raise KeyError(a)


def test_counts_every_state_once():
    e = explore(Grid(3))
    assert e.complete and e.states == 16 and e.transitions == 24 and e.depth == 6
    assert e.found == []


def test_shortest_witness_first():
    e = explore(Grid(5, k=2), Limits(stop_at_first=True))
    assert [f.finding.code for f in e.found] == ["meet"]
    assert len(e.found[0].path) == 4  # BFS: no shorter path to (2, 2)
    states = replay(Grid(5, k=2), e.found[0].path)
    assert states[-1][1] == (2, 2)


def test_terminal_findings():
    class Stuck(Grid):
        def successors(self, s):
            return [] if s == (1, 0) else super().successors(s)

    e = explore(Stuck(2))
    assert [f.finding.code for f in e.found] == ["stuck"]
    assert e.found[0].terminal and e.found[0].path == (("inc", 0),)


def test_max_states_stops_and_says_so():
    e = explore(Grid(50), Limits(max_states=100))
    assert not e.complete and e.stopped == "max-states" and e.states >= 100


def test_deterministic_order():
    a = explore(Grid(4, k=3), Limits(past_findings=True))
    b = explore(Grid(4, k=3), Limits(past_findings=True))
    assert [f.path for f in a.found] == [f.path for f in b.found]
    assert (a.states, a.transitions) == (b.states, b.transitions)


class Fan:
    """A path of `n` states, whose initial state also has `width` successors that end at once."""

    def __init__(self, n: int, width: int):
        self.n, self.width = n, width

    def initial(self):
        return ("p", 0)

    def successors(self, s):
        if s[0] != "p" or s[1] >= self.n:
            return []
        out = [(("next",), ("p", s[1] + 1), ())]
        if s[1] == 0:
            out += [(("leaf", i), ("leaf", i), ()) for i in range(self.width)]
        return out

    def terminal_findings(self, s):
        return ()


def test_work_beside_a_search_starts_only_while_its_frontier_stays_narrow():
    """`on_long` is called once a search has run its seconds without a finding (here at once), unless a frontier has
    been as wide as the pool shares out (pool.NARROW states a process): then the CPUs are the search's own."""
    from pipecheck.search import pool
    calls = []
    explore(Fan(50, 0), Limits(), on_long=(0.0, lambda: calls.append("narrow")), children=1)
    explore(Fan(50, 2 * pool.NARROW), Limits(), on_long=(0.0, lambda: calls.append("wide")), children=1)
    explore(Grid(5, 2), Limits(stop_at_first=True), on_long=(1e9, lambda: calls.append("late")))
    assert calls == ["narrow"]
