"""The protocol slice of a PTX entry -> thread classes with their programs (`model.ir`), as `.pipe`
roles become them in `lang/lower.py`.

Every identity-dependent value the slice uses (a role dispatch `tid / 128 == 1`, `tid % 128 == 0`,
the elected lane's predicate, a warp-uniform shared address) is a *signature node*: threads of one
warpgroup with equal node values run the same program, so they form one class. Values the
evaluation found dynamic become registers of the class program; everything else is folded.
Barrier and buffer operands stay raw addresses here (`SmemRef`); `resolve` maps them to the
declared barriers and buffers once every class's addresses are known.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..core.diagnostics import Span, SpecError, error
from ..model.ir import (ARRIVE, ARRIVE_DROP, BAR_ARRIVE, BRANCH, COLL, COLL_WAIT, COMMIT_GROUP, COMPLETE_TX, END, EXPECT_TX,
                        FENCE_INIT, FENCE_PROXY, INIT, INVAL, JUMP, LET, MMA, MMA_COMMIT, MMA_WAIT, PROBE, T5_AFTER, T5_BEFORE, READ, TMA_LOAD, TRAP,
                        TMA_STORE, WAIT, WAIT_GROUP, WRITE, Instr, RBuiltin, RConst, RExpr, ROp, RVar)
from . import syntax as X
from .decode import ALU_K, BRANCH_K, EXIT_K, LOAD_K, PROTO_K, REFUSE_K, STORE_K  # noqa: F401
from .evaluate import CTA, DYN, TID, Evaluation, Unknown, Value, operand_value
from .isa import alu, fold, mask, mk, setp_expr, type_of, width_of
from .slice import Slice, protocol_reads

FULL = 0xFFFFFFFF


@dataclass(frozen=True)
class SmemRef:
    """A barrier or buffer operand before resolution: the address expression (a shared::cta offset, or a
    shared::cluster address `(rank + 1) << 24 | offset`), and what kind of thing it must be."""

    kind: str  # "bar" | "buf" | "desc" (a wgmma descriptor: address bits 4..17 in its low 14 bits)
    addr: RExpr
    site: int
    # whose SMEM a CTA-local address names: "" the thread's own CTA, "peer" the odd CTA of the issuer's pair (a
    # cta_group::2 MMA's second operand set), "leader" the pair's even CTA (a cta_group::2 load's barrier)
    to: str = ""


class Identity:
    """One thread's identity: its index in the CTA, its CTA's rank and the configuration's elected lanes."""

    __slots__ = ("tid", "cta", "elected", "clc")

    def __init__(self, tid: int, cta: int, elected: dict[int, int], clc: int = 0):
        self.tid, self.cta, self.elected = tid, cta, elected
        self.clc = clc  # how many clusters' work the run's cluster launch control takes over (the `clc` choice)

    def leaf(self, e: RBuiltin) -> int:
        if e == TID:
            return self.tid
        if e == CTA:
            return self.cta
        if e.name.startswith("elected:"):
            return self.elected[int(e.name.split(":")[1], 16)]
        raise KeyError(e.name)


def evaluate_for(e: RExpr, ident: Identity, memo: dict | None = None) -> int:
    """An identity expression's value for one thread."""
    if isinstance(e, RConst):
        return e.value
    if isinstance(e, RBuiltin):
        return ident.leaf(e)
    if memo is not None:
        hit = memo.get(id(e))  # by identity (the entry keeps `e` alive): hashing a deep expression costs more than evaluating it
        if hit is not None:
            return hit[1]
    assert isinstance(e, ROp)
    vals = [evaluate_for(a, ident, memo) for a in e.args]
    v = fold(e.op, vals)  # what `mk` makes of constants, without building them
    if v is None:
        c = mk(e.op, *(RConst(x) for x in vals))
        if not isinstance(c, RConst):
            raise ArithmeticError(f"cannot evaluate {e.op}")
        v = c.value
    if memo is not None:
        memo[id(e)] = (e, v)
    return v


# binary operators defined on every pair of integers, as `isa.fold` computes them
_TOTAL_BINARY = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "&": lambda a, b: a & b,
    "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b), ">": lambda a, b: int(a > b),
    ">=": lambda a, b: int(a >= b), "&&": lambda a, b: int(bool(a) and bool(b)),
    "||": lambda a, b: int(bool(a) or bool(b)), "min": min, "max": max,
}


