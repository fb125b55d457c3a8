"""Static checks over parameter ranges: tx bytes per barrier phase, tx and count ranges, SMEM, tensor maps.

Checks over parameters alone (the SMEM budget, tensor map descriptors, constant byte and
arrival counts) are z3 formulas over the parameter space: a finding carries z3's witness,
closest to the defaults, and the region where it holds. The byte accounting runs each
lowered thread class's code (waits passing) and compares, per barrier phase, the bytes
announced by expect_tx with the bytes its TMA loads deliver (SEMANTICS 1, 3).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import z3

from ..core.diagnostics import Diagnostic, Note, Span
from ..core.records import record
from ..lang import ast as A
from ..lang.check import ARCHES, MAX_ARRIVAL_COUNT, MAX_TX, CheckedKernel, Inlined
from ..model.ir import (ADVANCE, ARRIVE, BRANCH, CHOOSE, COMPLETE_TX, END, EXPECT_TX, JUMP, LET, RING, TMA_LOAD, Instr,
                        RRef, RRing, Site, compile_expr)
from ..model.tensormaps import ELEMENT_BYTES
from ..model.threads import ThreadClass
from .classes import formula_text, point_text
from .terms import ParamSpace, Term, Unsupported, as_int, ast_term

BARRIER_BYTES = 8  # PTX 9.7.13.15.1: an mbarrier is 8 bytes, 8-byte aligned
TMA_ALIGN = 128  # a TMA destination in SMEM is 128-byte aligned
SWIZZLE_ATOM = 1024  # ... and 1024 under the 128-byte swizzle (8 rows of 128 bytes)
MAX_STEPS = 200_000  # per thread class, for the byte accounting
FLOAT_TYPES = ("f16", "fp16", "float16", "bf16", "bfloat16", "f32", "fp32", "float32", "tf32", "tfloat32",
               "f64", "fp64", "float64")
TM_FIELDS = ("dtype", "dims", "strides", "box", "element_strides", "swizzle", "interleave", "oob_fill", "address",
             "l2_promotion")


# ---------------------------------------------------------------- checks over the parameter space


@dataclass
class _Ctx:
    space: ParamSpace
    checked: CheckedKernel
    out: list[Diagnostic] = field(default_factory=list)

    def term(self, e: A.Expr) -> Term:
        return as_int(ast_term(e, self.space.env))

    def witness(self, bad: z3.BoolRef) -> z3.ModelRef | None:
        """A point where `bad` holds, as close to the default parameters as z3 finds."""
        opt = z3.Optimize()
        opt.set("timeout", 10_000)
        opt.add(*self.space.constraints, bad)
        for p in self.space.free:
            opt.add_soft(p.var == p.default)
        return opt.model() if opt.check() == z3.sat else None

    def report(self, code: str, bad: z3.BoolRef, span: Span | None, message: Callable[[z3.ModelRef], str],
               notes: tuple[Note, ...] = ()) -> bool:
        model = self.witness(bad)
        if model is None:
            return False
        text = message(model)
        where = formula_text(self.space, bad) if self.space.free else ""
        if where:
            at = point_text(self.space.point_of(model), [p.name for p in self.space.free])
            text += f" (only when {where}; witness: {at})"
        self.out.append(Diagnostic("error", code, text, span, notes))
        return True


def _val(model: z3.ModelRef, t: Term) -> int:
    v = model.eval(as_int(t), model_completion=True)
    return v.as_long() if z3.is_int_value(v) else 0


def _round_up(x: Term, a: int) -> Term:
    return ((x + (a - 1)) / a) * a


def param_checks(space: ParamSpace, kernel: A.Kernel, checked: CheckedKernel) -> list[Diagnostic]:
    """smem-budget, tma-descriptor, and the byte / arrival-count ranges of parameter-only expressions."""
    ctx = _Ctx(space, checked)
    maps = {i.name: i for i in kernel.items if isinstance(i, A.TensorMap)}
    for tm in maps.values():
        _tensormap(ctx, tm)
    _smem(ctx, kernel, maps)
    _ranges(ctx, kernel, maps)
    return ctx.out


def _smem(ctx: _Ctx, kernel: A.Kernel, maps: Mapping[str, A.TensorMap]) -> None:
    swizzled = set()  # buffers a 128B-swizzled map loads into
    for role in ctx.checked.roles:
        for s in _statements(role.body):
            if isinstance(s, A.TmaLoad) and s.tensormap in maps and _swizzle_span(maps[s.tensormap]) == 128:
                swizzled.add(s.buffer.name)
    offset: Term = z3.IntVal(0)
    parts: list[tuple[str, Term, Term]] = []
    biggest: tuple[Span, Term] | None = None
    try:
        for item in kernel.items:
            if isinstance(item, A.Smem) and item.over is None and item.space == "smem":  # TMEM is not SMEM
                align = SWIZZLE_ATOM if item.name in swizzled else TMA_ALIGN
                n: Term = z3.IntVal(1)
                for d in item.dims:
                    n = n * ctx.term(d)
                each = _round_up(ctx.term(item.bytes), align)
                offset = _round_up(offset, align) + n * each
                parts.append((item.name, n, each))
                biggest = biggest or (item.span, n * each)
        bars: Term = z3.IntVal(0)
        for item in kernel.items:
            if isinstance(item, A.MBarrier):
                n = z3.IntVal(1)
                for d in item.dims:
                    n = n * ctx.term(d)
                bars = bars + n
    except Unsupported:
        return
    total = _round_up(offset, BARRIER_BYTES) + BARRIER_BYTES * bars
    budget = ARCHES[ctx.checked.arch]
    involved = [p for p in ctx.space.free if any(z3.eq(p.var, v) for v in _vars(total))]

    def message(m: z3.ModelRef) -> str:
        used = ", ".join(f"{name}: {_val(m, n)} x {_val(m, each)} bytes" for name, n, each in parts)
        text = (f"shared memory needs {_val(m, total)} bytes per block ({used}, {_val(m, bars)} mbarriers x 8 bytes; "
                f"TMA destinations 128-byte aligned); {ctx.checked.arch} allows {budget} bytes ({budget // 1024} KiB)")
        fit = _largest_fit(ctx, total, budget, involved)
        return text + (f"; the largest configuration that fits is {fit}" if fit else "; no configuration fits")

    notes = tuple(Note(f"parameter {p.name} is declared here", p.decl.span) for p in involved)
    span = biggest[0] if biggest else kernel.span
    ctx.report("smem-budget", total > budget, span, message, notes)


def _largest_fit(ctx: _Ctx, total: Term, budget: int, involved) -> str:
    opt = z3.Optimize()
    opt.set("timeout", 10_000)
    opt.add(*ctx.space.constraints, total <= budget)
    opt.maximize(total)
    for p in involved:
        opt.maximize(p.var)
    if opt.check() != z3.sat:
        return ""
    m = opt.model()
    vals = ", ".join(f"{p.name}={_val(m, p.var)}" for p in involved)
    return f"{vals} ({_val(m, total)} bytes)" if vals else f"{_val(m, total)} bytes"


def _vars(t: Term) -> list[Term]:
    out: dict[str, Term] = {}
    todo = [t]
    while todo:
        x = todo.pop()
        if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out[str(x)] = x
        else:
            todo.extend(x.children())
    return list(out.values())


# ---------------------------------------------------------------- tensor maps (SEMANTICS 7)


def _word(v: A.Expr | tuple) -> str | None:
    return v.id.lower() if isinstance(v, A.Name) else None


def _swizzle_span(tm: A.TensorMap) -> int:
    f = next((x for x in tm.fields if x.name == "swizzle"), None)
    return _mode(f.value) if f is not None else 0


def _mode(v) -> int:
    """A swizzle or interleave mode as bytes: `none` / 0, `32B` / `SWIZZLE_32B` / 32, ... ; -1 if unknown."""
    if isinstance(v, A.Num):
        return v.value if v.value in (0, 16, 32, 64, 128) else -1
    w = _word(v)
    if w is None:
        return -1
    if w in ("none", "swizzle_none", "interleave_none"):
        return 0
    for n in (128, 64, 32, 16):
        if str(n) in w:
            return n
    return -1


def _tensormap(ctx: _Ctx, tm: A.TensorMap) -> None:
    fields = {f.name: f for f in tm.fields}
    where = f"tensor map {tm.name}"
    for f in tm.fields:
        if f.name not in TM_FIELDS:
            ctx.out.append(Diagnostic("error", "tma-descriptor", f"{where}: unknown field '{f.name}' (a tensor map has "
                                      f"{', '.join(TM_FIELDS)})", f.span))

    def fail(field_name: str, text: str) -> None:
        f = fields.get(field_name)
        ctx.out.append(Diagnostic("error", "tma-descriptor", f"{where}: {text} (cuTensorMapEncodeTiled, SEMANTICS 7)",
                                  f.span if f is not None else tm.span))

    dtype = _word(fields["dtype"].value) if "dtype" in fields else None
    if dtype is None:
        fail("dtype", "no `dtype` given")
        return
    elem = ELEMENT_BYTES.get(dtype, 0)
    if not elem:
        fail("dtype", f"unknown dtype '{dtype}'; pipecheck knows {', '.join(sorted(ELEMENT_BYTES))}")
        return

    def lst(name: str) -> tuple[A.Expr, ...] | None:
        f = fields.get(name)
        if f is None:
            return None
        return f.value if isinstance(f.value, tuple) else (f.value,)

    try:
        dims = [ctx.term(e) for e in lst("dims") or ()]
        box = [ctx.term(e) for e in lst("box") or ()]
        strides = [ctx.term(e) for e in lst("strides") or ()]
        estr = [ctx.term(e) for e in lst("element_strides") or ()]
    except Unsupported:
        return
    rank = len(dims)
    swizzle = _mode(fields["swizzle"].value) if "swizzle" in fields else 0
    inter = _mode(fields["interleave"].value) if "interleave" in fields else 0
    if swizzle not in (0, 32, 64, 128):
        fail("swizzle", "swizzle is none, 32B, 64B or 128B")
        swizzle = 0
    if inter not in (0, 16, 32):
        fail("interleave", "interleave is none, 16B or 32B")
        inter = 0
    if not 1 <= rank <= 5 or (inter and rank < 3):
        fail("dims", f"rank {rank}: a tensor map has 1 to 5 dimensions" + (" (at least 3 when interleaved)" if inter else ""))
        return
    if len(box) != rank:
        fail("box", f"box has {len(box)} dimensions, the tensor {rank}")
        return
    if rank > 1 and len(strides) != rank - 1:
        fail("strides", f"strides has {len(strides)} entries; a rank-{rank} map takes {rank - 1} (bytes between "
             "consecutive indices of dimensions 1..rank-1; dimension 0 is contiguous)")
        strides = []
    if estr and len(estr) != rank:
        fail("element_strides", f"element_strides has {len(estr)} entries, the tensor {rank} dimensions")
        estr = []

    def check(field_name: str, bad: z3.BoolRef, message: Callable[[z3.ModelRef], str]) -> None:
        f = fields.get(field_name)
        ctx.report("tma-descriptor", bad, f.span if f is not None else tm.span,
                   lambda m: f"{where}: {message(m)} (cuTensorMapEncodeTiled, SEMANTICS 7)")

    for i, d in enumerate(dims):
        check("dims", z3.Or(d < 1, d > 1 << 32), lambda m, i=i, d=d: f"dims[{i}] = {_val(m, d)} is outside 1..2^32")
    unit = 32 if inter == 32 else 16
    need: Term = dims[0] * elem if dims else z3.IntVal(0)
    for i, st in enumerate(strides):
        in_elems = st * elem
        check("strides", z3.Or(st % unit != 0, st < 1),
              lambda m, i=i, st=st: f"strides[{i}] = {_val(m, st)} is not a multiple of {unit} bytes"
              + _elements_hint(m, st, elem, dtype))
        check("strides", st >= 1 << 40, lambda m, i=i, st=st: f"strides[{i}] = {_val(m, st)} is not below 2^40")
        check("strides", z3.And(st % unit == 0, st < need),
              lambda m, i=i, st=st, need=need: f"strides[{i}] = {_val(m, st)} bytes is less than the "
              f"{_val(m, need)} bytes dimension {i} spans (globalStrides[{i}] = "
              + ("globalDim[0] * elementSize" if i == 0 else f"globalStrides[{i - 1}] * globalDim[{i}]")
              + " + padding)" + _elements_hint(m, st, elem, dtype, in_elems >= need))
        need = st * dims[i + 1] if i + 1 < rank else need
    for i, b in enumerate(box):
        check("box", z3.Or(b < 1, b > 256), lambda m, i=i, b=b: f"box[{i}] = {_val(m, b)} is outside 1..256")
    if box and not inter:
        row = box[0] * elem
        check("box", row % 16 != 0, lambda m: f"the inner box row is {_val(m, row)} bytes ({_val(m, box[0])} x "
              f"{dtype}); without interleave it must be a multiple of 16 bytes")
        if swizzle:
            check("swizzle", row > swizzle, lambda m: f"the inner box row is {_val(m, row)} bytes ({_val(m, box[0])} "
                  f"x {dtype}), wider than the {swizzle}-byte span of swizzle {swizzle}B")
    for i, e in enumerate(estr):
        check("element_strides", z3.Or(e < 1, e > 8),
              lambda m, i=i, e=e: f"element_strides[{i}] = {_val(m, e)} is outside 1..8")
    if inter == 32 and swizzle != 32:
        fail("interleave", "32B interleave requires swizzle 32B")
    if "oob_fill" in fields and _word(fields["oob_fill"].value) not in (None, "none") and dtype not in FLOAT_TYPES:
        fail("oob_fill", f"NaN out-of-bounds fill needs a floating-point dtype, not {dtype}")
    if "address" in fields:
        try:
            addr = ctx.term(fields["address"].value)
        except Unsupported:
            return
        align = 32 if inter == 32 else 16
        check("address", addr % align != 0, lambda m: f"the global address {_val(m, addr):#x} is not {align}-byte aligned")


def _elements_hint(m: z3.ModelRef, st: Term, elem: int, dtype: str, fits: z3.BoolRef | bool = True) -> str:
    """Strides are bytes; a value that works once multiplied by the element size was likely given in elements."""
    v = _val(m, st)
    ok = fits if isinstance(fits, bool) else z3.is_true(m.eval(fits, model_completion=True))
    if elem > 1 and ok and (v * elem) % 16 == 0:
        return f": strides are in bytes, and {v} looks like a count of {dtype} elements ({v} x {elem} = {v * elem} bytes)"
    return ""


# ---------------------------------------------------------------- byte and count ranges (SEMANTICS 6)


def _statements(body: tuple):
    for s in body:
        if isinstance(s, Inlined):
            yield from _statements(s.body)
            continue
        yield s
        if isinstance(s, A.If):
            yield from _statements(s.then)
            yield from _statements(s.other)
        elif isinstance(s, A.For):
            yield from _statements(s.body)


def box_bytes_term(ctx: _Ctx, tm: A.TensorMap) -> Term:
    fields = {f.name: f.value for f in tm.fields}
    elem = ELEMENT_BYTES.get(_word(fields.get("dtype")) or "", 1) if "dtype" in fields else 2
    box = fields.get("box", ())
    box = box if isinstance(box, tuple) else (box,)
    es = fields.get("element_strides", ())
    es = es if isinstance(es, tuple) else (es,)
    n: Term = z3.IntVal(elem)
    for i, b in enumerate(box):
        s = ctx.term(es[i]) if i < len(es) else z3.IntVal(1)
        s = z3.If(s < 1, 1, s)
        n = n * ((ctx.term(b) + s - 1) / s)
    return n


def _ranges(ctx: _Ctx, kernel: A.Kernel, maps: Mapping[str, A.TensorMap]) -> None:
    names = ctx.space.env
    done: set = set()

    def count(e: A.Expr | None, what: str, span: Span) -> None:
        _one(e, 1, MAX_ARRIVAL_COUNT, "arrive-fault", what, span,
             "PTX 9.7.13.15.2: an arrival count outside it is undefined at init and faults on arrive")

    def tx(e: A.Expr | None, lo: int, what: str, span: Span) -> None:
        _one(e, lo, MAX_TX, "tx-range", what, span, "the tx-count range of PTX 9.7.13.15.2; the H200 faults past it")

    def _one(e, lo, hi, code, what, span, rule) -> None:
        if e is None or (span, what) in done:
            return
        from .terms import mentions_only
        if not mentions_only(e, names):
            return  # depends on the run: the byte accounting and the model see it
        done.add((span, what))
        try:
            v = ctx.term(e)
        except Unsupported:
            return
        ctx.report(code, z3.Or(v < lo, v > hi), span,
                   lambda m: f"{what} is {_val(m, v)}, outside {lo}..{hi} ({rule})")

    for item in kernel.items:
        if isinstance(item, A.MBarrier):
            count(item.count, f"the arrival count of mbarrier {item.name}", item.count.span)
    for role in ctx.checked.roles:
        for s in _statements(role.body):
            if isinstance(s, A.Arrive):
                count(s.count, "the arrive count", s.span)
                tx(s.expect_tx, 0, "the expect_tx byte count", s.span)
            elif isinstance(s, A.ExpectTx):
                tx(s.bytes, 0, "the expect_tx byte count", s.span)
            elif isinstance(s, A.CompleteTx):
                tx(s.bytes, 0, "the complete_tx byte count", s.span)
            elif isinstance(s, A.ArriveDrop):
                count(s.count, "the arrive_drop count", s.span)
            elif isinstance(s, A.Init):
                count(s.count, "the init count", s.span)
            elif isinstance(s, A.TmaLoad):
                if s.bytes is not None:
                    tx(s.bytes, 1, "the tma_load byte count", s.span)
                elif s.tensormap in maps and (s.span, "box") not in done:
                    done.add((s.span, "box"))
                    try:
                        v = box_bytes_term(ctx, maps[s.tensormap])
                    except Unsupported:
                        continue
                    ctx.report("tx-range", v > MAX_TX, s.span,
                               lambda m, v=v, name=s.tensormap: f"a box of tensor map {name} is {_val(m, v)} bytes, "
                               f"above the tx-count limit {MAX_TX} (PTX 9.7.13.15.2)")


# ---------------------------------------------------------------- byte accounting per barrier phase


@record
class TxIssue:
    """One static finding of one configuration: (code, site) is its identity across configurations."""

    code: str
    site: int
    message: str
    notes: tuple[tuple[str, int], ...] = ()


@dataclass
class _Event:
    expect: bool  # announced by expect_tx (else delivered by a load or complete_tx)
    nbytes: int
    phase: int | None
    site: int


class _Unknown(Exception):
    """The code cannot be run without the model (a choice, a runaway loop): no accounting for it."""


def _ring_phase(ref: RRef, env: tuple) -> int | None:
    for i in ref.indices:
        if isinstance(i, RRing) and i.attr == "index" and env[i.slot] is not None:
            return env[i.slot] // i.stages
    return None


def _flat(ref: RRef, env: tuple, dims: tuple[int, ...], comp: dict) -> int:
    flat = 0
    for e, d in zip(ref.indices, dims):
        f = comp.get(id(e))
        if f is None:
            f = comp[id(e)] = compile_expr(e)
        v = f(env)
        if not 0 <= v < d:
            raise _Unknown
        flat = flat * d + v
    return flat


def _run_class(cl: ThreadClass, kernel: CheckedKernel, events: dict) -> None:
    """Run one class's code with every wait passing, recording its barrier byte events."""
    instrs: tuple[Instr, ...] = cl.program.instrs
    env: tuple = (None,) * cl.program.nslots
    comp: dict = {}
    dims = {b.name: b.dims for b in kernel.barriers}

    def ev(e):
        f = comp.get(id(e))
        if f is None:
            f = comp[id(e)] = compile_expr(e)
        return f(env)

    pc, steps = 0, 0
    try:
        while True:
            steps += 1
            if steps > MAX_STEPS:
                raise _Unknown
            ins = instrs[pc]
            op, a = ins.op, ins.args
            if op == END:
                return
            if op == LET:
                env = env[:a[0]] + (ev(a[1]),) + env[a[0] + 1:]
            elif op == RING:
                env = env[:a[0]] + (0,) + env[a[0] + 1:]
            elif op == ADVANCE:
                env = env[:a[0]] + (env[a[0]] + 1,) + env[a[0] + 1:]
            elif op == JUMP:
                pc = ins.target
                continue
            elif op == BRANCH:
                if not ev(a[0]):
                    pc = ins.target
                    continue
            elif op == CHOOSE:
                lo, hi = ev(a[1]), ev(a[2])
                if lo != hi:
                    raise _Unknown  # a role's own choice: the accounting would have to follow each value
                env = env[:a[0]] + (lo,) + env[a[0] + 1:]
            elif op in (ARRIVE, EXPECT_TX, COMPLETE_TX, TMA_LOAD):
                _record(cl, kernel, op, a, ins.site, env, ev, comp, dims, events)
            pc += 1
    except (ZeroDivisionError, TypeError):
        raise _Unknown from None


