"""Checked kernel: names resolved, parameters and constants evaluated, procedures inlined.

`check_kernel` is pure: syntax tree plus `-D` overrides in, `CheckedKernel` out, or a
SpecError whose diagnostics teach the rule that was broken (exit code 2).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import field
from typing import Mapping

from ..core.diagnostics import Diagnostic, Note, Span, SpecError, error
from ..core.records import record
from ..core.words import did_you_mean
from ..model.kernel import BarrierDecl, BufferDecl
from . import ast as A
from . import check_sm100 as sm100
from .consts import eval_const

# the spelling of each tcgen05 statement (ast.Tcgen05.kind) and its PTX instruction
TCGEN05_WORDS = {"before_thread_sync": "tcgen05_before_thread_sync", "after_thread_sync": "tcgen05_after_thread_sync",
                 "alloc": "tmem_alloc", "dealloc": "tmem_dealloc", "relinquish": "tmem_relinquish"}
ARCHES = {"sm_90": 227 * 1024, "sm_90a": 227 * 1024, "sm_100": 227 * 1024, "sm_100a": 227 * 1024}
MAX_ARRIVAL_COUNT = (1 << 20) - 1
MAX_TX = (1 << 20) - 1
MAX_CTA_THREADS = 1024
BUILTINS = ("lane", "warp", "thread", "instance", "cta", "cta_x", "cta_y", "warpgroup")
FUNCTIONS = ("elect", "min", "max")
RING_ATTRS = ("index", "phase", "count")
MAX_INLINE_DEPTH = 32
MAX_BLOCKS = 50  # blocks nested in a role after inlining: what one file may hold (parse.MAX_NESTING levels)
SHAPE_THREADS = {"thread": 1, "warp": 32, "warpgroup": 128, "threads": 1, "warps": 32, "warpgroups": 128}


@record
class ParamInfo:
    name: str
    value: int
    default: int
    lo: int | None
    hi: int | None
    span: Span


@record
class KChooseDecl:
    name: str
    dims: tuple[int, ...]
    lo: int
    hi: int
    span: Span


@record
class Inlined:
    """The body of a procedure call, kept as a unit so reports can name the call site."""

    proc: str
    body: tuple
    span: Span = field(compare=False, hash=False, repr=False)


@record
class RoleDecl:
    name: str
    instances: int
    threads: int  # per instance
    shape: str
    body: tuple
    span: Span


@record
class TensorMapDecl:
    name: str
    fields: Mapping[str, object]
    spans: Mapping[str, Span]
    span: Span


@record
class CheckedKernel:
    name: str
    file: str
    arch: str
    params: tuple[ParamInfo, ...]
    constants: Mapping[str, int]  # params and consts by name
    buffers: tuple[BufferDecl, ...]
    barriers: tuple[BarrierDecl, ...]
    roles: tuple[RoleDecl, ...]
    cluster: tuple[int, ...]
    kchooses: tuple[KChooseDecl, ...]
    tensormaps: tuple[TensorMapDecl, ...]
    span: Span

    @property
    def cluster_size(self) -> int:
        n = 1
        for d in self.cluster:
            n *= d
        return n

    def barrier(self, name: str) -> BarrierDecl | None:
        return next((b for b in self.barriers if b.name == name), None)

    def buffer(self, name: str) -> BufferDecl | None:
        return next((b for b in self.buffers if b.name == name), None)


# ---------------------------------------------------------------- the checker


class _Checker:
    def __init__(self, kernel: A.Kernel, procs: Mapping[str, A.Proc], overrides: Mapping[str, int], file: str):
        self.kernel = kernel
        self.procs = dict(procs)
        self.overrides = dict(overrides)
        self.file = file
        self.env: dict[str, int] = {}
        self.kinds: dict[str, tuple[str, Span]] = {}  # kernel-level name -> (kind, span)
        self.errors: list[Diagnostic] = []
        self._fresh = itertools.count()

    def fail(self, exc: SpecError) -> None:
        self.errors.extend(exc.diagnostics)

    def declare(self, name: str, kind: str, span: Span) -> None:
        if name in BUILTINS or name in FUNCTIONS:
            raise error("name", f"'{name}' is a builtin and cannot be redefined", span)
        if name in self.kinds:
            prev_kind, prev_span = self.kinds[name]
            raise error("name", f"'{name}' is already defined (as a {prev_kind})", span, Note("first defined here", prev_span))
        self.kinds[name] = (kind, span)

    def run(self) -> CheckedKernel:
        k = self.kernel
        arch = "sm_90"
        arch_seen = False
        params: list[ParamInfo] = []
        buffers: list[BufferDecl] = []
        barriers: list[BarrierDecl] = []
        roles: list[A.Role] = []
        cluster: tuple[int, ...] = (1,)
        kchooses: list[KChooseDecl] = []
        tensormaps: list[TensorMapDecl] = []
        declared_params: set[str] = set()
        counted: list[tuple[int, A.MBarrier, dict[str, int]]] = []  # each count, with the names defined above it
        for item in k.items:
            try:
                if isinstance(item, A.Arch):
                    if arch_seen:
                        raise error("name", "arch is given twice", item.span)
                    if item.name not in ARCHES:
                        raise error("value", f"unknown arch '{item.name}'; pipecheck models {', '.join(sorted(ARCHES))}", item.span)
                    arch, arch_seen = item.name, True
                elif isinstance(item, A.Param):
                    self.declare(item.name, "parameter", item.span)
                    declared_params.add(item.name)
                    params.append(self.param(item))
                elif isinstance(item, A.Const):
                    self.declare(item.name, "constant", item.span)
                    self.env[item.name] = eval_const(item.value, self.env, f"constant {item.name}")
                elif isinstance(item, A.Smem):
                    self.declare(item.name, "tmem buffer" if item.space == "tmem" else "smem buffer", item.span)
                    buffers.append(self.smem(item, buffers, barriers))
                elif isinstance(item, A.MBarrier):
                    self.declare(item.name, "mbarrier", item.span)
                    barriers.append(self.mbarrier(item, self.env, (1,), in_range=False))
                    counted.append((len(barriers) - 1, item, dict(self.env)))
                elif isinstance(item, A.Cluster):
                    cluster = self.cluster(item)
                elif isinstance(item, A.Role):
                    self.declare(item.name, "role", item.span)
                    roles.append(item)
                elif isinstance(item, A.KChoose):
                    self.declare(item.name, "kernel choice", item.span)
                    kchooses.append(self.kchoose(item))
                elif isinstance(item, A.Clc):
                    self.declare(sm100.CLC_CHOICE, "kernel choice", item.span)
                    kchooses.append(sm100.clc_decl(item, self.env, KChooseDecl))
                elif isinstance(item, A.TensorMap):
                    self.declare(item.name, "tensor map", item.span)
                    tensormaps.append(self.tensormap(item))
                elif isinstance(item, A.Proc):
                    pass  # collected by the loader
            except SpecError as exc:
                self.fail(exc)
        for i, item, env in counted:  # the cluster is known now: a count may depend on the CTA
            try:
                barriers[i] = self.mbarrier(item, env, cluster)
            except SpecError as exc:
                self.fail(exc)
        for name in sorted(set(self.overrides) - declared_params):
            self.errors.append(Diagnostic("error", "usage", f"-D {name}: the kernel has no parameter '{name}'", None))
        if self.errors:
            raise SpecError(self.errors)
        checked_roles: list[RoleDecl] = []
        ctx = _BodyContext(self, {b.name: b for b in barriers}, {b.name: b for b in buffers},
                           {c.name: c for c in kchooses}, {t.name for t in tensormaps}, arch)
        ctx.cluster_size = math.prod(cluster)
        bodies_failed = False
        for role in roles:
            try:
                checked_roles.append(self.role(role, ctx))
            except SpecError as exc:
                self.fail(exc)
                bodies_failed = True
        if not roles and not self.errors:
            self.errors.append(Diagnostic("error", "name", f"kernel '{k.name}' declares no role", k.span))
        total = sum(r.instances * r.threads for r in checked_roles)
        if total > MAX_CTA_THREADS:
            self.errors.append(Diagnostic("error", "value", f"the roles need {total} threads per CTA; a CTA holds at most {MAX_CTA_THREADS}", k.span))
        if not bodies_failed:  # a body left half-checked has not shown every load: no rule over all of them
            self.errors.extend(ctx.rule_errors())
        if self.errors:
            raise SpecError(sorted(self.errors, key=Diagnostic.sort_key))
        return CheckedKernel(
            name=k.name, file=self.file, arch=arch, params=tuple(params), constants=dict(self.env),
            buffers=tuple(buffers), barriers=tuple(barriers), roles=tuple(checked_roles), cluster=cluster,
            kchooses=tuple(kchooses), tensormaps=tuple(tensormaps), span=k.span,
        )

    def param(self, p: A.Param) -> ParamInfo:
        default = eval_const(p.default, self.env, f"the default of {p.name}")
        lo = eval_const(p.lo, self.env, f"the range of {p.name}") if p.lo is not None else None
        hi = eval_const(p.hi, self.env, f"the range of {p.name}") if p.hi is not None else None
        if lo is not None and hi is not None:
            if lo > hi:
                raise error("value", f"the range {lo}..{hi} of {p.name} is empty", p.span)
            if not lo <= default <= hi:
                raise error("value", f"the default {default} of {p.name} is outside its range {lo}..{hi}", p.span)
        value = default
        if p.name in self.overrides:
            value = self.overrides[p.name]
            if lo is not None and hi is not None and not lo <= value <= hi:
                self.env[p.name] = default  # what follows still resolves: one error, not one per use
                raise error("usage", f"-D {p.name}={value} is outside the declared range {lo}..{hi}", p.span)
        self.env[p.name] = value
        return ParamInfo(p.name, value, default, lo, hi, p.span)

    def dims(self, exprs: tuple[A.Expr, ...], what: str) -> tuple[int, ...]:
        out = []
        for e in exprs:
            v = eval_const(e, self.env, f"the size of {what}")
            if v < 1:
                raise error("value", f"{what} has {v} elements; an array needs at least 1", e.span)
            out.append(v)
        return tuple(out)

    def smem(self, s: A.Smem, buffers: list[BufferDecl], barriers: list[BarrierDecl]) -> BufferDecl:
        nbytes = eval_const(s.bytes, self.env, f"the size of {s.name}")
        if nbytes < 1:
            raise error("value", f"{s.space} buffer {s.name} has {nbytes} bytes; it needs at least 1", s.bytes.span)
        over = None
        if s.over is not None:
            target = next((b for b in buffers if b.name == s.over.name), None)
            tdims: tuple[int, ...]
            if target is not None:
                if target.space != "smem":
                    raise error("rule", f"'{s.name}' can only alias shared memory, and '{target.name}' is in tensor memory", s.over.span)
                tdims = target.dims
            else:
                bar = next((b for b in barriers if b.name == s.over.name), None)
                if bar is None:
                    raise error("name", f"'{s.name}' is declared over '{s.over.name}', which is not an smem buffer or "
                                "mbarrier array declared above", s.over.span)
                tdims = bar.dims
            idx = tuple(eval_const(i, self.env, "an alias index") for i in s.over.indices)
            if len(idx) > len(tdims):
                raise error("name", f"'{s.over.name}' has {len(tdims)} dimension(s), indexed with {len(idx)}", s.over.span)
            for v, d in zip(idx, tdims):
                if not 0 <= v < d:
                    raise error("value", f"index {v} of '{s.over.name}' is out of range 0..{d - 1}", s.over.span)
            over = (s.over.name, idx)
        return BufferDecl(s.name, self.dims(s.dims, s.name), nbytes, over, s.span, s.space)

    def mbarrier(self, m: A.MBarrier, env: Mapping[str, int], cluster: tuple[int, ...],
                 in_range: bool = True) -> BarrierDecl:
        """The declaration, its count evaluated in each CTA of the cluster: the count may use `cta`, `cta_x`
        and `cta_y` (the leader CTA's empty barrier counting both CTAs' consumers). Before the cluster
        is known (`in_range` off) only whether it evaluates is checked."""
        cx = cluster[0]
        cy = cluster[1] if len(cluster) > 1 else 1
        counts: list[int] = []
        for rank in range(math.prod(cluster)):
            where = {**env, "cta": rank, "cta_x": rank % cx, "cta_y": (rank // cx) % cy}
            count = eval_const(m.count, where, f"the arrival count of {m.name}")
            if in_range and not 1 <= count <= MAX_ARRIVAL_COUNT:
                in_cta = f" in CTA {rank}" if math.prod(cluster) > 1 else ""
                raise error("rule", f"mbarrier {m.name} is initialised with count {count}{in_cta}; an mbarrier's arrival "
                            f"count must be in 1..{MAX_ARRIVAL_COUNT} (PTX ISA 9.7.13.15.2)", m.count.span)
            counts.append(count)
        per_cta = tuple(counts) if len(set(counts)) > 1 else ()
        return BarrierDecl(m.name, self.dims(m.dims, m.name), counts[0], m.noinit, m.span, per_cta=per_cta)

    def cluster(self, c: A.Cluster) -> tuple[int, ...]:
        dims = tuple(eval_const(d, self.env, "the cluster shape") for d in c.dims)
        if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
            raise error("value", f"cluster {list(dims)} is not a shape of 1 to 3 positive sizes", c.span)
        n = 1
        for d in dims:
            n *= d
        if n > 16:
            raise error("rule", f"a cluster of {n} CTAs is larger than 16, the most Hopper allows (8 portable)", c.span)
        return dims

    def kchoose(self, c: A.KChoose) -> KChooseDecl:
        lo = eval_const(c.lo, self.env, f"the range of {c.name}") if c.lo is not None else 0
        hi = eval_const(c.hi, self.env, f"the range of {c.name}") if c.hi is not None else 1
        if lo > hi:
            raise error("value", f"the range {lo}..{hi} of {c.name} is empty", c.span)
        return KChooseDecl(c.name, self.dims(c.dims, c.name), lo, hi, c.span)

    def tensormap(self, t: A.TensorMap) -> TensorMapDecl:
        fields: dict[str, object] = {}
        spans: dict[str, Span] = {}
        for f in t.fields:
            if f.name in fields:
                raise error("name", f"tensor map field '{f.name}' is given twice", f.span)
            if isinstance(f.value, tuple):
                fields[f.name] = tuple(eval_const(v, self.env, f"{t.name}.{f.name}") for v in f.value)
            elif isinstance(f.value, A.Name) and f.value.id not in self.env:
                fields[f.name] = f.value.id
            else:
                fields[f.name] = eval_const(f.value, self.env, f"{t.name}.{f.name}")
            spans[f.name] = f.span
        return TensorMapDecl(t.name, fields, spans, t.span)

    def role(self, r: A.Role, ctx: "_BodyContext") -> RoleDecl:
        instances = 1
        if r.dims:
            if len(r.dims) > 1:
                raise error("value", "a role has one instance count, e.g. `role consumer[2] warpgroup`", r.span)
            instances = eval_const(r.dims[0], self.env, f"the instance count of {r.name}")
            if instances < 1:
                raise error("value", f"role {r.name} has {instances} instances; it needs at least 1", r.dims[0].span)
        per = SHAPE_THREADS[r.shape]
        if r.size is not None:
            n = eval_const(r.size, self.env, f"the size of {r.name}")
            if n < 1:
                raise error("value", f"role {r.name} has {n} {r.shape}", r.size.span)
            per *= n
        body = ctx.body(r.body, r.name)
        return RoleDecl(r.name, instances, per, r.shape, body, r.span)


class _Scope:
    def __init__(self, parent: "_Scope | None" = None):
        self.parent = parent
        self.names: dict[str, str] = {}  # name -> kind (var | ring)

    def lookup(self, name: str) -> str | None:
        s: _Scope | None = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None


class _BodyContext:
    """Checks role bodies: scoping, references, procedure inlining, and the language's rules."""

    def __init__(self, checker: _Checker, barriers: dict[str, BarrierDecl], buffers: dict[str, BufferDecl],
                 kchooses: dict[str, KChooseDecl], tensormaps: set[str], arch: str = "sm_90"):
        self.c = checker
        self.arch = arch
        self.cluster_size = 1
        self._loops = 0  # `for` loops open around the statement being checked (`break` needs one)
        self.barriers = barriers
        self.buffers = buffers
        self.kchooses = kchooses
        self.tensormaps = tensormaps
        self.tx_posters: dict[str, list[Span]] = {}  # barrier -> expect_tx sites
        self.tx_sources: set[str] = set()  # barriers some load or complete_tx completes on
        self._proc_locals: set[str] = set()
        self._blocks = 0  # blocks open around the statement being checked, counting inlined procedures

    def rule_errors(self) -> list[Diagnostic]:
        out = []
        for name, spans in sorted(self.tx_posters.items()):
            if name not in self.tx_sources:
                out.append(Diagnostic(
                    "error", "rule",
                    f"expect_tx on '{name}', but no tma_load or complete_tx completes bytes on '{name}': "
                    "the phase would wait forever for bytes that never come",
                    spans[0]))
        return out

    def body(self, stmts: tuple, role: str) -> tuple:
        return self.block(stmts, _Scope(), {}, 0)

    def _visible(self, scope: _Scope, subst: dict[str, A.Expr], kinds: tuple[str, ...] = ("var",)) -> list[str]:
        """The names a statement here can use, as the user wrote them (for "did you mean")."""
        out: list[str] = []
        s: _Scope | None = scope
        while s is not None:
            out.extend(n for n, k in s.names.items() if k in kinds and "'" not in n)  # not a proc's fresh names
            s = s.parent
        for n, v in subst.items():  # a procedure's parameters and locals, by the names its body uses
            if ((scope.lookup(v.id) if isinstance(v, A.Name) else None) or "var") in kinds:
                out.append(n)
        return out

    def block(self, stmts: tuple, scope: _Scope, subst: dict[str, A.Expr], depth: int) -> tuple:
        inner = _Scope(scope)
        subst = dict(subst)  # names a procedure declares stay inside the block
        out = []
        # the parser bounds one file's nesting; procedures inlined into each other can still nest deeper,
        # and every later stage walks blocks recursively
        self._blocks += 1
        try:
            if self._blocks > MAX_BLOCKS and stmts:
                raise error("limit", f"blocks nest more than {MAX_BLOCKS} deep here once procedure calls are "
                                     "inlined; flatten the blocks or the calls", stmts[0].span)
            for s in stmts:
                r = self.stmt(s, inner, subst, depth)
                if r is not None:
                    out.append(r)
        finally:
            self._blocks -= 1
        return tuple(out)

    # -- expressions
    def expr(self, e: A.Expr, scope: _Scope, subst: dict[str, A.Expr]) -> A.Expr:
        if isinstance(e, (A.Num, A.Bool)):
            return e
        if isinstance(e, A.Name):
            if e.id in subst:
                return subst[e.id]
            kind = scope.lookup(e.id)
            if kind == "ring":
                raise error("name", f"'{e.id}' is a ring; use {e.id}.index or {e.id}.phase", e.span)
            if kind is not None or e.id in self.c.env or e.id in BUILTINS:
                return e
            if e.id in self.kchooses:
                if self.kchooses[e.id].dims:
                    raise error("name", f"'{e.id}' is an array; index it, e.g. {e.id}[t]", e.span)
                return e
            what = self.c.kinds.get(e.id, (None,))[0]
            if what:
                raise error("name", f"'{e.id}' is a {what}, not a value", e.span)
            known = [*self._visible(scope, subst), *self.c.env, *self.kchooses, *BUILTINS]
            raise error("name", f"'{e.id}' is not defined{did_you_mean(e.id, known)}", e.span)
        if isinstance(e, A.Attr):
            if isinstance(e.obj, A.Name):
                obj = subst.get(e.obj.id, e.obj)
                if isinstance(obj, A.Name) and scope.lookup(obj.id) == "ring":
                    if e.name not in RING_ATTRS:
                        raise error("name", f"a ring has .index, .phase and .count, not .{e.name}"
                                    f"{did_you_mean(e.name, RING_ATTRS)}", e.span)
                    return A.Attr(obj, e.name, e.span)
                if e.obj.id not in subst and scope.lookup(e.obj.id) is None and e.obj.id not in self.c.kinds \
                        and e.obj.id not in self.c.env and e.obj.id not in BUILTINS:
                    rings = self._visible(scope, subst, ("ring",))
                    raise error("name", f"'{e.obj.id}' is not defined{did_you_mean(e.obj.id, rings)}", e.obj.span)
            raise error("name", f"'.{e.name}' applies to rings only (e.g. st.index, st.phase)", e.span)
        if isinstance(e, A.Index):
            base, idx = e, []
            while isinstance(base, A.Index):
                idx.append(base.index)
                base = base.obj
            if isinstance(base, A.Name) and base.id in self.kchooses:
                decl = self.kchooses[base.id]
                if len(idx) != len(decl.dims):
                    raise error("name", f"'{base.id}' has {len(decl.dims)} dimensions, indexed with {len(idx)}", e.span)
                return A.Index(self.expr(e.obj, scope, subst) if isinstance(e.obj, A.Index) else e.obj,
                               self.expr(e.index, scope, subst), e.span)
            raise error("name", "only kernel-scope `choose` arrays can be indexed in an expression", e.span)
        if isinstance(e, A.Unary):
            return A.Unary(e.op, self.expr(e.operand, scope, subst), e.span)
        if isinstance(e, A.Binary):
            return A.Binary(e.op, self.expr(e.left, scope, subst), self.expr(e.right, scope, subst), e.span)
        if isinstance(e, A.Ternary):
            return A.Ternary(self.expr(e.cond, scope, subst), self.expr(e.then, scope, subst),
                             self.expr(e.other, scope, subst), e.span)
        if isinstance(e, A.Call):
            if e.func == "elect":
                if len(e.args) > 1:
                    raise error("name", "elect takes at most one argument, the member mask", e.span)
            elif e.func in ("min", "max"):
                if len(e.args) < 2:
                    raise error("name", f"{e.func} takes at least two arguments", e.span)
            else:
                hint = " (procedures are statements: call them on a line of their own)" if e.func in self.c.procs else ""
                hint = hint or did_you_mean(e.func, FUNCTIONS)
                raise error("name", f"unknown function '{e.func}'{hint}", e.span)
            return A.Call(e.func, tuple(self.expr(a, scope, subst) for a in e.args), e.span)
        raise error("name", "unsupported expression", getattr(e, "span", None))

    def ref(self, r: A.Ref, scope: _Scope, subst: dict[str, A.Expr], kind: str) -> A.Ref:
        name, pre = r.name, ()
        if name in subst:
            bound = subst[name]
            chain: list[A.Expr] = []
            while isinstance(bound, A.Index):
                chain.append(bound.index)
                bound = bound.obj
            if not isinstance(bound, A.Name):
                raise error("name", f"'{name}' is bound to an expression, not to a {kind}", r.span)
            name, pre = bound.id, tuple(reversed(chain))
        table = self.barriers if kind == "mbarrier" else self.buffers
        if name not in table:
            what = self.c.kinds.get(name, (None,))[0] or ("a local value" if scope.lookup(name) else None)
            if what:
                raise error("name", f"'{name}' is a {what}, not an {kind}" if kind[0] in "aeiou" or kind.startswith("mb") else f"'{name}' is a {what}, not a {kind}", r.span)
            raise error("name", f"{kind} '{name}' is not declared{did_you_mean(name, [*table, *subst])}", r.span)
        decl = table[name]
        idx = pre + tuple(self.expr(i, scope, subst) for i in r.indices)
        if len(idx) != len(decl.dims):
            raise error("name", f"'{name}' has {len(decl.dims)} dimension(s) but is indexed with {len(idx)}", r.span)
        for i, (ix, dim) in enumerate(zip(idx, decl.dims)):
            try:
                v = eval_const(ix, self.c.env)
            except SpecError:
                continue
            if not 0 <= v < dim:
                raise error("value", f"index {v} of '{name}' is out of range 0..{dim - 1}", getattr(ix, "span", r.span))
        return A.Ref(name, idx, r.span)

    def const_range(self, e: A.Expr | None, lo: int, hi: int, what: str, rule: str) -> None:
        if e is None:
            return
        try:
            v = eval_const(e, self.c.env)
        except SpecError:
            return
        if not lo <= v <= hi:
            raise error("rule", f"{what} {v} is outside {lo}..{hi} ({rule})", e.span)

    # -- statements
    def stmt(self, s, scope: _Scope, subst: dict[str, A.Expr], depth: int):
        ex = lambda e: self.expr(e, scope, subst) if e is not None else None  # noqa: E731
        if isinstance(s, A.Let):
            v = ex(s.value)
            name = self.local(s.name, "var", scope, subst, depth, s.span)
            return A.Let(name, v, s.span)
        if isinstance(s, A.Choose):
            lo, hi = ex(s.lo), ex(s.hi)
            name = self.local(s.name, "var", scope, subst, depth, s.span)
            return A.Choose(name, lo, hi, s.span)
        if isinstance(s, A.RingDecl):
            stages = ex(s.stages)
            phase = ex(s.phase)
            sv = eval_const(stages, self.c.env, "a ring's stage count")
            if sv < 1:
                raise error("value", f"a ring needs at least 1 stage, not {sv}", s.stages.span)
            if phase is not None:
                try:
                    pv = eval_const(phase, self.c.env, "a ring's initial phase")
                except SpecError:
                    pv = None  # may depend on the thread (OrderedSequenceBarrier: group 0 starts at 1)
                if pv is not None and pv not in (0, 1):
                    raise error("value", f"a ring's initial phase is 0 or 1, not {pv}", s.phase.span)
            name = self.local(s.name, "ring", scope, subst, depth, s.span)
            return A.RingDecl(name, stages, phase, s.span)
        if isinstance(s, A.Advance):
            name = s.ring
            if name in subst and isinstance(subst[name], A.Name):
                name = subst[name].id
            if scope.lookup(name) != "ring":
                rings = self._visible(scope, subst, ("ring",))
                raise error("name", f"'{s.ring}' is not a ring declared above{did_you_mean(s.ring, rings)}", s.span)
            return A.Advance(name, s.span)
        if isinstance(s, A.For):
            lo, hi = ex(s.lo), ex(s.hi)
            inner = _Scope(scope)
            isubst = dict(subst)
            new_name = self.local(s.var, "var", inner, isubst, depth, s.span)
            self._loops += 1
            try:
                body = self.block(s.body, inner, isubst, depth)
            finally:
                self._loops -= 1
            return A.For(new_name, lo, hi, body, s.span)
        if isinstance(s, A.If):
            return A.If(ex(s.cond), self.block(s.then, scope, subst, depth), self.block(s.other, scope, subst, depth), s.span)
        if isinstance(s, A.Wait):
            if s.cta is not None:
                raise error("rule", "a wait is always on a barrier of the waiter's own CTA (PTX ISA 9.7.13.15.8); "
                            "remote CTAs can arrive on your barrier, but you can only wait on your own", s.cta.span)
            return A.Wait(self.ref(s.barrier, scope, subst, "mbarrier"), ex(s.parity), None, s.span)
        if isinstance(s, A.Arrive):
            self.const_range(s.count, 1, MAX_ARRIVAL_COUNT, "arrival count", "PTX ISA 9.7.13.15.2")
            self.const_range(s.expect_tx, 0, MAX_TX, "expect_tx byte count", "tx-count range, PTX ISA 9.7.13.15.2")
            ref = self.ref(s.barrier, scope, subst, "mbarrier")
            if s.expect_tx is not None:
                self.tx_posters.setdefault(ref.name, []).append(s.span)
            return A.Arrive(ref, ex(s.count), ex(s.expect_tx), ex(s.cta), s.span)
        if isinstance(s, A.ExpectTx):
            self.const_range(s.bytes, 0, MAX_TX, "expect_tx byte count", "tx-count range, PTX ISA 9.7.13.15.2")
            ref = self.ref(s.barrier, scope, subst, "mbarrier")
            self.tx_posters.setdefault(ref.name, []).append(s.span)
            return A.ExpectTx(ref, ex(s.bytes), ex(s.cta), s.span)
        if isinstance(s, A.CompleteTx):
            self.const_range(s.bytes, 0, MAX_TX, "complete_tx byte count", "tx-count range, PTX ISA 9.7.13.15.2")
            ref = self.ref(s.barrier, scope, subst, "mbarrier")
            self.tx_sources.add(ref.name)
            return A.CompleteTx(ref, ex(s.bytes), ex(s.cta), s.span)
        if isinstance(s, A.ArriveDrop):
            self.const_range(s.count, 1, MAX_ARRIVAL_COUNT, "arrival count", "PTX ISA 9.7.13.15.2")
            return A.ArriveDrop(self.ref(s.barrier, scope, subst, "mbarrier"), ex(s.count), s.span)
        if isinstance(s, A.TmaLoad):
            if s.barrier is None:
                raise error("rule", "a tma_load completes its bytes on an mbarrier: add `barrier full[i]`", s.span)
            if s.bytes is None and s.tensormap is None:
                raise error("rule", "a tma_load needs its size: `bytes N` or `map TENSORMAP`", s.span)
            if s.tensormap is not None and s.tensormap not in self.tensormaps:
                raise error("name", f"tensor map '{s.tensormap}' is not declared"
                            f"{did_you_mean(s.tensormap, self.tensormaps)}", s.span)
            self.const_range(s.bytes, 1, MAX_TX, "tma_load byte count", "tx-count range, PTX ISA 9.7.13.15.2")
            if s.cta is not None and s.multicast is not None:
                raise error("rule", "a tma_load lands either in the CTAs of a multicast mask or, with `on cta r`, in "
                            "CTA r alone: give one of them", s.cta.span)
            group = sm100.cta_group(s.cta_group, self.c.env, self.arch, self.cluster_size, "a tma_load")
            if group == 2 and (s.cta is not None or s.multicast is not None):
                raise error("rule", "a tma_load with cta_group 2 lands in the issuing CTA and completes on its pair "
                            "leader's barrier; together with `on cta` or `multicast` it is not modelled",
                            s.cta_group.span)
            bar = self.ref(s.barrier, scope, subst, "mbarrier")
            self.tx_sources.add(bar.name)
            return A.TmaLoad(self.ref(s.buffer, scope, subst, "smem buffer"), ex(s.tile), ex(s.bytes), s.tensormap,
                             bar, ex(s.multicast), ex(s.cta), A.Num(group, s.span) if group == 2 else None, s.span)
        if isinstance(s, A.TmaStore):
            if s.barrier is not None:
                raise error("rule", "a tma_store completes through bulk groups, not an mbarrier: drop `barrier` and use "
                            "`commit_group` then `wait_group_read N` before reusing the buffer (SEMANTICS 4)", s.barrier.span)
            return A.TmaStore(self.ref(s.buffer, scope, subst, "smem buffer"), ex(s.tile), ex(s.bytes), s.tensormap, None, s.span)
        if isinstance(s, A.Read):
            return A.Read(self.ref(s.buffer, scope, subst, "smem buffer"), ex(s.tile), s.span)
        if isinstance(s, A.Write):
            return A.Write(self.ref(s.buffer, scope, subst, "smem buffer"), ex(s.tile), s.span)
        if isinstance(s, A.MmaAsync):
            ops = tuple(A.Operand(self.ref(o.buffer, scope, subst, "smem buffer"), ex(o.tile), o.span) for o in s.operands)
            out = None
            if s.out is not None:
                out = A.Operand(self.ref(s.out.buffer, scope, subst, "smem buffer"), ex(s.out.tile), s.out.span)
            group = sm100.cta_group(s.cta_group, self.c.env, self.arch, self.cluster_size, "an mma_async")
            return A.MmaAsync(ops, out, A.Num(group, s.span) if group == 2 else None, s.span)
        if isinstance(s, A.CpAsync):
            return A.CpAsync(self.ref(s.buffer, scope, subst, "smem buffer"), ex(s.tile), s.span)
        if isinstance(s, A.MmaWait):
            return A.MmaWait(ex(s.pending), s.span)
        if isinstance(s, A.MmaCommit):
            return A.MmaCommit(self.ref(s.barrier, scope, subst, "mbarrier"), ex(s.multicast), s.span)
        if isinstance(s, A.CpAsyncArrive):
            return A.CpAsyncArrive(self.ref(s.barrier, scope, subst, "mbarrier"), s.span)
        if isinstance(s, A.WaitGroup):
            return A.WaitGroup(ex(s.pending), s.read_only, s.span)
        if isinstance(s, A.SyncWarp):
            return A.SyncWarp(ex(s.mask), s.span)
        if isinstance(s, A.BarSync):
            return A.BarSync(ex(s.id), ex(s.count), s.blocking, s.span)
        if isinstance(s, A.Init):
            self.const_range(s.count, 1, MAX_ARRIVAL_COUNT, "arrival count", "PTX ISA 9.7.13.15.2")
            return A.Init(self.ref(s.barrier, scope, subst, "mbarrier"), ex(s.count), ex(s.cta), s.span)
        if isinstance(s, A.Inval):
            return A.Inval(self.ref(s.barrier, scope, subst, "mbarrier"), s.span)
        if isinstance(s, (A.CommitGroup, A.FenceProxyAsync, A.FenceBarrierInit, A.SyncThreads, A.ClusterSync, A.Exit)):
            return s
        if isinstance(s, A.SetMaxNReg):
            if s.direction not in ("inc", "dec"):
                raise error("syntax", f"setmaxnreg takes `inc` or `dec`, not '{s.direction}'", s.span)
            try:
                n = eval_const(s.count, self.c.env, "setmaxnreg's register count")
            except SpecError:
                raise error("value", "setmaxnreg's register count must be a constant (an immediate in PTX)",
                            s.count.span) from None
            if not (24 <= n <= 256 and n % 8 == 0):
                raise error("rule", f"setmaxnreg's register count {n} is not a multiple of 8 in 24..256 "
                            "(PTX ISA 9.7.19.5)", s.count.span)
            return A.SetMaxNReg(s.direction, A.Num(n, s.count.span), s.span)
        if isinstance(s, A.Tcgen05):
            if not self.arch.startswith("sm_100"):
                word = TCGEN05_WORDS[s.kind]
                raise error("rule", f"'{word}' is a tcgen05 instruction, which exists on sm_100 only; this kernel is "
                            f"arch {self.arch} (write `arch sm_100`)", s.span)
            return s
        if isinstance(s, A.Break):
            if not self._loops:
                raise error("rule", "`break` leaves a `for` loop, and there is none around it", s.span)
            return s
        if isinstance(s, A.TryCancel):
            sm100.clc_statement(self, s, "try_cancel")
            bar = self.ref(s.barrier, scope, subst, "mbarrier")
            self.tx_sources.add(bar.name)  # its response completes 16 bytes on the barrier
            return A.TryCancel(self.ref(s.buffer, scope, subst, "smem buffer"), ex(s.tile), bar, s.multicast, s.span)
        if isinstance(s, A.QueryCancel):
            sm100.clc_statement(self, s, "query_cancel")
            buf, tile = self.ref(s.buffer, scope, subst, "smem buffer"), ex(s.tile)
            return A.QueryCancel(self.local(s.name, "var", scope, subst, depth, s.span), buf, tile, s.span)
        if isinstance(s, A.CallStmt):
            return self.call(s, scope, subst, depth)
        raise error("syntax", "unsupported statement", getattr(s, "span", None))

    def local(self, name: str, kind: str, scope: _Scope, subst: dict[str, A.Expr], depth: int, span: Span) -> str:
        """Declare a local; inside a procedure it gets a fresh name so it cannot capture the caller's."""
        if name in BUILTINS or name in FUNCTIONS:
            raise error("name", f"'{name}' is a builtin and cannot be redefined", span)
        if name in self.c.kinds:
            raise error("name", f"'{name}' shadows the kernel's {self.c.kinds[name][0]} of that name", span,
                        Note("defined here", self.c.kinds[name][1]))
        if name in scope.names or (depth and name in subst and name not in self._proc_locals):
            raise error("name", f"'{name}' is already defined in this block", span)
        if depth:
            fresh = f"{name}'{next(self.c._fresh)}"
            subst[name] = A.Name(fresh, span)
            self._proc_locals.add(name)
            scope.names[fresh] = kind
            return fresh
        scope.names[name] = kind
        return name

    def call(self, s: A.CallStmt, scope: _Scope, subst: dict[str, A.Expr], depth: int) -> Inlined:
        proc = self.c.procs.get(s.proc)
        if proc is None:
            hint = did_you_mean(s.proc, self.c.procs)
            if not hint and "." not in s.proc:  # `advnace(st)`: a statement keyword misspelled, read as a call
                from .syntax import keywords
                hint = did_you_mean(s.proc, keywords())
                hint = hint.replace("did you mean", "did you mean the statement") if hint else ""
            raise error("name", f"procedure '{s.proc}' is not defined{hint or ' (is an `import` missing?)'}", s.span)
        if len(s.args) != len(proc.params):
            raise error("name", f"'{s.proc}' takes {len(proc.params)} argument(s) ({', '.join(proc.params)}), "
                        f"given {len(s.args)}", s.span, Note("defined here", proc.span))
        if depth >= MAX_INLINE_DEPTH:
            raise error("name", f"procedure calls nest deeper than {MAX_INLINE_DEPTH} (is '{s.proc}' recursive?)", s.span)
        bound: dict[str, A.Expr] = {}
        pscope = _Scope()  # a procedure sees its parameters and the kernel's names, not the caller's locals
        for pname, arg in zip(proc.params, s.args):
            bound[pname] = self.arg(arg, scope, subst)
            if isinstance(bound[pname], A.Name) and scope.lookup(bound[pname].id) == "ring":
                pscope.names[bound[pname].id] = "ring"
        body = self.block(proc.body, pscope, bound, depth + 1)
        return Inlined(proc.name, body, s.span)

    def arg(self, a: A.Expr, scope: _Scope, subst: dict[str, A.Expr]) -> A.Expr:
        """Arguments name arrays, rings or values; array and ring names pass through unevaluated."""
        base = a
        while isinstance(base, A.Index):
            base = base.obj
        if isinstance(base, A.Name):
            name = base.id
            if name in subst and not isinstance(a, A.Index):
                return subst[name]
            if name in self.barriers or name in self.buffers or scope.lookup(name) == "ring":
                if isinstance(a, A.Index):
                    idx: list[A.Expr] = []
                    cur = a
                    while isinstance(cur, A.Index):
                        idx.append(self.expr(cur.index, scope, subst))
                        cur = cur.obj
                    out: A.Expr = A.Name(name, base.span)
                    for i in reversed(idx):
                        out = A.Index(out, i, a.span)
                    return out
                return A.Name(name, base.span)
        return self.expr(a, scope, subst)


def check_kernel(kernel: A.Kernel, procs: Mapping[str, A.Proc], overrides: Mapping[str, int], file: str) -> CheckedKernel:
    """Resolve, evaluate and validate a kernel; raises SpecError with every error found."""
    return _Checker(kernel, procs, overrides, file).run()
