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
another loop (or in an `if` that takes the same branch at every K of the range); a loop counter
appears only in tile tags (`tile k + c`, or `tile k * C + j + c` with j the counter of an inner
`for`: the tile loop of a persistent kernel, `--every TILES`) and its own increment, each buffer's
tags following it with one stride C; rings used in such a loop are read only through `.index` /
`.phase` and index every barrier the loop uses (a barrier with no index: waited on with a ring's
phase); rings joined by the barriers they index or the waits they give a parity to are one family
of one size, shifted on its own (a store ring advances once a tile, the mainloop ring K times);
branches inside the loop read no counter, there is no `choose` and no value carried between
iterations; no cp.async counter. A counter may pick a stage in a visible statement as
`(a * k + ...) % m`: the tiles then shift by multiples of m / gcd(a, m). Bulk-store group counters
(`commit_group` / `wait_group`) are shifted per class, with the groups of that class's stores;
tcgen05.commit counters with their MMA unit's groups. Each concrete K-system is finite and
acyclic, so the partial-order reduction needs no cycle proviso: the folded graph contains a reduced graph of every K-system up to
offsets (docs/performance.md, "Loop-offset abstraction").
"""
from __future__ import annotations

import dataclasses
import heapq
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ..core.diagnostics import SpecError, error
from ..model.compiled import liveness, registers_read, registers_written, ring_index
from ..model.ir import (ADVANCE, ARRIVE, ARRIVE_DROP, BRANCH, CHOOSE, COLL, COLL_WAIT, COMMIT_GROUP, COMPLETE_TX, CP_ASYNC,
                        CP_ASYNC_ARRIVE, EXPECT_TX, FENCE_INIT, INIT, INVAL, JUMP, LET, LOCAL_OPS, MMA, MMA_COMMIT,
                        MMA_WAIT, READ, RING, TMA_LOAD, TMA_STORE, WAIT, WAIT_GROUP, WRITE, Instr, Program, RConst,
                        EvalError, ROp, RRef, RRing, RVar, Site, compile_expr)
from ..model.state import FAR_K, State, merge_groups
from ..model.system import FUTURE_HORIZON, WARP_MEETINGS, Model
from .por import ReducibleSystem

FAR = FAR_K  # the K register of a state whose loops are nowhere near their end
ROOT = "every-k-root"  # `halted` of the root state, whose successors are the K-far start and the small K
EVERY_HORIZON = 24  # the reduction's look-ahead under --every (NEAR grows with it; docs/performance.md)

_REFUSED = (CP_ASYNC, CP_ASYNC_ARRIVE)
_GROUPS = (COMMIT_GROUP, WAIT_GROUP)  # bulk-store group counters: args[-1], one per thread, shifted per class
_COUNTER_USE = ("a loop counter is used other than in a tile tag (`tile k + c`, c >= 0, or `tile k * C + j + c` "
                "with j the counter of an inner `for`)")
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


def bound_only(body: Any, kvar: RVar, name: str, site: int = -1, values: Sequence[int] = ()) -> None:
    """Refuse a merged role body (lower.RoleCode) that reads K other than as the upper bound of a `for`,
    or as the condition of an `if` that reads nothing else and takes the same branch at every K of
    `values` (`if TILES > 0` over 1..8): the lowering folds that branch the same way at each of them."""
    if isinstance(body, (tuple, list)):
        if body and isinstance(body[-1], int) and not isinstance(body[-1], bool):
            site = body[-1]
        if len(body) == 6 and body[0] == "for":  # ("for", slot, lo, hi, body, site)
            bound_only(body[2], kvar, name, site, values)
            if body[3] != kvar:
                bound_only(body[3], kvar, name, site, values)
            bound_only(body[4], kvar, name, site, values)
            return
        if len(body) == 5 and body[0] == "if" and _same_branch(body[1], kvar, values):
            bound_only(body[2:], kvar, name, site, values)
            return
        for x in body:
            bound_only(x, kvar, name, site, values)
    elif body == kvar:
        raise Refused(f"{name} is used other than as the upper bound of a `for` loop", site)
    elif dataclasses.is_dataclass(body):
        for f in dataclasses.fields(body):
            bound_only(getattr(body, f.name), kvar, name, site, values)


def _same_branch(cond: Any, kvar: RVar, values: Sequence[int]) -> bool:
    """Whether `cond` reads K alone and is equally true at every K of `values`."""
    if not values or registers_read(cond) != {kvar.slot}:
        return False
    try:
        f = compile_expr(cond)
        return len({bool(f((k,))) for k in values}) == 1
    except (ArithmeticError, EvalError):  # a division by zero at some K: not the same branch
        return False


# ---------------------------------------------------------------- the per-class plan

@dataclass
class ClassPlan:
    """Which registers of one thread class are counters, and what its code can still reach."""

    kslot: int
    guards: dict[int, int] = field(default_factory=dict)  # guard pc -> loop counter slot
    loopvars: frozenset = frozenset()
    rings: frozenset = frozenset()
    hidden: frozenset = frozenset()  # wgmma group counters
    groups: frozenset = frozenset()  # bulk-store group counters (commit_group / wait_group)
    family: tuple = ()  # every counter slot, sorted
    tconst: list = field(default_factory=list)  # per pc: a constant tile tag or loop start still reachable
    vinit: list = field(default_factory=list)  # per pc: the largest loop start still reachable
    rinit: list = field(default_factory=list)  # per pc: the families of the rings that may still be (re)started
    ring_size: dict = field(default_factory=dict)  # ring slot -> its stages
    ring_family: dict = field(default_factory=dict)  # ring slot -> its family (Plan.families)
    blind: tuple = ()  # rings the loop advances that this class never reads: their values are kept at 0
    scalars: frozenset = frozenset()  # (name, site): barriers with no index used in the loop
    period: int = 1  # the tiles shift by multiples of this: `(a * k + ...) % m` reads k (stage indices)
    exit_live: dict = field(default_factory=dict)  # guard pc -> counters live after the loop
    stride: int = 0  # the fewest visible statements of an iteration that has any (0: no loop over K)
    busy: int = 0  # the same, not counting a warp's meetings
    inner: dict = field(default_factory=dict)  # counters of other `for` loops (+ 1 steps) -> their least start


@dataclass
class Plan:
    name: str
    lo: int
    families: tuple  # per ring family (rings joined by the barriers they index): its rings' size
    classes: list[ClassPlan]
    tbufs: dict  # buffer name -> stride: its tags are `stride * k + ...` of a loop counter k
    rbars: dict  # barrier name -> the family of the loops' rings that index it (anywhere): its phases shift with them
    near: int = 0  # how many guard crossings one step and the reduction's look-ahead can make
    crossings: int = 0  # how many guard crossings a future (the look-ahead) may make, K far
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


def _linear(e: Any) -> tuple[dict[int, int], int] | None:
    """An expression as a sum of registers times constants plus a constant, or None."""
    if isinstance(e, RConst) and isinstance(e.value, int):
        return {}, int(e.value)
    if isinstance(e, RVar):
        return {e.slot: 1}, 0
    if isinstance(e, ROp) and len(e.args) == 2 and e.op in ("+", "-", "*"):
        a, b = _linear(e.args[0]), _linear(e.args[1])
        if a is None or b is None:
            return None
        if e.op == "*":
            if a[0] and b[0]:
                return None
            (vs, c), f = (a, b[1]) if a[0] else (b, a[1])
            return {v: x * f for v, x in vs.items()}, c * f
        sign = 1 if e.op == "+" else -1
        vs = dict(a[0])
        for v, x in b[0].items():
            vs[v] = vs.get(v, 0) + sign * x
        return {v: x for v, x in vs.items() if x}, a[1] + sign * b[1]
    return None


def _tag_form(e: Any, loopvars: frozenset, inner: dict) -> tuple[str, int]:
    """('const', 0); ('counter', stride) for `stride * k + c + a * j + ...` over one loop counter k, with
    stride >= 1, a >= 1 over counters j of inner `for` loops (never carrying a tile number) and c no less
    than minus what the j start from, so the tag is never negative and moves with k alone:
    `tile t * K_TILES + k`, `tile t * N_BLOCKS + j - 1` with j from 1, `tile k + 1`; or ('other', 0).
    A tag that could be negative could meet the EMPTY / CLOBBERED tags."""
    if e is None or isinstance(e, RConst):
        return "const", 0
    lin = _linear(e)
    if lin is None:
        return "other", 0
    coeffs, const = lin
    outer = [v for v in coeffs if v in loopvars]
    if len(outer) != 1 or coeffs[outer[0]] < 1:
        return "other", 0
    least = const
    for v, x in coeffs.items():
        if v != outer[0]:
            if v not in inner or x < 1:
                return "other", 0
            least += x * inner[v]
    if least < 0:
        return "other", 0
    return "counter", coeffs[outer[0]]


def _strip_mods(e: Any, loopvars: frozenset, inner: dict, mods: set) -> Any:
    """`e` with each `(a * k + b * j + c) % m` over a loop counter k (inner counters j, constants m > 0) replaced by
    0, the period m / gcd(a, m) of each added to `mods`: shifting k by a multiple of it leaves the value alone."""
    if isinstance(e, ROp):
        if e.op == "%" and len(e.args) == 2 and isinstance(e.args[1], RConst) and int(e.args[1].value) > 0:
            lin = _linear(e.args[0])
            if lin is not None and all(v in loopvars or v in inner for v in lin[0]) and \
                    any(v in loopvars for v in lin[0]):
                m = int(e.args[1].value)
                for v, a in lin[0].items():
                    if v in loopvars:
                        mods.add(m // math.gcd(a, m))
                return RConst(0)
        args = tuple(_strip_mods(x, loopvars, inner, mods) for x in e.args)
        return e if args == e.args else ROp(e.op, args)
    if isinstance(e, RRef):
        idx = tuple(_strip_mods(x, loopvars, inner, mods) for x in e.indices)
        cta = _strip_mods(e.cta, loopvars, inner, mods) if e.cta is not None else None
        return e if idx == e.indices and cta is e.cta else dataclasses.replace(e, indices=idx, cta=cta)
    if isinstance(e, (tuple, list)):
        out = tuple(_strip_mods(x, loopvars, inner, mods) for x in e)
        return e if out == tuple(e) else type(e)(out)
    return e


def _inner_counters(prog: Program, exclude: frozenset) -> dict[int, int]:
    """Registers assigned only a constant >= 0 or their own value + 1 (the counters of `for` loops), with the
    least constant each is assigned (what it never falls below)."""
    ok: dict[int, bool] = {}
    least: dict[int, int] = {}
    for ins in prog.instrs:
        for v in registers_written(ins):
            good = False
            if ins.op == LET:
                e = ins.args[1]
                if isinstance(e, RConst) and isinstance(e.value, int) and e.value >= 0:
                    good = True
                    least[v] = min(least.get(v, e.value), int(e.value))
                else:
                    good = _linear(e) == ({v: 1}, 1)
            ok[v] = ok.get(v, True) and good
    return {v: least[v] for v, good in sorted(ok.items()) if good and v in least and v not in exclude}


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
    tbufs: dict[str, int] = {}
    cache: dict[Program, ClassPlan] = {}
    for prog in progs:
        if prog in cache:
            plans.append(cache[prog])
            continue
        cp = _class_plan(prog, tbufs)
        cache[prog] = cp
        plans.append(cp)
    for prog, cp in zip(progs, plans):
        for ins in prog.instrs:
            if ins.op == TMA_LOAD and any(getattr(r, "cta", None) is not None for r in (ins.args[0], ins.args[3])):
                # its landing shifts another CTA's buffer and barrier: the offsets are kept per issuing class
                raise Refused("a TMA load that lands in another CTA (`tma_load ... on cta`) is not shifted by the "
                              "abstraction", ins.site)
            for ref, tag in _tags(ins):  # every tag on a buffer whose tags follow a counter: a counter or a literal
                if ref.name in tbufs and _tag_form(tag, cp.loopvars, cp.inner)[0] == "other":
                    raise Refused(f"a tile tag of {ref.name} is neither a loop counter (`tile k + c`, "
                                  "`tile k * C + j`) nor a constant", ins.site)
    families, rbars = _ring_families(progs, plans)
    for cp in plans:
        for bar, site in sorted(cp.scalars):
            if bar not in rbars:
                raise Refused(f"barrier {bar} is used in the loop without a ring index", site)
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
    # a constant tile tag on a buffer whose tags follow a counter, or a loop start, still to come keeps the
    # tiles family unshifted; a ring start still to come, the rings of its family
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
            if ins.op == RING and ins.args[0] in cp.ring_family:
                rstart[pc].add(cp.ring_family[ins.args[0]])
        cr, sr, rr = _reach_from(succ, consts), _reach_from(succ, starts), _reach_from(succ, rstart)
        cp.tconst = [bool(x) for x in cr]
        cp.vinit = [max(x) if x else None for x in sr]
        cp.rinit = [frozenset(x) for x in rr]
    strides = [cp.stride for cp in plans if cp.busy]
    # the look-ahead reads `horizon` visible statements: at most that many / stride more crossings. Lanes whose
    # iterations may be nothing but a meeting with their warp's elected lane have their futures cut at that many
    # (Model.future): they would otherwise cross a guard per statement. NEAR adds one for the step itself and one
    # for a walk that starts just before a guard. Iterations as long as a tile of a persistent kernel cross few
    # guards even at the ordinary look-ahead, and the reduction is better for it (cooperative GEMM, --every TILES:
    # 178,592 -> 70,045 states); short ones keep EVERY_HORIZON, which keeps NEAR small
    horizon = FUTURE_HORIZON if strides and FUTURE_HORIZON // min(strides) <= 2 else EVERY_HORIZON
    crossings = horizon // min(strides) if strides else 0
    near = 2 + crossings if any(cp.stride for cp in plans) else 1
    return Plan(name, lo, families, plans, dict(sorted(tbufs.items())), rbars,
                near, crossings, horizon)


def _ring_families(progs: Sequence[Program], plans: list[ClassPlan]) -> tuple[tuple, dict]:
    """Rings of the loops joined by the barriers they index (anywhere), or whose phase is the parity a barrier is
    waited on with, each such family shifted on its own: a store ring that indexes no barrier advances at its own
    rate. Sets each class plan's `ring_family`; returns each family's size and the family of each barrier. A
    barrier indexed by rings of two sizes is refused."""
    parent: dict = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for prog, cp in zip(progs, plans):
        for slot in sorted(cp.ring_size):
            find(("r", id(cp), slot))
        for ins in prog.instrs:
            for ref in _bar_refs(ins):
                idx = ring_index(ref)
                if idx is not None and idx.slot in cp.ring_size:
                    parent[find(("r", id(cp), idx.slot))] = find(("b", ref.name))
            # a ring whose phase a wait passes names the barrier's phase it means (the phase-alias check compares
            # them), whichever ring indexes the barrier: one family (FA3's `barrier_Q` with `ring q(1)`)
            par = ins.args[1] if ins.op == WAIT and len(ins.args) > 1 else None
            if isinstance(par, RRing) and par.attr == "phase" and par.slot in cp.ring_size:
                parent[find(("r", id(cp), par.slot))] = find(("b", ins.args[0].name))
    fid: dict = {}
    sizes: list[int] = []
    for prog, cp in zip(progs, plans):
        for slot in sorted(cp.ring_size):
            root = find(("r", id(cp), slot))
            if root not in fid:
                fid[root] = len(sizes)
                sizes.append(cp.ring_size[slot])
            elif sizes[fid[root]] != cp.ring_size[slot]:
                name = root[1] if root[0] == "b" else "the same barriers"
                raise Refused(f"barrier {name} is indexed by rings of different sizes")
            cp.ring_family[slot] = fid[root]
    rbars = {x[1]: fid[find(x)] for x in sorted(parent, key=str) if x[0] == "b" and find(x) in fid}
    return tuple(sizes), rbars


def _class_plan(prog: Program, tbufs: dict) -> ClassPlan:
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
    groups: set[int] = set()
    mods: set[int] = set()
    inner = _inner_counters(prog, loopvars | {kslot})
    for pc, ins in enumerate(ins_):
        if ins.op in _REFUSED:
            raise Refused(f"'{ins.op}' keeps a counter the abstraction does not shift", ins.site)
        if ins.op in _GROUPS:
            groups.add(ins.args[-1])
        if pc in inside:
            if ins.op == ADVANCE:
                rings.add(ins.args[0])
            found: list[RRing] = []
            _rings_in(ins.args, found)
            rings |= {r.slot for r in found}
            if ins.op in (MMA, MMA_WAIT, MMA_COMMIT):  # the unit's group counter (a commit's `upto`)
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
        rest = ins.args
        if ins.op not in LOCAL_OPS:  # `% m` of the counter in a visible statement's operands: a stage it picks
            rest = _strip_mods(ins.args, loopvars, inner, mods)
            if not registers_read(rest) & loopvars:
                continue
        tagged = _tags(ins)
        if tagged and not registers_read(_untagged(Instr(ins.op, rest, ins.site, ins.target))) & loopvars:
            for ref, tag in tagged:
                form, stride = _tag_form(tag, loopvars, inner)
                if form == "other":
                    raise Refused(_COUNTER_USE, ins.site)
                if form == "counter":
                    if tbufs.setdefault(ref.name, stride) != stride:
                        raise Refused(f"the tile tags of {ref.name} follow the loop counter with different strides "
                                      f"({tbufs[ref.name]} and {stride})", ins.site)
            continue
        raise Refused(_COUNTER_USE, ins.site)
    # rings: read through .index and .phase only; every barrier used in a loop is indexed by one
    ring_size: dict[int, int] = {}
    scalars: set[tuple[str, int]] = set()
    for pc, ins in enumerate(ins_):
        found = []
        _rings_in(ins.args, found)
        for r in found:
            if r.slot in rings:
                if ring_size.setdefault(r.slot, r.stages) != r.stages:
                    raise Refused("a ring of the loop is read with different sizes", ins.site)
                if r.attr == "count":
                    raise Refused("a ring of the loop is read through .count", ins.site)
        if ins.op == BRANCH and pc in inside and pc not in guards and registers_read(ins.args[0]) & (rings | loopvars | hidden | groups):
            raise Refused("a branch inside the loop reads a counter", ins.site)
        if pc in inside:
            for ref in _bar_refs(ins):
                idx = ring_index(ref)
                if idx is None and not ref.indices:
                    scalars.add((ref.name, ins.site))  # one barrier: its waits' parity must follow a ring (plan)
                elif idx is None or idx.slot not in rings:
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
    busy = min((x for x in (_stride(prog, head, True) for head in guards) if x), default=0)
    exit_live = {head: tuple(sorted(live[ins_[head].target] & set(fam))) for head in guards}
    return ClassPlan(kslot, guards, loopvars, frozenset(rings), frozenset(hidden), frozenset(groups), fam,
                     exit_live=exit_live, stride=stride, busy=busy, inner=inner, ring_size=ring_size,
                     blind=tuple(sorted(rings - set(ring_size))), scalars=frozenset(scalars),
                     period=math.lcm(1, *mods))


def _stride(prog: Program, head: int, busy: bool = False) -> int:
    """The fewest visible statements on a path from the guard back to it that has at least one (0: none has);
    `busy`: not counting a warp's meetings (an elect, a syncwarp), so that lanes that only meet their warp's
    elected lane have none. An inner `for` over constants runs its trip count times (`_const_loops`)."""
    return _fewest(prog, prog.successors(), head, busy, _const_loops(prog), True)


def _fewest(prog: Program, succ: list, head: int, busy: bool, loops: dict, need_one: bool) -> int:
    """Dijkstra over a loop body, from just past its guard `head` back to it: the fewest visible statements on
    a path (with at least one when `need_one`: 0 when no such path)."""
    exit_pc = prog.instrs[head].target
    best: dict[tuple[int, bool], int] = {}
    heap = [(0, head + 1, False)]
    while heap:
        d, pc, any_ = heapq.heappop(heap)
        if pc == head:
            if any_ or not need_one:
                return d
            continue
        if best.get((pc, any_), 1 << 30) <= d or pc == exit_pc:
            continue
        best[(pc, any_)] = d
        inner = loops.get(pc)
        if inner is not None:  # an inner loop over constants: its trips, each at least its body's fewest
            ihead, iexit, trips = inner
            cost = trips * _fewest(prog, succ, ihead, busy, loops, False) if trips else 0
            heapq.heappush(heap, (d + cost, iexit, any_ or cost > 0))
            continue
        ins = prog.instrs[pc]
        vis = ins.op not in LOCAL_OPS and ins.op != COLL_WAIT  # coll + coll_wait: one step
        if busy and ins.op == COLL and ins.args and ins.args[0] in WARP_MEETINGS:
            vis = False
        for nxt in succ[pc]:
            heapq.heappush(heap, (d + vis, nxt, any_ or vis))
    return 0


def _const_loops(prog: Program) -> dict[int, tuple[int, int, int]]:
    """`for j in c0 .. c1` loops over constants, as lowered (lang/lower.py): the pc of `let j = c0` -> (guard,
    exit, trips). Only loops whose counter nothing else in the body writes and that no `break` leaves."""
    ins_ = prog.instrs
    out = {}
    for h, ins in enumerate(ins_):
        if ins.op != BRANCH or h == 0:
            continue
        cond, exit_pc = ins.args[0], ins.target
        if not (isinstance(cond, ROp) and cond.op == "<" and isinstance(cond.args[0], RVar)
                and isinstance(cond.args[1], RConst)) or exit_pc is None or exit_pc < h + 3:
            continue
        j = cond.args[0].slot
        init, step, back = ins_[h - 1], ins_[exit_pc - 2], ins_[exit_pc - 1]
        if not (init.op == LET and init.args[0] == j and isinstance(init.args[1], RConst)
                and back.op == JUMP and back.target == h
                and step.op == LET and step.args[0] == j and _linear(step.args[1]) == ({j: 1}, 1)):
            continue
        body = range(h + 1, exit_pc - 2)
        if any(j in registers_written(ins_[pc]) for pc in body):
            continue
        if any(ins_[pc].op in (JUMP, BRANCH) and ins_[pc].target is not None
               and not h <= ins_[pc].target < exit_pc for pc in body):
            continue  # a `break`, or a jump out of the loop
        out[h - 1] = (h, exit_pc, max(0, int(cond.args[1].value) - int(init.args[1].value)))
    return out


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
        self.period = math.lcm(1, *(cp.period for cp in self.cplans))  # the tiles shift by multiples of it
        self.tbuf = [0] * (lay.nbuf * lay.ncta)  # per buffer: the stride its tags follow the counter by (0: none)
        self.rbar = [-1] * (lay.nbar * lay.ncta)  # per barrier: the family of the rings its phases follow (-1: none)
        decls = model.kernel
        for gid in range(len(self.tbuf)):
            self.tbuf[gid] = plan.tbufs.get(decls.buffers[lay._decl_index(decls.buffers, gid % lay.nbuf)].name, 0)
        for gid in range(len(self.rbar)):
            self.rbar[gid] = plan.rbars.get(decls.barriers[lay._decl_index(decls.barriers, gid % lay.nbar)].name, -1)
        self.unit = model.mma_unit
        # wgmma units whose group counters are shifted: every class of such a unit counts its groups
        self.munits = {self.unit[c] for c, cp in enumerate(self.cplans) if cp.hidden}
        for c, cp in enumerate(self.cplans):
            if self.unit[c] in self.munits and not cp.hidden:
                raise Refused("the threads of one warpgroup issue wgmma in the loop on some paths only")
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

    # the loop-offset abstraction bounds a future by the loop guards it crosses within the horizon (the plan's NEAR,
    # `Model.future`): a longer future could enter a loop that bound does not count, so futures are never lengthened
    # here (`por.Reduced._lengthened`)
    lengthens = False

    def processes(self, s: State, enabled: set, horizons: dict | None = None):
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
        tmin = FAR
        sizes = self.plan.families
        rmin = [FAR] * len(sizes)  # per ring family
        mmin: dict[int, int] = {}
        gmin: dict[int, int] = {}
        blind = False
        for c, groups in enumerate(s.locs):
            cp = self.cplans[c]
            u = self.unit[c]
            for (pc, env), _ in groups:
                for r in cp.blind:
                    if env[r]:
                        blind = True
                for g in cp.groups:
                    x = env[g]
                    if x is not None and x < gmin.get(c, FAR):
                        gmin[c] = x
                for v in cp.loopvars:
                    x = env[v]
                    if x is not None and x < tmin:
                        tmin = x
                x = env[cp.kslot]
                if x is not None and x < tmin:  # FAR and above: never the minimum
                    tmin = x
                if cp.tconst[pc]:
                    tmin = 0  # a constant tag or loop start still to come keeps its meaning only unshifted
                for r, f in cp.ring_family.items():
                    x = env[r]
                    if x is not None and x < rmin[f]:
                        rmin[f] = x
                for f in cp.rinit[pc]:
                    rmin[f] = 0
                for h in cp.hidden:
                    x = env[h]
                    if x is not None and x < mmin.get(u, FAR):
                        mmin[u] = x
        tmin = self._tag_min(enumerate(s.bufs), tmin)
        tmin = self._tag_min(((op[0], op[1]) for op in s.flight), tmin)
        tmin = self._tag_min(((st[2], st[3]) for st in s.stores), tmin)
        for st in s.stores:
            if st[1] >= 0 and st[0] in gmin and st[1] < gmin[st[0]]:
                gmin[st[0]] = st[1]
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
        for k in s.commits:  # tcgen05.commit arrivals owed: the unit's group they wait for, their rounds
            if k[0] == "mma":
                if k[1] in self.munits and k[2] < mmin.get(k[1], FAR):
                    mmin[k[1]] = k[2]
                self._who_min(k[5], k[6][1], rmin, mmin)
        if rmin or self.munits:
            for g, b in enumerate(s.bars):
                if b is None:
                    continue
                f = self.rbar[g]
                if f >= 0 and b.phase * sizes[f] < rmin[f]:
                    rmin[f] = b.phase * sizes[f]
                for c, r in b.arrivers:
                    self._who_min(c, r, rmin, mmin)
        dt = (tmin // self.period) * self.period if 0 < tmin < FAR else 0
        dr = {f: (x // (2 * sizes[f])) * 2 * sizes[f] for f, x in enumerate(rmin) if 2 * sizes[f] <= x < FAR}
        dm = {u: x for u, x in mmin.items() if 0 < x < FAR}
        dg = {c: x for c, x in gmin.items() if 0 < x < FAR}
        if not dt and not dr and not dm and not dg and not blind:
            return s
        return self._apply(s, dt, dr, dm, dg)

    def _who_min(self, c: int, r: Any, rmin: list, mmin: dict) -> None:
        """An arrival's round (a ring's, or a commit's group) into its family's minimum."""
        if r is None:
            return
        if r[0] == "commit":
            u = self.unit[c]
            if u in self.munits and r[1] < mmin.get(u, FAR):
                mmin[u] = r[1]
            return
        f = self.cplans[c].ring_family.get(r[0])
        if f is not None and r[1] * self.plan.families[f] < rmin[f]:
            rmin[f] = r[1] * self.plan.families[f]

    def _who(self, c: int, r: Any, dr: dict, dm: dict) -> Any:
        if r is None:
            return r
        if r[0] == "commit":
            return ("commit", r[1] - dm.get(self.unit[c], 0))
        f = self.cplans[c].ring_family.get(r[0])
        return r if f is None or f not in dr else (r[0], r[1] - dr[f] // self.plan.families[f])

    def _tag_min(self, ops: Iterable, tmin: int) -> int:
        """`tmin` lowered to the tile of each (buffer, tag) whose buffer's tags follow the counter."""
        for buf, tag in ops:
            k = self.tbuf[buf]
            if tag is not None and k and tag >= 0 and tag // k < tmin:
                tmin = tag // k
        return tmin

    def _tag(self, buf: int, tag: Any, dt: int) -> Any:
        k = self.tbuf[buf]
        return tag - dt * k if k and tag is not None and tag >= 0 else tag

    def _tags(self, ops: tuple, dt: int) -> tuple:
        return tuple((buf, self._tag(buf, tag, dt)) for buf, tag in ops)

    def _apply(self, s: State, dt: int, dr: dict[int, int], dm: dict[int, int], dg: dict[int, int]) -> State:
        locs = []
        for c, groups in enumerate(s.locs):
            cp = self.cplans[c]
            dh = dm.get(self.unit[c], 0)
            dc = dg.get(c, 0)
            if not (cp.family or cp.groups) or not (dt or dr or dh or dc or cp.blind):
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
                    for r, f in cp.ring_family.items():
                        if e[r] is not None and f in dr:
                            e[r] -= dr[f]
                if dh:
                    for h in cp.hidden:
                        if e[h] is not None:
                            e[h] -= dh
                if dc:
                    for h in cp.groups:
                        if e[h] is not None:
                            e[h] -= dc
                for r in cp.blind:
                    if e[r]:
                        e[r] = 0
                new.append(((pc, tuple(e)), m))
            locs.append(merge_groups(new))
        bufs = tuple(self._tag(g, t, dt) for g, t in enumerate(s.bufs)) if dt else s.bufs
        flight = tuple(sorted((op[0], self._tag(op[0], op[1], dt)) + op[2:] for op in s.flight)) if dt else s.flight
        stores = tuple(sorted((c, q - dg.get(c, 0) if q >= 0 else q, b, self._tag(b, t, dt), st, si)
                              for c, q, b, t, st, si in s.stores)) if dt or dg else s.stores
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
        bars, commits = s.bars, s.commits
        if dr or dm:
            bars = tuple(None if b is None else self._phases(g, b, dr, dm) for g, b in enumerate(s.bars))
            commits = tuple(sorted(k if k[0] != "mma" else
                                   k[:2] + (k[2] - dm.get(k[1], 0),) + k[3:6] + ((k[6][0], self._who(k[5], k[6][1], dr, dm)),)
                                   + k[7:] for k in s.commits))
        return s._replace(locs=tuple(locs), bufs=bufs, flight=flight, stores=stores, mmas=tuple(mmas), bars=bars,
                          commits=commits)

    def _phases(self, g: int, b: Any, dr: dict, dm: dict) -> Any:
        """A barrier whose phases follow a ring family shifted by pr x its size: its phase less pr; its arrivers'
        rounds less their own shift (a ring's, a commit's group)."""
        f = self.rbar[g]
        pr = dr.get(f, 0) // self.plan.families[f] if f >= 0 else 0
        if not pr and not b.arrivers:
            return b
        return b._replace(phase=b.phase - pr, arrivers=frozenset((c, self._who(c, r, dr, dm)) for c, r in b.arrivers))


def refusal(exc: Refused, name: str, sites: Sequence[Site], fallback: Any = None) -> SpecError:
    """The [every] error, at the statement that breaks a rule (else at `fallback`, the parameter)."""
    span = sites[exc.site].span if 0 <= exc.site < len(sites) else fallback
    return error("every", f"--every {name}: {exc}; the loop-offset abstraction does not apply "
                 "(docs/performance.md, 'Loop-offset abstraction')", span)
