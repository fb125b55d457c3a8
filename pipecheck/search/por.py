"""Partial-order reduction: explore only a persistent set of transitions in each state.

A persistent set T is a set of processes such that nothing the other processes can do
before some transition of T runs is dependent on T's transitions (Godefroid 1996). The
model describes each process's future as a sequence of operations with a footprint
(objects read/written/incremented), the resources it provides (arrivals, bytes, joins)
and what it needs to run; this module knows nothing else. Because every state space here
is acyclic, a persistent-set search visits every terminal state and every finding.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from ..core.records import record
from .explore import probe_schedules

# Footprint modes: "r" read, "w" write, "i" commutative increment (commutes with other "i"),
# "k" keyed write (third element the value written: writes of the same value commute),
# "c" counted (an arrival of `amount`, third element; a fourth, the bytes it expects; a fifth, the
# count at which this arrival completes the object's generation, for named barriers), "u" a
# counted arrival of single plain arrivals that commute with each other at any count (no bytes,
# nothing recorded per phase: the barrier ends the same whatever their order), and "t"
# byte count (third element the bytes that land, None when unknown or not a landing): while the
# counted amounts on an object stay below its budget (the arrivals its phase still owes), counted
# and byte operations commute with each other and with reads; when they reach it exactly they
# still commute with each other if the bytes balance (see `_balanced`); otherwise they act as writes.
Footprint = tuple[tuple, ...]

# Loudness of an object in one closure step: what its quiet ("r", "c", "t") operations may do.
_SILENT, _COUNTED, _BALANCED, _LOUD = 0, 1, 2, 3


NEVER: tuple[tuple[Any, int], ...] = ((("never",), 1),)  # needs of an op nothing can enable (nobody provides it)


@record
class Op:
    footprint: Footprint
    provides: tuple[tuple[Any, int], ...] = ()
    # what the op needs others to provide before it can run: (resource, at least this much), all of
    # them; None: nothing (it runs whenever its process gets to it)
    needs: tuple[tuple[Any, int], ...] | None = None
    spawns: tuple["Op", ...] = ()  # async operations this op starts (e.g. the landing of a TMA load)
    # a wait that blocks now: the phase completions of its barrier it needs (`_late_waits`); 0 for every other op.
    # Not part of the footprint, which a model may keep per future (`Shape`): this depends on the state
    phases: int = 0
    # the op and its spawns together (derived): what the reduction walks
    all_provides: tuple[tuple[Any, int], ...] = field(init=False, repr=False, compare=False)
    all_footprint: Footprint = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.spawns:  # most ops: their own
            object.__setattr__(self, "all_provides", self.provides)
            object.__setattr__(self, "all_footprint", self.footprint)
            return
        object.__setattr__(self, "all_provides", self.provides + tuple(x for sp in self.spawns for x in sp.provides))
        object.__setattr__(self, "all_footprint", self.footprint + tuple(e for sp in self.spawns for e in sp.footprint))


@record
class Shape:
    """A process's operations as the reduction walks them: runs of operations that start at one
    that may block (`segs`: first op, end op, what the run provides) and, per object, the
    operations that touch it (op index, footprint entry; by op index). Both depend only on the
    footprints and provisions, so a model may build a shape once per future and reuse it."""
    segs: tuple[tuple[int, int, tuple[tuple[Any, int], ...]], ...]
    touches: Mapping[Any, Sequence[tuple[int, tuple]]]
    summed: tuple = field(default=(), compare=False)  # per run, what it provides with one pair per resource
    # per object, its distinct entries (`_distinct`), filled in as the closure asks
    distinct: dict = field(default_factory=dict, compare=False, repr=False)


def _distinct(shape: Shape, obj: Any) -> tuple[tuple[tuple, int, list[int]], ...]:
    """The distinct footprint entries of a shape's operations on `obj`, each with the first op index that has it and
    all of them (sorted), in the order of their first op: a future touches a barrier with a few kinds of entry many
    times over, and the closure's conflict test reads only the entry."""
    hit = shape.distinct.get(obj)
    if hit is None:
        at: dict[tuple, list[int]] = {}
        for j, e in shape.touches.get(obj, ()):
            js = at.get(e)
            if js is None:
                at[e] = [j]
            else:
                js.append(j)
        hit = shape.distinct[obj] = tuple((e, js[0], js) for e, js in at.items())
    return hit


def shape_of(ops: Sequence[Op], starts: Sequence[int] | None = None) -> Shape:
    """The shape of `ops`; `starts`: the ops that may wait, in order (default: those with `needs`); op 0 starts the
    first run whatever it is."""
    n = len(ops)
    if starts is None:
        starts = [j for j in range(1, n) if ops[j].needs is not None]
    bounds = [0] + [j for j in starts if j] + [n] if n else []
    segs = []
    summed = []
    for a, b in zip(bounds, bounds[1:]):
        prov: tuple = ()
        for j in range(a, b):
            got = ops[j].all_provides
            if got:
                prov += got
        segs.append((a, b, prov))
        summed.append(_summed(prov))
    touches: dict[Any, list[tuple[int, tuple]]] = {}  # (lists: a shape is read, never changed)
    get = touches.get
    for j, op in enumerate(ops):
        for e in op.all_footprint:
            lst = get(e[0])
            if lst is None:
                touches[e[0]] = [(j, e)]
            else:
                lst.append((j, e))
    return Shape(tuple(segs), touches, tuple(summed))