def _record(cl, kernel, op, a, site, env, ev, comp, dims, events) -> None:
    m = cl.size
    if op == TMA_LOAD:
        ref, nbytes, mc = a[3], ev(a[2]), a[4]
        targets = [cl.cta if ref.cta is None else ev(ref.cta)]
        if mc is not None:
            mask = ev(mc)
            targets = [k for k in range(kernel.cluster_size) if mask >> k & 1]
        flat = _flat(ref, env, dims[ref.name], comp)
        for k in targets:
            events.setdefault((k, ref.name, flat), []).append(_Event(False, m * nbytes, _ring_phase(ref, env), site))
        return
    ref = a[0]
    cta = cl.cta if ref.cta is None else ev(ref.cta)
    flat = _flat(ref, env, dims[ref.name], comp)
    if op == ARRIVE:
        if a[2] is None:
            return
        nbytes, expect = ev(a[2]), True
    else:
        nbytes, expect = ev(a[1]), op == EXPECT_TX
    events.setdefault((cta, ref.name, flat), []).append(_Event(expect, m * nbytes, _ring_phase(ref, env), site))


def _bar_name(kernel: CheckedKernel, key: tuple) -> str:
    cta, name, flat = key
    dims = kernel.barrier(name).dims
    idx = []
    for d in reversed(dims):
        idx.append(flat % d)
        flat //= d
    text = name + "".join(f"[{i}]" for i in reversed(idx))
    return f"cta{cta}.{text}" if kernel.cluster_size > 1 else text