def evaluate_group(e: RExpr, threads: Sequence[int], idents: Mapping[int, Identity], memo: dict) -> list[int]:
    """`evaluate_for` of each of `threads`, a node at a time: the same values for the same threads (every
    argument is evaluated for the threads that evaluate the node, as there), each node visited once per group
    rather than once per thread. `memo`: per node (by identity), its value per thread so far."""
    if isinstance(e, RConst):
        return [e.value] * len(threads)
    if isinstance(e, RBuiltin):
        return [idents[t].leaf(e) for t in threads]
    have = memo.get(id(e))
    if have is None:
        have = memo[id(e)] = (e, {})  # the entry keeps `e` alive, so its id stays its own
    known = have[1]
    missing = [t for t in threads if t not in known]
    if missing:
        assert isinstance(e, ROp)
        cols = [evaluate_group(a, missing, idents, memo) for a in e.args]
        op = e.op
        f2 = _TOTAL_BINARY.get(op) if len(cols) == 2 else None
        if f2 is not None:  # the common operators, a column at a time (`fold`'s values, without its dispatch)
            for t, a, b in zip(missing, cols[0], cols[1]):
                known[t] = f2(a, b)
            return [known[t] for t in threads]
        for t, vals in zip(missing, zip(*cols)):
            v = fold(op, list(vals))
            if v is None:
                c = mk(op, *(RConst(x) for x in vals))
                if not isinstance(c, RConst):
                    raise ArithmeticError(f"cannot evaluate {op}")
                v = c.value
            known[t] = v
    return [known[t] for t in threads]


def leaves(e, out: set) -> set:
    if isinstance(e, RBuiltin):
        out.add(e)
    elif isinstance(e, ROp):
        for a in e.args:
            leaves(a, out)
    return out


@dataclass
class Plan:
    """What the slice needs per class, computed once: registers kept at run time, signature nodes."""

    dyn: set[str]
    nodes: list[RExpr]
    uses: dict[int, list[RExpr]]  # instruction -> the identity-dependent values it uses (nodes)
    elect_masks: list[int]
    elect_sites: list[int]  # flat indices of the elect.sync instructions in the slice
    warp_colls: bool
    # run-time registers that only ever feed access addresses (`addr_only`): their identity parts split no class
    addr_regs: frozenset[str] = frozenset()
    # per read/write access: its address's identity part (address = run-time part + delta(thread)), checked per class
    addr_delta: dict[int, RExpr] = field(default_factory=dict)


def plan(ev: Evaluation, sl: Slice) -> Plan:
    ops = ev.body.ops
    dyn: set[str] = set()
    nodes: dict[RExpr, None] = {}
    at: dict[int, list[RExpr]] = {}
    masks: set[int] = set()
    esites: list[int] = []
    uses = sorted(sl.ops | sl.branches)
    for i in uses:
        if not ev.reach[i]:
            continue
        d = ev.decoded[i]
        if d.kind == REFUSE_K:
            raise error("rule", f"PTX line {ops[i].line}: {d.reason}", ev.body.span(i))
        for r in protocol_reads(ev, i):
            v = ev.opvals[i].get(r, 0)
            if v is DYN:
                dyn.add(r)
            elif isinstance(v, Unknown):
                _refuse_unknown(ev, i, r, v)
    # a run-time register's definitions read run-time registers too: close over them
    grew = True
    while grew:
        grew = False
        for i in uses:
            d = ev.decoded[i]
            if not ev.reach[i] or d.kind not in (ALU_K, LOAD_K) or not any(r in dyn for r, _ in d.dests):
                continue
            for r in protocol_reads(ev, i):
                v = ev.opvals[i].get(r, 0)
                if v is DYN and r not in dyn:
                    dyn.add(r)
                    grew = True
                elif isinstance(v, Unknown):
                    _refuse_unknown(ev, i, r, v)
    addr_regs, addr_delta = addr_only(ev, sl, dyn, uses)
    # the destinations of kept instructions whose registers are dynamic anywhere, and their identity operands
    for i in uses:
        d = ev.decoded[i]
        if not ev.reach[i]:
            continue
        if d.kind == PROTO_K and d.what == "elect":
            m = ev.value(i, d.roles[0][1])
            if isinstance(m, int):
                masks.add(m & FULL)
                esites.append(i)
        if d.kind == PROTO_K and d.what in ("probe", "query_cancel"):
            dyn.update(r for r, _ in d.dests)
        access = d.kind in (LOAD_K, STORE_K) and d.what in ("read", "write")
        if d.kind in (ALU_K, LOAD_K) and not access and not any(r in dyn for r, _ in d.dests):
            continue  # folded for every class: its operands are no one's business
        addr_alu = d.kind == ALU_K and all(r in addr_regs for r, _ in d.dests if r in dyn)
        for r in protocol_reads(ev, i):
            v = ev.opvals[i].get(r, 0)
            if isinstance(v, RExpr) and not isinstance(v, RConst):
                if r != ops[i].guard and (access or addr_alu):
                    # an access's address, or a part of one, decides only which buffer: the class's members must
                    # name the same buffer, which `frontend._resolve` checks from `addr_delta`
                    continue
                nodes.setdefault(v, None)
                if v not in at.setdefault(i, []):
                    at[i].append(v)
    warp_colls = any(ev.decoded[i].kind == PROTO_K and ev.decoded[i].what in ("elect", "shfl", "syncwarp")
                     for i in uses if ev.reach[i])
    return Plan(dyn, list(nodes), at, sorted(masks), esites, warp_colls, frozenset(addr_regs), addr_delta)


_ZERO = RConst(0)
_ADDITIVE = frozenset({"mov", "cvt", "cvta", "add", "sub", "shl", "mul", "mad"})