def plan_of(ops: Sequence[Op], shape: Shape) -> tuple:
    """What `_reach` walks of a process: per run of `shape`, the needs of its first op, what the run provides
    (an amount per resource) and where it ends; a run whose first op needs nothing (a wait that passes now)
    is walked with the run before it, which is all a walk can tell of it."""
    out: list[tuple] = []
    folded = False
    for first, end, prov in shape.segs:
        needs = ops[first].needs
        if needs is None and out:
            prev_needs, prev_prov, _ = out[-1]
            out[-1] = (prev_needs, prev_prov + prov, end)
            folded = True
        else:
            out.append((needs, prov, end))
    if not folded and len(shape.summed) == len(out):  # each row one run: its provisions summed once per shape
        return tuple((needs, summed, end) for (needs, _, end), summed in zip(out, shape.summed))
    return tuple((needs, _summed(prov), end) for needs, prov, end in out)


def _summed(prov: tuple) -> tuple:
    """(resource, amount) pairs with one pair per resource, in the order they first come."""
    if len(prov) < 2:
        return prov
    total: dict = {}
    for res, amount in prov:
        total[res] = total.get(res, 0) + amount
    return prov if len(total) == len(prov) else tuple(total.items())


@dataclass(slots=True)
class Process:
    key: Any
    enabled: bool  # whether its head op can run now
    ops: Sequence[Op]  # the head first; may stop early
    exhaustive: bool  # False: the future was cut off; assume it may touch anything
    # every resource any of its ops (or their spawns) may provide, when the model knows it without building them
    provides: frozenset | None = None
    # processes whose heads run as one transition with this one (lanes of a warp in lockstep): a
    # persistent set holds all of them or none; their head footprints together are the move's
    bundle: tuple = ()
    shape: Shape | None = None  # built from `ops` when the model gives none
    plan: tuple | None = None  # `plan_of(ops, shape)`, when the model keeps one per op list


class ReducibleSystem(Protocol):
    """What the reduction needs to know of a system: which process takes an action, and each process's
    future as footprints (`Op`s) in a state."""

    def process_of(self, action: Any) -> Any: ...

    def processes(self, state: Any, enabled: set, horizons: dict | None = None) \
            -> tuple[list[Process], Mapping[Any, int]]: ...


_QUIET = frozenset({"r", "c", "u", "t"})
_QUIET_ALL: Mapping[Any, int] = {}  # every object silent: only the conflicts no loudness can lift
_COUNTS = frozenset({"c", "u"})


def _conflict(a: Footprint, b: Footprint, loud: Mapping[Any, int]) -> bool:
    for ea in a:
        obj, ma = ea[0], ea[1]
        for eb in b:
            if eb[0] != obj:
                continue
            mb = eb[1]
            if ma == "r" and mb == "r" or ma == "i" and mb == "i" or ma == "u" and mb == "u":
                continue
            if ma == "k" and mb == "k" and ea[2] == eb[2]:
                continue
            if ma in _QUIET and mb in _QUIET:
                level = loud.get(obj, _SILENT)
                if level == _SILENT or level == _COUNTED and ma in _COUNTS and mb in _COUNTS \
                        or level == _BALANCED and ma != "r" and mb != "r":
                    continue
            return True
    return False


class Flat:
    """What `_reach` walks, over small ints, kept for a whole search: resource names as ids, and each plan as rows of
    (needs as (id, amount) pairs or None, provisions as (id, amount) pairs, end)."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self._by_obj: dict[int, tuple] = {}  # id(plan) -> (plan, its rows): the entry keeps the plan alive
        self._rows: dict[tuple, tuple] = {}  # a row by name -> by id (plans of one future share most rows)
        self._needs: dict[int, tuple] = {}  # id(rows) -> (rows, what they need most of): the entry keeps them alive

    def rid(self, res: Any) -> int:
        i = self.ids.get(res)
        if i is None:
            i = self.ids[res] = len(self.ids)
        return i

    def rows(self, plan: tuple) -> tuple:
        """A plan's rows by resource id."""
        known = self._rows
        out = []
        for row in plan:
            hit = known.get(row)
            if hit is None:
                needs, prov, end = row
                rid = self.rid
                if len(known) >= _FLAT_KEPT:
                    known.clear()
                hit = known[row] = (None if needs is None else tuple((rid(r), a) for r, a in needs),
                                    tuple((rid(r), a) for r, a in prov), end)
            out.append(hit)
        return tuple(out)

    def needed(self, rows: tuple) -> dict[int, int]:
        """Per resource id, the most any of these rows needs of it (kept per rows, like `of`)."""
        hit = self._needs.get(id(rows))
        if hit is not None and hit[0] is rows:
            return hit[1]
        need: dict[int, int] = {}
        for needs, _, _ in rows:
            if needs is not None:
                for res, amount in needs:
                    if need.get(res, 0) < amount:
                        need[res] = amount
        if len(self._needs) >= _NEEDS_KEPT:
            self._needs.clear()
        self._needs[id(rows)] = (rows, need)
        return need

    def of(self, plan: tuple) -> tuple:
        """The rows of a plan the model keeps (one object per op list)."""
        hit = self._by_obj.get(id(plan))
        if hit is not None and hit[0] is plan:
            return hit[1]
        if len(self._by_obj) >= _FLAT_KEPT:
            self._by_obj.clear()
        rows = self.rows(plan)
        self._by_obj[id(plan)] = (plan, rows)
        return rows


_FLAT_KEPT = 200_000  # plans kept with their rows (then dropped all at once: memory stays bounded)
_NEEDS_KEPT = 20_000  # rows kept with what they need most of (`Flat.needed`)


