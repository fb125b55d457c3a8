"""The loop-offset abstraction (`--every K`): one exploration stands for every value of a loop bound.

A protocol whose roles run `for k in c .. K` over one parameter K reaches, after 2 x STAGES
iterations, a state that differs from an earlier one only by offsets: the tile tags and loop
counters are larger by some d, the ring counters by a multiple of 2 x STAGES, the phases of
the barriers those rings index by that multiple / STAGES, the wgmma group counters by what
their warpgroup issued. `Offset.shift` maps every state to the one with the smallest offsets,
each family of numbers on its own, so the state count stops growing with K.

K itself is not fixed up front. While every loop guard a step or the reduction's look-ahead
(EVERY_HORIZON visible statements) can cross is below K, K makes no difference: such states
are explored once, with K "far" (FAR in the K register). A step that raises the leading loop
counter M to M' is, for each K in M + NEAR + 1 .. M' + NEAR, the first step that comes within
NEAR of the end: its successor is also kept with that K written into every thread's K register,
and from there the run is the ordinary one for that K. Values of K too small to be far even at
the start are entered from a root state. A K written into a folded state stands for itself plus
the tiles' shift so far: far states carry that shift, up to the declared lower bound, in their K
register (FAR + shift), so only values of the declared range are written.

Soundness rests on the mapping commuting with every step, which `plan` checks on the lowered
code, refusing by name otherwise: K appears only as the bound of `for` loops that are not inside
another loop; a loop counter appears only in tile tags (`tile k`, `tile k + c`) and its own
increment; rings used in such a loop have one size, are read only through `.index` / `.phase`
and index every barrier the loop uses; branches inside the loop read no counter, there is no
`choose` and no value carried between iterations; no bulk-store group, cp.async or tcgen05
commit counter. Each concrete K-system is finite and acyclic, so the partial-order reduction
needs no cycle proviso: the folded graph contains a reduced graph of every K-system up to
offsets (docs/performance.md, "Loop-offset abstraction").
"""
from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..core.diagnostics import SpecError, error
from ..model.compiled import liveness, registers_read, ring_index
from ..model.ir import (ADVANCE, ARRIVE, ARRIVE_DROP, BRANCH, CHOOSE, COLL_WAIT, COMMIT_GROUP, COMPLETE_TX, CP_ASYNC,
                        CP_ASYNC_ARRIVE, EXPECT_TX, FENCE_INIT, INIT, INVAL, JUMP, LET, LOCAL_OPS, MMA, MMA_COMMIT,
                        MMA_WAIT, READ, RING, TMA_LOAD, TMA_STORE, WAIT, WAIT_GROUP, WRITE, Instr, Program, RConst,
                        ROp, RRef, RRing, RVar, Site)
from ..model.state import FAR_K, State, merge_groups
from ..model.system import FUTURE_HORIZON, Model
from .por import ReducibleSystem

FAR = FAR_K  # the K register of a state whose loops are nowhere near their end
ROOT = "every-k-root"  # `halted` of the root state, whose successors are the K-far start and the small K
EVERY_HORIZON = 24  # the reduction's look-ahead under --every (NEAR grows with it; docs/performance.md)

_REFUSED = (COMMIT_GROUP, WAIT_GROUP, CP_ASYNC, CP_ASYNC_ARRIVE, MMA_COMMIT)
_TAGGED = (TMA_LOAD, READ, WRITE, TMA_STORE)  # args[0] buffer, args[1] tile tag


class Refused(Exception):
    def __init__(self, message: str, site: int = -1):
        super().__init__(message)
        self.site = site


# ---------------------------------------------------------------- K as a register