def addr_only(ev: Evaluation, sl: Slice, dyn: set[str], uses: list[int]) -> tuple[set[str], dict[int, RExpr]]:
    """The run-time registers whose identity-dependent parts need not split threads, and each access's delta.

    A register qualifies when (1) every kept instruction that reads it is an access using it in its address, or
    arithmetic whose run-time destinations qualify too (never a branch, guard, barrier, count, parity, bytes, loop
    bound), and (2) the identity enters it additively: for a thread t, its value is the class representative's plus
    delta(t) - delta(rep) modulo 2^32, with one identity expression `delta` for every definition (mov, cvt, cvta,
    add, sub, shl by a constant, mul/mad by a constant, 32 bits or wider). Every other run-time register of a class is
    the same for all its members (its identity operands split), so its delta is 0. An access's address is then
    A(run-time) + delta(t); `frontend._resolve` makes the class's program check, where it runs, that A plus the
    smallest and the largest delta of the class's members fall in the same buffer or the same gap between buffers
    (so every member does: buffers are intervals), and refuses the run otherwise."""
    ops = ev.body.ops
    reads: dict[str, list[int]] = {}
    defs: dict[str, list[int]] = {}
    for i in uses:
        if not ev.reach[i]:
            continue
        for r in set(protocol_reads(ev, i)):
            if r in dyn:
                reads.setdefault(r, []).append(i)
        if i in sl.ops:
            for r, _ in ev.decoded[i].dests:
                if r in dyn:
                    defs.setdefault(r, []).append(i)
    accesses = [i for i in uses if ev.reach[i] and ev.decoded[i].kind in (LOAD_K, STORE_K)
                and ev.decoded[i].what in ("read", "write")]
    cand = set(dyn)

    def reader_ok(i: int, r: str) -> bool:
        op, d = ops[i], ev.decoded[i]
        if op.guard == r:
            return False
        if d.kind in (LOAD_K, STORE_K) and d.what in ("read", "write"):
            return True  # protocol_reads of an access: its guard and its address
        if d.kind == ALU_K and op.base in _ADDITIVE:
            return all(x in cand for x, _ in d.dests if x in dyn)
        return False

    while True:
        grew = True
        while grew:  # (1): drop registers with a reader that is not an address computation
            grew = False
            for r in sorted(cand):
                if any(not reader_ok(i, r) for i in reads.get(r, ())):
                    cand.discard(r)
                    grew = True
        delta: dict[str, RExpr] = {}
        bad: set[str] = set()
        changed = True
        while changed:  # (2): the deltas, optimistically over loops (an undefined delta skips a definition)
            changed = False
            for r in sorted(cand - bad):
                for i in defs.get(r, ()):
                    e = _def_delta(ev, i, r, cand, delta)
                    if e is None:
                        continue
                    if e is _BAD:
                        bad.add(r)
                        changed = True
                        break
                    old = delta.get(r)
                    if old is None:
                        delta[r] = e
                        changed = True
                    elif old != e and not _same_fn(ev, old, e):
                        bad.add(r)
                        changed = True
                        break
        if not bad:  # a register defined only from itself has no delta: it splits as before
            bad = {r for r in cand if r not in delta and defs.get(r)}
            if not bad:
                break
        cand -= bad
    out: dict[int, RExpr] = {}
    for i in accesses:
        addr = next((o for k, o in ev.decoded[i].roles if k == "addr"), None)
        if addr is None or not any(_mentions(addr, r) for r in cand):
            continue  # an address of identity and shared registers only: exempt as before (not checked)
        e = _operand_delta(ev, i, addr, cand, delta)
        if e is None or e is _BAD:
            raise error("rule", f"PTX line {ops[i].line}: an address whose per-thread part pipecheck cannot follow",
                        ev.body.span(i))
        out[i] = e
    return cand, out


class _Bad:
    pass


_BAD = _Bad()  # a value whose identity part is not additive


def _operand_delta(ev: Evaluation, i: int, o, cand: set[str], delta: dict[str, RExpr]):
    """An operand's identity part: an identity expression, None (a register's not known yet) or _BAD."""
    if isinstance(o, X.Reg) and o.name in cand:
        return delta.get(o.name)
    if isinstance(o, X.BinOp) and o.op in ("+", "-"):
        a, b = _operand_delta(ev, i, o.a, cand, delta), _operand_delta(ev, i, o.b, cand, delta)
        if a is _BAD or b is _BAD:
            return _BAD
        if a is None or b is None:
            return None
        return mk(o.op, a, b)
    v = ev.value(i, o)
    if isinstance(v, int):
        return _ZERO
    if isinstance(v, RExpr):
        return v  # an identity value: all of it is the thread's own part
    if v is DYN and isinstance(o, X.Reg):
        return _ZERO  # a run-time register the class's members share (its identity operands split the class)
    return _BAD