class _Index:
    """One state's processes, seen by every seed tried: who is where, the resources each process may
    ever provide (built on first use), and what the closure has already computed."""

    def __init__(self, procs: list[Process], flat: Flat):
        self.procs = procs
        self.flat = flat
        self.keys = [p.key for p in procs]
        self.where = {p.key: i for i, p in enumerate(procs)}
        self.enabled = [p.enabled for p in procs]
        self.shapes = shapes = [p.shape if p.shape is not None else shape_of(p.ops) for p in procs]
        # processes with the very same op list (lanes of different warps at one point: the model keeps one
        # list per future and what its waits see) run in step in every reach, so the reach walks each kind once
        kinds: dict[tuple, list[int]] = {}
        for i, p in enumerate(procs):
            kinds.setdefault((p.enabled, p.exhaustive, id(shapes[i]), id(p.ops)), []).append(i)
        self.kinds = list(kinds.values())
        # per kind: its plan's rows, whether its head is enabled, whether its future is whole
        self.kind_plan = []
        self.kind_head = []
        self.kind_whole = []
        for members in self.kinds:
            i = members[0]
            p = procs[i]
            self.kind_plan.append(flat.of(p.plan) if p.plan is not None else flat.rows(plan_of(p.ops, shapes[i])))
            self.kind_head.append(p.enabled)
            self.kind_whole.append(p.exhaustive)
        self.kind_of = [0] * len(procs)
        for g, members in enumerate(self.kinds):
            for i in members:
                self.kind_of[i] = g
        self._provides: list[frozenset] | None = None
        self._need: dict[int, int] = {}  # per resource id, `need_of`
        self._needed: list | None = None  # per kind, `Flat.needed` of its plan
        self._heads: dict | None = None  # `enabled_heads`
        self._supply: dict[int, int] | None = None
        self.base_ats: list[int] = []  # where each kind stands in the walk of everyone (`_reach` of no process)
        self.reach_memo: dict[frozenset, Reach] = {}
        self.close_memo: dict[frozenset, frozenset | None] = {}
        # the processes the closure of a thread group's seed took in because a walk ran past the end of their future,
        # cut off by the horizon (`Reduced._lengthened`); `thread_seed`: whether the closure grown now is of one
        self.cut: set[int] = set()
        self.thread_seed = False

    @property
    def provides(self) -> list[frozenset]:
        if self._provides is None:
            out = []
            for p in self.procs:
                if p.provides is not None:
                    out.append(p.provides)
                    continue
                out.append(frozenset(r for op in p.ops for r, _ in op.all_provides))
            self._provides = out
        return self._provides

    def enabled_heads(self) -> dict[Any, list[tuple[int, tuple]]]:
        """Per object, the footprint entries of the enabled processes' head ops (their spawns included) that touch
        it, as (process index, entry)."""
        if self._heads is None:
            heads: dict[Any, list[tuple[int, tuple]]] = {}
            for i, p in enumerate(self.procs):
                if p.enabled and p.ops:
                    for e in p.ops[0].all_footprint:
                        heads.setdefault(e[0], []).append((i, e))
            self._heads = heads
        return self._heads

    def need_of(self, res: int) -> int:
        """The most any run of any process needs of resource `res` (0: none needs it)."""
        need = self._need.get(res)
        if need is None:
            if self._needed is None:
                self._needed = [self.flat.needed(plan) for plan in self.kind_plan]
            need = 0
            for per_kind in self._needed:
                n = per_kind.get(res)
                if n is not None and n > need:
                    need = n
            self._need[res] = need
        return need

    def first_supply(self) -> dict[int, int]:
        """Per resource id, what the enabled processes' first runs provide: those run whatever else happens."""
        if self._supply is None:
            supply: dict[int, int] = {}
            for g, members in enumerate(self.kinds):
                plan = self.kind_plan[g]
                if self.kind_head[g] and plan:
                    for res, amount in plan[0][1]:
                        supply[res] = supply.get(res, 0) + amount * len(members)
            self._supply = supply
        return self._supply


Reach = tuple[list, list[tuple[int, list[int]]], list[int]]


def _reach(ix: _Index, frozen: frozenset) -> Reach:
    """What processes outside `frozen` can do before any of `frozen` moves (an over-approximation):
    the resources they may provide (by resource id, `Flat.ids`), how many operations of each kind of process
    may run (op count, its members outside `frozen`; an op's spawned async operations run with it), and which
    processes have a future cut off by the horizon (assumed to touch anything)."""
    hit = ix.reach_memo.get(frozen)
    if hit is not None:
        return hit
    if frozen and _saturated(ix, frozen):
        out = _without(ix, frozen)
        ix.reach_memo[frozen] = out
        return out
    where = ix.where
    held = {where[k] for k in frozen}  # their process indices
    live = []  # (kind, its members outside frozen)
    for g, members in enumerate(ix.kinds):
        left_in = [i for i in members if i not in held]
        if left_in:
            live.append((g, left_in))
    avail, ats = _walk(ix, live)
    if not frozen:
        ix.base_ats = ats
    pos = []
    unbounded = []
    kind_plan = ix.kind_plan
    kind_whole = ix.kind_whole
    for (g, members), r in zip(live, ats):
        plan = kind_plan[g]
        pos.append((plan[r - 1][2] if r else 0, members))
        if r == len(plan) and not kind_whole[g]:  # the walk ran past the end of a future cut off by the horizon
            unbounded.extend(members)
    out = (avail, pos, unbounded)
    ix.reach_memo[frozen] = out
    return out


def _saturated(ix: _Index, frozen: frozenset) -> bool:
    """Whether every resource the processes of `frozen` may provide is one that nothing needs more of than the
    enabled processes outside `frozen` provide by their first runs alone (which run whatever happens): then every
    need of the walk is met with or without them, and the walk without them is the walk of everyone, less them."""
    where, kind_of, kind_plan, kind_head = ix.where, ix.kind_of, ix.kind_plan, ix.kind_head
    # (only for processes of one run, asynchronous operations most often, where a twin's landing supplies the same
    # resource: a thread's future most often provides arrivals someone waits for, and the test would cost more than
    # it saves)
    if any(len(kind_plan[kind_of[where[key]]]) > 1 for key in frozen):
        return False
    own_first: dict[int, int] | None = None  # what the frozen processes' own first runs add to that supply
    for key in frozen:
        for _, prov, _ in kind_plan[kind_of[where[key]]]:  # (its one run, if any)
            for res, _ in prov:
                need = ix.need_of(res)
                if not need:
                    continue
                if own_first is None:
                    own_first = {}
                    for k in frozen:
                        g = kind_of[where[k]]
                        if kind_head[g]:
                            for r, amount in kind_plan[g][0][1]:
                                own_first[r] = own_first.get(r, 0) + amount
                if ix.first_supply().get(res, 0) - own_first.get(res, 0) < need:
                    return False
    return True