def symbolic_programs(progs_a: Sequence[Program], progs_b: Sequence[Program], ka: int, kb: int, name: str,
                      ) -> list[Program]:
    """The programs lowered at K = ka and K = kb, merged into one that reads K from a register.

    Every constant that differs between the two must be K + c; the register is the program's
    last slot."""
    out = []
    for pa, pb in zip(progs_a, progs_b, strict=True):
        if len(pa.instrs) != len(pb.instrs) or pa.nslots != pb.nslots:
            raise Refused(f"the value of {name} changes the shape of a role's code (a loop or branch over it "
                          "is folded away for some values)")
        kslot = pa.nslots
        kvar = RVar(kslot, name)
        instrs = []
        for ia, ib in zip(pa.instrs, pb.instrs):
            if (ia.op, ia.site, ia.target) != (ib.op, ib.site, ib.target):
                raise Refused(f"the value of {name} changes the shape of a role's code", ia.site)
            args = merge_tree(ia.args, ib.args, ka, kb, kvar, name, ia.site)
            instrs.append(Instr(ia.op, args, ia.site, ia.target))
        out.append(Program(tuple(instrs), kslot + 1, tuple(pa.slot_names) + (name,)))
    return out


def merge_tree(a: Any, b: Any, ka: int, kb: int, kvar: RVar, name: str, site: int) -> Any:
    if type(a) is not type(b):
        raise Refused(f"the value of {name} changes the shape of an expression", site)
    if isinstance(a, RConst):
        if a.value == b.value:
            return a
        off = a.value - ka
        if b.value - kb != off:
            raise Refused(f"{name} enters an expression other than {name} + constant", site)
        return kvar if off == 0 else ROp("+", (kvar, RConst(off)))
    if isinstance(a, (tuple, list)):
        if len(a) != len(b):
            raise Refused(f"the value of {name} changes the shape of a role's code", site)
        return type(a)(merge_tree(x, y, ka, kb, kvar, name, site) for x, y in zip(a, b))
    if dataclasses.is_dataclass(a):
        changes = {}
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            m = merge_tree(x, y, ka, kb, kvar, name, site)
            if m is not x:
                changes[f.name] = m
        return dataclasses.replace(a, **changes) if changes else a
    if a != b:
        raise Refused(f"the value of {name} changes a role's code", site)
    return a


def bound_only(body: Any, kvar: RVar, name: str, site: int = -1) -> None:
    """Refuse a merged role body (lower.RoleCode) that reads K other than as the upper bound of a `for`."""
    if isinstance(body, (tuple, list)):
        if body and isinstance(body[-1], int) and not isinstance(body[-1], bool):
            site = body[-1]
        if len(body) == 6 and body[0] == "for":  # ("for", slot, lo, hi, body, site)
            bound_only(body[2], kvar, name, site)
            if body[3] != kvar:
                bound_only(body[3], kvar, name, site)
            bound_only(body[4], kvar, name, site)
            return
        for x in body:
            bound_only(x, kvar, name, site)
    elif body == kvar:
        raise Refused(f"{name} is used other than as the upper bound of a `for` loop", site)
    elif dataclasses.is_dataclass(body):
        for f in dataclasses.fields(body):
            bound_only(getattr(body, f.name), kvar, name, site)


# ---------------------------------------------------------------- the per-class plan

@dataclass
class ClassPlan:
    """Which registers of one thread class are counters, and what its code can still reach."""

    kslot: int
    guards: dict[int, int] = field(default_factory=dict)  # guard pc -> loop counter slot
    loopvars: frozenset = frozenset()
    rings: frozenset = frozenset()
    hidden: frozenset = frozenset()  # wgmma group counters
    family: tuple = ()  # every counter slot, sorted
    tconst: list = field(default_factory=list)  # per pc: a constant tile tag or loop start still reachable
    vinit: list = field(default_factory=list)  # per pc: the largest loop start still reachable
    rinit: list = field(default_factory=list)  # per pc: a ring of the family may still be (re)started
    exit_live: dict = field(default_factory=dict)  # guard pc -> counters live after the loop
    stride: int = 0  # the fewest visible statements of an iteration that has any (0: no loop over K)


