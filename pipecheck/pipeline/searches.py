"""The searches of a run (its configuration classes, at each parameter point), in order, on one
process or several (--jobs).

`SearchResults` gives each search's `Exploration` in the order asked, the same whatever the
number of processes. The one thing a search takes from those before it is the cause budget:
the states it may explore past its first finding (Options.cause_budget for one search,
causes.TOTAL over the spec, `CauseBudget`). Searches that run at once cannot know it, so
each runs ahead with the budget it would have if every search still out before it spent all of
its own (`CauseBudget.after`: a failing spec's configurations mostly find something), and when
its turn comes the result is kept only where the exact budget gives the same search; otherwise
(one before it found nothing, and this one used all it had) it runs again here with the exact
budget. Every search builds its own reduction (`Search.system`), with caches of its own. The
search that runs in the run's own process has the expansions of its wide frontiers spread over
`jobs` processes (search/pool.py): the same search, state for state.
"""
from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from ..search.explore import Exploration, Limits, explore
from ..search.footprints import Footprints
from ..search.por import Reduced
from ..search.visited import Interner
from . import causes, workers
from .result import Options


class CauseBudget:
    """States past first findings: at most `per_search` in one search, `causes.TOTAL` over one spec."""

    def __init__(self, stop_at_first: bool, per_search: int):
        self.on = stop_at_first and per_search > 0
        self.per_search = per_search
        self.left = causes.TOTAL

    def now(self) -> int:
        """A search that starts while some of the spec's budget is left goes on for all of its own: so a
        search's budget is all or nothing, and one that ran ahead seldom needs to run again."""
        return self.per_search if self.on and self.left > 0 else 0

    def after(self, running: int) -> int:
        """The budget of a search that starts while `running` searches before it are still out, were they all to
        spend theirs: what it will have when the searches before it found something each (a failing spec's
        configurations mostly do), so it seldom runs again."""
        return self.per_search if self.on and self.left - running * self.per_search > 0 else 0

    def spend(self, exp: Exploration) -> None:
        self.left -= exp.extra.get("after_first", 0)


@dataclass
class Search:
    """One exploration to run: `system()` builds what it searches and the visited set's encoder, fresh."""

    system: Callable[[], tuple[Any, Any]]
    limits: Callable[[], Limits]  # read when the search starts (the time left under --timeout)
    # what to run beside the search from its first finding, given the states explored then (the lockstep re-check of
    # pipeline/verify.py), as (a tag saying what it is, the call), in a child process (`workers.beside`; only for a
    # search run in the run's own process: its `Exploration.beside`); None: nothing
    beside: Callable[[int], tuple[Any, Callable[[], Any]]] | None = None
    # the same work started before the first finding, once the search has run `EARLY_AFTER` seconds without one (a
    # search that long most often meets its first finding late, or not at all), on a CPU the search leaves idle:
    # its `tag` and `call`, and `found(states)`, told the states at the first finding (pipeline/verify.py
    # `EarlyRecheck`); it is the search's `Exploration.beside` instead of the one `beside` would start then
    early: Callable[[], Any] | None = None


# seconds a search runs without a finding before its `Search.early` work starts beside it: searches shorter than this
# (most) start none, and a long one has its re-check under way while it goes on
EARLY_AFTER = 0.25


def reduced_system(model: Any, base: Any, options: Options) -> tuple[Any, Interner | None]:
    """What one search of `model` explores, built fresh: the reduction around it (or its symmetric `base`),
    and the visited set's encoder."""
    system = Reduced(base, Footprints(model), options.chains) if options.reduce else base
    return system, Interner(options.stats) if options.compact else None


def limits_now(limits: Limits, start: float) -> Limits:
    """The limits of a search that starts now: --timeout counts from the start of the run (`start`)."""
    if limits.timeout is None:
        return limits
    return replace(limits, timeout=max(limits.timeout - (time.perf_counter() - start), 0.0))