def _without(ix: _Index, frozen: frozenset) -> Reach:
    """`_reach` of `frozen` when `_saturated`: the reach of everyone with `frozen`'s processes and what they
    provided taken out (the same walk for every other process, as the walk is a least fixpoint)."""
    avail, pos, unbounded = _reach(ix, frozenset())
    ats = ix.base_ats
    where, kind_of, kind_plan = ix.where, ix.kind_of, ix.kind_plan
    avail = avail.copy()
    kept = pos.copy()  # the walk of everyone has every kind, in order: kind g is entry g
    gone = set()  # their process indices
    for key in frozen:
        i = where[key]
        gone.add(i)
        g = kind_of[i]
        for _, prov, _ in kind_plan[g][:ats[g]]:
            for res, amount in prov:
                avail[res] -= amount
        k, members = kept[g]
        kept[g] = (k, [j for j in members if j != i])
    return avail, [e for e in kept if e[1]], [i for i in unbounded if i not in gone] if unbounded else unbounded


def _walk(ix: _Index, live: list[tuple[int, list[int]]]) -> tuple[list, list[int]]:
    """The walk behind `_reach`: every kind goes as far as the resources the others provide let it (a least
    fixpoint, so the order of the walk does not matter); the provisions (a list by resource id) and the runs each
    kind passed."""
    kind_plan = ix.kind_plan
    kind_head = ix.kind_head
    n_res = len(ix.flat.ids)
    avail = [0] * n_res
    at = [0] * len(live)
    # a kind stopped at a run whose head needs more of a resource waits, in a heap per resource by the
    # amount it needs, until that resource reaches it
    waiting: list[list[tuple[int, int]] | None] = [None] * n_res
    todo = list(range(len(live)))
    push, pop = heapq.heappush, heapq.heappop
    while todo:
        n_kind = todo.pop()
        g, members = live[n_kind]
        n_members = len(members)
        plan = kind_plan[g]
        r = at[n_kind]
        n = len(plan)
        if r == 0 and n and kind_head[g]:  # an enabled head runs now, whatever it needs
            r = 1
            for res, amount in plan[0][1]:
                avail[res] += amount * n_members
                heap = waiting[res]
                if heap:
                    got = avail[res]
                    while heap and heap[0][0] <= got:
                        todo.append(pop(heap)[1])
        while r < n:
            needs, prov, _ = plan[r]
            if needs is not None:
                short = None
                for need in needs:
                    if avail[need[0]] < need[1]:
                        short = need
                        break
                if short is not None:
                    res = short[0]
                    heap = waiting[res]
                    if heap is None:
                        waiting[res] = [(short[1], n_kind)]
                    else:
                        push(heap, (short[1], n_kind))
                    break
            r += 1
            for res, amount in prov:
                avail[res] += amount * n_members
                heap = waiting[res]
                if heap:
                    got = avail[res]
                    while heap and heap[0][0] <= got:
                        todo.append(pop(heap)[1])
        at[n_kind] = r
    return avail, at


def persistent(procs: list[Process], budgets: Mapping[Any, Any], won: list | None = None,
               flat: Flat | None = None, index: list | None = None, recent: tuple = (),
               seeds: frozenset | None = None) -> set | None:
    """Keys of a persistent set of processes with at least one enabled head, or None for all.

    `recent`: the processes that were alone a persistent set on the way to this state, the latest first (`won`
    gets the key of the one that is here, if one is): they are tried first (any order gives a persistent set; a
    good one saves the failing tries, and the process that was alone persistent a step ago most often is again).
    `flat` keeps the walks' plans and results across states (one per search). `index` gets the state's `_Index`
    (for `commutes`). `seeds`: the only processes tried as seeds (None: every enabled one)."""
    enabled = [p for p in procs if p.enabled]
    if len(enabled) <= 1:
        return None
    best_n = len(enabled)
    if seeds is not None:
        enabled = [p for p in enabled if p.key in seeds]
    best: set | None = None
    # threads first (a thread's next step is most often invisible to the rest), then async completions
    if recent:
        rank = {k: i - len(recent) for i, k in enumerate(recent)}  # the latest lowest; the others 0
        order = sorted(enabled, key=lambda p: (rank.get(p.key, 0), 0 if p.key[0] == "g" else 1))
    else:
        order = sorted(enabled, key=lambda p: 0 if p.key[0] == "g" else 1)
    ix = _Index(procs, flat if flat is not None else Flat())
    if index is not None:
        index.append(ix)
    if not any(p.bundle for p in procs):
        # Without lockstep bundles the loop below stops at the first seed whose closure holds one enabled process,
        # and a closure only grows: so that seed is found as well by giving up each closure as soon as it takes in
        # a second enabled process (most seeds that fail, fail there), and the loop runs only when none has one.
        starts: list = []
        # the seeds whose heads clash with a later seed's: grown first in the loop below (their closures, which take
        # that seed in, are most often the smallest: found first, they bound the others' growth sooner)
        first_up: list = []
        tried: set = set()
        for seed in order:
            other = _clashes(ix, seed)
            if other is not None:  # it fails here: its closure is grown in the loop below, if that runs, first
                # (and not even there when that other head was a seed before it: this closure takes that seed in, and
                # is seldom smaller than its closure, which was grown or passed over already; a closure is only ever
                # larger than the one from that seed where freezing more cuts what the others can reach, and any
                # closure is a persistent set, so passing it over costs states at most, never a finding)
                if ix.keys[other] not in tried:
                    first_up.append((seed, frozenset((seed.key,))))
                tried.add(seed.key)
                continue
            tried.add(seed.key)
            stop: list = []
            ix.thread_seed = seed.key[0] == "g"
            t = _close(ix, frozenset((seed.key,)), budgets, 2, stop)
            if t is not None:
                if won is not None:
                    won.append(seed.key)
                return set(t)
            # its growth passed through the set it stopped at, and goes on from there as it would have
            starts.append((seed, stop[0]))
        ix.close_memo = {}  # their None meant "two enabled", not "no better than the best so far"
        starts = first_up + starts
    else:
        starts = [(seed, frozenset((seed.key,))) for seed in order]
    for seed, start in starts:
        if start is None:  # its closure takes in every process
            continue
        ix.thread_seed = seed.key[0] == "g"
        t = _close(ix, start, budgets, best_n)
        if t is None:
            continue
        n = sum(1 for k in t if ix.enabled[ix.where[k]])
        if n < best_n:
            best, best_n = set(t), n
            if n == 1 or len(t) == len(_bundled(ix, frozenset((seed.key,)))):  # one move: none is smaller
                if won is not None:
                    won.append(seed.key)
                break
    return best