def tx_accounting(kernel: CheckedKernel, classes: Sequence[ThreadClass], sites: Sequence[Site]) -> list[TxIssue]:
    """expect-tx-mismatch and tx-range findings of one configuration: announced vs delivered bytes per phase."""
    events: dict[tuple, list[_Event]] = {}
    unknown: set[tuple] = set()
    for cl in classes:
        mine: dict = {}
        try:
            _run_class(cl, kernel, mine)
        except _Unknown:
            unknown |= set(mine) | {("*",)}
            continue
        for k, evs in mine.items():
            events.setdefault(k, []).extend(evs)
    if ("*",) in unknown:
        return []  # a class we could not run may announce or deliver anywhere
    found: dict[tuple, list] = {}  # (code, site) -> [(barrier phase name, said, got, loads, notes)]
    for key in sorted(events):
        evs = events[key]
        by_phase = all(e.phase is not None for e in evs)
        buckets: dict[int | None, list[_Event]] = {}
        for e in evs:
            buckets.setdefault(e.phase if by_phase else None, []).append(e)
        for phase in sorted(buckets, key=lambda p: -1 if p is None else p):
            bucket = buckets[phase]
            said = sum(e.nbytes for e in bucket if e.expect)
            got = sum(e.nbytes for e in bucket if not e.expect)
            name = _bar_name(kernel, key) + (f" phase {phase}" if phase is not None else " (all phases together)")
            announce = [e for e in bucket if e.expect]
            loads = [e for e in bucket if not e.expect]
            site = (announce or loads)[0].site
            notes = tuple((f"delivers {e.nbytes} bytes here", e.site) for e in (loads if announce else loads[1:]))[:4]
            if said != got:
                found.setdefault(("expect-tx-mismatch", site), []).append((name, said, got, loads, notes))
            if max(said, got) > MAX_TX:
                found.setdefault(("tx-range", site), []).append((name, said, got, loads, notes))
    out = []
    for (code, site), hits in found.items():
        name, said, got, loads, notes = hits[0]
        if code == "expect-tx-mismatch":
            text = _mismatch_text(name, said, got, loads, sites, len(hits) - 1)
        else:
            text = (f"{name}: {max(said, got)} bytes are owed to one phase, beyond the tx-count limit {MAX_TX} "
                    "(PTX 9.7.13.15.2; the H200 faults past it)")
        out.append(TxIssue(code, site, text, notes))
    return out