def _def_delta(ev: Evaluation, i: int, r: str, cand: set[str], delta: dict[str, RExpr]):
    op, d = ev.body.ops[i], ev.decoded[i]
    if op.guard is None:
        v = ev.outvals[i].get(r)
        if isinstance(v, int):
            return _ZERO
        if isinstance(v, RExpr):
            return v
    if d.kind != ALU_K or op.base not in _ADDITIVE or len(d.dests) != 1:
        return _BAD
    from .isa import INT_TYPES, FLOAT_TYPES
    for m in op.mods:
        if "." + m in FLOAT_TYPES or ("." + m in INT_TYPES and width_of("." + m) < 32):
            return _BAD  # a narrow value wraps below 2^32, a float rounds: the identity part would not stay additive
    args = [_operand_delta(ev, i, s, cand, delta) for s in d.srcs]
    if any(a is _BAD for a in args):
        return _BAD
    if any(a is None for a in args):
        return None
    const = [ev.value(i, s) if a == _ZERO else None for s, a in zip(d.srcs, args)]
    base = op.base
    if all(a == _ZERO for a in args):
        return _ZERO
    if base in ("mov", "cvt", "cvta") and len(args) == 1:
        return args[0]
    if base in ("add", "sub") and len(args) == 2:
        return mk("+" if base == "add" else "-", args[0], args[1])
    if base == "shl" and len(args) == 2 and args[1] == _ZERO and isinstance(const[1], int) and 0 <= const[1] < 32:
        return mk("*", args[0], RConst(1 << const[1]))
    if base in ("mul", "mad") and ("lo" in op.mods or "wide" in op.mods) and len(args) >= 2:
        k = 0 if args[1] == _ZERO else 1 if args[0] == _ZERO else -1
        if k < 0 or not isinstance(const[k], int):
            return _BAD
        prod = mk("*", args[1 - k], RConst(const[k]))
        if base == "mul" and len(args) == 2:
            return prod
        if base == "mad" and len(args) == 3:
            return mk("+", prod, args[2])
    return _BAD


def _same_fn(ev: Evaluation, a: RExpr, b: RExpr) -> bool:
    """Whether two identity expressions agree for every thread of the cluster (no elected lane in them)."""
    if (leaves(a, set()) | leaves(b, set())) - {TID, CTA}:
        return False
    T = ev.launch.block[0] * ev.launch.block[1] * ev.launch.block[2]
    ncta = ev.launch.cluster[0] * ev.launch.cluster[1] * ev.launch.cluster[2]
    try:
        return all(evaluate_for(a, Identity(t, c, {})) == evaluate_for(b, Identity(t, c, {}))
                   for c in range(ncta) for t in range(T))
    except (ArithmeticError, KeyError):
        return False


def op_guard(op) -> str | None:
    return op.guard


def _mentions(o: X.Operand, r: str) -> bool:
    if isinstance(o, X.Reg):
        return o.name == r
    if isinstance(o, X.BinOp):
        return _mentions(o.a, r) or _mentions(o.b, r)
    if isinstance(o, (X.Neg, X.Not)):
        return _mentions(o.a, r)
    if isinstance(o, X.Addr):
        return any(_mentions(p, r) for p in o.parts)
    if isinstance(o, (X.Vec, X.PList)):
        return any(_mentions(p, r) for p in o.items)
    return False


def _refuse_unknown(ev: Evaluation, i: int, r: str, v: Unknown) -> None:
    ops = ev.body.ops
    where = f" (PTX line {ops[v.at].line})" if 0 <= v.at < len(ops) else ""
    raise error("rule", f"PTX line {ops[i].line}: `{ops[i].opcode}` depends on {r}, which holds {v.why}{where}: "
                "pipecheck cannot know this value, and it steers the protocol", ev.body.span(i))


def partition(ev: Evaluation, sl: Slice, pl: Plan, threads: list[int], idents: dict[int, Identity]) -> list[list[int]]:
    """Threads that run the same program: walk the body with groups of threads, splitting a group where an
    identity-dependent branch or value differs among its members; threads that agree at every split they
    met form one class. A split counts only where its threads actually are (a warp-0-only branch does not
    split the other warps)."""
    ops = ev.body.ops
    n = len(ops)
    sig: dict[int, list] = {t: [] for t in threads}
    events = 0
    memo: dict = {}  # evaluate_group's: per node, its value per thread
    work: list[tuple[int, tuple[int, ...]]] = [(0, tuple(threads))]
    seen: set = set()

    def val(e, t):
        return evaluate_group(e, (t,), idents, memo)[0]
    while work:
        i, group = work.pop()
        while 0 <= i < n:
            key = (i, group)
            if key in seen:
                break
            seen.add(key)
            split = None
            for e in pl.uses.get(i, ()):
                vals: dict[int, list[int]] = {}
                for t, v in zip(group, evaluate_group(e, group, idents, memo)):
                    vals.setdefault(v, []).append(t)
                if len(vals) > 1:
                    split = list(vals.values())
                    break
            if split is not None:
                events += 1
                for k, part in enumerate(split):
                    for t in part:
                        sig[t].append((events, k))
                    work.append((i, tuple(part)))
                break
            op, d = ops[i], ev.decoded[i]
            if d.kind == BRANCH_K:
                if i in sl.jump_to:
                    i = sl.jump_to[i]
                    continue
                if op.guard is None:
                    i = op.target
                    continue
                g = ev.opvals[i].get(op.guard, 0)
                if isinstance(g, int):
                    i = op.target if (g != 0) != op.negated else i + 1
                    continue
                if isinstance(g, RExpr):  # split by the guard (its values are one node: already uniform here)
                    taken = val(g, group[0])
                    i = op.target if (taken != 0) != op.negated else i + 1
                    continue
                work.append((op.target, group))
                i += 1
                continue
            if d.kind == EXIT_K:
                if op.guard is None:
                    break
                g = ev.opvals[i].get(op.guard, 0)
                if isinstance(g, RExpr):
                    g = val(g, group[0])
                if isinstance(g, int) and (g != 0) != op.negated:
                    break
            i += 1
    classes: dict[tuple, list[int]] = {}
    for t in threads:
        classes.setdefault(tuple(sig[t]), []).append(t)
    return list(classes.values())