def _enabled_in(ix: _Index, t: set | None) -> int:
    """How many enabled processes the persistent set `t` of `ix`'s state holds (None: every one)."""
    if t is None:
        return sum(ix.enabled)
    return sum(1 for k in t if ix.enabled[ix.where[k]])


def _clashes(ix: _Index, seed: Process) -> int | None:
    """Another enabled process whose head the head of process `seed` conflicts with, however loud their objects (its
    index), or None: that head is in every reach without `seed`, so `seed`'s closure takes in that process too."""
    heads = ix.enabled_heads()
    me = ix.where[seed.key]
    for e in seed.ops[0].footprint:
        for i, e2 in heads.get(e[0], ()):
            if i != me and _conflict((e,), (e2,), _QUIET_ALL):
                return i
    return None


def _close(ix: _Index, t: frozenset, budgets: Mapping[Any, Any], bound: int,
           stops: list | None = None) -> frozenset | None:
    """Grow `t` until it is persistent; None once it has `bound` enabled processes (no better than known).

    Growing is a function of `t` alone, so every set met on the way from an earlier seed leads to
    the same end: that end is remembered (None stays None, as the bound only falls). `stops` gets the
    set the growth stopped at (None: it would hold every process), where a larger bound takes it on."""
    path: list[frozenset] = []
    result: frozenset | None = None
    nxt: frozenset | None = t
    while True:
        if t in ix.close_memo:
            result = ix.close_memo[t]
            if result is not None and sum(1 for k in result if ix.enabled[ix.where[k]]) >= bound:
                result = None
            break
        path.append(t)
        if sum(1 for k in t if ix.enabled[ix.where[k]]) >= bound:
            break
        nxt = _grow(ix, t, budgets)
        if nxt is t:
            result = t
            break
        if nxt is None:
            break
        t = nxt
    for q in path:
        if q not in ix.close_memo or ix.close_memo[q] is not None:
            ix.close_memo[q] = result
    if stops is not None:
        stops.append(None if nxt is None else t)  # None: the growth would take in every process
    return result


def _unmet_flat(needs: tuple[tuple[Any, int], ...], avail: list, ids: Mapping[Any, int]) -> tuple[Any, int] | None:
    """The first need a reach's provisions (by resource id) do not cover, or None when all are (a resource without
    an id, or interned after the walk, was provided by nobody)."""
    n = len(avail)
    for need in needs:
        i = ids.get(need[0])
        if (avail[i] if i is not None and i < n else 0) < need[1]:
            return need
    return None


def _bundled(ix: "_Index", t: frozenset) -> frozenset:
    """`t` with every process that moves together with one of its members (`t` itself when closed)."""
    extra = {k for key in t for k in ix.procs[ix.where[key]].bundle if k not in t and k in ix.where}
    return t | extra if extra else t


def _loudness(counted: list[tuple[tuple, int]], budgets: Mapping[Any, Any]) -> dict:
    """Per object the counted and byte operations may touch (entry, how many processes run it): how loud
    they are. Below the budget no phase can complete: all quiet operations commute."""
    totals: dict = {}
    expects: dict = {}  # bytes the arrivals expect; None once one the balance cannot follow (negative)
    lands: dict = {}  # bytes that land; None once a byte operation is not a landing of known size
    owns: dict = {}  # per object whose arrivals carry their own completion count: (smallest, largest)
    for e, times in counted:
        obj = e[0]
        if e[1] in _COUNTS:
            totals[obj] = totals.get(obj, 0) + e[2] * times
            if len(e) > 3:
                _add(expects, obj, e[3] * times if e[3] >= 0 else None)
                if len(e) > 4:
                    lo_hi = owns.get(obj)
                    owns[obj] = (e[4], e[4]) if lo_hi is None else (min(lo_hi[0], e[4]), max(lo_hi[1], e[4]))
        elif e[1] == "t":
            totals.setdefault(obj, 0)
            nbytes = e[2] if len(e) > 2 else None
            _add(lands, obj, nbytes * times if nbytes is not None and nbytes > 0 else None)
    loud: dict = {}
    for obj, total in totals.items():
        own = owns.get(obj)
        if own is not None:
            # arrivals that each complete a generation at their own thread count (a named barrier): none can
            # complete it in any order while the total stays below the smallest count less the threads in;
            # at that total, only one count among them means the last arrival completes it, whichever it is
            arrived = budgets.get((obj, "arrived"), 0)
            budget = own[0] - arrived
            if total > budget or total == budget and own[0] != own[1]:
                loud[obj] = _LOUD
            elif total == budget:
                loud[obj] = _COUNTED
            continue
        budget = budgets.get(obj, 0)
        if total > budget:
            loud[obj] = _LOUD
        elif total == budget:
            loud[obj] = _BALANCED if _balanced(budgets.get((obj, "tx")), expects.get(obj, 0), lands.get(obj, 0)) \
                else _COUNTED
    return loud


