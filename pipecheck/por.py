"""Partial-order reduction: explore only a persistent set of transitions in each state.

A persistent set T is a set of processes such that nothing the other processes can do
before some transition of T runs is dependent on T's transitions (Godefroid 1996). The
model describes each process's future as a sequence of operations with a footprint
(objects read/written/incremented), the resources it provides (arrivals, bytes, joins)
and what it needs to run; this module knows nothing else. Because every state space here
is acyclic, a persistent-set search visits every terminal state and every finding.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

# Footprint modes: "r" read, "w" write, "i" commutative increment (commutes with other "i"),
# "k" keyed write (third element the value written: writes of the same value commute),
# "c" counted (an arrival of `amount`, third element) and "t" byte count: while the counted
# amounts on an object stay below its budget (the arrivals its phase still owes), counted and
# byte operations commute with each other and with reads; otherwise they act as writes.
Footprint = tuple[tuple, ...]


@dataclass(frozen=True)
class Op:
    footprint: Footprint
    provides: tuple[tuple[Any, int], ...] = ()
    # needs(avail) -> whether the op can become enabled given resources others may provide; None = always
    needs: Callable[[Mapping[Any, int]], bool] | None = None
    need_resources: tuple[Any, ...] = ()
    spawns: tuple["Op", ...] = ()  # async operations this op starts (e.g. the landing of a TMA load)


@dataclass
class Process:
    key: Any
    enabled: bool  # whether its head op can run now
    ops: Sequence[Op]  # the head first; may stop early
    exhaustive: bool  # False: the future was cut off; assume it may touch anything
    # processes whose heads run as one transition with this one (lanes of a warp in lockstep): a
    # persistent set holds all of them or none; their head footprints together are the move's
    bundle: tuple = ()


class ReducibleSystem(Protocol):
    def processes(self, state: Any, enabled: set) -> tuple[list[Process], Mapping[Any, int]]: ...


_QUIET = frozenset({"r", "c", "t"})


def _conflict(a: Footprint, b: Footprint, loud: Mapping[Any, int]) -> bool:
    for ea in a:
        obj, ma = ea[0], ea[1]
        for eb in b:
            if eb[0] != obj:
                continue
            mb = eb[1]
            if ma == "r" and mb == "r" or ma == "i" and mb == "i":
                continue
            if ma == "k" and mb == "k" and ea[2] == eb[2]:
                continue
            if ma in _QUIET and mb in _QUIET:
                level = loud.get(obj, 0)
                if level == 0 or level == 1 and ma == "c" and mb == "c":
                    continue
            return True
    return False


def _loud(ops: list[Footprint], budgets: Mapping[Any, int]) -> dict:
    """Per counted object: 0 when its operations cannot complete what is owed (they all commute),
    1 when together they may complete it exactly (arrivals still commute with each other),
    2 when they may overflow it (nothing commutes)."""
    totals: dict = {}
    touched: set = set()
    for fp in ops:
        for e in fp:
            if e[1] == "c":
                totals[e[0]] = totals.get(e[0], 0) + e[2]
                touched.add(e[0])
            elif e[1] == "t":
                touched.add(e[0])
    out = {}
    for obj in touched:
        total, budget = totals.get(obj, 0), budgets.get(obj, 0)
        if total > budget:
            out[obj] = 2
        elif total == budget:
            out[obj] = 1
    return out


class _Avail(dict):
    def __missing__(self, key):
        return 0


def _reach(procs: list[Process], frozen: set) -> tuple[_Avail, list[tuple[int, Footprint]], set[int]]:
    """What processes outside `frozen` can do before any of `frozen` moves (an over-approximation):
    the resources they may provide, the footprints of the operations they may run, and which of
    them have a future cut off by the horizon (assumed to touch anything)."""
    avail = _Avail()
    pos = {i: 0 for i, p in enumerate(procs) if p.key not in frozen}
    done_ops: list[tuple[int, Footprint]] = []
    unbounded: set[int] = set()
    changed = True
    while changed:
        changed = False
        for i in pos:
            p = procs[i]
            ops = p.ops
            k = pos[i]
            while k < len(ops):
                op = ops[k]
                if op.needs is not None and not (k == 0 and p.enabled) and not op.needs(avail):
                    break
                k += 1
                changed = True
                done_ops.append((i, op.footprint))
                for res, amount in op.provides:
                    avail[res] += amount
                for sp in op.spawns:
                    done_ops.append((i, sp.footprint))
                    for res, amount in sp.provides:
                        avail[res] += amount
            pos[i] = k
            if k >= len(ops) and not p.exhaustive:
                unbounded.add(i)
    return avail, done_ops, unbounded


def persistent(procs: list[Process], budgets: Mapping[Any, int]) -> set | None:
    """Keys of a persistent set of processes with at least one enabled head, or None for all."""
    enabled = [p for p in procs if p.enabled]
    if len(enabled) <= 1:
        return None
    best: set | None = None
    best_n = len(enabled)
    # async completions first: they are most often independent of everything else
    order = sorted(enabled, key=lambda p: 0 if p.key[0] != "g" else 1)
    for seed in order:
        t = _close(procs, {seed.key}, budgets, best_n)
        if t is None:
            continue
        n = sum(1 for p in procs if p.enabled and p.key in t)
        if n < best_n:
            best, best_n = t, n
            if n == 1:
                break
    return best


def _bundled(procs: list[Process], index: dict, t: set) -> set:
    """`t` with every process that moves together with one of its members."""
    todo = list(t)
    while todo:
        for k in procs[index[todo.pop()]].bundle:
            if k not in t and k in index:
                t = t | {k}
                todo.append(k)
    return t


def _close(procs: list[Process], t: set, budgets: Mapping[Any, int], bound: int) -> set | None:
    """Grow `t` until it is persistent; None once it has `bound` enabled processes (no better than known)."""
    index = {p.key: i for i, p in enumerate(procs)}
    while True:
        t = _bundled(procs, index, t)
        if sum(1 for k in t if procs[index[k]].enabled) >= bound:
            return None
        avail, ops, unbounded = _reach(procs, t)
        if unbounded:
            t = t | {procs[i].key for i in unbounded}
            if len(t) == len(procs):
                return None
            continue
        heads = [procs[index[k]] for k in t]
        head_fps = [h.ops[0].footprint for h in heads if h.enabled]
        loud = _loud(head_fps + [fp for _, fp in ops], budgets)
        by_obj: dict = {}
        for i, fp in ops:
            for e in fp:
                by_obj.setdefault(e[0], []).append((i, e))
        add: set = set()
        for fp in head_fps:
            for e in fp:
                for i, e2 in by_obj.get(e[0], ()):
                    if procs[i].key in add:
                        continue
                    if _conflict((e,), (e2,), loud):
                        add.add(procs[i].key)
        for h in heads:
            if h.enabled:
                continue
            op = h.ops[0] if h.ops else None
            if op is None or op.needs is None or op.needs(avail):
                # it could be enabled from outside T: bring in whoever provides what it needs
                wanted = set(op.need_resources) if op is not None else set()
                for p in procs:
                    if p.key in t or p.key in add:
                        continue
                    if not wanted or any(r in wanted for o in p.ops for r, _ in o.provides) \
                            or any(r in wanted for o in p.ops for sp in o.spawns for r, _ in sp.provides):
                        add.add(p.key)
        if not add:
            return t
        t = t | add
        if len(t) == len(procs):
            return None


class Reduced:
    """A transition system that offers, in each state, only the transitions of a persistent set."""

    def __init__(self, system: Any):
        self.system = system
        self.reduced_states = 0

    def initial(self) -> Any:
        return self.system.initial()

    def successors(self, state: Any) -> list:
        succ = self.system.successors(state)
        if len(succ) <= 1:
            return succ
        keys = {self.system.process_of(a) for a, _, _ in succ}
        if len(keys) <= 1:
            return succ
        procs, budgets = self.system.processes(state, keys)
        t = persistent(procs, budgets)
        if t is None:
            return succ
        self.reduced_states += 1
        return [x for x in succ if self.system.process_of(x[0]) in t]

    def terminal_findings(self, state: Any) -> Sequence[Any]:
        return self.system.terminal_findings(state)

    def step(self, state: Any, action: Any) -> Any:
        return self.system.step(state, action)
