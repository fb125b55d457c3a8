"""Breadth-first exploration of any transition system with `initial`, `successors`, `terminal_findings`.

It knows nothing of barriers: states are hashable, actions replayable, findings carry a
`key`. BFS makes every counterexample a shortest one; the order is deterministic.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from ..core.records import record
from . import pool


class TransitionSystem(Protocol):
    def initial(self) -> Any: ...
    def successors(self, state: Any) -> Sequence[tuple[Any, Any, Sequence[Any]]]: ...
    def terminal_findings(self, state: Any) -> Sequence[Any]: ...


CHAIN = "c"  # the action of one move that takes several steps: (CHAIN, (step, step, ...)) (chains.py)
CHECK_INTERVAL = 0.05  # seconds between checks of --timeout and --max-memory
SPREAD_AFTER = 0.1  # seconds a search runs in its own process before children work out its expansions (pool.py)


@record
class Limits:
    max_states: int | None = None
    timeout: float | None = None
    max_memory_mb: int | None = None
    stop_at_first: bool = False
    # Do not explore past a transition that raised a finding: the protocol is already broken there,
    # and what follows is mostly fallout. A state reached by a clean path is still explored.
    past_findings: bool = False
    # With stop_at_first: go on for this many more states after the first finding, now also past the transitions
    # that raised findings (its cause and consequences, pipeline/causes.py); the stop is still "first-finding".
    # The states, transitions and depth reported stay those at the first finding: what decided the verdict.
    after_first: int = 0
    # Depth-first instead of breadth-first: when any finding will do (a yes/no question, not a witness to show),
    # one is most often met after a few hundred states where breadth-first first visits every shorter schedule.
    # The state spaces are acyclic, so either order visits every reachable state of the reduced graph.
    depth_first: bool = False
    # With stop_at_first: before searching, follow the system's probe schedules (`probe_schedules`: one move a state,
    # without the reduction's work), and stop at a finding met on one: when any finding will do, a schedule that
    # shows one answers at the cost of its steps alone (the lockstep re-check of pipeline/verify.py).
    probe: bool = False


@dataclass
class Found:
    finding: Any
    path: tuple  # actions from the initial state; the last one raised the finding (none for terminal findings)
    terminal: bool
    after_first: bool = False  # found by Limits.after_first, past the first finding

    @property
    def steps(self) -> int:
        """How many steps the witness shows: a private run (chains.py) is one action of several steps."""
        return sum(len(a[1]) if a[0] == CHAIN else 1 for a in self.path)


@dataclass
class Exploration:
    complete: bool
    states: int
    transitions: int
    depth: int
    found: list[Found]
    stopped: str | None  # why exploration stopped early: "max-states", "timeout", "max-memory"
    seconds: float
    terminals: int = 0
    extra: dict = field(default_factory=dict)
    # work its caller started beside the search at its first finding (pipeline/searches.py), in this process only
    beside: Any = field(default=None, compare=False, repr=False)


def _path(parents: list[tuple[int, Any]], index: int) -> tuple:
    acts = []
    while index > 0:
        p, a = parents[index]
        acts.append(a)
        index = p
    return tuple(reversed(acts))


def rss_mb() -> float:
    """Resident memory of this process in MB (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        import os
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        return 0.0


def explore(system: TransitionSystem, limits: Limits = Limits(),
            progress: Callable[[int, int, float], None] | None = None,
            key: Callable[[Any], Any] | None = None,
            on_first: Callable[[int], None] | None = None, children: int = 0,
            on_long: tuple[float, Callable[[], None]] | None = None) -> Exploration:
    """Visit every reachable state once, in BFS order; keep the first occurrence of each finding.

    `key` (injective) is what the visited set stores instead of the state itself (compact.py);
    the frontier keeps the states it still has to expand. With `stop_at_first`, `on_first` is told the states
    explored when the first finding is found (the states the exploration reports), before the search goes on
    past it (`after_first`).

    A system with `expand(state, order) -> (successors, their order, note)` (the reduction, por.py) is handed with
    each state the order its expansion returned for the state it was reached from (one for all its successors, or a
    dict of them by action), and `count(note)` for each state
    expanded. `children`: once the search has run `SPREAD_AFTER` seconds, that many forked processes work out the
    expansions (pool.py); the search is the same, state for state. `on_long` (seconds, call): the call is made once
    when the search has run that long without a finding, and without a frontier wide enough for the pool to share
    (work started beside such a search would take CPUs from it)."""
    start = time.perf_counter()
    if limits.probe and limits.stop_at_first:
        hit = _probe(system, limits, start)
        if hit is not None:
            steps = len(hit[0].path)
            return Exploration(False, steps + 1, steps, steps, hit, "first-finding", time.perf_counter() - start,
                               int(hit[0].terminal), {"probe": steps})
    init = system.initial()
    index: dict[Any, int] = {key(init) if key is not None else init: 0}
    parents: list[tuple[int, Any]] = [(-1, None)]
    frontier: deque[tuple[Any, int, int, Any]] = deque([(init, 0, 0, ())])
    expand = getattr(system, "expand", None)
    count = getattr(system, "count", None)
    if expand is None:
        successors = system.successors
        expand, count = (lambda state, order: (successors(state), order, ())), None
    found: dict[Any, Found] = {}
    transitions = 0
    depth = 0
    terminals = 0
    stopped = None
    tick = 0
    next_check = start  # the first expansion is checked too: a small graph must still honour a tight limit
    first_at: tuple | None = None  # (states, transitions, depth) when the first finding was found (after_first)
    held: list = []  # transitions that raised findings before the first was found, for the after_first search
    take = frontier.pop if limits.depth_first else frontier.popleft
    source = pool.in_turn(frontier, take, expand)
    spread_at = start + SPREAD_AFTER if children > 0 and not limits.depth_first else None
    long_at = start + on_long[0] if on_long is not None else None
    # a frontier this wide is one the pool shares out: the CPUs are the search's, and `on_long` is not called at all
    wide = pool.NARROW * (children + 1)
    try:
        while True:
            got = next(source, None)
            if got is None:
                break
            (state, sid, d, _), (succs, order, note) = got
            if count is not None:
                count(note)
            depth = max(depth, d)
            if not succs:
                terminals += 1
                for f in system.terminal_findings(state):
                    if f.key not in found:
                        found[f.key] = Found(f, _path(parents, sid), True, first_at is not None)
            per_move = type(order) is dict  # a seed order per successor (por.Reduced.expand)
            for action, nxt, findings in succs:
                transitions += 1
                o = order[action] if per_move else order
                if findings:
                    for f in findings:
                        if f.key not in found:
                            found[f.key] = Found(f, _path(parents, sid) + (action,), False, first_at is not None)
                    if not limits.past_findings and first_at is None:
                        if limits.after_first:
                            held.append((sid, action, nxt, d + 1, o))
                        continue
                k = key(nxt) if key is not None else nxt
                if k not in index:
                    nid = len(parents)
                    index[k] = nid
                    parents.append((sid, action))
                    frontier.append((nxt, nid, d + 1, o))
            if long_at is not None and len(frontier) >= wide:
                long_at = None
            if limits.stop_at_first and found:
                if on_first is not None:
                    on_first(len(parents))
                    on_first = None
                if first_at is None and limits.after_first:
                    first_at = (len(parents), transitions, depth)
                    for psid, action, nxt, nd, o in held:  # the transitions that raised the findings: now explored too
                        k = key(nxt) if key is not None else nxt
                        if k not in index:
                            index[k] = len(parents)
                            parents.append((psid, action))
                            frontier.append((nxt, len(parents) - 1, nd, o))
                if first_at is None or len(parents) > first_at[0] + limits.after_first:
                    stopped = "first-finding"
                    break
            tick += 1
            now = time.perf_counter()
            if progress is not None and tick & 1023 == 0:
                progress(len(parents), depth, now - start)
            # by the clock, not by a count of states: one state can have tens of thousands of successors
            # (a `choose` over a wide range), so a thousand expansions may take minutes
            if now >= next_check:
                next_check = now + CHECK_INTERVAL
                if long_at is not None and now >= long_at:
                    long_at = None
                    if not found:
                        on_long[1]()  # type: ignore[index]
                if spread_at is not None and now >= spread_at:  # long enough to be worth the processes
                    spread_at = None
                    source = pool.spread(frontier, expand, children)
                if limits.timeout is not None and now - start > limits.timeout:
                    stopped = "timeout"
                    break
                if limits.max_memory_mb is not None and rss_mb() > limits.max_memory_mb:
                    stopped = "max-memory"
                    break
            if limits.max_states is not None and len(parents) > limits.max_states:
                stopped = "max-states"
                break
    finally:
        source.close()  # the children expanding states, if any, stop
    complete = stopped is None or (stopped == "first-finding" and not frontier)
    states = len(parents)
    extra = {}
    if first_at is not None:  # what decided the verdict; the states past it looked for causes and consequences
        extra["after_first"] = states - first_at[0]
        (states, transitions, depth), stopped, complete = first_at, "first-finding", False
    if getattr(key, "census", False):  # --stats: the visited keys, for search.census
        extra["visited"] = (key, list(index))
    stats = getattr(system, "stats", None)
    if stats is not None:  # what the system says of its own search (the reduction's sets)
        extra.update(stats())
    return Exploration(complete, states, transitions, depth, list(found.values()),
                       None if complete else stopped, time.perf_counter() - start, terminals, extra)


def _probe(system: TransitionSystem, limits: Limits, start: float) -> list[Found] | None:
    """The findings of the first of the system's probe schedules that shows some (`Limits.probe`): those of the
    transition or end state where it first shows them; None where none does within `limits.max_states` steps in
    all, or once past `limits.timeout` (the search that follows stops at its first check). A system's
    `probe_schedules()` gives each schedule as the one move it makes in a state ((action, state, findings), or None
    where nothing can move); without them, the schedule that takes the first successor in every state.

    Its steps are not states of the search, and no `progress` hears of them: a watch that counts a search's states
    against a budget (the early re-check, pipeline/verify.py) counts those of the search alone, so a probe that shows
    nothing leaves the search that follows with the budget it had."""
    limit = limits.max_states
    taken = 0
    for move_of in probe_schedules(system):
        state = system.initial()
        path: list = []
        while limit is None or taken < limit:
            taken += 1
            if taken & 255 == 0 and limits.timeout is not None and time.perf_counter() - start > limits.timeout:
                return None
            move = move_of(state)
            if move is None:
                ends = system.terminal_findings(state)
                if ends:
                    return [Found(f, tuple(path), True) for f in ends]
                break
            action, state, findings = move
            path.append(action)
            if findings:
                firsts: dict = {}
                for f in findings:
                    firsts.setdefault(f.key, f)
                return [Found(f, tuple(path), False) for f in firsts.values()]
    return None


def probe_schedules(system: Any) -> tuple[Callable[[Any], tuple | None], ...]:
    """The schedules a probe follows in `system`: its own (`probe_schedules()`), or else the one that takes its first
    successor in every state."""
    own = getattr(system, "probe_schedules", None)
    if own is not None:
        return own()
    return (lambda state: next(iter(system.successors(state)), None),)


def replay(system: Any, path: Sequence[Any]) -> list[tuple[Any, Any, Sequence[Any]]]:
    """Re-run a path from the initial state: [(action, state after, findings)], state before first is initial().

    Each step recomputes the state's successors, so a witness costs what exploring its states did; the cause
    grouping and the report both replay it, so the last few replays are kept on the system (its own record,
    dropped with it). The caller must not change the list it gets."""
    key = tuple(path)
    memo = getattr(system, "replays", None)
    if memo is not None and key in memo:
        return memo[key]
    state = system.initial()
    out = []
    steps = getattr(system, "steps", None)
    for action in path:
        if action[0] == CHAIN and steps is not None:  # a private run (chains.py): each of its steps
            out.extend(steps(state, action))
            state = out[-1][1]
            continue
        state, findings = system.step(state, action)
        out.append((action, state, findings))
    if memo is None:
        try:
            memo = system.replays = {}
        except AttributeError:  # a system with fixed slots keeps none
            return out
    if len(memo) >= _REPLAYS_KEPT:
        memo.pop(next(iter(memo)))
    memo[key] = out
    return out


_REPLAYS_KEPT = 8  # per system: the witnesses of one configuration's findings