def _mismatch_text(name: str, said: int, got: int, loads: list[_Event], sites: Sequence[Site], more: int) -> str:
    boxes = any(" map " in f" {sites[e.site].text} " for e in loads if 0 <= e.site < len(sites))
    whole = " (whole boxes, out-of-bounds elements included)" if boxes else ""
    if said == 0:
        head = f"{name}: {got} bytes land{whole} but no expect_tx announces them"
    elif got == 0:
        head = f"{name}: expect_tx announces {said} bytes but no load completes bytes on it"
    else:
        head = f"{name}: expect_tx announces {said} bytes but the TMA loads that complete on it deliver {got}{whole}"
    tail = f"; {more} more barrier phase{'s' if more != 1 else ''} of this statement too" if more else ""
    return head + f"; the phase cannot complete (its tx ends at {said - got}){tail}"


# ---------------------------------------------------------------- grouping across configurations


@dataclass
class TxCollector:
    """Static findings of every (parameter point, configuration), grouped by (code, site)."""

    hits: dict[tuple[str, int], dict] = field(default_factory=dict)  # key -> point -> [configs]
    first: dict[tuple[str, int], tuple] = field(default_factory=dict)  # key -> (order, TxIssue)

    def add(self, point, order: tuple, configs: Sequence, issues: Sequence[TxIssue]) -> None:
        for issue in issues:
            key = (issue.code, issue.site)
            self.hits.setdefault(key, {}).setdefault(point, []).extend(configs)
            if key not in self.first or order < self.first[key][0]:
                self.first[key] = (order, issue, point)
