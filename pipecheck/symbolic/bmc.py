"""The second engine: bounded model checking of a Model's transition system in z3.

Each thread class's own code is unrolled first (its control flow reads only its registers,
so its visible steps form a finite graph of nodes with concrete operands, computed with the
model's own `settle`); z3 then encodes the shared state — mbarriers (SEMANTICS 1, as
`semantics.py`), buffer tags, TMA loads in flight, wgmma groups, collectives, CTA exits —
one transition per step, and searches for a finding at depth 1, 2, ... up to the bound.
Every witness is replayed through `model.step` before it is reported; a search that runs
out of transitions before the bound is complete, so its "no finding" is a proof.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import z3

from .. import semantics as S
from ..explore import Exploration, Found, Limits
from ..ir import (ARRIVE, ARRIVE_DROP, BAR_ARRIVE, COLL, COLL_WAIT, COMPLETE_TX, END, EXPECT_TX, LOCAL_OPS, MMA,
                  MMA_WAIT, READ, TMA_LOAD, WAIT, EvalError)
from ..model import Model, State

DEFAULT_DEPTH = 30  # proofs of no finding grow steeply with depth (docs/symbolic.md)
WIDTH = 32  # bit-vectors, not integers: the search is then pure SAT after bit-blasting, much faster


def _int(name: str) -> z3.BitVecRef:
    return z3.BitVec(name, WIDTH)


def _val(v: int) -> z3.BitVecRef:
    return z3.BitVecVal(v, WIDTH)


class Unsupported(Exception):
    """A behaviour of the model this engine does not encode (it stops inconclusive, saying which)."""


# ---------------------------------------------------------------- the unrolled code of each class


@dataclass
class Node:
    """One local state (pc, registers) of a thread class, with its instruction's operands made concrete."""

    pc: int
    env: tuple
    op: str
    succ: list[int] = field(default_factory=list)  # outcomes after it fires (COLL: after the last arrival)
    wait_node: int = -1  # COLL: where the class waits when it is not the last to arrive
    args: dict = field(default_factory=dict)
    error: EvalError | None = None


@dataclass
class ClassCode:
    nodes: list[Node]
    start: int
    ends: list[int]
    dist: list[int] = field(default_factory=list)  # fewest steps from the start: deeper nodes need no encoding yet

    def live(self, t: int) -> list[int]:
        """The nodes the class can stand at after t steps."""
        return [i for i, d in enumerate(self.dist) if d <= t]

    def ends_by(self, t: int) -> list[int]:
        return [i for i in self.ends if self.dist[i] <= t]