@dataclass
class Plan:
    name: str
    lo: int
    stages: int  # the size of the rings of the loops (0: none)
    classes: list[ClassPlan]
    tbufs: frozenset  # buffer names whose tags follow a loop counter
    rbars: frozenset  # barrier names indexed by the loops' rings (anywhere): their phases shift with them
    near: int = 0  # how many guard crossings one step and the reduction's look-ahead can make
    horizon: int = FUTURE_HORIZON  # the look-ahead of the reduction (visible statements of a thread)


def _rings_in(e: Any, out: list) -> None:
    if isinstance(e, RRing):
        out.append(e)
    elif isinstance(e, ROp):
        for x in e.args:
            _rings_in(x, out)
    elif isinstance(e, RRef):
        for x in e.indices:
            _rings_in(x, out)
        if e.cta is not None:
            _rings_in(e.cta, out)
    elif isinstance(e, tuple):
        for x in e:
            _rings_in(x, out)


def _tag_form(e: Any, loopvars: frozenset) -> str:
    """'const', 'counter' (k, k + c, c + k with c >= 0) or 'other'."""
    if e is None or isinstance(e, RConst):
        return "const"
    if isinstance(e, RVar) and e.slot in loopvars:
        return "counter"
    if isinstance(e, ROp) and e.op == "+" and len(e.args) == 2:  # k - c could meet the EMPTY/CLOBBERED tags
        x, y = e.args
        if isinstance(x, RVar) and x.slot in loopvars and isinstance(y, RConst) and y.value >= 0:
            return "counter"
        if isinstance(y, RVar) and y.slot in loopvars and isinstance(x, RConst) and x.value >= 0:
            return "counter"
    return "other"


def _tags(ins: Instr) -> list[tuple[RRef, Any]]:
    """(buffer, tile tag) pairs an instruction names."""
    if ins.op in _TAGGED:
        return [(ins.args[0], ins.args[1])]
    if ins.op == MMA:
        return [(r, t) for r, t in ins.args[0]] + [(r, t) for r, t in ins.args[1]]
    return []


def _untagged(ins: Instr) -> tuple:
    """An instruction's operands without its tile tags."""
    if ins.op in _TAGGED:
        return (ins.args[0],) + ins.args[2:]
    if ins.op == MMA:
        return (tuple(r for r, _ in ins.args[0]), tuple(r for r, _ in ins.args[1])) + ins.args[2:]
    return ins.args


def _reach_from(succ: list[list[int]], value: list) -> list:
    """Per pc: the values of the pcs reachable from it (itself included), as a set."""
    n = len(succ)
    out: list[set] = [set(v) for v in value]
    changed = True
    while changed:
        changed = False
        for pc in range(n - 1, -1, -1):
            acc = out[pc]
            before = len(acc)
            for s in succ[pc]:
                acc |= out[s]
            if len(acc) != before:
                changed = True
    return out