def _add(sums: dict, obj: Any, amount: int | None) -> None:
    """sums[obj] += amount, where None (unknown) absorbs everything."""
    have = sums.get(obj, 0)
    sums[obj] = None if have is None or amount is None else have + amount


def _balanced(owed: tuple[int, int] | None, expects: int | None, lands: int | None) -> bool:
    """Whether arrivals that use up the pending count and landings of positive byte counts commute.

    With tx bytes owed now (`owed[0]`), the arrivals expecting `expects` more and landings of `lands`
    bytes, all of them in any order: the phase can complete only once every arrival is in, and then
    tx = owed + expects - (bytes landed so far) stays above 0 while a landing is still out, when
    owed + expects >= lands; so no operation but the last can complete it, whatever the order.
    `owed[1]` bounds |tx| (the range fault): no order may pass it."""
    if owed is None or expects is None or lands is None:
        return False
    tx, limit = owed
    return tx + expects >= lands and abs(tx) + expects + lands <= limit


def _grow(ix: _Index, t: frozenset, budgets: Mapping[Any, Any]) -> frozenset | None:
    """One step of the closure: `t` itself when it is persistent, None when it would hold everything."""
    procs = ix.procs
    bundled = _bundled(ix, t)
    if bundled is not t:  # a lockstep move is one transition: its lanes join together
        return None if len(bundled) == len(procs) else bundled
    avail, pos, unbounded = _reach(ix, t)
    if unbounded:
        if ix.thread_seed:
            ix.cut.update(unbounded)
        t = t | {ix.keys[i] for i in unbounded}
        return None if len(t) == len(procs) else t
    heads = [procs[ix.where[k]] for k in t]
    add = _conflicting(ix, pos, [h.ops[0].footprint for h in heads if h.enabled], budgets, False)
    for h in heads:
        if h.enabled:
            continue
        op = h.ops[0] if h.ops else None
        needs = None if op is None else op.needs
        if needs is None or _unmet_flat(needs, avail, ix.flat.ids) is None:
            # it could be enabled from outside T: bring in whoever provides what it needs
            wanted = {r for r, _ in needs} if needs else set()
            for i, key in enumerate(ix.keys):
                if key in t or key in add:
                    continue
                if not wanted or not wanted.isdisjoint(ix.provides[i]):
                    add.add(key)
    if not add:
        return t
    t = t | add
    return None if len(t) == len(procs) else t


def _conflicting(ix: _Index, pos: list, head_fps: list, budgets: Mapping[Any, Any], first: bool) -> set:
    """The keys of the processes outside a set whose operations within reach (`pos`, from `_reach`) conflict with
    the set's head footprints `head_fps`; with `first`, stop at the first such process."""
    # conflicts and loudness matter only for the objects the heads touch; loudness only for the pairs of quiet entries
    # (`_conflict`: any other pair conflicts or commutes however loud the object), and only through counted entries
    heads: dict[Any, tuple] = {}
    for fp in head_fps:
        for e in fp:
            heads[e[0]] = heads.get(e[0], ()) + (e,)
    keys, shapes = ix.keys, ix.shapes
    add: set = set()
    quiet: dict[Any, list[tuple[list[int], tuple]]] = {}  # object -> (the processes of a kind, quiet entry)
    counted: list[tuple[tuple, int]] = []  # the counted entries in reach on those objects, with how often they run
    for obj, hes in heads.items():
        hard_heads = tuple(he for he in hes if he[1] not in _QUIET)  # they conflict or commute however loud
        quiet_heads = len(hard_heads) < len(hes)
        reads_only = all(he[1] == "r" for he in hes if he[1] in _QUIET)  # (reads commute with reads)
        pairs = None
        for k, members in pos:
            shape = shapes[members[0]]
            if obj not in shape.touches:
                continue
            for e2, first_at, js in shape.distinct.get(obj) or _distinct(shape, obj):
                if first_at >= k:
                    break
                mode = e2[1]
                if mode in _QUIET:
                    if quiet_heads:  # a quiet pair: decided by the loudness, taken below
                        if mode != "r":
                            counted.append((e2, (len(js) if js[-1] < k else bisect_left(js, k)) * len(members)))
                        if mode != "r" or not reads_only:
                            if pairs is None:
                                pairs = quiet[obj] = []
                            pairs.append((members, e2, js, k))
                    if not hard_heads:
                        continue
                    against = hard_heads
                else:
                    against = hes
                if keys[members[-1]] not in add and _conflict(against, (e2,), _QUIET_ALL):
                    add.update(keys[i] for i in members)
                    if first:
                        return add
    if not quiet:
        return add
    loud = _loudness([(e, 1) for obj in quiet for e in heads[obj]] + counted, budgets)
    for obj, pairs in quiet.items():
        hes = tuple(he for he in heads[obj] if he[1] in _QUIET)
        if not hes or loud.get(obj, _SILENT) == _SILENT:
            continue
        # (only where a wait's read is among the pairs: the bound walks every counted entry in reach)
        late = _late_waits(obj, hes, counted, budgets) if any(e2[1] == "r" for _, e2, _, _ in pairs) else None
        for members, e2, js, upto in pairs:
            if late is not None and e2[1] == "r" and _all_late(ix.procs[members[0]].ops, js, upto, late):
                continue
            if keys[members[-1]] not in add and _conflict(hes, (e2,), loud):
                add.update(keys[i] for i in members)
                if first:
                    return add
    return add


