"""The explorer on tiny hand-built transition systems: shortest witnesses, limits, determinism."""
from __future__ import annotations

from dataclasses import dataclass, replace

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


class FirstMoves(Grid):
    """A Grid whose probe schedule takes the last successor (increment the second counter first), counting the states
    whose successors were asked for: the probe asks for none."""

    def __init__(self, n: int, k: int | None = None):
        super().__init__(n, k)
        self.expanded = 0

    def successors(self, s):
        self.expanded += 1
        return super().successors(s)

    def probe_schedules(self):
        return (self.first_move,)

    def first_move(self, s):
        succs = Grid.successors(self, s)
        return succs[-1] if succs else None


def test_probe_answers_with_the_first_schedule_when_it_shows_a_finding():
    g = Grid(5, k=0)  # (0, 0) again is never reached: no finding on any schedule
    assert explore(g, Limits(stop_at_first=True, probe=True)).found == []

    class Stuck(FirstMoves):
        def first_move(self, s):
            return None if s == (0, 3) else super().first_move(s)

        def successors(self, s):
            return [] if s == (0, 3) else super().successors(s)

    sys = Stuck(5)
    e = explore(sys, Limits(stop_at_first=True, probe=True))
    assert [f.finding.code for f in e.found] == ["stuck"] and e.found[0].terminal
    assert e.found[0].path == (("inc", 1),) * 3 and e.extra == {"probe": 3}
    assert sys.expanded == 0  # nothing searched: the schedule answered
    assert replay(sys, e.found[0].path)[-1][1] == (0, 3)
    # a finding on a transition of that schedule: its path ends with that transition
    sys = FirstMoves(5, k=5)
    e = explore(sys, Limits(stop_at_first=True, probe=True))
    assert [f.finding.code for f in e.found] == ["meet"] and not e.found[0].terminal
    assert e.found[0].path == (("inc", 1),) * 5 + (("inc", 0),) * 5 and sys.expanded == 0
    assert (e.states, e.transitions, e.depth, e.stopped) == (11, 10, 10, "first-finding")


def test_probe_without_a_finding_leaves_the_search_as_it_was():
    for lim in (Limits(stop_at_first=True, depth_first=True), Limits(stop_at_first=True)):
        with_probe = explore(FirstMoves(4, k=2), replace(lim, probe=True))
        without = explore(FirstMoves(4, k=2), lim)
        # (the probe's schedule runs (0,1), (0,2), ... and never meets (2, 2): the search finds it, as before)
        assert [(f.finding.code, f.path) for f in with_probe.found] == [(f.finding.code, f.path) for f in without.found]
        assert (with_probe.states, with_probe.transitions, with_probe.depth) == \
            (without.states, without.transitions, without.depth)
        assert "probe" not in with_probe.extra


def test_probe_stays_within_max_states():
    class Long(FirstMoves):
        def first_move(self, s):  # a schedule with a finding at its 30th step
            t = (s[0], s[1] + 1)
            return ("inc", 1), t, ((F("late"),) if t[1] == 30 else ())

    e = explore(Long(50), Limits(stop_at_first=True, probe=True, max_states=20))
    assert e.stopped == "max-states" and all(f.finding.code != "late" for f in e.found)
    e = explore(Long(50), Limits(stop_at_first=True, probe=True, max_states=40))
    assert [f.finding.code for f in e.found] == ["late"] and len(e.found[0].path) == 30


def test_probe_counts_the_steps_of_all_its_schedules_and_stops_at_the_timeout():
    """`max_states` bounds the steps of the schedules together (the second starts with what the first left), and a
    probe past `timeout` gives up: the search after it stops at its first check, with no finding."""
    class Two(FirstMoves):
        def probe_schedules(self):
            quiet = lambda s: (("inc", 1), (s[0], s[1] + 1), ())  # noqa: E731 - never ends, shows nothing
            return (self.bounded(quiet, 600), self.bounded(self.late, 10_000))

        @staticmethod
        def bounded(move, n):
            return lambda s: move(s) if s[1] < n else None

        @staticmethod
        def late(s):  # a finding at its 500th step
            t = (s[0], s[1] + 1)
            return ("inc", 1), t, ((F("late"),) if t[1] == 500 else ())

        def terminal_findings(self, s):
            return ()

    e = explore(Two(2), Limits(stop_at_first=True, probe=True, max_states=1_200))
    assert [f.finding.code for f in e.found] == ["late"] and len(e.found[0].path) == 500
    e = explore(Two(2), Limits(stop_at_first=True, probe=True, max_states=1_000))  # 600 + 400: not as far as 500
    assert all(f.finding.code != "late" for f in e.found)
    e = explore(Two(2), Limits(stop_at_first=True, probe=True, max_states=1_200, timeout=0.0))
    assert e.found == [] and e.stopped == "timeout"