def plan(name: str, lo: int, progs: Sequence[Program], sites: Sequence[Site]) -> Plan:
    """Check the merged programs against the abstraction's rules; raise Refused naming the statement."""
    plans: list[ClassPlan] = []
    tbufs: set[str] = set()
    rbars: set[str] = set()
    stages: set[int] = set()
    cache: dict[Program, ClassPlan] = {}
    for prog in progs:
        if prog in cache:
            plans.append(cache[prog])
            continue
        cp = _class_plan(prog, tbufs, stages)
        cache[prog] = cp
        plans.append(cp)
    for prog, cp in zip(progs, plans):
        for ins in prog.instrs:
            if ins.op == TMA_LOAD and any(getattr(r, "cta", None) is not None for r in (ins.args[0], ins.args[3])):
                # its landing shifts another CTA's buffer and barrier: the offsets are kept per issuing class
                raise Refused("a TMA load that lands in another CTA (`tma_load ... on cta`) is not shifted by the "
                              "abstraction", ins.site)
            for ref, tag in _tags(ins):  # every tag on a buffer whose tags follow a counter: a counter or a literal
                if ref.name in tbufs and _tag_form(tag, cp.loopvars) == "other":
                    raise Refused(f"a tile tag of {ref.name} is neither a loop counter (`tile k + c`) nor a constant",
                                  ins.site)
            for ref in _bar_refs(ins):  # a barrier indexed by a shifted ring anywhere has its phases shifted
                idx = ring_index(ref)
                if idx is not None and idx.slot in cp.rings:
                    rbars.add(ref.name)
    waits: list[tuple[str, int]] = []
    for prog, cp in zip(progs, plans):
        for ins in prog.instrs:
            if ins.op == WAIT:
                idx = ring_index(ins.args[0])
                if idx is not None and idx.slot not in cp.rings:
                    waits.append((ins.args[0].name, ins.site))
    for bar, site in waits:
        if bar in rbars:
            raise Refused(f"{bar} is waited on through a ring that the loop does not advance", site)
    if len(stages) > 1:
        raise Refused(f"the rings of the {name} loops have different sizes ({', '.join(map(str, sorted(stages)))})")
    # a constant tile tag on a buffer whose tags follow a counter, or a loop start, still to come keeps the
    # tiles family unshifted; a ring start still to come, the rings family
    S = next(iter(stages), 0)
    for prog, cp in zip(progs, plans):
        if cp.tconst:
            continue
        succ = prog.successors()
        consts: list[set] = [set() for _ in prog.instrs]
        starts: list[set] = [set() for _ in prog.instrs]
        rstart: list[set] = [set() for _ in prog.instrs]
        for pc, ins in enumerate(prog.instrs):
            for ref, tag in _tags(ins):
                if ref.name in tbufs and isinstance(tag, RConst):
                    consts[pc].add(tag.value)
            if ins.op == LET and ins.args[0] in cp.loopvars and isinstance(ins.args[1], RConst):
                consts[pc].add(ins.args[1].value)
                starts[pc].add(ins.args[1].value)
            if ins.op == RING and ins.args[0] in cp.rings:
                rstart[pc].add(True)
        cr, sr, rr = _reach_from(succ, consts), _reach_from(succ, starts), _reach_from(succ, rstart)
        cp.tconst = [bool(x) for x in cr]
        cp.vinit = [max(x) if x else None for x in sr]
        cp.rinit = [bool(x) for x in rr]
    strides = [cp.stride for cp in plans if cp.stride]
    # the look-ahead reads EVERY_HORIZON visible statements: at most that many / stride more crossings,
    # one for the step itself and one for a walk that starts just before a guard
    horizon = EVERY_HORIZON
    near = 2 + horizon // min(strides) if strides else 1
    return Plan(name, lo, S, plans, frozenset(tbufs), frozenset(rbars), near, horizon)