def _late_waits(obj: Any, hes: tuple, counted: list[tuple[tuple, int]], budgets: Mapping[Any, Any]) -> int | None:
    """The fewest phase completions a wait on barrier `obj` that blocks now must need (`Op.phases`) to commute with the
    heads `hes`, or None when no such bound is known.

    It is known when the heads and everything in reach on `obj` are plain single arrivals ("u": no bytes, nothing
    recorded per phase) and no bytes are owed: then a phase completes exactly at every `count` arrivals after the
    `pending` now, whatever their order. A wait that needs k completions runs only once the others' arrivals
    completed k phases, and a head's arrival disables it (by completing one more: the parity flips back) or changes
    what it sees (the phase) only if it completes a phase there, which needs others' arrivals + the head's >= pending
    + k x count; below that the two commute and neither enables the other (arrivals never block; the wait changes
    only where its own thread stands)."""
    count = budgets.get((obj, "count"))
    owed = budgets.get((obj, "tx"))
    if count is None or owed is None or owed[0] != 0:
        return None
    total = 0
    for e in hes:
        if e[1] != "u" or e[3] != 0:
            return None
        total += e[2]
    for e, times in counted:
        if e[0] == obj:
            if e[1] != "u" or e[3] != 0:
                return None
            total += e[2] * times
    # the least k with total < pending + k x count
    return (total - budgets.get(obj, 0)) // count + 1


def _all_late(ops: Sequence[Op], js: list[int], upto: int, late: int) -> bool:
    """Whether every op of a future at indices `js` within reach (below `upto`) is a wait, in this state, that blocks
    and needs at least `late` phase completions (read from the ops of the state, not from the future's shape)."""
    n = len(ops)
    for j in js:
        if j >= upto:
            break
        if j >= n or ops[j].phases < late:
            return False
    return True


def commutes(ix: _Index, keys: frozenset, budgets: Mapping[Any, Any], footprints: list) -> bool:
    """Whether operations with these footprints, run by the processes `keys` alone, commute with everything the
    other processes of `ix`'s state can do before those move: the closure's test of `keys` (`_grow`) for other
    heads."""
    _, pos, unbounded = _reach(ix, keys)
    return not unbounded and not _conflicting(ix, pos, footprints, budgets, True)


_RECENT = 32  # the processes a seed order (`Reduced.expand`) remembers
_LENGTHEN = 2  # how much longer a future a walk ran past gets in the next try (`Reduced._lengthen`)
_LONGEST = 4  # the longest future it gets, in times the model's horizon


