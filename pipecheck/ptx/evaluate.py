"""What every register holds, for all threads at once: sparse conditional constant propagation
over the flat body, with values that may depend on the thread's identity.

A value is a number (known for every thread), an expression over the thread's identity (its
index in the CTA, its CTA's rank, the lane each `elect.sync` picks: `RBuiltin` leaves), `DYN`
(computed at run time from loop-carried state: the model keeps it in a register) or an
`Unknown` (read from memory or another lane: no one can know it). Branches on a number take
one edge; on an identity expression both (different threads go different ways).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..core.diagnostics import Span, SpecError, error
from ..model.ir import RBuiltin, RConst, RExpr, ROp
from . import syntax as X
from .decode import ALU_K, BRANCH_K, EXIT_K, LOAD_K, PROTO_K, REFUSE_K, Decoded, decode
from .flatten import Body
from .isa import FLOAT_TYPES, alu, float_static, mask, mk, setp_expr, type_of, width_of

PARAM_BASE = 1 << 46  # addresses in the kernel parameter space (a tag, not a real address)
GENERIC_SHARED = 1 << 44  # generic addresses of shared memory (cvta)
CLUSTER_SHIFT = 24  # a shared::cluster address: (rank + 1) << 24 | the CTA-local offset (mapa)
TID = RBuiltin("tid")  # the thread's linear index in its CTA
CTA = RBuiltin("cta")  # the CTA's rank in its cluster


class _Dyn:
    def __repr__(self) -> str:
        return "DYN"


DYN = _Dyn()


@dataclass(frozen=True)
class Unknown:
    at: int  # the instruction whose result cannot be known
    why: str


Value = int | RExpr | _Dyn | Unknown


def elected_lane(mask_value: int) -> RBuiltin:
    """The lane `elect.sync` picks for a member mask: fixed by the configuration."""
    return RBuiltin(f"elected:{mask_value & 0xFFFFFFFF:#x}")


@dataclass(frozen=True)
class Launch:
    """What the PTX does not say: block and cluster shape, grid size, and the kernel parameters' bytes."""

    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    grid: tuple[int, int, int]
    params: Mapping[int, int] = field(default_factory=dict)  # byte offset -> byte

    def param(self, offset: int, nbytes: int) -> int:
        v = 0
        for i in range(nbytes):
            v |= (self.params.get(offset + i, 0) & 0xFF) << (8 * i)
        return v


@dataclass
class ParamRead:
    offset: int
    width: int  # bits
    op: int  # the instruction that reads it
    is_float: bool = False


@dataclass
class Evaluation:
    body: Body
    decoded: list[Decoded]
    reach: list[bool]
    opvals: list[dict[str, Value]]  # per instruction: the value of every register it reads
    taken: dict[int, set[int]]  # branch -> the targets it may go to (fall-through: i + 1)
    param_reads: list[ParamRead]
    shared_symbols: dict[str, int]
    param_bases: dict[str, int]
    launch: Launch
    outvals: list[dict[str, Value]]  # per instruction: the value of every register it defines, right after it

    def value(self, i: int, o: X.Operand) -> Value:
        """Operand o of instruction i: a special register, an immediate, a symbol or a register's value."""
        if isinstance(o, X.Reg) and o.name.split(".")[0] in _SPECIALS:
            return _special(o.name, self.launch)
        if isinstance(o, X.BinOp):
            return combine(lambda x, y: mk(o.op, x, y), self.value(i, o.a), self.value(i, o.b))
        if isinstance(o, X.Neg):
            return combine(lambda x: mk("-", RConst(0), x), self.value(i, o.a))
        return operand_value(o, self.opvals[i], self.shared_symbols, self.param_bases)