def _class_plan(prog: Program, tbufs: set, stages: set) -> ClassPlan:
    ins_ = prog.instrs
    kslot = prog.nslots - 1
    guards: dict[int, int] = {}
    for pc, ins in enumerate(ins_):
        if kslot in registers_read(ins.args):
            cond = ins.args[0] if ins.op == BRANCH else None
            if not (isinstance(cond, ROp) and cond.op == "<" and isinstance(cond.args[0], RVar)
                    and cond.args[1] == RVar(kslot, cond.args[1].name if isinstance(cond.args[1], RVar) else "")):
                raise Refused(f"{prog.slot_names[kslot]} is used other than as the upper bound of a `for` loop",
                              ins.site)
            guards[pc] = cond.args[0].slot
    loopvars = frozenset(guards.values())
    bodies: dict[int, range] = {}
    for head in guards:
        exit_pc = ins_[head].target
        bodies[head] = range(head + 1, exit_pc)
        back = exit_pc - 1
        if ins_[back].op != JUMP or ins_[back].target != head:
            raise Refused("a loop over the bound does not end in its own back edge", ins_[head].site)
        for pc in bodies[head]:  # a `break`: how many trips run depends on the run, not on K alone
            if ins_[pc].op == JUMP and ins_[pc].target == exit_pc and pc != back:
                raise Refused("a `break` leaves a loop over the bound", ins_[pc].site)
    for pc, ins in enumerate(ins_):
        if ins.op == JUMP and ins.target <= pc:
            for head, body in bodies.items():
                if pc not in body and ins.target <= head < pc:
                    raise Refused("a loop over the bound runs inside another loop", ins_[head].site)
    inside = {pc for body in bodies.values() for pc in body}
    rings: set[int] = set()
    hidden: set[int] = set()
    for pc, ins in enumerate(ins_):
        if ins.op in _REFUSED:
            raise Refused(f"'{ins.op}' keeps a counter the abstraction does not shift", ins.site)
        if pc in inside:
            if ins.op == ADVANCE:
                rings.add(ins.args[0])
            found: list[RRing] = []
            _rings_in(ins.args, found)
            rings |= {r.slot for r in found}
            if ins.op in (MMA, MMA_WAIT):
                hidden.add(ins.args[-1])
    # uses of the loop counters: their own start and increment, the guard, tile tags
    for pc, ins in enumerate(ins_):
        used = registers_read(ins.args) & loopvars
        if ins.op == LET and ins.args[0] in loopvars:
            v, e = ins.args
            if not (isinstance(e, RConst) or e == ROp("+", (RVar(v, ""), RConst(1)))
                    or (isinstance(e, ROp) and e.op == "+" and isinstance(e.args[0], RVar) and e.args[0].slot == v
                        and e.args[1] == RConst(1))):
                raise Refused("a loop counter is assigned other than by its `for`", ins.site)
            continue
        if not used or pc in guards:
            continue
        tagged = _tags(ins)
        if tagged and not registers_read(_untagged(ins)) & loopvars:
            for ref, tag in tagged:
                form = _tag_form(tag, loopvars)
                if form == "other":
                    raise Refused("a loop counter is used other than in a tile tag (`tile k`, `tile k + c`, c >= 0)", ins.site)
                if form == "counter":
                    tbufs.add(ref.name)
            continue
        raise Refused("a loop counter is used other than in a tile tag (`tile k`, `tile k + c`, c >= 0)", ins.site)
    # rings: read through .index and .phase only; every barrier used in a loop is indexed by one
    for pc, ins in enumerate(ins_):
        found = []
        _rings_in(ins.args, found)
        for r in found:
            if r.slot in rings:
                stages.add(r.stages)
                if r.attr == "count":
                    raise Refused("a ring of the loop is read through .count", ins.site)
        if ins.op == BRANCH and pc in inside and pc not in guards and registers_read(ins.args[0]) & (rings | loopvars | hidden):
            raise Refused("a branch inside the loop reads a counter", ins.site)
        if pc in inside:
            for ref in _bar_refs(ins):
                idx = ring_index(ref)
                if idx is None or idx.slot not in rings:
                    raise Refused(f"barrier {ref.name} is used in the loop without a ring index", ins.site)
    live = liveness(prog)
    fam = tuple(sorted(loopvars | rings | hidden))
    # each iteration must start from the same registers but for the counters: then a path with no visible
    # statement repeats forever (the far shortcut) and one with some repeats its stride
    for head, body in bodies.items():
        for pc in body:
            ins = ins_[pc]
            if ins.op == CHOOSE:
                raise Refused("a `choose` inside the loop", ins.site)
            if ins.op in (INIT, INVAL, FENCE_INIT):  # a barrier restarted at phase 0 inside the loop
                raise Refused(f"'{ins.op}' inside the loop", ins.site)
            if ins.op == LET and ins.args[0] not in loopvars and ins.args[0] in live[head]:
                raise Refused("a value is carried from one iteration of the loop to the next", ins.site)
    strides = [_stride(prog, head) for head in guards]
    stride = min((x for x in strides if x), default=0)
    exit_live = {head: tuple(sorted(live[ins_[head].target] & set(fam))) for head in guards}
    return ClassPlan(kslot, guards, loopvars, frozenset(rings), frozenset(hidden), fam, exit_live=exit_live,
                     stride=stride)