def _unroll(model: Model, c: int, limit: int = 20_000) -> ClassCode:
    code = model.code[c]
    cl = model.classes[c]
    cta = cl.cta
    env0: list = [None] * cl.program.nslots
    if model.mma_unit[c] >= 0:
        first = next(i for i, x in enumerate(cl.program.instrs) if x.op in (MMA, MMA_WAIT))
        env0[cl.program.instrs[first].args[-1]] = 0
    index: dict[tuple, int] = {}
    nodes: list[Node] = []
    todo: list[int] = []

    def node(pc: int, env: tuple) -> int:
        key = (pc, env)
        if key not in index:
            if len(nodes) >= limit:
                raise Unsupported(f"{cl.label} has more than {limit} local states")
            index[key] = len(nodes)
            nodes.append(Node(pc, env, code[pc].op))
            todo.append(index[key])
        return index[key]

    starts = model.settle(c, 0, tuple(env0))
    if len(starts) == 1:
        start = node(*starts[0])
    else:  # a `choose` before the first visible statement: the first step is the choice
        start = len(nodes)
        nodes.append(Node(0, tuple(env0), "local"))
        nodes[start].succ = [node(pc, env) for pc, env in starts]
    while todo:
        n = nodes[todo.pop()]
        ins = code[n.pc]
        env = n.env
        try:
            if n.op in (END, COLL_WAIT):
                if n.op is COLL_WAIT:
                    n.succ = [node(pc, e) for pc, e in model.settle(c, n.pc + 1, env)]
                continue
            nxt = env
            a = n.args
            if n.op is WAIT:
                a.update(gid=ins.a(env, cta), parity=ins.b(env) & 1, intended=ins.c(env) if ins.c is not None else None)
            elif n.op is ARRIVE:
                a.update(gid=ins.a(env, cta), count=ins.b(env), tx=ins.c(env) if ins.c is not None else 0)
            elif n.op in (EXPECT_TX, COMPLETE_TX, ARRIVE_DROP):
                a.update(gid=ins.a(env, cta), n=ins.b(env))
            elif n.op is TMA_LOAD:
                buf, tag, nbytes, bar = ins.a(env, cta), ins.b(env), ins.c(env), ins.d(env, cta)
                targets = [cta]
                if ins.e is not None:
                    mask = ins.e(env)
                    targets = [k for k in range(model.layout.ncta) if mask >> k & 1]
                    if not targets:
                        raise EvalError(f"multicast mask {mask:#x} names no CTA of the cluster", ins.site)
                pb, pr = model.layout.nbuf, model.layout.nbar
                a["flights"] = [(k * pb + buf % pb, tag, nbytes, k * pr + bar % pr, ins.site, c)
                                for _ in range(cl.size) for k in targets]
            elif n.op is READ:
                a.update(buf=ins.a(env, cta), want=ins.b(env))
            elif n.op is MMA:
                seq = env[ins.b]
                a.update(unit=model.mma_unit[c], seq=seq,
                         ops=tuple((r(env, cta), t(env) if t is not None else None) for r, t in ins.a))
                nxt = env[:ins.b] + (seq + 1,) + env[ins.b + 1:]
            elif n.op is MMA_WAIT:
                a.update(unit=model.mma_unit[c], need=env[ins.b] - ins.a(env))
            elif n.op is COLL:
                key, count = model._coll_key(c, ins, env)
                if key[0] == "b" and (count <= 0 or count % 32):
                    raise EvalError(f"a named barrier's thread count must be a positive multiple of 32, not {count}",
                                    ins.site)
                a.update(key=key, n=count)
                n.wait_node = node(n.pc + 1, model.canon(c, n.pc + 1, env))
                n.succ = [node(pc, e) for pc, e in model.settle(c, n.pc + 2, env)]
                continue
            elif n.op is BAR_ARRIVE:
                count = ins.c(env)
                if count <= 0 or count % 32:
                    raise EvalError(f"a named barrier's thread count must be a positive multiple of 32, not {count}",
                                    ins.site)
                a.update(key=("b", cta, ins.b(env)), n=count)
            elif n.op in LOCAL_OPS:
                pass
            else:
                raise Unsupported(f"'{n.op}' ({ins.text})")
            n.succ = [node(pc, e) for pc, e in model.settle(c, n.pc + 1, nxt)]
        except ZeroDivisionError:
            n.error = EvalError("division by zero", ins.site)
        except EvalError as exc:
            n.error = exc
    ends = [i for i, n in enumerate(nodes) if n.op is END]
    big = 1 << 30
    dist = [big] * len(nodes)
    dist[start] = 0
    frontier = [start]
    while frontier:  # every move (and a collective's release) takes a class one node further
        nxt = []
        for i in frontier:
            n = nodes[i]
            for j in n.succ + ([n.wait_node] if n.wait_node >= 0 else []):
                if dist[j] > dist[i] + 1:
                    dist[j] = dist[i] + 1
                    nxt.append(j)
        frontier = nxt
    return ClassCode(nodes, start, ends, dist)


# ---------------------------------------------------------------- mbarriers in z3 (semantics.py, symbolically)


@dataclass
class Bar:
    init: bool
    phase: Any
    pending: Any
    expected: Any
    tx: Any
    arr: dict  # class -> Bool: arrived in the current phase

    def where(self, cond, other: "Bar") -> "Bar":
        """`self` where cond holds, else `other`."""
        return Bar(self.init, z3.If(cond, self.phase, other.phase), z3.If(cond, self.pending, other.pending),
                   z3.If(cond, self.expected, other.expected), z3.If(cond, self.tx, other.tx),
                   {k: z3.If(cond, v, other.arr[k]) for k, v in self.arr.items()})


def _complete(b: Bar) -> Bar:
    done = z3.And(b.pending == 0, b.tx == 0)
    return Bar(b.init, z3.If(done, b.phase + 1, b.phase), z3.If(done, b.expected, b.pending), b.expected,
               z3.If(done, 0, b.tx), {k: z3.And(z3.Not(done), v) for k, v in b.arr.items()})


