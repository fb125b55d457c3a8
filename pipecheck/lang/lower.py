"""Checked kernel + configuration -> thread classes, each with its own flat program.

Threads of a role instance whose specialised code is identical form a class (DESIGN.md,
"Threads"). A class moves as one block: lanes of one warp at the same point execute
together (SIMT), and a class that never signals is exact as one block across warps.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterable, Mapping

from ..core.diagnostics import Span, SpecError, error, source_lines
from ..core.records import record
from ..model.ir import (T5_AFTER, T5_BEFORE, TMEM_ALLOC, TMEM_DEALLOC, TMEM_RELINQUISH, ADVANCE, ARRIVE, ARRIVE_DROP, BAR_ARRIVE, BRANCH, CHOOSE, COLL, COLL_WAIT, COMMIT_GROUP,
                        COMPLETE_TX, CP_ASYNC, CP_ASYNC_ARRIVE, END, EXPECT_TX, FENCE_INIT, FENCE_PROXY, INIT, INVAL,
                        JUMP, LET, MMA, MMA_COMMIT, MMA_WAIT, READ, RING, SIGNALLING_OPS, TMA_LOAD, TMA_STORE, WAIT,
                        WAIT_GROUP, WRITE, EvalError, Instr, Program, RBuiltin, RChoice, RConst, RElect, RExpr, ROp,
                        RRef, RRing, RVar, Site)
from ..model.threads import FULL_MASK, Config, ThreadClass, class_label
from . import ast as A
from . import check_sm100 as sm100
from .check import BUILTINS, CheckedKernel, Inlined
from .consts import binop, eval_const

# ---------------------------------------------------------------- resolution


# Hidden per-thread counters, appended to the argument list of the operations that use them.
GHOSTS = {"mma#": (MMA, MMA_WAIT, MMA_COMMIT), "bulk#": (COMMIT_GROUP, WAIT_GROUP), "cp#": (CP_ASYNC, CP_ASYNC_ARRIVE)}


@dataclass
class RoleCode:
    """A role body with names resolved: statements as tuples over RExpr, sites numbered."""

    role_index: int
    body: tuple
    slot_names: list[str]
    elect_masks: set[int]
    uses_warp_collectives: bool
    uses_mma: bool
    ghosts: dict[str, int]  # ghost counter name -> slot

    @property
    def mma_slot(self) -> int:
        return self.ghosts.get("mma#", -1)


class _Resolver:
    def __init__(self, kernel: CheckedKernel, sites: list[Site], sources: Mapping[str, str]):
        self.k = kernel
        self.sites = sites
        self.sources = sources
        self.slots: list[str] = []
        self.elect_masks: set[int] = set()
        self.warp_coll = False
        self.mma = False
        self.elect_sites = itertools.count()
        self.lockstep = False
        self.lines: dict[str, list[str]] = {}  # each file split once: a site per statement, not a split each
        self.callees: dict[Span, str] = {}  # each procedure call's span -> the procedure it calls

    def site(self, span: Span, via: tuple[Span, ...], proc: str | None, text: str | None = None) -> int:
        calls = tuple((c, self.callees.get(c, "")) for c in via)
        self.sites.append(Site(span, text if text is not None else self.text(span), via, proc, calls))
        return len(self.sites) - 1

    def text(self, span: Span) -> str:
        src = self.sources.get(span.file)
        if src is None or span.line <= 0:
            return ""
        lines = self.lines.get(span.file)
        if lines is None:
            lines = self.lines[span.file] = source_lines(src)
        if span.line > len(lines):
            return ""
        if span.end_line == span.line and span.end_col > span.col:
            return lines[span.line - 1][span.col - 1: span.end_col - 1].strip()
        return lines[span.line - 1][span.col - 1:].strip()

    def new_slot(self, name: str) -> int:
        self.slots.append(name.split("'")[0])
        return len(self.slots) - 1

    # scope: name -> RExpr (static lets) | ("var", slot) | ("ring", slot, stages, phase0)
    def expr(self, e: A.Expr, scope: dict, pre: list) -> RExpr:
        if isinstance(e, A.Num):
            return RConst(e.value)
        if isinstance(e, A.Bool):
            return RConst(int(e.value))
        if isinstance(e, A.Name):
            b = scope.get(e.id)
            if b is not None:
                if isinstance(b, tuple) and b[0] == "var":
                    return RVar(b[1], e.id.split("'")[0])
                if isinstance(b, tuple):
                    raise error("name", f"'{e.id}' is a ring", e.span)
                return b
            if e.id in self.k.constants:
                return RConst(self.k.constants[e.id])
            if e.id in BUILTINS:
                return RBuiltin(e.id)
            if any(c.name == e.id for c in self.k.kchooses):
                return RChoice(e.id, ())
            raise error("name", f"'{e.id}' is not defined", e.span)
        if isinstance(e, A.Attr):
            assert isinstance(e.obj, A.Name)
            b = scope.get(e.obj.id)
            if not (isinstance(b, tuple) and b[0] == "ring"):
                raise error("name", f"'{e.obj.id}' is not a ring", e.span)
            return RRing(b[1], e.obj.id.split("'")[0], b[2], b[3], e.name)
        if isinstance(e, A.Index):
            idx: list[RExpr] = []
            cur: A.Expr = e
            while isinstance(cur, A.Index):
                idx.append(self.expr(cur.index, scope, pre))
                cur = cur.obj
            assert isinstance(cur, A.Name)
            return RChoice(cur.id, tuple(reversed(idx)))
        if isinstance(e, A.Unary):
            return ROp(e.op, (self.expr(e.operand, scope, pre),))
        if isinstance(e, A.Binary):
            return ROp(e.op, (self.expr(e.left, scope, pre), self.expr(e.right, scope, pre)))
        if isinstance(e, A.Ternary):
            return ROp("?:", tuple(self.expr(x, scope, pre) for x in (e.cond, e.then, e.other)))
        if isinstance(e, A.Call):
            if e.func == "elect":
                mask = FULL_MASK
                if e.args:
                    m = self.expr(e.args[0], scope, pre)
                    if not isinstance(m, RConst):
                        raise error("value", "elect's member mask must be a constant", e.span)
                    mask = m.value & FULL_MASK
                    if mask == 0:
                        raise error("value", "elect's member mask is empty", e.span)
                self.elect_masks.add(mask)
                self.warp_coll = True
                site_id = next(self.elect_sites)
                pre.append((mask, site_id, e.span))
                return RElect(mask, site_id)
            return ROp(e.func, tuple(self.expr(a, scope, pre) for a in e.args))
        raise error("name", "unsupported expression", getattr(e, "span", None))

    def ref(self, r: A.Ref, scope: dict, pre: list, cta: A.Expr | None = None) -> RRef:
        return RRef(r.name, tuple(self.expr(i, scope, pre) for i in r.indices),
                    self.expr(cta, scope, pre) if cta is not None else None)

    def opt(self, e: A.Expr | None, scope: dict, pre: list) -> RExpr | None:
        return self.expr(e, scope, pre) if e is not None else None

    def block(self, stmts: Iterable, scope: dict, via: tuple[Span, ...], proc: str | None) -> list:
        scope = dict(scope)
        out: list = []
        for s in stmts:
            self.stmt(s, scope, via, proc, out)
        return out

    def stmt(self, s, scope: dict, via: tuple[Span, ...], proc: str | None, out: list) -> None:
        if isinstance(s, Inlined):
            self.callees[s.span] = s.proc
            out.append(("block", self.block(s.body, scope, via + (s.span,), s.proc)))
            return
        pre: list = []
        node = self._stmt(s, scope, via, proc, pre)
        for mask, site_id, span in pre:
            # elect() is warp-collective where it stands: the warp meets before the statement uses its value
            out.append(("coll", ("elect", mask, site_id), self.site(span, via, proc, "elect()" if mask == FULL_MASK else f"elect({mask:#x})")))
        if node is not None:
            out.append(node)
            if self.lockstep and node[0] == "if":
                # --lockstep: the lanes of a warp that reached this branch meet again after it
                out.append(("coll", ("reconv",), self.site(s.span, via, proc, "end of if (lockstep reconvergence)")))

    def _stmt(self, s, scope: dict, via: tuple[Span, ...], proc: str | None, pre: list):
        ex = lambda e: self.opt(e, scope, pre)  # noqa: E731
        site = lambda: self.site(s.span, via, proc)  # noqa: E731
        if isinstance(s, A.Let):
            v = self.expr(s.value, scope, pre)
            if _is_static(v):
                scope[s.name] = v
                return None
            slot = self.new_slot(s.name)
            scope[s.name] = ("var", slot)
            return ("let", slot, v, site())
        if isinstance(s, A.Choose):
            lo = ex(s.lo) if s.lo is not None else RConst(0)
            hi = ex(s.hi) if s.hi is not None else RConst(1)
            slot = self.new_slot(s.name)
            scope[s.name] = ("var", slot)
            return ("choose", slot, lo, hi, site())
        if isinstance(s, A.RingDecl):
            stages = self.expr(s.stages, scope, pre)
            phase = self.expr(s.phase, scope, pre) if s.phase is not None else RConst(0)
            if not isinstance(stages, RConst):  # check proved it constant; resolution does not fold `c ? a : b`
                stages = RConst(int(eval_const(s.stages, self.k.constants, "a ring's stage count")))
            if not _is_static(phase):
                raise error("value", "a ring's initial phase may depend on which thread runs, not on loop values", s.span)
            slot = self.new_slot(s.name)
            scope[s.name] = ("ring", slot, stages.value, phase.value if isinstance(phase, RConst) else phase)
            return ("ring", slot, site())
        if isinstance(s, A.Advance):
            b = scope[s.ring]
            return ("advance", b[1], site())
        if isinstance(s, A.For):
            lo, hi = self.expr(s.lo, scope, pre), self.expr(s.hi, scope, pre)
            slot = self.new_slot(s.var)
            inner = dict(scope)
            inner[s.var] = ("var", slot)
            st = site()
            body = self.block(s.body, inner, via, proc)
            return ("for", slot, lo, hi, body, st)
        if isinstance(s, A.If):
            cond = self.expr(s.cond, scope, pre)
            st = self.site(s.cond.span, via, proc, "if " + self.text(s.cond.span))
            return ("if", cond, self.block(s.then, scope, via, proc), self.block(s.other, scope, via, proc), st)
        if isinstance(s, A.Wait):
            return ("op", WAIT, (self.ref(s.barrier, scope, pre), self.expr(s.parity, scope, pre)), site())
        if isinstance(s, A.Arrive):
            return ("op", ARRIVE, (self.ref(s.barrier, scope, pre, s.cta), ex(s.count) or RConst(1), ex(s.expect_tx)), site())
        if isinstance(s, A.ExpectTx):
            return ("op", EXPECT_TX, (self.ref(s.barrier, scope, pre, s.cta), ex(s.bytes)), site())
        if isinstance(s, A.CompleteTx):
            return ("op", COMPLETE_TX, (self.ref(s.barrier, scope, pre, s.cta), ex(s.bytes)), site())
        if isinstance(s, A.ArriveDrop):
            return ("op", ARRIVE_DROP, (self.ref(s.barrier, scope, pre), ex(s.count) or RConst(1)), site())
        if isinstance(s, A.TmaLoad):
            nbytes = ex(s.bytes)
            if nbytes is None:
                tm = next(t for t in self.k.tensormaps if t.name == s.tensormap)
                nbytes = RConst(tensormap_box_bytes(tm))
            # `on cta r`: the buffer and the barrier are CTA r's (a 2-SM load lands in the peer); `cta_group 2`:
            # the buffer is the issuer's and the barrier its pair leader's (CUTLASS's SM100 2SM TMA)
            bar_cta = sm100.pair_leader() if s.cta_group is not None else s.cta
            return ("op", TMA_LOAD, (self.ref(s.buffer, scope, pre, s.cta), self.expr(s.tile, scope, pre), nbytes,
                                     self.ref(s.barrier, scope, pre, bar_cta), ex(s.multicast)), site())
        if isinstance(s, A.TmaStore):
            return ("op", TMA_STORE, (self.ref(s.buffer, scope, pre), ex(s.tile)), site())
        if isinstance(s, A.Read):
            return ("op", READ, (self.ref(s.buffer, scope, pre), self.expr(s.tile, scope, pre)), site())
        if isinstance(s, A.Write):
            return ("op", WRITE, (self.ref(s.buffer, scope, pre), self.expr(s.tile, scope, pre)), site())
        if isinstance(s, A.MmaAsync):
            self.mma = True
            # the CTAs it reads and writes: its own, and with cta_group 2 the pair's peer too (same buffer index)
            ctas = (None, sm100.peer_of_leader()) if s.cta_group is not None else (None,)
            ops = tuple((self.ref(o.buffer, scope, pre, k), ex(o.tile)) for k in ctas for o in s.operands)
            outs = tuple((self.ref(s.out.buffer, scope, pre, k), ex(s.out.tile)) for k in ctas) if s.out is not None \
                else ()
            return ("op", MMA, (ops, outs, len(ctas)), site())
        if isinstance(s, A.CpAsync):
            return ("op", CP_ASYNC, (self.ref(s.buffer, scope, pre), self.expr(s.tile, scope, pre)), site())
        if isinstance(s, A.MmaWait):
            self.mma = True
            return ("op", MMA_WAIT, (self.expr(s.pending, scope, pre),), site())
        if isinstance(s, A.MmaCommit):
            self.mma = True
            return ("op", MMA_COMMIT, (self.ref(s.barrier, scope, pre), ex(s.multicast)), site())
        if isinstance(s, A.CpAsyncArrive):
            return ("op", CP_ASYNC_ARRIVE, (self.ref(s.barrier, scope, pre),), site())
        if isinstance(s, A.CommitGroup):
            return ("op", COMMIT_GROUP, (), site())
        if isinstance(s, A.WaitGroup):
            return ("op", WAIT_GROUP, (self.expr(s.pending, scope, pre), int(s.read_only)), site())
        if isinstance(s, A.FenceProxyAsync):
            return ("op", FENCE_PROXY, (), site())
        if isinstance(s, A.FenceBarrierInit):
            return ("op", FENCE_INIT, (), site())
        if isinstance(s, A.Tcgen05):
            return ("op", {"before_thread_sync": T5_BEFORE, "after_thread_sync": T5_AFTER, "alloc": TMEM_ALLOC,
                           "dealloc": TMEM_DEALLOC, "relinquish": TMEM_RELINQUISH}[s.kind], (), site())
        if isinstance(s, A.SyncWarp):
            self.warp_coll = True
            mask = FULL_MASK
            if s.mask is not None:
                m = self.expr(s.mask, scope, pre)
                if not isinstance(m, RConst):
                    raise error("value", "syncwarp's member mask must be a constant", s.span)
                mask = m.value & FULL_MASK
            return ("coll", ("syncwarp", mask), site())
        if isinstance(s, A.SyncThreads):
            return ("coll", ("syncthreads",), site())
        if isinstance(s, A.SetMaxNReg):  # every warp of the warpgroup meets there: split the role by warp
            self.warp_coll = True
            return ("coll", ("setmaxnreg", s.direction, s.count.value), site())
        if isinstance(s, A.ClusterSync):
            return ("coll", ("cluster_sync",), site())
        if isinstance(s, A.BarSync):
            bid, n = self.expr(s.id, scope, pre), self.expr(s.count, scope, pre)
            if s.blocking:
                return ("coll", ("bar", bid, n), site())
            return ("op", BAR_ARRIVE, (bid, n), site())
        if isinstance(s, A.Init):
            return ("op", INIT, (self.ref(s.barrier, scope, pre, s.cta), self.expr(s.count, scope, pre)), site())
        if isinstance(s, A.Inval):
            return ("op", INVAL, (self.ref(s.barrier, scope, pre),), site())
        if isinstance(s, A.Exit):
            return ("exit", site())
        if isinstance(s, A.Break):
            return ("break", site())
        if isinstance(s, A.TryCancel):
            # clusterlaunchcontrol.try_cancel: an async-proxy write of the 16-byte response, completing its bytes on
            # the barrier (in every CTA of the cluster with .multicast::cluster::all): a TMA load's semantics
            mask = RConst((1 << self.k.cluster_size) - 1) if s.multicast else None
            return ("op", TMA_LOAD, (self.ref(s.buffer, scope, pre), self.expr(s.tile, scope, pre),
                                     RConst(sm100.CLC_RESPONSE_BYTES), self.ref(s.barrier, scope, pre), mask,
                                     "try_cancel"), site())
        if isinstance(s, A.QueryCancel):
            # a read of response n, then is_canceled: the first `clc` responses of the run are canceled clusters
            tile = self.expr(s.tile, scope, pre)
            st = site()
            read = ("op", READ, (self.ref(s.buffer, scope, pre), tile), st)
            v = ROp("<", (tile, RChoice(sm100.CLC_CHOICE, ())))
            if _is_static(v):
                scope[s.name] = v
                return ("block", [read])
            slot = self.new_slot(s.name)
            scope[s.name] = ("var", slot)
            return ("block", [read, ("let", slot, v, st)])
        raise error("syntax", f"unsupported statement {type(s).__name__}", getattr(s, "span", None))


def _ops_used(body) -> set[str]:
    out: set[str] = set()
    for s in body:
        if s[0] == "op":
            out.add(s[1])
        elif s[0] == "block":
            out |= _ops_used(s[1])
        elif s[0] == "for":
            out |= _ops_used(s[4])
        elif s[0] == "if":
            out |= _ops_used(s[2]) | _ops_used(s[3])
    return out


def tensormap_box_bytes(tm) -> int:
    """Bytes a TMA load of this map delivers: the whole box, out-of-bounds elements included (SEMANTICS 3)."""
    from ..model.tensormaps import box_bytes
    return box_bytes(tm)


def _is_static(e: RExpr) -> bool:
    if isinstance(e, (RVar, RRing)):
        return False
    if isinstance(e, ROp):
        return all(_is_static(a) for a in e.args)
    if isinstance(e, RChoice):
        return all(_is_static(i) for i in e.index)
    return True


def resolve_roles(kernel: CheckedKernel, sources: Mapping[str, str], lockstep: bool = False) -> tuple[list[RoleCode], list[Site]]:
    """Resolve every role body; with `lockstep` each warp reconverges after every branch."""
    sites: list[Site] = []
    out = []
    for ri, role in enumerate(kernel.roles):
        r = _Resolver(kernel, sites, sources)
        r.lockstep = lockstep
        body = r.block(role.body, {}, (), None)
        used = _ops_used(body)
        ghosts = {name: r.new_slot(name) for name, ops in GHOSTS.items() if used & set(ops)}
        out.append(RoleCode(ri, tuple(body), list(r.slots), r.elect_masks, r.warp_coll, r.mma, ghosts))
    return out, sites


# ---------------------------------------------------------------- specialisation


@record
class Ident:
    cta: int
    role: int
    instance: int
    thread: int
    cta_x: int
    cta_y: int

    def builtin(self, name: str) -> int:
        if name == "lane":
            return self.thread % 32
        if name == "warp":
            return self.thread // 32
        if name == "warpgroup":
            return self.thread // 128
        if name == "thread":
            return self.thread
        if name == "instance":
            return self.instance
        if name == "cta":
            return self.cta
        if name == "cta_x":
            return self.cta_x
        if name == "cta_y":
            return self.cta_y
        raise KeyError(name)


class _Specialiser:
    """Partially evaluates a role body for one thread and flattens it into instructions."""

    def __init__(self, ident: Ident, config: Config, elect_lowest: bool, kernel: CheckedKernel, ghosts: dict[str, int]):
        self.ident = ident
        self.config = config
        self.lowest = elect_lowest
        self.k = kernel
        self.ghosts = ghosts
        self.code: list[Instr] = []
        self.breaks: list[list[int]] = []  # per open `for`: its `break` jumps, patched to the loop's exit

    def peval(self, e: RExpr | None, site: int) -> RExpr | None:
        if e is None or isinstance(e, (RConst, RVar)):
            return e
        if isinstance(e, RRing):
            if isinstance(e.phase0, int):
                return e
            ph = self.peval(e.phase0, site)
            if not isinstance(ph, RConst) or ph.value not in (0, 1):
                raise EvalError(f"ring {e.name}'s initial phase must be 0 or 1 for every thread", site)
            return RRing(e.slot, e.name, e.stages, ph.value, e.attr)
        if isinstance(e, RBuiltin):
            return RConst(self.ident.builtin(e.name))
        if isinstance(e, RElect):
            return RConst(int(self.ident.thread % 32 == self.config.elected(e.mask, self.lowest)))
        if isinstance(e, RChoice):
            idx = tuple(self.peval(i, site) for i in e.index)
            decl = next(c for c in self.k.kchooses if c.name == e.name)
            values = self.config.choice(e.name)
            if all(isinstance(i, RConst) for i in idx):
                flat = 0
                for i, d in zip(idx, decl.dims):
                    if not 0 <= i.value < d:
                        raise EvalError(f"index {i.value} of '{e.name}' is out of range 0..{d - 1}", site)
                    flat = flat * d + i.value
                return RConst(values[flat])
            return _table(values, decl.dims, idx)
        assert isinstance(e, ROp)
        args = tuple(self.peval(a, site) for a in e.args)
        if e.op == "&&":
            a, b = args
            if isinstance(a, RConst):
                return _truth(b) if a.value else RConst(0)
            if isinstance(b, RConst) and not b.value:
                return RConst(0)
        if e.op == "||":
            a, b = args
            if isinstance(a, RConst):
                return RConst(1) if a.value else _truth(b)
            if isinstance(b, RConst) and b.value:
                return RConst(1)
        if e.op == "?:" and isinstance(args[0], RConst):
            return args[1] if args[0].value else args[2]
        if all(isinstance(a, RConst) for a in args):
            vals = [a.value for a in args]
            if e.op == "-" and len(vals) == 1:
                return RConst(-vals[0])
            if e.op == "!":
                return RConst(int(not vals[0]))
            if e.op in ("min", "max"):
                return RConst(min(vals) if e.op == "min" else max(vals))
            if e.op in ("&&", "||"):
                return RConst(int(bool(vals[0]) and bool(vals[1])) if e.op == "&&" else int(bool(vals[0]) or bool(vals[1])))
            try:
                return RConst(binop(e.op, vals[0], vals[1], Span("", 0, 0)))
            except SpecError:
                pass  # left for the run to report with its site
        return ROp(e.op, args)

    def ref(self, r: RRef, site: int) -> RRef:
        return RRef(r.name, tuple(self.peval(i, site) for i in r.indices), self.peval(r.cta, site))

    def emit(self, op: str, args: tuple = (), site: int = -1, target: int = -1) -> int:
        self.code.append(Instr(op, args, site, target))
        return len(self.code) - 1

    def patch(self, pc: int, target: int) -> None:
        i = self.code[pc]
        self.code[pc] = Instr(i.op, i.args, i.site, target)

    def block(self, stmts: Iterable) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: tuple) -> None:
        kind = s[0]
        if kind == "block":
            self.block(s[1])
        elif kind == "let":
            _, slot, v, site = s
            self.emit(LET, (slot, self.peval(v, site)), site)
        elif kind == "choose":
            _, slot, lo, hi, site = s
            self.emit(CHOOSE, (slot, self.peval(lo, site), self.peval(hi, site)), site)
        elif kind == "ring":
            self.emit(RING, (s[1],), s[2])
        elif kind == "advance":
            self.emit(ADVANCE, (s[1],), s[2])
        elif kind == "for":
            _, slot, lo, hi, body, site = s
            lo_e, hi_e = self.peval(lo, site), self.peval(hi, site)
            if isinstance(lo_e, RConst) and isinstance(hi_e, RConst) and lo_e.value >= hi_e.value:
                return  # a loop that never runs
            self.emit(LET, (slot, lo_e), site)
            head = self.emit(BRANCH, (ROp("<", (RVar(slot, ""), hi_e)),), site)
            self.breaks.append([])
            self.block(body)
            breaks = self.breaks.pop()
            if not breaks and isinstance(lo_e, RConst) and isinstance(hi_e, RConst) and \
                    self.fold(head, hi_e.value - lo_e.value, _slots_of(body) | {slot}, site):
                return
            self.emit(LET, (slot, ROp("+", (RVar(slot, ""), RConst(1)))), site)
            self.emit(JUMP, (), site, head)
            self.patch(head, len(self.code))
            for pc in breaks:  # `break`: to the loop's exit
                self.patch(pc, len(self.code))
        elif kind == "if":
            _, cond, then, other, site = s
            c = self.peval(cond, site)
            if isinstance(c, RConst):
                self.block(then if c.value else other)
                return
            br = self.emit(BRANCH, (c,), site)
            self.block(then)
            if other:
                j = self.emit(JUMP, (), site)
                self.patch(br, len(self.code))
                self.block(other)
                self.patch(j, len(self.code))
            else:
                self.patch(br, len(self.code))
        elif kind == "coll":
            _, key, site = s
            key = tuple(self.peval(k, site) if isinstance(k, (RConst, RVar, RRing, RBuiltin, RElect, RChoice, ROp)) else k
                        for k in key)
            self.emit(COLL, key, site)
            self.emit(COLL_WAIT, key, site)
        elif kind == "op":
            _, op, args, site = s
            self.emit(op, self.op_args(op, args, site), site)
        elif kind == "exit":
            self.emit(JUMP, (), s[1], EXIT_TARGET)  # patched to END once the code is complete
        elif kind == "break":
            self.breaks[-1].append(self.emit(JUMP, (), s[1]))
        else:
            raise AssertionError(kind)

    def fold(self, head: int, trips: int, inner: set[int], site: int) -> bool:
        """A long loop of local steps only (`advance`, `let`) becomes its effect: each ring advanced
        trips x n times at once, so threads that only advance (non-elected producer lanes) cost O(1).

        The loop's own and inner `let`s are dead after it (block scope) and dropped; every other write
        must add a constant. Short loops stay as they are (what --every merges)."""
        if trips < FOLD_MIN_TRIPS:
            return False
        body = self.code[head + 1:]
        adds: dict[int, int] = {}
        for ins in body:
            if ins.op == ADVANCE:
                adds[ins.args[0]] = adds.get(ins.args[0], 0) + 1
            elif ins.op == LET and ins.args[0] in inner:
                if not _cannot_fail(ins.args[1]):
                    return False
            elif ins.op == LET and isinstance(ins.args[1], ROp) and ins.args[1].op == "+" \
                    and ins.args[1].args[0] == RVar(ins.args[0], "") and isinstance(ins.args[1].args[1], RConst):
                adds[ins.args[0]] = adds.get(ins.args[0], 0) + ins.args[1].args[1].value
            else:
                return False
        del self.code[head - 1:]
        for s, n in sorted(adds.items()):
            self.emit(LET, (s, ROp("+", (RVar(s, ""), RConst(n * trips)))), site)
        return True

    def op_args(self, op: str, args: tuple, site: int) -> tuple:
        if op == MMA and args[2] == 2 and self.ident.cta % 2:
            raise EvalError(f"an mma_async with cta_group 2 is issued by the leader CTA of a pair (an even rank), "
                            f"but CTA {self.ident.cta} reaches it: guard it with `if cta % 2 == 0`", site, "rule")
        out: list = []
        for a in args:
            if isinstance(a, RRef):
                out.append(self.ref(a, site))
            elif a is None or isinstance(a, (int, str)):  # ghost slots, an mma's CTA count, try_cancel's mark
                out.append(a)
            elif isinstance(a, tuple):  # mma operands and outputs
                out.append(tuple((self.ref(r, site), self.peval(t, site)) for r, t in a))
            else:
                out.append(self.peval(a, site))
        for name, ops in GHOSTS.items():
            if op in ops:
                out.append(self.ghosts[name])
        return tuple(out)


# loops of local steps that run at least this often are folded into their effect (_Specialiser.fold)
FOLD_MIN_TRIPS = 1024
_NEVER_FAILS = frozenset({"+", "-", "*", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "!", "?:", "min", "max", "&",
                          "|", "^", "~"})


def _cannot_fail(e: RExpr) -> bool:
    """No division, modulo or shift: evaluating `e` raises no error, so dropping it changes nothing."""
    if isinstance(e, ROp):
        return e.op in _NEVER_FAILS and all(_cannot_fail(a) for a in e.args)
    return isinstance(e, (RConst, RVar, RRing))


def _slots_of(body) -> set[int]:
    """The slots a resolved block declares (let, for, choose, ring), nested blocks included."""
    out: set[int] = set()
    for s in body:
        kind = s[0]
        if kind in ("let", "choose", "ring"):
            out.add(s[1])
        elif kind == "for":
            out.add(s[1])
            out |= _slots_of(s[4])
        elif kind == "if":
            out |= _slots_of(s[2]) | _slots_of(s[3])
        elif kind == "block":
            out |= _slots_of(s[1])
    return out


def _truth(e: RExpr) -> RExpr:
    if isinstance(e, RConst):
        return RConst(int(bool(e.value)))
    return ROp("!=", (e, RConst(0)))


def _table(values: tuple[int, ...], dims: tuple[int, ...], idx: tuple) -> RExpr:
    flat: RExpr = RConst(0)
    for i, d in zip(idx, dims):
        flat = ROp("+", (ROp("*", (flat, RConst(d))), i))
    # a dynamic index into a kernel choice: nested ternaries keep the expression hashable and compilable
    out: RExpr = RConst(values[-1])
    for j in range(len(values) - 2, -1, -1):
        out = ROp("?:", (ROp("==", (flat, RConst(j))), RConst(values[j]), out))
    return out


def _identity_dependent(e) -> bool:
    if isinstance(e, (RBuiltin, RElect)):
        return True
    if isinstance(e, ROp):
        return any(_identity_dependent(a) for a in e.args)
    if isinstance(e, RChoice):
        return any(_identity_dependent(i) for i in e.index)
    return False


def signature_nodes(code: RoleCode) -> list:
    """The maximal static sub-expressions that depend on which thread runs: their values decide its code."""
    found: dict = {}

    def expr(e) -> None:
        if e is None or isinstance(e, (int, str)):
            return
        if isinstance(e, RRef):
            for i in e.indices:
                expr(i)
            expr(e.cta)
            return
        if isinstance(e, tuple):
            for x in e:
                expr(x)
            return
        if _is_static(e) and _identity_dependent(e):
            found.setdefault(e, None)
            return
        if isinstance(e, ROp):
            for a in e.args:
                expr(a)
        elif isinstance(e, RChoice):
            for i in e.index:
                expr(i)
        elif isinstance(e, RRing) and not isinstance(e.phase0, int):
            expr(e.phase0)

    def block(stmts) -> None:
        for s in stmts:
            kind = s[0]
            if kind == "block":
                block(s[1])
            elif kind == "let":
                expr(s[2])
            elif kind == "choose":
                expr(s[2])
                expr(s[3])
            elif kind == "for":
                expr(s[2])
                expr(s[3])
                block(s[4])
            elif kind == "if":
                expr(s[1])
                block(s[2])
                block(s[3])
            elif kind == "coll":
                expr(s[1][1:])
            elif kind == "op":
                expr(s[2])
            elif kind == "exit":
                pass

    block(code.body)
    return list(found)


EXIT_TARGET = -2


def specialise(code: RoleCode, ident: Ident, config: Config, elect_lowest: bool, kernel: CheckedKernel) -> Program:
    sp = _Specialiser(ident, config, elect_lowest, kernel, code.ghosts)
    sp.block(code.body)
    end = sp.emit(END, (), -1)
    instrs = tuple(Instr(i.op, i.args, i.site, end) if i.target == EXIT_TARGET else i for i in sp.code)
    return Program(instrs, len(code.slot_names), tuple(code.slot_names))


# ---------------------------------------------------------------- classes


def lane_profile(kernel: CheckedKernel, codes: list[RoleCode], mask: int, lane: int) -> tuple:
    """How lane `lane` behaves, elected or not, in every warp that elects with `mask`.

    Two lanes with the same profile are interchangeable: swapping them maps the
    configuration that elects one onto the configuration that elects the other.
    """
    out = []
    cx = kernel.cluster[0]
    cy = kernel.cluster[1] if len(kernel.cluster) > 1 else 1
    for code in codes:
        if mask not in code.elect_masks:
            continue
        role = kernel.roles[code.role_index]
        nodes = signature_nodes(code)
        for cta in range(kernel.cluster_size):
            for inst in range(role.instances):
                for warp in range((role.threads + 31) // 32):
                    t = warp * 32 + lane
                    if t >= role.threads:
                        out.append(None)
                        continue
                    ident = Ident(cta, code.role_index, inst, t, cta % cx, (cta // cx) % cy)
                    for elected in (lane, -1):
                        cfg = Config(((mask, elected),))
                        sp = _Specialiser(ident, cfg, False, kernel, code.ghosts)
                        out.append(tuple(sp.peval(n, -1) for n in nodes))
    return tuple(out)


def build_classes(kernel: CheckedKernel, codes: list[RoleCode], config: Config, elect_lowest: bool,
                  memo: dict | None = None) -> list[ThreadClass]:
    """The thread classes of one configuration. `memo`: kept by the caller across the configurations of one
    kernel and codes (`pipeline.configurations.config_classes`): a thread's program reads the configuration only
    through whether its lane is the one each `elect` mask picks and through the kernel choices (`_Specialiser.peval`),
    so it is kept per thread and what it reads."""
    classes: list[ThreadClass] = []
    memo = {} if memo is None else memo
    cx = kernel.cluster[0]
    cy = kernel.cluster[1] if len(kernel.cluster) > 1 else 1
    wgmma = kernel.arch.startswith("sm_90")
    for cta in range(kernel.cluster_size):
        for code in codes:
            role = kernel.roles[code.role_index]
            nodes = memo.get(("nodes", code.role_index))
            if nodes is None:
                nodes = memo[("nodes", code.role_index)] = signature_nodes(code)
            picked = [config.elected(m, elect_lowest) for m in sorted(code.elect_masks)]
            for inst in range(role.instances):
                groups: dict[Program, list[int]] = {}
                for t in range(role.threads):
                    key = (code.role_index, cta, inst, t, tuple(t % 32 == lane for lane in picked), config.choices)
                    prog = memo.get(key)
                    if prog is None:
                        ident = Ident(cta, code.role_index, inst, t, cta % cx, (cta // cx) % cy)
                        sp = _Specialiser(ident, config, elect_lowest, kernel, code.ghosts)
                        # the values of the signature nodes decide the program of a thread of this instance, in
                        # every configuration with these choices (whether it is elected is among them)
                        by_sig = ("sig", code.role_index, cta, inst, config.choices,
                                  tuple(sp.peval(n, -1) for n in nodes))
                        prog = memo.get(by_sig)
                        if prog is None:
                            prog = specialise(code, ident, config, elect_lowest, kernel)
                            # one object per distinct program over the configurations: dicts keyed by
                            # programs then compare them by identity
                            prog = memo[by_sig] = memo.setdefault(("program", prog), prog)
                        memo[key] = prog
                    groups.setdefault(prog, []).append(t)
                for prog, members in sorted(groups.items(), key=lambda kv: kv[1][0]):
                    signalling = any(i.op in SIGNALLING_OPS or (i.op == MMA and not wgmma) for i in prog.instrs)
                    split_warp = code.uses_warp_collectives or signalling
                    split_wg = code.uses_mma and wgmma
                    parts: dict[tuple, list[int]] = {}
                    for t in members:
                        key = (t // 32 if split_warp else None, t // 128 if split_wg else None)
                        parts.setdefault(key, []).append(t)
                    for (w, wg), mem in sorted(parts.items(), key=lambda kv: kv[1][0]):
                        if w is None and len({t // 32 for t in mem}) == 1:
                            w = mem[0] // 32
                        if wg is None and len({t // 128 for t in mem}) == 1:
                            wg = mem[0] // 128
                        label, unit, who = class_label(role.name, role.instances, role.threads, kernel.cluster_size > 1, inst,
                                                       cta, tuple(mem))
                        classes.append(ThreadClass(
                            id=len(classes), cta=cta, role=code.role_index, role_name=role.name, instance=inst,
                            members=tuple(mem), warp=w, warpgroup=wg, program=prog, signalling=signalling,
                            label=label, role_threads=role.threads, instances=role.instances, unit=unit, who=who))
    return classes