class Reduced:
    """A transition system that offers, in each state, only the transitions of a persistent set."""

    def __init__(self, system: Any, describer: ReducibleSystem | None = None, chains: bool = False):
        """`describer` names the process of each action and describes the processes of a state (footprints);
        by default the system describes itself. `chains`: a thread group that alone is persistent runs on
        through its private steps in one move (the describer's `chain`, search/chains.py)."""
        self.system = system
        self.describer = describer if describer is not None else system
        self._chain = getattr(self.describer, "chain", None) if chains else None
        self.chained = 0  # steps taken within runs, past each run's first (--stats)
        self.lengthened = 0  # states whose set was found with futures longer than the horizon (--stats)
        self.reduced_states = 0
        self.flat = Flat()  # the walks' plans and results, kept across states
        # per kind of persistent set (the sorted kinds of its processes: "g" thread groups, "l" landings, "m"
        # MMA units, "s" bulk stores, "k" commit arrivals, "x" exits), how many states offered only it (--stats)
        self.sets: dict[tuple, int] = {}
        self.full = 0  # states with several processes enabled where no smaller persistent set was found
        # a system that maps states to a canonical one (symmetry) may offer its successors before the
        # mapping: only the persistent ones are then mapped (the choice depends on the state alone)
        self._raw = getattr(system, "raw_successors", system.successors)
        self._canon = getattr(system, "canon_successors", None)
        # a system may also offer its successors per process as (action, moves), the moves a list or a function
        # that makes it when asked (the reduction keeps few of them)
        self._lazy = getattr(system, "lazy_successors", None)
        # whether the describer's futures may be lengthened (`_lengthened`; not under the loop-offset abstraction)
        self._lengthens = getattr(self.describer, "lengthens", True)

    def initial(self) -> Any:
        return self.system.initial()

    def probe_schedules(self) -> tuple:
        """The schedules `explore`'s probe follows: the system's own (`Model.probe_schedules`), without the
        reduction's work, or else the one that takes its first successor in every state."""
        return probe_schedules(self.system)

    def successors(self, state: Any) -> list:
        """The successors offered in `state`, the seed order reached here left out (`expand`)."""
        succ, _, note = self.expand(state)
        self.count(note)
        return succ

    def expand(self, state: Any, recent: tuple = ()) -> tuple[list, tuple | dict, tuple]:
        """(The successors offered in `state`, the seed order its successors inherit, what to `count` of it.)

        The seed order is one tuple for every successor, or, where several processes were offered, a dict from each
        successor's action to its own: the other processes offered come first there (a diamond closes where they are
        alone persistent in both branches, instead of the branches running on apart).

        `recent` is the seed order reached with the state (`persistent`): the processes that were alone persistent
        on the way here, the latest first. The successors are a function of the state and `recent` alone, so a
        search that hands each state the order of the state it was reached from (search/explore.py) explores the
        same graph however its expansions are spread over processes."""
        process_of = self.describer.process_of
        if self._lazy is None:
            moves = [(a, [(a, t, f)]) for a, t, f in self._raw(state)]
        else:
            moves = self._lazy(state)
        keys = {process_of(a) for a, _ in moves}
        t: set | None = None
        note: tuple = ()
        if len(keys) > 1:
            procs, budgets = self.describer.processes(state, keys)
            seen: list = []
            won: list = []
            t = persistent(procs, budgets, won, self.flat, seen, recent)
            lengthened = 0
            if seen and self._lengthens:
                first = t
                t, won, seen = self._lengthened(state, keys, budgets, recent, t, won, seen)
                lengthened = int(t is not first)
            if t is not None:
                note = (tuple(sorted(k[0] for k in t if k in keys)), 0, lengthened)
                moves = [x for x in moves if process_of(x[0]) in t]
                if won and (not recent or recent[0] != won[0]):
                    recent = (won[0],) + tuple(k for k in recent[:_RECENT - 1] if k != won[0])
            else:
                note = (None,)
        succ = [x for _, made in moves for x in (made() if callable(made) else made)]
        movers = [process_of(a) for a, _, _ in succ]
        if len(set(movers)) > 1:
            # several processes offered: the successor by one of them tries the others first, so that each branch
            # takes the others' moves next where they are alone persistent, and the branches meet again (a diamond)
            # instead of running on apart; any seed order gives a persistent set
            offered = sorted(set(movers), key=repr)
            orders = {}
            for (a, _, _), mine in zip(succ, movers):
                first = tuple(k for k in offered if k != mine)[:_RECENT]
                orders[a] = first + tuple(k for k in recent[:_RECENT - len(first)] if k not in first)
            return (succ if self._canon is None else self._canon(succ)), orders, note
        if t is not None and self._chain is not None and len(succ) == 1:
            move = self._run(state, succ[0], seen[0], process_of(succ[0][0]), frozenset(t), budgets)
            if move is not succ[0]:
                note = (note[0], len(move[0][1]) - 1, note[2])
            succ = [move]
        return (succ if self._canon is None else self._canon(succ)), recent, note

    def _lengthened(self, state: Any, keys: set, budgets: Mapping[Any, Any], recent: tuple, t: set | None,
                    won: list, seen: list) -> tuple[set | None, list, list]:
        """The persistent set `t` found in `state` (with `won` and `seen` of `persistent`), or a smaller one found
        with longer futures.

        A future is cut off at the model's horizon, and a process whose walk runs past the cut counts as touching
        anything: a closure takes it in, and with it what its head needs. Where that leaves more than one enabled
        process, the thread groups the closures took in that way get futures `_LENGTHEN` times as long, and each
        enabled thread group is tried again as a seed, up to `_LONGEST` times the horizon. A set with fewer enabled
        processes replaces `t`. Any set the closure finds is persistent; this only looks further for a smaller
        one, and the choice is a function of the state and `recent` alone (the search's graph does not depend on
        which process expands a state)."""
        ix = seen[-1]
        if not ix.cut:
            return t, won, seen
        n = _enabled_in(ix, t)
        if n <= 1 or any(p.bundle for p in ix.procs):
            return t, won, seen
        threads = frozenset(k for i, k in enumerate(ix.keys) if ix.enabled[i] and k[0] == "g")
        horizons: dict = {}
        while ix.cut and threads:
            grown = False
            for i in ix.cut:
                key = ix.keys[i]
                if key[0] == "g" and horizons.get(key, 1) < _LONGEST:
                    horizons[key] = horizons.get(key, 1) * _LENGTHEN
                    grown = True
            if not grown:
                break
            procs, _ = self.describer.processes(state, keys, horizons)
            seen2: list = []
            won2: list = []
            t2 = persistent(procs, budgets, won2, self.flat, seen2, recent, threads)
            ix = seen2[-1]
            if _enabled_in(ix, t2) < n:
                return t2, won2, seen2
        return t, won, seen

    def count(self, note: tuple) -> None:
        """Add one expansion's `note` (`expand`) to what `stats` says: the kinds of the persistent set it offered
        (None: every enabled process; nothing: one process, no choice), then the steps a run took past its first and
        whether the set was found with futures lengthened (`_lengthened`)."""
        if note:
            kind = note[0]
            if kind is None:
                self.full += 1
            else:
                self.reduced_states += 1
                self.sets[kind] = self.sets.get(kind, 0) + 1
                self.chained += note[1]
                self.lengthened += note[2]

    def _run(self, state: Any, move: tuple, ix: _Index, key: Any, t: frozenset, budgets: Mapping[Any, Any]) -> tuple:
        """The one move of process `key` (with the processes it moves with), the only move of the persistent set
        `t`, run on through its private steps. The processes of `t` that cannot move stay so while the move's
        steps change only where its own groups stand."""
        bundle = ix.procs[ix.where[key]].bundle or (key,)
        if bundle[0] != key or {k for k in t if ix.enabled[ix.where[k]]} != set(bundle):
            return move
        return self._chain(state, move, bundle, lambda fps: commutes(ix, t, budgets, fps))

    def terminal_findings(self, state: Any) -> Sequence[Any]:
        return self.system.terminal_findings(state)

    def step(self, state: Any, action: Any) -> Any:
        return self.system.step(state, action)

    def steps(self, state: Any, action: Any) -> list:
        return self.system.steps(state, action)

    def stats(self) -> dict:
        """What the reduction did, for `explore`'s record of the search: states where it offered a smaller set
        (by the kinds of process in the set), states where it offered every enabled process."""
        return {"reduced": self.reduced_states, "full": self.full, "chained": self.chained,
                "lengthened": self.lengthened, "sets": sorted(self.sets.items(), key=lambda kv: (-kv[1], kv[0]))}