def _arrive(b: Bar, count: int, who: int, tx: int) -> tuple[Bar, Any, Any]:
    """S.arrive: (barrier after, a finding was raised, the kernel faulted)."""
    if not b.init:
        return b, z3.BoolVal(True), z3.BoolVal(True)
    t = b.tx + tx if tx else b.tx
    rng = z3.Or(t > S.MAX_TX, t < -S.MAX_TX) if tx else z3.BoolVal(False)
    fault = z3.Or(rng, b.pending == 0, count > b.pending)
    double = b.arr.get(who, z3.BoolVal(False))
    arr = dict(b.arr)
    arr[who] = z3.BoolVal(True)
    after = _complete(Bar(b.init, b.phase, b.pending - count, b.expected, t, arr))
    faulted = Bar(b.init, b.phase, b.pending, b.expected, t, b.arr)
    return faulted.where(fault, after), z3.Or(fault, double), fault


def _tx(b: Bar, delta: int) -> tuple[Bar, Any, Any]:
    """S.expect_tx (delta > 0) / S.complete_tx (delta < 0)."""
    if not b.init:
        return b, z3.BoolVal(True), z3.BoolVal(True)
    t = b.tx + delta
    fault = z3.Or(t > S.MAX_TX, t < -S.MAX_TX)
    moved = Bar(b.init, b.phase, b.pending, b.expected, t, b.arr)
    return moved.where(fault, _complete(moved)), fault, fault


def _drop(b: Bar, count: int, who: int) -> tuple[Bar, Any, Any]:
    """S.arrive_drop: expected -= count (a finding at <= 0, kept at 0), then arrive."""
    if not b.init:
        return b, z3.BoolVal(True), z3.BoolVal(True)
    e = b.expected - count
    zero = e <= 0
    nb, bad, halt = _arrive(Bar(b.init, b.phase, b.pending, z3.If(zero, 0, e), b.tx, b.arr), count, who, 0)
    return nb, z3.Or(bad, zero), halt


def _repeat(op, b: Bar, m: int) -> tuple[Bar, Any, Any]:
    """m threads of a class doing op one after another; the first fault stops the kernel."""
    bad, halt = z3.BoolVal(False), z3.BoolVal(False)
    for _ in range(m):
        nb, nbad, nhalt = op(b)
        b = b.where(halt, nb)
        bad = z3.Or(bad, z3.And(z3.Not(halt), nbad))
        halt = z3.Or(halt, nhalt)
    return b, z3.simplify(bad), z3.simplify(halt)


# ---------------------------------------------------------------- the encoding


@dataclass
class _Step:
    """The state variables at one depth."""

    loc: list
    bars: list  # per barrier: Bar
    bufs: list
    fl: list  # per flight slot: Bool
    done: list  # per wgmma unit
    joined: dict  # (unit, seq) -> Int
    formed: dict  # (unit, seq) -> Bool
    coll: dict  # key -> Int
    exited: list
    halted: Any
    t: int = 0
    cache: dict = field(default_factory=dict)  # terms built once per state (node tests, accesses)