def _stride(prog: Program, head: int) -> int:
    """The fewest visible statements on a path from the guard back to it that has at least one (0: none has)."""
    succ = prog.successors()
    exit_pc = prog.instrs[head].target
    best: dict[tuple[int, bool], int] = {}
    heap = [(0, head + 1, False)]
    while heap:
        d, pc, any_ = heapq.heappop(heap)
        if pc == head:
            if any_:
                return d
            continue
        if best.get((pc, any_), 1 << 30) <= d or pc == exit_pc:
            continue
        best[(pc, any_)] = d
        vis = prog.instrs[pc].op not in LOCAL_OPS and prog.instrs[pc].op != COLL_WAIT  # coll + coll_wait: one step
        for nxt in succ[pc]:
            heapq.heappush(heap, (d + vis, nxt, any_ or vis))
    return 0


def _bar_refs(ins: Instr) -> list[RRef]:
    if ins.op in (WAIT, ARRIVE, ARRIVE_DROP, COMPLETE_TX, EXPECT_TX):
        return [ins.args[0]]
    if ins.op == TMA_LOAD:
        return [ins.args[3]]
    return []


# ---------------------------------------------------------------- the folded system

class Offset:
    """Wraps a system over `model.State` (the model, or its symmetry quotient); the root fans out to
    K far and to each K too small for that; states are mapped to their smallest offsets."""

    def __init__(self, base: Any, model: Model, plan: Plan, footprints: ReducibleSystem):
        self.base = base
        self.model = model
        self.footprints = footprints  # the model's processes, for the reduction (its actions under ours)
        self.plan = plan
        lay = model.layout
        self.cplans = [plan.classes[c.id] for c in model.classes]
        self.tbuf = [False] * (lay.nbuf * lay.ncta)
        self.rbar = [False] * (lay.nbar * lay.ncta)
        decls = model.kernel
        for gid in range(len(self.tbuf)):
            self.tbuf[gid] = decls.buffers[lay._decl_index(decls.buffers, gid % lay.nbuf)].name in plan.tbufs
        for gid in range(len(self.rbar)):
            self.rbar[gid] = decls.barriers[lay._decl_index(decls.barriers, gid % lay.nbar)].name in plan.rbars
        self.unit = model.mma_unit
        # wgmma units whose group counters are shifted: every class of such a unit counts its groups
        self.munits = {self.unit[c] for c, cp in enumerate(self.cplans) if cp.hidden}
        for c, cp in enumerate(self.cplans):
            if self.unit[c] in self.munits and not cp.hidden:
                raise Refused("the threads of one warpgroup issue wgmma in the loop on some paths only")
        self.S = plan.stages
        self._canon = getattr(base, "canon_successors", None)
        self._raw = getattr(base, "raw_successors", base.successors)

    # ------------------------------------------------------------ the interface
    def initial(self) -> State:
        return self.model.initial()._replace(halted=ROOT)

    def _start(self, k: int) -> State:
        s = self.model.initial(k)
        return self.base.canon(s) if self.base is not self.model else s

    def raw_successors(self, s: State) -> list:
        if s.halted == ROOT:
            far = self._start(FAR)  # nothing shifted yet
            top = self._top(far) + self.plan.near
            out = [(("K", None), far, ())]
            out += [(("K", k), self._start(k), ()) for k in range(self.plan.lo, top + 1)]
            return out
        succ = self._raw(s)
        level = self._far(s)
        if level is None:
            return succ
        m = self._top(s)
        extra = []
        for a, t, f in succ:
            mt = self._top(t)
            # K here stands for K + the tiles' shift so far, which `level` knows up to lo
            for k in range(max(m + self.plan.near + 1, self.plan.lo - level), mt + self.plan.near + 1):
                extra.append((("K", k, a), self._declare(t, k), f))
        return succ + extra

    def canon_successors(self, succ: list) -> list:
        if self._canon is not None:
            succ = self._canon(succ)
        out = []
        for a, t, f in succ:
            out.append((a, self.shift(t), f))
        return out

    def successors(self, s: State) -> list:
        return self.canon_successors(self.raw_successors(s))

    def step(self, s: State, action: Any):
        for a, t, f in self.successors(s):
            if a == action:
                return t, f
        raise KeyError(f"action {action} is not enabled")

    def terminal_findings(self, s: State):
        return self.base.terminal_findings(s)

    def process_of(self, action: Any):
        if action[0] == "K":
            return ("root",) if len(action) == 2 else self.footprints.process_of(action[2])
        return self.footprints.process_of(action)

    def processes(self, s: State, enabled: set):
        return self.footprints.processes(s, enabled)

    # ------------------------------------------------------------ K
    def _far(self, s: State) -> int | None:
        """None when K is written; else how far the tiles have been shifted, up to the declared lower bound
        (FAR + that in the K register): a K written later stands for itself plus the shift, which must
        reach the bound."""
        for c, groups in enumerate(s.locs):
            k = self.cplans[c].kslot
            for (_, env), _ in groups:
                if env[k] is not None and env[k] >= FAR:
                    return env[k] - FAR
        return None

    def _top(self, s: State) -> int:
        """The largest loop counter a class has reached or will start from (-1: none)."""
        top = -1
        for c, groups in enumerate(s.locs):
            cp = self.cplans[c]
            for (pc, env), _ in groups:
                for v in cp.loopvars:
                    x = env[v]
                    if x is not None and x > top:
                        top = x
                vi = cp.vinit[pc]
                if vi is not None and vi > top:
                    top = vi
        return top

    def _declare(self, s: State, k: int) -> State:
        locs = []
        for c, groups in enumerate(s.locs):
            ks = self.cplans[c].kslot
            if any(env[ks] is not None and env[ks] >= FAR for (_, env), _ in groups):
                groups = merge_groups((((pc, env[:ks] + (k,) + env[ks + 1:] if env[ks] is not None and env[ks] >= FAR
                                   else env)), m) for (pc, env), m in groups)
            locs.append(groups)
        return s._replace(locs=tuple(locs))

    # ------------------------------------------------------------ offsets
    def shift(self, s: State) -> State:
        if s.halted is not None:
            return s
        tmin = rmin = FAR
        mmin: dict[int, int] = {}
        S2 = 2 * self.S
        for c, groups in enumerate(s.locs):
            cp = self.cplans[c]
            u = self.unit[c]
            for (pc, env), _ in groups:
                for v in cp.loopvars:
                    x = env[v]
                    if x is not None and x < tmin:
                        tmin = x
                x = env[cp.kslot]
                if x is not None and x < tmin:  # FAR and above: never the minimum
                    tmin = x
                if cp.tconst[pc]:
                    tmin = 0  # a constant tag or loop start still to come keeps its meaning only unshifted
                for r in cp.rings:
                    x = env[r]
                    if x is not None and x < rmin:
                        rmin = x
                if cp.rinit[pc]:
                    rmin = 0
                for h in cp.hidden:
                    x = env[h]
                    if x is not None and x < mmin.get(u, FAR):
                        mmin[u] = x
        for g, tag in enumerate(s.bufs):
            if self.tbuf[g] and 0 <= tag < tmin:
                tmin = tag
        for op in s.flight:
            if self.tbuf[op[0]] and 0 <= op[1] < tmin:
                tmin = op[1]
        for st in s.stores:
            if self.tbuf[st[2]] and st[3] is not None and 0 <= st[3] < tmin:
                tmin = st[3]
        for u, (done, forming, inflight) in enumerate(s.mmas):
            if u in self.munits:
                lo = min([done] + [f[0] for f in forming] + [f[0] for f in inflight])
                mmin[u] = min(mmin.get(u, FAR), lo)
            for f in forming:
                tmin = self._tag_min(f[2], tmin)
            for f in inflight:
                tmin = self._tag_min(f[1], tmin)
                if f[4]:
                    tmin = self._tag_min(f[4], tmin)
        if self.S:
            for g, b in enumerate(s.bars):
                if b is not None and self.rbar[g]:
                    if b.phase * self.S < rmin:
                        rmin = b.phase * self.S
                    for c, r in b.arrivers:
                        if r is not None and r[0] in self.cplans[c].rings and r[1] * self.S < rmin:
                            rmin = r[1] * self.S
        dt = tmin if 0 < tmin < FAR else 0
        dr = (rmin // S2) * S2 if self.S and 0 < rmin < FAR else 0
        dm = {u: x for u, x in mmin.items() if 0 < x < FAR}
        if not dt and not dr and not dm:
            return s
        return self._apply(s, dt, dr, dm)

    def _tag_min(self, ops: tuple, tmin: int) -> int:
        for buf, tag in ops:
            if tag is not None and self.tbuf[buf] and 0 <= tag < tmin:
                tmin = tag
        return tmin

    def _tags(self, ops: tuple, dt: int) -> tuple:
        return tuple((buf, tag - dt if tag is not None and self.tbuf[buf] and tag >= 0 else tag) for buf, tag in ops)

    def _apply(self, s: State, dt: int, dr: int, dm: dict[int, int]) -> State:
        pr = dr // self.S if self.S else 0
        locs = []
        for c, groups in enumerate(s.locs):
            cp = self.cplans[c]
            dh = dm.get(self.unit[c], 0)
            if not cp.family or not (dt or dr or dh):
                locs.append(groups)
                continue
            new = []
            for (pc, env), m in groups:
                e = list(env)
                if dt:
                    for v in cp.loopvars:
                        if e[v] is not None:
                            e[v] -= dt
                    x = e[cp.kslot]
                    if x is not None:
                        e[cp.kslot] = x - dt if x < FAR else FAR + min(self.plan.lo, x - FAR + dt)
                if dr:
                    for r in cp.rings:
                        if e[r] is not None:
                            e[r] -= dr
                if dh:
                    for h in cp.hidden:
                        if e[h] is not None:
                            e[h] -= dh
                new.append(((pc, tuple(e)), m))
            locs.append(merge_groups(new))
        bufs = tuple(t - dt if self.tbuf[g] and t >= 0 else t for g, t in enumerate(s.bufs)) if dt else s.bufs
        flight = tuple(sorted((op[0], op[1] - dt if self.tbuf[op[0]] and op[1] >= 0 else op[1]) + op[2:]
                              for op in s.flight)) if dt else s.flight
        stores = tuple(sorted((c, q, b, t - dt if dt and t is not None and self.tbuf[b] and t >= 0 else t, st, si)
                              for c, q, b, t, st, si in s.stores)) if dt else s.stores
        mmas = []
        for u, (done, forming, inflight) in enumerate(s.mmas):
            dh = dm.get(u, 0)
            if not dh and not dt:
                mmas.append((done, forming, inflight))
                continue
            forming = tuple(sorted((q - dh, j, self._tags(ops, dt)) for q, j, ops in forming))
            inflight = tuple(sorted((q - dh, self._tags(ops, dt), site, c,
                                     self._tags(out, dt))
                                    for q, ops, site, c, out in inflight))
            mmas.append((done - dh, forming, inflight))
        bars = s.bars
        if pr:
            bars = tuple(b if b is None or not self.rbar[g] else
                         b._replace(phase=b.phase - pr,
                                    arrivers=frozenset((c, (r[0], r[1] - pr) if r is not None
                                                        and r[0] in self.cplans[c].rings else r)
                                                       for c, r in b.arrivers))
                         for g, b in enumerate(s.bars))
        return s._replace(locs=tuple(locs), bufs=bufs, flight=flight, stores=stores, mmas=tuple(mmas), bars=bars)


def refusal(exc: Refused, name: str, sites: Sequence[Site], fallback: Any = None) -> SpecError:
    """The [every] error, at the statement that breaks a rule (else at `fallback`, the parameter)."""
    span = sites[exc.site].span if 0 <= exc.site < len(sites) else fallback
    return error("every", f"--every {name}: {exc}; the loop-offset abstraction does not apply "
                 "(docs/performance.md, 'Loop-offset abstraction')", span)