def _special(name: str, launch: Launch) -> Value:
    bx, by, bz = launch.block
    cx, cy, cz = launch.cluster
    gx, gy, gz = launch.grid
    base, _, dim = name.partition(".")
    d = "xyz".index(dim) if dim in ("x", "y", "z") else 0
    if base == "%tid":
        if (by, bz) == (1, 1):
            return TID if d == 0 else 0
        return [mk("%", TID, RConst(bx)), mk("%", mk("/", TID, RConst(bx)), RConst(by)),
                mk("/", TID, RConst(bx * by))][d]
    if base == "%ntid":
        return launch.block[d]
    if base == "%laneid":
        return mk("&", TID, RConst(31))
    if base == "%warpid":
        return mk(">>", TID, RConst(5))
    if base == "%nwarpid":
        return (bx * by * bz + 31) // 32
    if base == "%cluster_ctarank":
        return CTA
    if base == "%cluster_nctarank":
        return cx * cy * cz
    if base == "%cluster_ctaid":
        return [mk("%", CTA, RConst(cx)), mk("%", mk("/", CTA, RConst(cx)), RConst(cy)),
                mk("/", CTA, RConst(cx * cy))][d]
    if base == "%cluster_nctaid":
        return launch.cluster[d]
    if base == "%ctaid":  # the first cluster of the grid: its CTAs' ids are their positions in it
        return _special("%cluster_ctaid." + (dim or "x"), launch)
    if base == "%nctaid":
        return launch.grid[d]
    if base == "%clusterid":
        return 0
    if base == "%nclusterid":
        return max(1, launch.grid[d] // max(1, launch.cluster[d]))
    if base == "%is_explicit_cluster":
        return int(cx * cy * cz > 1)
    return Unknown(-1, f"the special register {name} (not known before the kernel runs)")


def operand_value(o: X.Operand, regs: Mapping[str, Value], shared: Mapping[str, int],
                  params: Mapping[str, int], launch: Launch | None = None) -> Value:
    if isinstance(o, X.Imm):
        return o.value
    if isinstance(o, X.FImm):
        import struct
        return struct.unpack("<I", struct.pack("<f", o.value))[0]
    if isinstance(o, X.Reg):
        v = regs.get(o.name)
        if v is None:
            return 0  # read before written: PTX leaves it undefined; nvcc never does it on a real path
        return v
    if isinstance(o, X.Sym):
        if o.name in shared:
            return shared[o.name]
        if o.name in params:
            return params[o.name]
        return Unknown(-1, f"the address of {o.name}")
    if isinstance(o, X.BinOp):
        a = operand_value(o.a, regs, shared, params, launch)
        b = operand_value(o.b, regs, shared, params, launch)
        return combine(lambda x, y: mk(o.op, x, y), a, b)
    if isinstance(o, X.Neg):
        a = operand_value(o.a, regs, shared, params, launch)
        return combine(lambda x: mk("-", RConst(0), x), a)
    return Unknown(-1, "an operand the front end does not read")


def combine(f, *vals: Value) -> Value:
    """Apply an expression builder to values: unknown wins, then run-time, else an expression (folded)."""
    for v in vals:
        if isinstance(v, Unknown):
            return v
    if any(v is DYN for v in vals):
        return DYN
    args = [RConst(v) if isinstance(v, int) else v for v in vals]
    out = f(*args)
    if isinstance(out, RConst):
        return out.value
    return out


def join(a: Value, b: Value) -> Value:
    if a is b or a == b:
        return a
    if isinstance(a, Unknown):
        return a
    if isinstance(b, Unknown):
        return b
    return DYN


@dataclass(frozen=True)
class Static:
    """What an evaluation reads of the body alone, the same at every parameter point (`static_parts`): the
    decoded instructions, the registers each reads, the basic blocks. `defaults` evaluates one entry dozens
    of times; this is made once."""

    decoded: list[Decoded]
    reads: list[list[str]]
    ends: dict[int, int]


def static_parts(body: Body) -> Static:
    decoded = [decode(op, body.regs) for op in body.ops]
    _, ends, _ = basic_blocks(body.ops, decoded)
    return Static(decoded, [_reads(op, d) for op, d in zip(body.ops, decoded)], ends)


class _Eval:
    def __init__(self, body: Body, launch: Launch, shared: dict[str, int], params: dict[str, int],
                 static: Static | None = None):
        self.body = body
        self.launch = launch
        self.shared = shared
        self.params = params
        self.static = static if static is not None else static_parts(body)
        self.decoded = self.static.decoded
        self.param_reads: dict[tuple[int, int], ParamRead] = {}
        self.outvals: list[dict[str, Value]] = [{} for _ in body.ops]

    def val(self, o: X.Operand, regs: Mapping[str, Value]) -> Value:
        if isinstance(o, X.Reg) and o.name.startswith("%") and o.name.split(".")[0] in _SPECIALS:
            return _special(o.name, self.launch)
        return operand_value(o, regs, self.shared, self.params, self.launch)

    # ------------------------------------------------------------ one instruction
    def step(self, i: int, regs: dict[str, Value]) -> None:
        op = self.body.ops[i]
        d = self.decoded[i]
        guard: Value = 1
        if op.guard is not None:
            g = regs.get(op.guard, 0)
            guard = combine(lambda x: mk("==", x, RConst(0)), g) if op.negated else g
            if isinstance(guard, int) and guard == 0:
                return
        new = self.results(i, op, d, regs)
        for (r, w), v in zip(d.dests, new):
            if isinstance(guard, int):
                regs[r] = v
                self.outvals[i][r] = v
                continue
            old = regs.get(r, 0)
            if isinstance(guard, Unknown):
                regs[r] = guard
            elif isinstance(v, Unknown) or isinstance(old, Unknown):
                regs[r] = v if isinstance(v, Unknown) else old
            elif guard is DYN or v is DYN or old is DYN:
                regs[r] = v if v == old else DYN
            else:
                regs[r] = combine(lambda g, a, b: mk("?:", g, a, b), guard, v, old)
        self.outvals[i] = {r: regs[r] for r, _ in d.dests}

    def results(self, i: int, op, d: Decoded, regs: Mapping[str, Value]) -> list[Value]:
        if not d.dests:
            return []
        if d.kind == ALU_K:
            return self._alu(i, op, d, regs)
        if d.kind == LOAD_K:
            if d.space == "param" and len(d.srcs) == 1:
                return self._param_load(i, op, d, regs)
            what = {"clc": "a cluster launch control response (which cluster's tile)", "shared": "shared memory", "global": "global memory", "local": "local memory",
                    "const": "constant memory", "warp": "other lanes of the warp", "barrier": "a barrier"}
            return [Unknown(i, f"`{op.opcode}` reads {what.get(d.space, 'memory')}")] * len(d.dests)
        if d.kind == PROTO_K:
            if d.what == "elect":
                m = self.val(d.roles[0][1], regs)
                if not isinstance(m, int):
                    return [Unknown(i, "elect.sync's member mask is not a constant")] * len(d.dests)
                lane = elected_lane(m)
                out: list[Value] = []
                pair = op.operands[0]
                if isinstance(pair, X.Pair) and isinstance(pair.a, X.Reg):
                    out.append(lane)
                is_elected = mk("&&", mk("!=", mk("&", RConst(m & 0xFFFFFFFF), mk("<<", RConst(1), mk("&", TID, RConst(31)))),
                                             RConst(0)), mk("==", mk("&", TID, RConst(31)), lane))
                if isinstance(pair, X.Pair) and isinstance(pair.b, X.Reg):
                    out.append(is_elected)
                return out
            if d.what == "shfl":
                return self._shfl(i, op, d, regs)
            if d.what == "wait":
                return [1]  # the wait ends when its phase completed: P is true after the loop
            if d.what in ("probe", "arrive", "arrive_drop", "query_cancel"):
                return [DYN]  # whether the phase completed; an arrive's phase token (the parity it arrived in)
            return [Unknown(i, f"the state token of `{op.opcode}`")] * len(d.dests)
        return [Unknown(i, f"`{op.opcode}`")] * len(d.dests)

    def _param_load(self, i: int, op, d: Decoded, regs) -> list[Value]:
        addr = self.val(d.roles[0][1] if d.roles else d.srcs[0], regs)
        if not isinstance(addr, int) or not PARAM_BASE <= addr < PARAM_BASE + (1 << 20):
            return [Unknown(i, "a kernel parameter read at an address that is not constant")] * len(d.dests)
        typ = type_of(op.mods)
        w = width_of(typ)
        nb = max(1, w // 8)
        off = addr - PARAM_BASE
        out: list[Value] = []
        for k in range(len(d.dests)):
            o = off + k * nb
            self.param_reads.setdefault((o, i), ParamRead(o, w, i, typ in FLOAT_TYPES))
            out.append(self.launch.param(o, nb))
        return out

    def _alu(self, i: int, op, d: Decoded, regs) -> list[Value]:
        base, mods = op.base, op.mods
        typ = type_of(mods)
        # registers hold unsigned bit patterns: a negative immediate is its pattern at the operation's width
        w_src = width_of(typ) if typ not in FLOAT_TYPES else 64
        vals = [v & mask(w_src) if isinstance(v, int) and v < 0 else v for v in (self.val(s, regs) for s in d.srcs)]
        if base == "cvta":
            v = vals[0] if vals else Unknown(i, "cvta")
            if "to" in mods and "shared" in mods:
                return [combine(lambda x: mk("-", x, RConst(GENERIC_SHARED)), v)]
            if "shared" in mods:
                return [combine(lambda x: mk("+", x, RConst(GENERIC_SHARED)), v)]
            return [v]
        if base == "mapa":
            a, r = vals[0], vals[1]
            return [combine(lambda x, y: mk("|", mk("<<", mk("+", y, RConst(1)), RConst(CLUSTER_SHIFT)),
                                            mk("&", x, RConst((1 << CLUSTER_SHIFT) - 1))), a, r)]
        if base == "setp":
            dests = d.dests
            if typ in FLOAT_TYPES:
                if all(isinstance(v, int) for v in vals[:2]):
                    r = float_static(base, mods, vals[:2])
                    res: Value = r if r is not None else Unknown(i, f"`{op.opcode}`")
                else:
                    res = next((v for v in vals if isinstance(v, Unknown)), None) or \
                        (DYN if any(v is DYN for v in vals) else Unknown(i, f"`{op.opcode}` on floating-point values"))
            else:
                res = combine(lambda a, b: setp_expr(mods, a, b) or ROp("?", ()), vals[0], vals[1])
                if isinstance(res, ROp) and _has_unknown(res):
                    res = Unknown(i, f"`{op.opcode}` is not evaluated by the PTX front end")
            # setp.CmpOp.BoolOp: combined with a third predicate
            if len(vals) > 2 and len(mods) > 1 and mods[1] in ("and", "or", "xor"):
                bop = {"and": "&&", "or": "||", "xor": "!="}[mods[1]]
                res = combine(lambda a, b: mk(bop, a, b), res, vals[2])
            out = [res]
            if len(dests) > 1:
                out.append(combine(lambda a: mk("!", a), res))
            return out
        if typ in FLOAT_TYPES and base not in ("mov", "selp", "cvt"):
            if vals and all(isinstance(v, int) for v in vals):
                r = float_static(base, mods, vals)
                return [r if r is not None else Unknown(i, f"`{op.opcode}`")]
            return [next((v for v in vals if isinstance(v, Unknown)), None) or
                    (DYN if any(v is DYN for v in vals) else Unknown(i, f"`{op.opcode}` on floating-point values"))]
        if base == "cvt" and any("." + m in FLOAT_TYPES for m in mods):
            return [Unknown(i, f"`{op.opcode}` converts floating-point values")]
        if base == "mov" and len(d.dests) > 1:  # mov.b64 {lo, hi}, x
            v = vals[0]
            w = d.dests[0][1]
            return [combine(lambda x, k=k: mk("&", mk(">>", x, RConst(k * w)), RConst(mask(w))), v)
                    for k in range(len(d.dests))]
        if base == "mov" and isinstance(op.operands[1], X.Vec):  # mov.b64 x, {lo, hi}
            parts = [self.val(p, regs) for p in op.operands[1].items]
            w = width_of(type_of(mods)) // max(1, len(parts))
            acc: Value = 0
            for k, p in enumerate(parts):
                acc = combine(lambda a, b, k=k: mk("|", a, mk("<<", b, RConst(k * w))), acc, p)
            return [acc]
        if base in ("popc", "clz", "brev", "prmt", "lop3") and all(isinstance(v, int) for v in vals):
            return [_bits(base, mods, vals)]
        res2 = combine(lambda *a: alu(base, mods, list(a)) or ROp("?", ()), *vals) if vals else Unknown(i, op.opcode)
        if isinstance(res2, ROp) and res2.op == "?":
            return [Unknown(i, f"`{op.opcode}` is not evaluated by the PTX front end")] * len(d.dests)
        if isinstance(res2, RExpr) and _has_unknown(res2):
            return [Unknown(i, f"`{op.opcode}` is not evaluated by the PTX front end")] * len(d.dests)
        return [res2] + [Unknown(i, op.opcode)] * (len(d.dests) - 1)

    def _shfl(self, i: int, op, d: Decoded, regs) -> list[Value]:
        roles = dict(d.roles)
        v = self.val(roles["value"], regs)
        lane = self.val(roles["lane"], regs)
        clamp = self.val(roles["clamp"], regs)
        mode = op.mods[1] if len(op.mods) > 1 else "idx"
        out: list[Value]
        if isinstance(v, int):
            res: Value = v
        elif mode == "idx" and isinstance(lane, int) and clamp == 31 and isinstance(v, RExpr):
            src = lane & 31
            res = _subst_tid(v, mk("|", mk("&", TID, RConst(~31 & 0xFFFFFFFF)), RConst(src)))
        elif isinstance(v, (Unknown, _Dyn)):
            res = v if isinstance(v, Unknown) else Unknown(i, "shfl.sync of a run-time value (data from another lane)")
        else:
            res = Unknown(i, "shfl.sync of a lane-dependent value in a mode the front end does not evaluate")
        out = [res]
        if len(d.dests) > 1:
            out.append(1)
        return out

    # ------------------------------------------------------------ the fixpoint
    def run(self) -> Evaluation:
        ops = self.body.ops
        n = len(ops)
        ends = self.static.ends
        reads_of = self.static.reads
        entry_state: dict[int, dict[str, Value]] = {0: {}}
        work = [0]
        queued = {0}
        reach = [False] * n
        opvals: list[dict[str, Value]] = [{} for _ in range(n)]
        taken: dict[int, set[int]] = {}
        visits: dict[int, int] = {}
        while work:
            s = min(work)  # program order: fewer re-visits on loops
            work.remove(s)
            queued.discard(s)
            visits[s] = visits.get(s, 0) + 1
            if visits[s] > 200:
                raise error("limit", "PTX: the static evaluation does not settle (a value keeps changing around a loop)",
                            self.body.span(s))
            regs = dict(entry_state[s])
            succ: list[int] = []
            i = s
            e = ends[s]
            while i < e:
                op = ops[i]
                reach[i] = True
                opvals[i] = {r: regs.get(r, 0) for r in reads_of[i]}
                if op.base in ("bra", "brx"):
                    tgt = op.target
                    if op.guard is None:
                        succ = [tgt]
                    else:
                        g = regs.get(op.guard, 0)
                        if isinstance(g, int):
                            cond = (g == 0) if op.negated else (g != 0)
                            succ = [tgt] if cond else [i + 1]
                        else:
                            succ = [tgt, i + 1]
                    taken.setdefault(i, set()).update(succ)
                    break
                if self.decoded[i].kind == EXIT_K:
                    if op.guard is None:
                        succ = []
                        break
                    g = regs.get(op.guard, 0)
                    if isinstance(g, int) and ((g == 0) != op.negated):
                        i += 1
                        continue
                    if isinstance(g, int):
                        succ = []
                        break
                    self.step(i, regs)
                    i += 1
                    continue
                self.step(i, regs)
                i += 1
            else:
                succ = [e] if e < n else []
            for t in succ:
                old = entry_state.get(t)
                if old is None:
                    entry_state[t] = dict(regs)
                    changed = True
                else:
                    changed = False
                    for r, v in regs.items():
                        ov = old.get(r)
                        if ov is v:  # most registers: the value the last visit left (no call to `join`)
                            continue
                        if ov is None:
                            old[r] = v
                            changed = True
                        else:
                            nv = join(ov, v)
                            if nv is not ov and nv != ov:
                                old[r] = nv
                                changed = True
                    if len(old) > len(regs):  # (every register of `regs` is in `old` now)
                        for r in old:
                            if r not in regs and old[r] != 0:
                                nv = join(old[r], 0)
                                if nv != old[r]:
                                    old[r] = nv
                                    changed = True
                if changed and t not in queued:
                    work.append(t)
                    queued.add(t)
        return Evaluation(self.body, self.decoded, reach, opvals, taken, list(self.param_reads.values()), self.shared,
                          self.params, self.launch, self.outvals)


_SPECIALS = {"%tid", "%ntid", "%laneid", "%warpid", "%nwarpid", "%ctaid", "%nctaid", "%cluster_ctarank",
             "%cluster_nctarank", "%cluster_ctaid", "%cluster_nctaid", "%clusterid", "%nclusterid",
             "%is_explicit_cluster", "%smid", "%nsmid", "%gridid", "%clock", "%clock64", "%globaltimer",
             "%globaltimer_lo", "%globaltimer_hi", "%dynamic_smem_size", "%total_smem_size", "%lanemask_eq",
             "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt", "%envreg", "%aggr_smem_size"}


def _has_unknown(e: RExpr) -> bool:
    """Whether an operation's result is the mark of one the front end does not evaluate. The mark, `ROp("?")`,
    is only ever made as the whole result of the builder `combine` applies (`_alu`), and a marked result
    becomes an `Unknown` before it reaches a register: so the values an operation reads hold no mark, and
    its result holds one only at its top (a walk of the whole expression was a sixth of a PTX start-up)."""
    return isinstance(e, ROp) and e.op == "?"


def _subst_tid(e: RExpr, by: RExpr) -> RExpr:
    if e == TID:
        return by
    if isinstance(e, ROp):
        return mk(e.op, *(_subst_tid(a, by) for a in e.args))
    return e


def _bits(base: str, mods: tuple[str, ...], vals: list[int]) -> Value:
    w = width_of(type_of(mods))
    x = vals[0] & mask(w)
    if base == "popc":
        return bin(x).count("1")
    if base == "clz":
        return w - x.bit_length()
    if base == "brev":
        return int(format(x, f"0{w}b")[::-1], 2)
    if base == "lop3" and len(vals) >= 4:
        a, b, c, lut = vals[0], vals[1], vals[2], vals[3]
        r = 0
        for bit in range(32):
            idx = ((a >> bit) & 1) << 2 | ((b >> bit) & 1) << 1 | ((c >> bit) & 1)
            r |= ((lut >> idx) & 1) << bit
        return r
    if base == "prmt" and len(vals) >= 3:
        a, b, sel = vals[0] & mask(32), vals[1] & mask(32), vals[2]
        src = a | (b << 32)
        r = 0
        for k in range(4):
            s = (sel >> (4 * k)) & 0xF
            byte = (src >> (8 * (s & 7))) & 0xFF
            if s & 8:
                byte = 0xFF if byte & 0x80 else 0
            r |= byte << (8 * k)
        return r
    return Unknown(-1, f"`{base}`")


def _reads(op, d: Decoded) -> list[str]:
    out: list[str] = []
    if op.guard is not None:
        out.append(op.guard)

    def walk(o) -> None:
        if isinstance(o, X.Reg):
            if o.name.split(".")[0] not in _SPECIALS:
                out.append(o.name)
        elif isinstance(o, (X.BinOp,)):
            walk(o.a)
            walk(o.b)
        elif isinstance(o, (X.Neg, X.Not)):
            walk(o.a)
        elif isinstance(o, X.Addr):
            for p in o.parts:
                walk(p)
        elif isinstance(o, (X.Vec, X.PList)):
            for p in o.items:
                walk(p)
        elif isinstance(o, X.Pair):
            pass  # destinations
    dest_first = d.kind in (ALU_K, LOAD_K) or (d.kind == PROTO_K and d.dests)
    for k, o in enumerate(op.operands):
        if k == 0 and dest_first:
            if isinstance(o, X.Addr):
                walk(o)
            continue
        walk(o)
    return out


def basic_blocks(ops, decoded) -> tuple[list[int], dict[int, int], list[int]]:
    """(block starts, block start -> end, the block of each instruction): blocks begin at branch
    targets and after branches and exits."""
    n = len(ops)
    leaders = {0}
    for i, op in enumerate(ops):
        if op.base in ("bra", "brx"):
            leaders.add(op.target)
            leaders.add(i + 1)
        elif decoded[i].kind == EXIT_K:
            leaders.add(i + 1)
    starts = sorted(x for x in leaders if x < n)
    ends: dict[int, int] = {}
    block_of = [0] * n
    for k, s in enumerate(starts):
        e = starts[k + 1] if k + 1 < len(starts) else n
        ends[s] = e
        for j in range(s, e):
            block_of[j] = s
    return starts, ends, block_of


def evaluate(body: Body, launch: Launch, shared: dict[str, int], params: dict[str, int],
             static: Static | None = None) -> Evaluation:
    """The values every register may hold at every instruction, for every thread of the launch. `static`:
    `static_parts(body)`, made once by a caller that evaluates the body again."""
    return _Eval(body, launch, shared, params, static).run()


__all__ = ["DYN", "Evaluation", "Launch", "ParamRead", "Static", "Unknown", "Value", "evaluate", "static_parts",
           "SpecError", "Span",
           "elected_lane", "REFUSE_K", "BRANCH_K"]
