"""The searches of one parameter point, in order, on one process or several (--jobs).

`run_in_order` gives each search's `Exploration` in the order asked, the same whatever the
number of processes. The one thing a search takes from those before it is the cause budget:
the states it may explore past its first finding (Options.cause_budget for one search,
causes.TOTAL over the spec, `CauseBudget`). Searches that run at once cannot know it, so
each runs ahead with the budget left when they start, and when its turn comes the result is
kept only where the exact budget gives the same search; otherwise (more than three
configurations with findings whose continuations ran long) it runs again here with the exact
budget. Every search builds its own reduction (`Search.system`): its seed order learns as it
goes (search/por.py), so a fresh one is what makes a second run the first one's equal.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import time

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
        return min(self.left, self.per_search) if self.on and self.left > 0 else 0

    def spend(self, exp: Exploration) -> None:
        self.left -= exp.extra.get("after_first", 0)


@dataclass
class Search:
    """One exploration to run: `system()` builds what it searches and the visited set's encoder, fresh."""

    system: Callable[[], tuple[Any, Any]]
    limits: Callable[[], Limits]  # read when the search starts (the time left under --timeout)


def reduced_system(model: Any, base: Any, options: Options) -> tuple[Any, Interner | None]:
    """What one search of `model` explores, built fresh: the reduction around it (or its symmetric `base`),
    and the visited set's encoder."""
    system = Reduced(base, Footprints(model)) if options.reduce else base
    return system, Interner(options.stats) if options.compact else None


def limits_now(limits: Limits, start: float) -> Limits:
    """The limits of a search that starts now: --timeout counts from the start of the run (`start`)."""
    if limits.timeout is None:
        return limits
    return replace(limits, timeout=max(limits.timeout - (time.perf_counter() - start), 0.0))


def _run(search: Search, budget: int, progress: Callable | None) -> Exploration:
    system, encode = search.system()
    limits = search.limits()
    if budget:  # past the first finding (and past every transition that raised one): its cause and consequences
        limits = replace(limits, after_first=budget)
    return explore(system, limits, progress, encode)


def _same(exp: Exploration, ran: int, exact: int) -> bool:
    """Whether a search run with `ran` states past its first finding is the one `exact` would have run."""
    if ran == exact or not exp.found:
        return True
    # it found something and the budgets differ: the same search only if it ended within the smaller one
    # (it then never reached its budget, so any budget it stayed within ends it the same way)
    return 0 < exact and exp.extra.get("after_first", 0) <= exact


def run_in_order(searches: Sequence[Search], budget: CauseBudget, jobs: int,
                 progress: Callable | None) -> Iterator[Exploration]:
    if jobs <= 1 or len(searches) <= 1 or not workers.can_fork():
        for search in searches:
            exp = _run(search, budget.now(), progress)
            budget.spend(exp)
            yield exp
        return
    ahead = budget.now()
    results = workers.in_order([lambda s=s: _run(s, ahead, None) for s in searches], jobs)
    try:
        for search in searches:
            exp = next(results)
            exact = budget.now()
            if not _same(exp, ahead, exact):
                exp = _run(search, exact, progress)
            elif progress is not None:  # the live line shows the searches as they come in
                progress(exp.states, exp.depth, exp.seconds)
            budget.spend(exp)
            yield exp
    finally:
        results.close()
