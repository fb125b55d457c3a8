"""Python's cycle collector, paused while a run builds and searches its state space.

A search allocates millions of small tuples (states, footprints, ops, plans) and keeps most of them in its visited
set and caches; none of them form reference cycles (a run's set-up leaves a few hundred objects in cycles, whatever
its states: tests/test_collector.py). The cycle collector is started by allocation counts, and each
full collection walks every container object alive, so as the caches grow it spends more and more time finding
nothing: a third of the search's time on the pingpong benchmark (7/15/8: 4.4 s with it, 2.9-3.4 s without),
15-19 % on FA4, with the same peak memory (benchmarks/collector.py measures both). Reference counting still frees
every object that is not in a cycle, and the collector is running again once the run is over (a library caller's
process keeps it as it had it); its first pass then frees the set-up's cycles."""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """The cycle collector off for the block (children forked in it inherit that), on again after it where it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
