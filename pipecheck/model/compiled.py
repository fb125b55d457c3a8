"""Thread-class programs compiled for execution: closures over registers, liveness masks.

Each instruction's operands become Python closures of the thread's register tuple;
barrier and buffer references become closures that return flat ids and check bounds.
Registers dead at a visible instruction are cleared there, so equal states compare equal.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .ir import (PROBE, TRAP, ADVANCE, ARRIVE, ARRIVE_DROP, BAR_ARRIVE, BRANCH, CHOOSE, COLL, COLL_WAIT, COMMIT_GROUP, COMPLETE_TX,
                 CP_ASYNC, CP_ASYNC_ARRIVE, END, EXPECT_TX, FENCE_INIT, FENCE_PROXY, INIT, TCGEN05_OPS, INVAL, JUMP, LET, LOCAL_OPS,
                 MMA, MMA_COMMIT, MMA_WAIT, READ, RING, TMA_LOAD, TMA_STORE, WAIT, WAIT_GROUP, WRITE, EvalError,
                 Instr, Program, RConst, ROp, RRef, RRing, RVar, Site, compile_expr)
from .layout import Layout

RefFn = Callable[[tuple, int], int]  # (registers, own CTA) -> flat id


@dataclass
class CInstr:
    """A compiled instruction; the meaning of a..e depends on the opcode (see `compile_program`)."""

    op: str
    site: int
    target: int
    live: tuple[bool, ...] | None  # registers to keep at this visible instruction (None: all)
    a: object = None
    b: object = None
    c: object = None
    d: object = None
    e: object = None
    text: str = ""
    # an arrive its thread issues at most once per value of its ring (`once_per_round`): it can never
    # be a double arrival, so the barrier's per-phase record of arrivers leaves it out
    once: bool = False


def registers_read(e) -> set[int]:
    if isinstance(e, (RVar, RRing)):
        return {e.slot}
    if isinstance(e, ROp):
        out: set[int] = set()
        for a in e.args:
            out |= registers_read(a)
        return out
    if isinstance(e, RRef):
        out = set()
        for i in e.indices:
            out |= registers_read(i)
        if e.cta is not None:
            out |= registers_read(e.cta)
        return out
    if isinstance(e, tuple):
        out = set()
        for x in e:
            out |= registers_read(x)
        return out
    return set()


def token_slot(ins: Instr) -> int | None:
    """The register an `arrive` / `arrive_drop` writes its phase token into (PTX `mbarrier.arrive` with a state
    destination that a later wait reads), or None: args (bar, count, tx[, slot]) and (bar, count[, slot])."""
    n = 4 if ins.op == ARRIVE else 3
    return ins.args[n - 1] if len(ins.args) >= n and isinstance(ins.args[n - 1], int) else None


GHOST_USERS = (MMA, MMA_WAIT, MMA_COMMIT, COMMIT_GROUP, WAIT_GROUP, CP_ASYNC, CP_ASYNC_ARRIVE)


def registers_written(ins: Instr) -> set[int]:
    """The registers an instruction assigns (a ghost counter it advances included)."""
    if ins.op in (LET, CHOOSE, RING, ADVANCE):
        return {ins.args[0]}
    if ins.op == PROBE:
        return {ins.args[2]}
    if ins.op in (ARRIVE, ARRIVE_DROP) and token_slot(ins) is not None:
        return {ins.args[-1]}
    if ins.op in (MMA, COMMIT_GROUP, CP_ASYNC):
        return {ins.args[-1]}
    return set()


def liveness(prog: Program) -> list[frozenset[int]]:
    """Registers live on entry to each instruction (backward dataflow)."""
    n = len(prog.instrs)
    uses: list[set[int]] = []
    defs: list[set[int]] = []
    succ = prog.successors()
    for ins in prog.instrs:
        u, d = set(), registers_written(ins)
        if ins.op == LET:
            u |= registers_read(ins.args[1])
        elif ins.op == CHOOSE:
            u |= registers_read(ins.args[1:])
        elif ins.op == ADVANCE:
            u.add(ins.args[0])
        elif ins.op == PROBE:
            u |= registers_read(ins.args[:2])
        elif ins.op in (ARRIVE, ARRIVE_DROP) and token_slot(ins) is not None:
            u |= registers_read(ins.args[:-1])
        elif ins.op != RING:  # a ring's start reads nothing
            u |= registers_read(ins.args)
            if ins.op in GHOST_USERS:
                u.add(ins.args[-1])
        uses.append(u)
        defs.append(d)
    live_in = [frozenset()] * n
    changed = True
    while changed:
        changed = False
        for pc in range(n - 1, -1, -1):
            out: set[int] = set()
            for s_ in succ[pc]:
                out |= live_in[s_]
            new = frozenset(uses[pc] | (out - defs[pc]))
            if new != live_in[pc]:
                live_in[pc] = new
                changed = True
    return live_in


def once_per_round(prog: Program) -> frozenset[int]:
    """The pcs of `arrive`s on a ring-indexed barrier (`b[st.index]`) that a thread cannot issue twice
    with one value of that ring: no path leads from one arrive on the array through that ring to
    another without an `advance` of the ring in between, and the ring is not restarted in a loop.

    Two arrivals of one thread on one barrier in one phase are a double arrival only for the same
    ring round (`_round`), so these never are one (forward dataflow: the (array, ring) pairs
    arrived on since the ring's last advance)."""
    succ = prog.successors()
    n = len(prog.instrs)
    restarted = {ins.args[0] for pc, ins in enumerate(prog.instrs) if ins.op == RING and _on_cycle(succ, pc)}

    def ring_of(ins) -> int | None:
        i = ring_index(ins.args[0])
        return i.slot if i is not None and i.slot not in restarted else None

    entry: list[frozenset | None] = [None] * n  # (array, ring, pc of the arrival)
    entry[0] = frozenset()
    work = [0]
    twice: set[int] = set()
    while work:
        pc = work.pop()
        ins = prog.instrs[pc]
        armed = entry[pc]
        assert armed is not None
        if ins.op in _ARRIVALS:
            r = ring_of(ins) if ins.op == ARRIVE else None  # the other arrivals are always recorded
            name = ins.args[0].name
            if r is None:
                twice.add(pc)
            for a_name, a_ring, a_pc in armed:
                if a_name == name and (a_ring == r or r is None or a_ring is None):
                    twice.update((pc, a_pc))  # both: either may come first in the phase
            armed = armed | {(name, r, pc)}
        elif ins.op in (ADVANCE, RING):
            armed = frozenset(k for k in armed if k[1] != ins.args[0])
        for nxt in succ[pc]:
            old = entry[nxt]
            new = armed if old is None else old | armed
            if new != old:
                entry[nxt] = new
                work.append(nxt)
    return frozenset(pc for pc, ins in enumerate(prog.instrs) if ins.op == ARRIVE and pc not in twice)


_ARRIVALS = (ARRIVE, ARRIVE_DROP, MMA_COMMIT, CP_ASYNC_ARRIVE)


def _on_cycle(succ: list[list[int]], start: int) -> bool:
    seen: set[int] = set()
    stack = list(succ[start])
    while stack:
        pc = stack.pop()
        if pc == start:
            return True
        if pc not in seen:
            seen.add(pc)
            stack.extend(succ[pc])
    return False


def compile_ref(layout: Layout, ref: RRef, site: int, barrier: bool) -> RefFn:
    base, dims = (layout.bar_base if barrier else layout.buf_base)[ref.name]
    per = layout.nbar if barrier else layout.nbuf
    ncta = layout.ncta
    cta_f = compile_expr(ref.cta) if ref.cta is not None else None
    if all(isinstance(i, RConst) for i in ref.indices) and all(0 <= i.value < d for i, d in zip(ref.indices, dims)):
        flat = 0
        for i, d in zip(ref.indices, dims):
            flat = flat * d + i.value
        off = base + flat
        if cta_f is None:
            return lambda env, cta: cta * per + off
    # an index made constant by specialisation (`A[lane]`) may still be out of range: the checked path below
    # reports it when the statement runs, instead of landing on another array's element
    idx = [compile_expr(i) for i in ref.indices]
    name = ref.name

    def f(env: tuple, cta: int) -> int:
        flat = 0
        for fn, d in zip(idx, dims):
            v = fn(env)
            if not 0 <= v < d:
                raise EvalError(f"index {v} of '{name}' is out of range 0..{d - 1}", site)
            flat = flat * d + v
        if cta_f is not None:
            c = cta_f(env)
            if not 0 <= c < ncta:
                raise EvalError(f"CTA {c} is outside the cluster of {ncta}", site)
            cta = c
        return cta * per + base + flat

    return f


def ring_index(ref: RRef) -> RRing | None:
    """The ring whose `.index` indexes `ref` (`empty[st.index]`), if any."""
    return next((i for i in ref.indices if isinstance(i, RRing) and i.attr == "index"), None)


def _round(ref: RRef):
    """For a barrier indexed by a ring (`empty[st.index]`): which round of the ring an arrival belongs to.

    Two arrivals by one thread on one barrier phase are a double arrival only when they
    belong to the same round; an arrival of the next round landing early is phase drift."""
    i = ring_index(ref)
    if i is None:
        return None
    slot, stages = i.slot, i.stages
    return lambda env, slot=slot, stages=stages: (slot, env[slot] // stages)


def compile_program(prog: Program, layout: Layout, sites: list[Site]) -> list[CInstr]:
    live = liveness(prog)
    once = once_per_round(prog)
    out: list[CInstr] = []
    bar = lambda r, site: compile_ref(layout, r, site, True)  # noqa: E731
    buf = lambda r, site: compile_ref(layout, r, site, False)  # noqa: E731
    opt = lambda e: compile_expr(e) if e is not None else None  # noqa: E731
    for pc, ins in enumerate(prog.instrs):
        mask = None
        if ins.op not in LOCAL_OPS:
            lv = tuple(i in live[pc] for i in range(prog.nslots))
            mask = lv if not all(lv) else None
        ci = CInstr(ins.op, ins.site, ins.target, mask, text=sites[ins.site].text if ins.site >= 0 else "")
        a, op, site = ins.args, ins.op, ins.site
        if op == LET:
            ci.a, ci.b = a[0], compile_expr(a[1])
        elif op == CHOOSE:
            ci.a, ci.b, ci.c = a[0], compile_expr(a[1]), compile_expr(a[2])
        elif op in (RING, ADVANCE):
            ci.a = a[0]
        elif op == BRANCH:
            ci.a = compile_expr(a[0])
        elif op == WAIT:
            ci.a, ci.b = bar(a[0], site), compile_expr(a[1])
            p = a[1]
            if isinstance(p, RRing) and p.attr == "phase":
                slot, st, ph = p.slot, p.stages, p.phase0
                ci.c = lambda env, slot=slot, st=st, ph=ph: env[slot] // st - ph
        elif op == ARRIVE:
            ci.a, ci.b, ci.c, ci.d = bar(a[0], site), compile_expr(a[1]), opt(a[2]), _round(a[0])
            ci.e = token_slot(ins)
            ci.once = prog.unrecorded or pc in once
        elif op in (EXPECT_TX, COMPLETE_TX, ARRIVE_DROP, INIT):
            ci.a, ci.b = bar(a[0], site), compile_expr(a[1])
            if op == ARRIVE_DROP:
                ci.d, ci.e = _round(a[0]), token_slot(ins)
        elif op == INVAL:
            ci.a = bar(a[0], site)
        elif op == PROBE:
            ci.a, ci.b, ci.c = bar(a[0], site), compile_expr(a[1]), a[2]
        elif op == TMA_LOAD:
            ci.a, ci.b, ci.c, ci.d, ci.e = buf(a[0], site), compile_expr(a[1]), compile_expr(a[2]), bar(a[3], site), opt(a[4])
        elif op == CP_ASYNC:
            ci.a, ci.b, ci.d = buf(a[0], site), compile_expr(a[1]), a[2]
        elif op == CP_ASYNC_ARRIVE:
            ci.a, ci.d = bar(a[0], site), a[1]
        elif op in (READ, WRITE):
            ci.a, ci.b = buf(a[0], site), compile_expr(a[1])
        elif op == TMA_STORE:
            ci.a, ci.b = buf(a[0], site), opt(a[1])
        elif op == MMA:
            ci.a = tuple((buf(r, site), opt(t)) for r, t in a[0])
            ci.c = tuple((buf(r, site), opt(t)) for r, t in a[1])  # the accumulators it writes (two: cta_group 2)
            ci.b = a[-1]
        elif op == MMA_WAIT:
            ci.a, ci.b = compile_expr(a[0]), a[1]
        elif op == MMA_COMMIT:
            ci.a, ci.e, ci.b, ci.d = bar(a[0], site), opt(a[1]), a[2], _round(a[0])
        elif op == COMMIT_GROUP:
            ci.b = a[0]
        elif op == WAIT_GROUP:
            ci.a, ci.c, ci.b = compile_expr(a[0]), bool(a[1]), a[2]
        elif op in (COLL, COLL_WAIT):
            kind = a[0]
            ci.a = kind
            if kind == "bar":
                ci.b, ci.c = compile_expr(a[1]), compile_expr(a[2])
            elif kind in ("elect", "syncwarp"):
                ci.b = a[1]
                ci.c = a[2] if kind == "elect" else None
        elif op == BAR_ARRIVE:
            ci.b, ci.c = compile_expr(a[0]), compile_expr(a[1])
        elif op not in (END, JUMP, FENCE_PROXY, FENCE_INIT, TRAP) and op not in TCGEN05_OPS:
            raise EvalError(f"'{op}' is not supported by this version of the model", site)
        out.append(ci)
    return out