class Encoding:
    """The transition system of one Model, unrolled step by step into a z3 solver."""

    def __init__(self, model: Model):
        self.model = model
        self.codes = [_unroll(model, c) for c in range(len(model.classes))]
        self.slots: list[tuple[int, int, int, tuple]] = []  # (class, node, copy, flight entry)
        self.slot_of: dict[tuple[int, int], list[int]] = {}
        for c, code in enumerate(self.codes):
            for i, n in enumerate(code.nodes):
                for j, f in enumerate(n.args.get("flights", ())):
                    self.slot_of.setdefault((c, i), []).append(len(self.slots))
                    self.slots.append((c, i, j, f))
        self.arrivers: dict[int, set[int]] = {}
        self.seqs: dict[tuple[int, int], tuple] = {}  # (unit, seq) -> ops
        self.keys: dict[tuple, int] = {}
        for c, code in enumerate(self.codes):
            for n in code.nodes:
                if n.op in (ARRIVE, ARRIVE_DROP) and n.error is None:
                    self.arrivers.setdefault(n.args["gid"], set()).add(c)
                if n.op is MMA and n.error is None:
                    k = (n.args["unit"], n.args["seq"])
                    if self.seqs.setdefault(k, n.args["ops"]) != n.args["ops"]:
                        raise Unsupported("wgmma group with different operands in different classes")
                if n.op in (COLL, BAR_ARRIVE) and n.error is None:
                    self.keys[n.args["key"]] = n.args["n"]
        self.movers = len(model.classes) + len(self.slots) + model.nunits + model.layout.ncta
        self.touch = self._touch_sets()
        self.steps: list[_Step] = []
        self._guards: dict[int, list] = {}
        self.bad_at: list[tuple] = []  # per transition: (a finding, a spec error, something not encoded)
        self.who: list = []
        self.out: list = []
        self.solver = z3.Solver()
        self.init_state()

    # -- what each move reads and writes, for the reduction
    def _touch_sets(self) -> list[list[tuple[frozenset, frozenset]]]:
        """Per mover, per node (one for async movers): the shared resources its move reads and writes.

        Halting is left out: a halting move is a finding, where the search stops anyway.
        """
        m = self.model
        per = m.layout.nbuf
        waiters: dict = {}
        for d, code in enumerate(self.codes):
            for wn in code.nodes:
                if wn.op is COLL_WAIT:
                    waiters.setdefault(self._wait_key(d, wn), set()).add(f"loc{d}")
        out: list[list[tuple[frozenset, frozenset]]] = []
        for c, code in enumerate(self.codes):
            rows = []
            for i, n in enumerate(code.nodes):
                r, w = {f"loc{c}"}, {f"loc{c}"}
                a = n.args
                if n.error is not None:
                    w.add("*")
                elif n.op is WAIT:
                    r.add(f"bar{a['gid']}")
                elif n.op in (ARRIVE, EXPECT_TX, COMPLETE_TX, ARRIVE_DROP):
                    w.add(f"bar{a['gid']}")
                elif n.op is TMA_LOAD:
                    w |= {f"fl{k}" for k in self.slot_of.get((c, i), ())}
                elif n.op is READ:
                    r.add(f"buf{a['buf']}")
                elif n.op is MMA:
                    w.add(f"q{a['unit']}.{a['seq']}")
                    r |= {f"buf{b}" for b, _ in a["ops"]}
                elif n.op is MMA_WAIT:
                    r.add(f"done{a['unit']}")
                elif n.op in (COLL, BAR_ARRIVE):
                    w |= {f"co{a['key']!r}"} | waiters.get(a["key"], set())
                rows.append((frozenset(r | w), frozenset(w)))
            out.append(rows)
        for (c, i, j, f) in self.slots:
            buf, gid = f[0], f[3]
            reads = {f"q{u}.{q}" for (u, q), ops in self.seqs.items() if any(b == buf for b, _ in ops)}
            reads |= {f"done{u}" for (u, q), ops in self.seqs.items() if any(b == buf for b, _ in ops)}
            w = {f"fl{len(out) - len(self.codes)}", f"buf{buf}", f"bar{gid}"}
            out.append([(frozenset(reads | w), frozenset(w))])
        for u in range(m.nunits):
            out.append([(frozenset({f"q{uu}.{q}" for uu, q in self.seqs if uu == u} | {f"done{u}"}),
                         frozenset({f"done{u}"}))])
        for cta in range(m.layout.ncta):
            r = {f"loc{c}" for c in m.cta_classes[cta]} | {f"exit{cta}"}
            r |= {f"fl{k}" for k, sl in enumerate(self.slots) if sl[3][0] // per == cta}
            r |= {f"q{u}.{q}" for u, q in self.seqs if m.unit_cta[u] == cta}
            r |= {f"done{u}" for u in range(m.nunits) if m.unit_cta[u] == cta}
            out.append([(frozenset(r), frozenset({f"exit{cta}"}))])
        return out

    def _access(self, s: _Step, x: int) -> tuple[dict, dict]:
        """Per resource: when mover x's move in state s touches it, and when it writes it (cached per state)."""
        key = ("access", x)
        if key not in s.cache:
            touches: dict[str, list] = {}
            writes: dict[str, list] = {}
            rows = self.touch[x]
            live = self.codes[x].live(s.t) if x < len(self.codes) else [0]
            for i in live:
                rw, w = rows[i]
                cond = self._at(s, x, i) if x < len(self.codes) else z3.BoolVal(True)
                for r in rw:
                    touches.setdefault(r, []).append(cond)
                for r in w:
                    writes.setdefault(r, []).append(cond)
            s.cache[key] = ({r: z3.Or(v) for r, v in touches.items()}, {r: z3.Or(v) for r, v in writes.items()})
        return s.cache[key]

    def _dependent(self, s: _Step, a: int, b: int):
        """Whether the moves of movers a and b in state s may not commute (a formula over their nodes)."""
        ta, wa = self._access(s, a)
        tb, wb = self._access(s, b)
        terms = [z3.And(wa[r], tb[r]) for r in wa if r in tb] + [z3.And(wb[r], ta[r]) for r in wb if r in ta]
        terms += [wa["*"]] if "*" in wa else []
        terms += [wb["*"]] if "*" in wb else []
        return z3.Or(terms) if terms else z3.BoolVal(False)

    # -- variables
    def _fresh(self, t: int) -> _Step:
        m = self.model
        ncls = len(m.classes)
        init = m.initial()
        bars = []
        for g, b0 in enumerate(init.bars):
            arr = {c: z3.Bool(f"arr_{g}_{c}_{t}") for c in sorted(self.arrivers.get(g, ()))}
            bars.append(Bar(b0 is not None, _int(f"ph_{g}_{t}"), _int(f"pe_{g}_{t}"), _int(f"ex_{g}_{t}"),
                            _int(f"tx_{g}_{t}"), arr))
        return _Step(
            [_int(f"loc_{c}_{t}") for c in range(ncls)], bars, [_int(f"buf_{b}_{t}") for b in range(len(init.bufs))],
            [z3.Bool(f"fl_{s}_{t}") for s in range(len(self.slots))], [_int(f"done_{u}_{t}") for u in range(m.nunits)],
            {k: _int(f"jo_{k[0]}_{k[1]}_{t}") for k in self.seqs}, {k: z3.Bool(f"fo_{k[0]}_{k[1]}_{t}") for k in self.seqs},
            {k: _int(f"co_{i}_{t}") for i, k in enumerate(sorted(self.keys, key=repr))},
            [z3.Bool(f"exit_{k}_{t}") for k in range(m.layout.ncta)], z3.Bool(f"halt_{t}"), t)

    def init_state(self) -> None:
        s0 = self._fresh(0)
        init = self.model.initial()
        cs = []
        for c, code in enumerate(self.codes):
            cs.append(s0.loc[c] == code.start)
        for g, b0 in enumerate(init.bars):
            b = s0.bars[g]
            if b0 is not None:
                cs += [b.phase == b0.phase, b.pending == b0.pending, b.expected == b0.expected, b.tx == b0.tx]
            else:
                cs += [b.phase == 0, b.pending == 0, b.expected == 0, b.tx == 0]
            cs += [z3.Not(v) for v in b.arr.values()]
        cs += [v == t for v, t in zip(s0.bufs, init.bufs)]
        cs += [z3.Not(v) for v in s0.fl] + [v == 0 for v in s0.done] + [v == 0 for v in s0.joined.values()]
        cs += [z3.Not(v) for v in s0.formed.values()] + [v == 0 for v in s0.coll.values()]
        cs += [z3.Not(v) for v in s0.exited] + [z3.Not(s0.halted)]
        self.solver.add(*cs)
        self.steps.append(s0)

    # -- one step
    def _at(self, s: _Step, c: int, i: int):
        key = ("at", c, i)
        hit = s.cache.get(key)
        if hit is None:
            hit = s.cache[key] = s.loc[c] == i
        return hit

    def guards(self, t: int) -> list:
        """Per mover, whether it can move in state t (classes ignore the outcome index here); cached."""
        if t in self._guards:
            return self._guards[t]
        s = self.steps[t]
        out = []
        for c, code in enumerate(self.codes):
            en = [z3.And(self._at(s, c, i), e) for i in code.live(t)
                  if (e := self._enabled(s, c, code.nodes[i])) is not None]
            out.append(z3.And(z3.Not(s.halted), z3.Or(en)) if en else z3.BoolVal(False))
        for k in range(len(self.slots)):
            out.append(z3.And(z3.Not(s.halted), s.fl[k]))
        for u in range(self.model.nunits):
            ready = [z3.And(s.done[u] == q, s.formed[(uu, q)]) for (uu, q) in self.seqs if uu == u]
            out.append(z3.And(z3.Not(s.halted), z3.Or(ready)) if ready else z3.BoolVal(False))
        for cta in range(self.model.layout.ncta):
            fin = [z3.Or([self._at(s, c, e) for e in self.codes[c].ends_by(t)]) if self.codes[c].ends_by(t)
                   else z3.BoolVal(False) for c in self.model.cta_classes[cta]]
            out.append(z3.And(z3.Not(s.halted), z3.Not(s.exited[cta]), *fin))
        self._guards[t] = out
        return out

    def _enabled(self, s: _Step, c: int, n: Node):
        """None when the node cannot fire by itself (END, a collective's wait)."""
        if n.op in (END, COLL_WAIT):
            return None
        if n.error is not None:
            return z3.BoolVal(True)
        if n.op is WAIT:
            b = s.bars[n.args["gid"]]
            if not b.init:
                return z3.BoolVal(False)
            return (b.phase & 1) != n.args["parity"]
        if n.op is MMA_WAIT:
            return s.done[n.args["unit"]] >= n.args["need"]
        return z3.BoolVal(True)

    def extend(self) -> None:
        """Add the transition from the last state to a new one."""
        t = len(self.steps) - 1
        s, nx = self.steps[t], self._fresh(t + 1)
        who, out = _int(f"who_{t}"), _int(f"out_{t}")
        self.who.append(who)
        self.out.append(out)
        g = self.guards(t)
        cs = [who >= 0, who < self.movers, out >= 0, z3.Implies(who >= len(self.codes), out == 0)]
        for k, guard in enumerate(g):
            cs.append(z3.Implies(who == k, guard))
        if t > 0:  # partial-order reduction: of two adjacent independent moves, only the lower-numbered goes first
            prev, ps = self.who[t - 1], self.steps[t - 1]
            for a in range(self.movers):
                for b in range(a):
                    cs.append(z3.Implies(z3.And(prev == a, who == b), self._dependent(ps, a, b)))
        upd: dict[str, list] = {}  # variable name -> [(condition, value)]
        bad, err, unsup = [], [], []

        def put(name: str, cond, value) -> None:
            upd.setdefault(name, []).append((cond, value))

        ncls = len(self.codes)
        for c, code in enumerate(self.codes):
            me = who == c
            for i in code.live(t):
                n = code.nodes[i]
                if self._enabled(s, c, n) is None:
                    continue
                here = z3.And(me, self._at(s, c, i))
                if n.error is not None:
                    err.append(here)
                    put(f"loc{c}", here, _val(i))
                    continue
                self._fire(s, t, c, i, n, here, out, put, bad, unsup, cs)
        for k, (c, i, j, f) in enumerate(self.slots):
            here = who == ncls + k
            buf, tag, nbytes, gid = f[0], f[1], f[2], f[3]
            put(f"fl{k}", here, z3.BoolVal(False))
            put(f"buf{buf}", here, _val(tag))
            nb, b_bad, b_halt = _tx(s.bars[gid], -nbytes)
            self._put_bar(put, gid, here, nb)
            put("halt", here, b_halt)
            reading = [z3.And(s.formed[q], q[1] >= s.done[q[0]]) for q, ops in self.seqs.items()
                       if any(b == buf for b, _ in ops)]
            bad.append(z3.And(here, z3.Or(b_bad, *reading)))
        base = ncls + len(self.slots)
        for u in range(self.model.nunits):
            here = who == base + u
            put(f"done{u}", here, s.done[u] + 1)
        base += self.model.nunits
        for cta in range(self.model.layout.ncta):
            here = who == base + cta
            put(f"exit{cta}", here, z3.BoolVal(True))
            per = self.model.layout.nbuf
            inflight = [s.fl[k] for k, sl in enumerate(self.slots) if sl[3][0] // per == cta]
            running = [z3.And(s.formed[q], q[1] >= s.done[q[0]]) for q in self.seqs
                       if self.model.unit_cta[q[0]] == cta]
            bad.append(z3.And(here, z3.Or(z3.BoolVal(False), *inflight, *running)))
        # next state: every variable keeps its value unless its mover changed it
        def chain(name: str, old, new) -> None:
            v = old
            for cond, value in reversed(upd.get(name, [])):
                v = z3.If(cond, value, v)
            cs.append(new == v)

        for c in range(ncls):
            chain(f"loc{c}", s.loc[c], nx.loc[c])
        for gid, (b, nb) in enumerate(zip(s.bars, nx.bars)):
            for f in ("phase", "pending", "expected", "tx"):
                chain(f"bar{gid}.{f}", getattr(b, f), getattr(nb, f))
            for c in b.arr:
                chain(f"bar{gid}.arr{c}", b.arr[c], nb.arr[c])
        for k in range(len(s.bufs)):
            chain(f"buf{k}", s.bufs[k], nx.bufs[k])
        for k in range(len(s.fl)):
            chain(f"fl{k}", s.fl[k], nx.fl[k])
        for u in range(len(s.done)):
            chain(f"done{u}", s.done[u], nx.done[u])
        for q in self.seqs:
            chain(f"jo{q}", s.joined[q], nx.joined[q])
            chain(f"fo{q}", s.formed[q], nx.formed[q])
        for key in self.keys:
            chain(f"co{key!r}", s.coll[key], nx.coll[key])
        for k in range(len(s.exited)):
            chain(f"exit{k}", s.exited[k], nx.exited[k])
        chain("halt", s.halted, nx.halted)
        self.solver.add(*cs)
        self.steps.append(nx)
        self.bad_at.append((z3.Or(bad) if bad else z3.BoolVal(False), z3.Or(err) if err else z3.BoolVal(False),
                            z3.Or(unsup) if unsup else z3.BoolVal(False)))

    def _put_bar(self, put, gid: int, cond, nb: Bar) -> None:
        for f in ("phase", "pending", "expected", "tx"):
            put(f"bar{gid}.{f}", cond, getattr(nb, f))
        for c, v in nb.arr.items():
            put(f"bar{gid}.arr{c}", cond, v)

    def _fire(self, s: _Step, t: int, c: int, i: int, n: Node, here, out, put, bad: list, unsup: list,
              cs: list) -> None:
        """The effect of class c firing node i (its instruction, then its local steps)."""
        m = self.model.classes[c].size
        a = n.args
        if n.op is COLL or n.op is BAR_ARRIVE:
            key, count = a["key"], a["n"]
            arrived = s.coll[key] + m
            last = arrived >= count
            unsup.append(z3.And(here, arrived > count))
            put(f"co{key!r}", here, z3.If(last, 0, arrived))
            if n.op is COLL:
                cs.append(z3.Implies(z3.And(here, z3.Not(last)), out == 0))
                cs.append(z3.Implies(z3.And(here, last), out < len(n.succ)))
                target = _val(n.wait_node)
                for o in range(len(n.succ) - 1, -1, -1):
                    target = z3.If(z3.And(last, out == o), n.succ[o], target)
                put(f"loc{c}", here, target)
            else:
                cs.append(z3.Implies(here, out < len(n.succ)))
                put(f"loc{c}", here, self._pick(n.succ, out))
            for d, code in enumerate(self.codes):  # the last arrival releases every waiter of this generation
                for w in code.live(t):
                    wn = code.nodes[w]
                    if wn.op is COLL_WAIT and d != c and self._wait_key(d, wn) == key:
                        if len(wn.succ) != 1:
                            unsup.append(z3.And(here, last, self._at(s, d, w)))
                            continue
                        put(f"loc{d}", z3.And(here, last, self._at(s, d, w)), _val(wn.succ[0]))
            return
        cs.append(z3.Implies(here, out < max(1, len(n.succ))))
        put(f"loc{c}", here, self._pick(n.succ, out))
        if n.op is WAIT and a["intended"] is not None:
            ph = s.bars[a["gid"]].phase
            bad.append(z3.And(here, z3.Or(ph > a["intended"] + 1, ph < a["intended"])))
        elif n.op in (ARRIVE, EXPECT_TX, COMPLETE_TX, ARRIVE_DROP):
            gid = a["gid"]
            if n.op is ARRIVE:
                op = lambda b: _arrive(b, a["count"], c, a["tx"])  # noqa: E731
            elif n.op is ARRIVE_DROP:
                op = lambda b: _drop(b, a["n"], c)  # noqa: E731
            else:
                op = lambda b: _tx(b, a["n"] if n.op is EXPECT_TX else -a["n"])  # noqa: E731
            nb, b_bad, b_halt = _repeat(op, s.bars[gid], m)
            self._put_bar(put, gid, here, nb)
            put("halt", here, b_halt)
            bad.append(z3.And(here, b_bad))
        elif n.op is TMA_LOAD:
            for k in self.slot_of.get((c, i), ()):
                put(f"fl{k}", here, z3.BoolVal(True))
        elif n.op is READ:
            bad.append(z3.And(here, s.bufs[a["buf"]] != a["want"]))
        elif n.op is MMA:
            q = (a["unit"], a["seq"])
            size = self.model.unit_size[a["unit"]] if self.model.wgmma else m
            joined = s.joined[q] + m
            forms = joined >= size
            put(f"jo{q}", here, z3.If(forms, 0, joined))
            put(f"fo{q}", here, z3.Or(s.formed[q], forms))
            stale = [s.bufs[b] != t for b, t in a["ops"] if t is not None]
            bad.append(z3.And(here, forms, z3.Or(z3.BoolVal(False), *stale)))

    def _wait_key(self, d: int, wn: Node):
        ins = self.model.code[d][wn.pc]
        return self.model._coll_key(d, ins, wn.env)[0]

    @staticmethod
    def _pick(succ: list[int], out):
        v = _val(succ[-1] if succ else -1)
        for o in range(len(succ) - 2, -1, -1):
            v = z3.If(out == o, succ[o], v)
        return v

    def hang(self, t: int):
        """State t has no move left and some thread unfinished."""
        s = self.steps[t]
        unfinished = [z3.Not(z3.Or([self._at(s, c, e) for e in code.ends_by(t)])) if code.ends_by(t) else z3.BoolVal(True)
                      for c, code in enumerate(self.codes)]
        return z3.And(z3.Not(s.halted), z3.Not(z3.Or(self.guards(t))), z3.Or(unfinished))


# ---------------------------------------------------------------- the search


def _solver(assertions: list, extra, timeout: float | None) -> z3.Solver:
    """A fresh bit-blasting solver per question: much faster on these queries than one incremental solver."""
    s = z3.Then("simplify", "propagate-values", "solve-eqs", "bit-blast", "sat").solver()
    if timeout is not None:
        s.set("timeout", max(1, int(1000 * timeout)))
    s.add(*assertions)
    s.add(extra)
    return s


def search(model: Model, limits: Limits = Limits(), depth: int = DEFAULT_DEPTH) -> Exploration:
    """Bounded search for a finding; the result has the explorer's shape (path of model actions)."""
    start = time.perf_counter()

    def result(complete: bool, d: int, found: list[Found], stopped: str | None, **extra) -> Exploration:
        return Exploration(complete, d, d, d, found, stopped, time.perf_counter() - start,
                           extra={"engine": "bmc", "bound": depth, **extra})

    try:
        enc = Encoding(model)
    except Unsupported as exc:
        return result(False, 0, [], "bmc-unsupported", unsupported=str(exc))
    for d in range(0, depth + 1):
        left = None if limits.timeout is None else limits.timeout - (time.perf_counter() - start)
        if left is not None and left <= 0:
            return result(False, d, [], "timeout")
        if d > 0:
            enc.extend()
        path = enc.solver.assertions()
        goal = z3.Or([enc.hang(d)] + (list(enc.bad_at[d - 1]) if d > 0 else []))
        s = _solver(path, goal, left)
        res = s.check()
        if res == z3.sat:
            found, note = _replay(enc, s.model(), d)
            if found is None:
                return result(False, d, [], note)
            return result(True, d, found, "first-finding")
        if res == z3.unknown:
            return result(False, d, [], "timeout")
        more = _solver(path, z3.Or(enc.guards(d)), left).check()
        if more == z3.unsat:  # every execution ends within d steps: no finding anywhere
            return result(True, d, [], None)
        if more == z3.unknown:
            return result(False, d, [], "timeout")
    return result(False, depth, [], "depth-bound")


def _replay(enc: Encoding, zm: z3.ModelRef, d: int) -> tuple[list[Found] | None, str]:
    """Turn z3's path into model actions and re-run it through model.step; only findings it shows are kept."""
    model = enc.model
    ncls = len(enc.codes)
    err = any(z3.is_true(zm.eval(enc.bad_at[t][1], model_completion=True)) for t in range(d))
    unsup = any(z3.is_true(zm.eval(enc.bad_at[t][2], model_completion=True)) for t in range(d))
    if unsup:
        return None, "bmc-unsupported"
    state: State = model.initial()
    path: list = []
    found: list[Found] = []
    for t in range(d):
        who = zm.eval(enc.who[t], model_completion=True).as_long()
        out = zm.eval(enc.out[t], model_completion=True).as_long()
        if who < ncls:
            if len(state.locs[who]) != 1:
                return None, "bmc-unsupported"
            action = ("t", who, 0, out)
        elif who < ncls + len(enc.slots):
            entry = enc.slots[who - ncls][3]
            if entry not in state.flight:
                return None, "bmc-replay-failed"
            action = ("l", state.flight.index(entry))
        elif who < ncls + len(enc.slots) + model.nunits:
            action = ("m", who - ncls - len(enc.slots))
        else:
            action = ("x", who - ncls - len(enc.slots) - model.nunits)
        path.append(action)
        try:
            state, findings = model.step(state, action)
        except KeyError:
            if err:
                raise  # pragma: no cover - an EvalError node: the model raises it on the same step
            return None, "bmc-replay-failed"
        if findings:
            found.extend(Found(f, tuple(path), False) for f in findings)
            return found, ""
    if not model.successors(state):
        found.extend(Found(f, tuple(path), True) for f in model.terminal_findings(state))
    return (found or None), ("" if found else "bmc-replay-failed")