# ---------------------------------------------------------------- one class's program


@dataclass
class ClassCode:
    instrs: list[Instr]
    slot_names: list[str]
    ghosts: dict[str, int]
    sites: list[int] = field(default_factory=list)  # flat instruction of each ir instruction
    rep: int = -1  # the thread whose identity the code was written for (`frontend.class_codes`)


class Emitter:
    """Writes the program of the threads with one identity (a class representative)."""

    def __init__(self, ev: Evaluation, sl: Slice, pl: Plan, ident: Identity, site_of, block_threads: int,
                 warp_split: bool = False):
        self.ev, self.sl, self.pl, self.ident = ev, sl, pl, ident
        # lanes of this class's warps run other code too: wgmma's `.sync` makes them meet (Emitter._aligned)
        self.warp_split = warp_split
        self.site_of = site_of  # flat index -> ir Site index
        self.block_threads = block_threads
        self.slots: dict[str, int] = {}
        self.names: list[str] = []
        self.code: list[Instr] = []
        self.memo: dict = {}
        self.mma_pending: list = []  # wgmma operands since the last commit_group

    def slot(self, r: str) -> int:
        if r not in self.slots:
            self.slots[r] = len(self.names)
            self.names.append(r.split("#")[0])
        return self.slots[r]

    def value(self, i: int, o: X.Operand) -> RExpr:
        """An operand at instruction i for this class: a constant, or an expression over run-time registers."""
        ev = self.ev
        if isinstance(o, X.Reg) and o.name in self.pl.dyn:
            v = ev.opvals[i].get(o.name, 0)
            if isinstance(v, int):
                return RConst(v)
            if isinstance(v, RExpr):
                return RConst(evaluate_for(v, self.ident, self.memo))
            return RVar(self.slot(o.name), o.name.split("#")[0])
        if isinstance(o, X.BinOp):
            return mk(o.op, self.value(i, o.a), self.value(i, o.b))
        if isinstance(o, X.Neg):
            return mk("-", RConst(0), self.value(i, o.a))
        v = ev.value(i, o)
        if isinstance(v, int):
            return RConst(v)
        if isinstance(v, RExpr):
            return RConst(evaluate_for(v, self.ident, self.memo))
        if v is DYN and isinstance(o, X.Reg):
            return RVar(self.slot(o.name), o.name.split("#")[0])
        raise error("rule", f"PTX line {ev.body.ops[i].line}: a value pipecheck cannot know steers the protocol here",
                    ev.body.span(i))

    def emit(self, op: str, args: tuple = (), i: int = -1, target=-1) -> int:
        self.code.append(Instr(op, args, self.site_of(i) if i >= 0 else -1, target))
        if op == COLL:  # a collective is an arrival and a wait for the others (model: COLL then COLL_WAIT)
            self.code.append(Instr(COLL_WAIT, args, self.site_of(i) if i >= 0 else -1, target))
            return len(self.code) - 2
        return len(self.code) - 1

    # ------------------------------------------------------------ the walk
    def run(self) -> ClassCode:
        ev = self.ev
        ops = ev.body.ops
        n = len(ops)
        reach = self._reachable()
        if any(reach[i] and ev.decoded[i].what == "query_cancel" for i in range(n)):
            self.emit(LET, (self.slot(CLC_QUERIES), RConst(0)))  # the thread's count of decoded responses
        first: dict[int, int] = {}
        fixups: list[tuple[int, int]] = []  # (ir pc, flat target)
        for i in range(n):
            if not reach[i]:
                continue
            first[i] = len(self.code)
            self._op(i, fixups)
        end = self.emit(END)
        # a flat index's pc: the first instruction emitted at or after it
        pcs = [end] * (n + 1)
        nxt = end
        for i in range(n - 1, -1, -1):
            if i in first:
                nxt = first[i]
            pcs[i] = nxt
        for pc, tgt in fixups:
            ins = self.code[pc]
            self.code[pc] = Instr(ins.op, ins.args, ins.site, end if tgt < 0 else pcs[tgt])
        ghosts: dict[str, int] = {}
        if any(x.op in (MMA, MMA_WAIT, MMA_COMMIT) for x in self.code):
            ghosts["mma#"] = self.slot("mma#")
        if any(x.op in (COMMIT_GROUP, WAIT_GROUP) for x in self.code):
            ghosts["bulk#"] = self.slot("bulk#")
        out = []
        for x in self.code:
            extra = ()
            if x.op in (MMA, MMA_WAIT, MMA_COMMIT):
                extra = (ghosts["mma#"],)
            elif x.op in (COMMIT_GROUP, WAIT_GROUP):
                extra = (ghosts["bulk#"],)
            out.append(Instr(x.op, x.args + extra, x.site, x.target) if extra else x)
        return ClassCode(out, list(self.names), ghosts)

    def _guard_value(self, i: int) -> int | None:
        """1 / 0 when instruction i's guard is known for this class; None when it is decided at run time."""
        op = self.ev.body.ops[i]
        if op.guard is None:
            return 1
        v = self.ev.opvals[i].get(op.guard, 0)
        if isinstance(v, RExpr) and not isinstance(v, RConst):
            v = evaluate_for(v, self.ident, self.memo)
        if isinstance(v, int):
            t = int(v != 0)
            return 1 - t if op.negated else t
        return None

    def _reachable(self) -> list[bool]:
        ev, sl = self.ev, self.sl
        ops = ev.body.ops
        n = len(ops)
        seen = [False] * n
        stack = [0]
        while stack:
            i = stack.pop()
            while 0 <= i < n and not seen[i]:
                seen[i] = True
                op, d = ops[i], ev.decoded[i]
                if d.kind == BRANCH_K:
                    if i in sl.jump_to:
                        i = sl.jump_to[i]
                        continue
                    g = self._guard_value(i)
                    if g == 1:
                        i = op.target
                        continue
                    if g is None:
                        stack.append(op.target)
                    i += 1
                    continue
                if d.kind == EXIT_K:
                    g = self._guard_value(i)
                    if g == 1:
                        break
                i += 1
        return seen

    def _op(self, i: int, fixups: list) -> None:
        ev, sl = self.ev, self.sl
        op, d = ev.body.ops[i], ev.decoded[i]
        if d.kind == BRANCH_K:
            if i in sl.jump_to:
                fixups.append((self.emit(JUMP, (), i), sl.jump_to[i]))
                return
            g = self._guard_value(i)
            if g == 1:
                fixups.append((self.emit(JUMP, (), i), op.target))
            elif g is None:
                taken = self.value(i, X.Reg(op.guard))
                cond = mk("!=", taken, RConst(0)) if op.negated else mk("==", taken, RConst(0))
                fixups.append((self.emit(BRANCH, (cond,), i), op.target))
            return
        if i not in sl.ops:
            return
        g = self._guard_value(i)
        if g == 0:
            return
        skip = None
        if g is None:  # a guard decided at run time: branch around the instruction
            taken = self.value(i, X.Reg(op.guard))
            cond = mk("==", taken, RConst(0)) if op.negated else mk("!=", taken, RConst(0))
            skip = self.emit(BRANCH, (cond,), i)
        if d.kind == EXIT_K:
            fixups.append((self.emit(JUMP, (), i), -1))
        elif d.kind == ALU_K or (d.kind == LOAD_K and d.what != "read"):
            self._alu(i, op, d)
        elif d.kind == PROTO_K or d.what in ("read", "write"):
            if d.kind == LOAD_K:  # an ld.shared: the read of its buffer, and registers no one can know
                self._alu(i, op, d)
            self._proto(i, op, d)
        if skip is not None:
            ins = self.code[skip]
            self.code[skip] = Instr(ins.op, ins.args, ins.site, len(self.code))

    def _alu(self, i: int, op, d) -> None:
        dests = [(r, w) for r, w in d.dests if r in self.pl.dyn]
        if not dests:
            return
        if d.kind == LOAD_K:
            if d.space == "param":
                for r, w in dests:
                    self._let_static(i, r, self.ev.outvals[i].get(r))
                return
            raise error("rule", f"PTX line {op.line}: `{op.opcode}` reads a value pipecheck cannot know, and it steers "
                        "the protocol", self.ev.body.span(i))
        after = self._after(i, dests)
        if after is not None:
            for r, _ in dests:
                self.emit(LET, (self.slot(r), after[r]), i)
            return
        base, mods = op.base, op.mods
        if base == "mov" and isinstance(op.operands[1], X.Vec):  # mov.b64 d, {lo, hi}: the parts side by side
            parts = [self.value(i, x) for x in op.operands[1].items]
            w = width_of(type_of(mods)) // max(1, len(parts))
            acc: RExpr = RConst(0)
            for k, x in enumerate(parts):
                acc = mk("|", acc, mk("<<", mk("&", x, RConst(mask(w))), RConst(k * w)))
            self.emit(LET, (self.slot(d.dests[0][0]), acc), i)
            return
        if base == "mov" and len(d.dests) > 1:  # mov.b64 {lo, hi}, x
            x = self.value(i, d.srcs[0])
            w = d.dests[0][1]
            for k, (r, _) in enumerate(d.dests):
                if r in self.pl.dyn:
                    self.emit(LET, (self.slot(r), mk("&", mk(">>", x, RConst(k * w)), RConst(mask(w)))), i)
            return
        w_src = width_of(type_of(mods))
        args = [RConst(a.value & mask(w_src)) if isinstance(a, RConst) and a.value < 0 else a
                for a in (self.value(i, s) for s in d.srcs)]
        if base == "setp":
            e = setp_expr(mods, args[0], args[1])
            if e is None:
                raise error("rule", f"PTX line {op.line}: `{op.opcode}` on run-time values is not modelled",
                            self.ev.body.span(i))
            if len(args) > 2 and len(mods) > 1 and mods[1] in ("and", "or", "xor"):
                e = mk({"and": "&&", "or": "||", "xor": "!="}[mods[1]], e, args[2])
            vals = [e, mk("!", e)]
        elif base == "cvta":
            from .evaluate import GENERIC_SHARED
            x = args[0]
            if "to" in mods and "shared" in mods:
                x = mk("-", x, RConst(GENERIC_SHARED))
            elif "shared" in mods:
                x = mk("+", x, RConst(GENERIC_SHARED))
            vals = [x]
        elif base == "mapa":
            from .evaluate import CLUSTER_SHIFT
            vals = [mk("|", mk("<<", mk("+", args[1], RConst(1)), RConst(CLUSTER_SHIFT)),
                       mk("&", args[0], RConst((1 << CLUSTER_SHIFT) - 1)))]
        else:
            e = alu(base, mods, args)
            if e is None:
                raise error("rule", f"PTX line {op.line}: `{op.opcode}` on run-time values is not modelled by the "
                            "PTX front end", self.ev.body.span(i))
            vals = [e]
        for (r, _), v in zip(d.dests, vals):
            if r in self.pl.dyn:
                self.emit(LET, (self.slot(r), v), i)

    def _after(self, i: int, dests) -> dict[str, RExpr] | None:
        """The destinations' values right after instruction i when the evaluation knows them for this class."""
        out: dict[str, RExpr] = {}
        for r, _ in dests:
            v = self.ev.outvals[i].get(r) if self.ev.body.ops[i].guard is None else None
            if isinstance(v, int):
                out[r] = RConst(v)
            elif isinstance(v, RExpr):
                out[r] = RConst(evaluate_for(v, self.ident, self.memo))
            else:
                return None
        return out

    def _let_static(self, i: int, r: str, v) -> None:
        if isinstance(v, int):
            self.emit(LET, (self.slot(r), RConst(v)), i)
        elif isinstance(v, RExpr):
            self.emit(LET, (self.slot(r), RConst(evaluate_for(v, self.ident, self.memo))), i)
        else:
            raise error("rule", f"PTX line {self.ev.body.ops[i].line}: a kernel parameter read pipecheck cannot place",
                        self.ev.body.span(i))

    def _role(self, i: int, d, name: str) -> RExpr | None:
        for k, o in d.roles:
            if k == name:
                return self.value(i, o)
        return None

    def _proto(self, i: int, op, d) -> None:
        w = d.what
        role = lambda k: self._role(i, d, k)  # noqa: E731
        bar = lambda: SmemRef("bar", role("bar"), i)  # noqa: E731
        if w == "init":
            self.emit(INIT, (bar(), role("count")), i)
        elif w == "inval":
            self.emit(INVAL, (bar(),), i)
        elif w in ("arrive", "arrive_drop"):
            # a state destination a wait reads: the model writes the arrival's phase token into its register
            token = tuple(self.slot(r) for r, _ in d.dests[:1] if r in self.pl.dyn)
            if w == "arrive":
                self.emit(ARRIVE, (bar(), role("count") or RConst(1), role("tx")) + token, i)
            else:
                self.emit(ARRIVE_DROP, (bar(), role("count") or RConst(1)) + token, i)
        elif w == "expect_tx":
            self.emit(EXPECT_TX, (bar(), role("tx")), i)
        elif w == "complete_tx":
            self.emit(COMPLETE_TX, (bar(), role("tx")), i)
        elif w == "wait":
            self.emit(WAIT, (bar(), role("parity")), i)
        elif w == "probe":
            self.emit(PROBE, (bar(), role("parity"), self.slot(d.dests[0][0])), i)
        elif w == "query_cancel":
            # the answer to this thread's n-th query: the first `clc` responses of the run are canceled clusters
            # (docs/semantics.md), so every role that decodes response n agrees, as on the hardware
            n = self.slot(CLC_QUERIES)
            if d.dests and d.dests[0][0] in self.pl.dyn:
                self.emit(LET, (self.slot(d.dests[0][0]), ROp("<", (RVar(n, "clc queries"), RConst(self.ident.clc)))), i)
            self.emit(LET, (n, ROp("+", (RVar(n, "clc queries"), RConst(1)))), i)
        elif w == "elect":
            m = role("mask")
            self.emit(COLL, ("elect", m.value & FULL if isinstance(m, RConst) else FULL, i), i)
        elif w in ("shfl", "syncwarp"):
            m = role("mask")
            self.emit(COLL, ("syncwarp", m.value & FULL if isinstance(m, RConst) else FULL), i)
        elif w == "bar_sync":
            n = role("count")
            self.emit(COLL, ("bar", role("id"), n if n is not None else RConst(self.block_threads)), i)
        elif w == "bar_arrive":
            self.emit(BAR_ARRIVE, (role("id"), role("count")), i)
        elif w == "cluster_wait":
            self.emit(COLL, ("cluster_sync",), i)
        elif w == "tma_load":
            size = role("size")
            b = SmemRef("bar", role("bar"), i, "leader") if d.pair else bar()
            self.emit(TMA_LOAD, (SmemRef("buf", role("dst"), i), RConst(0), size, b, role("mask")), i)
        elif w == "tma_store":
            self.emit(TMA_STORE, (SmemRef("buf", role("src"), i), None), i)
        elif w == "bulk_commit":
            self.emit(COMMIT_GROUP, (), i)
        elif w == "bulk_wait":
            self.emit(WAIT_GROUP, (role("pending"), int(d.space == "read")), i)
        elif w == "fence_proxy":
            self.emit(FENCE_PROXY, (), i)
        elif w == "fence_init":
            self.emit(FENCE_INIT, (), i)
        elif w == "trap":
            self.emit(TRAP, (), i)
        elif w == "mma":
            for k in ("a", "b"):
                e = role(k)
                if e is not None:
                    self.mma_pending.append(SmemRef("desc", e, i))
        elif w == "wg_commit":
            seen: list = []
            for ref in self.mma_pending:
                if ref not in seen:
                    seen.append(ref)
            self.mma_pending = []
            self._aligned(i)
            self.emit(MMA, (tuple((ref, RConst(ANY_TILE)) for ref in seen), (), 1), i)
        elif w == "t5_mma":  # one thread's tcgen05.mma: its own group, completed by a later commit
            refs = [SmemRef("desc", e, i) for e in (role("a"), role("b")) if e is not None]
            if d.pair:  # the CTA pair's MMA: issued by the even CTA, it reads the same descriptors in the odd one
                if self.ident.cta % 2:
                    raise error("rule", f"PTX line {op.line}: `{op.opcode}` is issued by the even CTA of a pair "
                                f"(PTX ISA 9.7.16), but CTA {self.ident.cta} (%cluster_ctarank) reaches it",
                                self.ev.body.span(i))
                refs += [SmemRef("desc", r.addr, i, "peer") for r in refs]
            self.emit(MMA, (tuple((ref, RConst(ANY_TILE)) for ref in refs), (), 2 if d.pair else 1), i)
        elif w == "t5_commit":
            self.emit(MMA_COMMIT, (bar(), role("mask")), i)
        elif w == "t5_before":
            self.emit(T5_BEFORE, (), i)
        elif w == "t5_after":
            self.emit(T5_AFTER, (), i)
        elif w == "wg_wait":
            self._aligned(i)
            self.emit(MMA_WAIT, (role("pending"),), i)
        elif w == "read":
            self.emit(READ, (SmemRef("buf", role("addr"), i), RConst(ANY_TILE)), i)
        elif w == "write":
            self.emit(WRITE, (SmemRef("buf", role("addr"), i), RConst(0)), i)
        # wg_fence, setmaxnreg, cluster_arrive: nothing the model needs (docs/ptx.md)


    def _aligned(self, i: int) -> None:
        """`wgmma.commit_group/wait_group.sync.aligned`: a thread goes on only once every thread of its
        warp executes the same instruction (PTX 9.7.15.5.2/.3), so lanes that run other code between
        two of them (a lane-0 release) cannot drift past them: where a warp's lanes are in several
        classes, a meeting of the warp's lanes (as `syncwarp`) comes first."""
        if self.warp_split:
            self.emit(COLL, ("syncwarp", FULL), i)


CLC_QUERIES = "clc#"  # the ghost register counting a thread's query_cancel decodes
ANY_TILE = -3  # the tag a PTX read expects: any landed data, read after it landed (model.state.ANY_TILE)
_IDENT = {"%tid", "%ntid", "%laneid", "%warpid", "%nwarpid", "%ctaid", "%nctaid", "%cluster_ctarank",
          "%cluster_nctarank", "%cluster_ctaid", "%cluster_nctaid", "%clusterid", "%nclusterid", "%is_explicit_cluster"}


__all__ = ["ClassCode", "Emitter", "Identity", "Plan", "SmemRef", "evaluate_for", "plan", "Span", "SpecError",
           "operand_value", "Value", "ROp", "mask", "type_of", "width_of", "STORE_K"]