def _run(search: Search, budget: int, progress: Callable | None, here: bool, children: int = 0) -> Exploration:
    """`search`'s exploration; `here`: it runs in the run's own process, which may start its `beside` work;
    `children`: processes that may work out its expansions (search/pool.py)."""
    system, encode = search.system()
    limits = search.limits()
    if budget:  # past the first finding (and past every transition that raised one): its cause and consequences
        limits = replace(limits, after_first=budget)
    started: list = []  # the work started beside the search (None: none could be), with its `found` hook or None
    first = long = None
    if here and search.beside is not None:
        def first(states: int) -> None:
            if started:  # started early: told the states now
                if started[0][1] is not None:
                    started[0][1](states)
                return
            tag, call = search.beside(states)
            started.append((workers.beside(call, tag), None))
    if here and search.early is not None:
        def early() -> None:
            work = search.early()
            child = workers.beside(work.call, work.tag, idle=True)
            started.append((child, work.found if child is not None else None))
        long = (EARLY_AFTER, early)
    try:
        exp = explore(system, limits, progress, encode, first, children, long)
    except BaseException:  # (a limit of the run's watch, an error of the model): the work beside it stops too
        if started and started[0][0] is not None:
            started[0][0].cancel()
        raise
    if started:
        exp.beside = started[0][0]
    return exp


def _same(exp: Exploration, ran: int, exact: int) -> bool:
    """Whether a search run with `ran` states past its first finding is the one `exact` would have run."""
    if ran == exact or not exp.found:
        return True
    # it found something and the budgets differ: the same search only if it went on past its first finding and
    # ended within the smaller budget (it then never reached its own, and any budget it stayed within ends it the
    # same way); a budget of 0 does not go on at all
    smaller = min(ran, exact)
    return smaller > 0 and exp.extra.get("after_first", 0) <= smaller


class SearchResults:
    """The explorations of `searches`, one `next()` each, in their order (the iterable may be lazy: it is read
    a few searches ahead of the results with several processes, one at a time with one); `skip()` passes over
    one that is no longer wanted. `close()` stops the processes still running."""

    def __init__(self, searches: Iterable[Search], budget: CauseBudget, jobs: int, progress: Callable | None):
        self._searches = iter(searches)
        self._budget, self._progress, self._jobs = budget, progress, jobs
        self._handed: deque[Search] = deque()  # searches given to the workers, in order
        self._results = workers.in_order(self._calls(), jobs) if jobs > 1 and workers.can_fork() else None
        self._pid = os.getpid()

    def _calls(self) -> Iterator[Callable[[], tuple[Exploration, int]]]:
        for search in self._searches:
            ahead = self._budget.after(len(self._handed))  # exact unless one before it finds nothing, or less
            self._handed.append(search)
            # (a lone search runs in this process: workers.in_order starts no child for it)
            yield lambda s=search, ahead=ahead: (self._here(s, ahead), ahead)

    def _here(self, search: Search, ahead: int) -> Exploration:
        """A search of `_calls`: the lone one runs in this process, its expansions spread over it and `jobs - 1`
        children."""
        here = os.getpid() == self._pid
        return _run(search, ahead, None, here, self._jobs - 1 if here else 0)

    def next(self) -> Exploration:
        """The next search's exploration (StopIteration when there is none)."""
        if self._results is None:
            exp = _run(next(self._searches), self._budget.now(), self._progress, True)
        else:
            kind, got = next(self._results)
            search = self._handed.popleft()
            if kind == "raise":
                raise got
            exp, ahead = got
            exact = self._budget.now()
            if not _same(exp, ahead, exact):
                if exp.beside is not None:
                    exp.beside.cancel()
                exp = _run(search, exact, self._progress, True)
            elif self._progress is not None:  # the live line shows the searches as they come in
                self._progress(exp.states, exp.depth, exp.seconds)
        self._budget.spend(exp)
        return exp

    def skip(self) -> None:
        """Pass over the next search: not run (with several processes, its result, or its error, is dropped)."""
        if self._results is None:
            next(self._searches)
            return
        kind, got = next(self._results)  # what it returned or raised: nobody asks for it any more
        self._handed.popleft()
        if kind == "ok" and got[0].beside is not None:
            got[0].beside.cancel()

    def close(self) -> None:
        if self._results is not None:
            self._results.close()


def run_in_order(searches: Iterable[Search], budget: CauseBudget, jobs: int,
                 progress: Callable | None) -> Iterator[Exploration]:
    """Each search's exploration, in order (`SearchResults` as an iterator)."""
    results = SearchResults(searches, budget, jobs, progress)
    try:
        while True:
            try:
                exp = results.next()
            except StopIteration:
                return
            yield exp
    finally:
        results.close()
