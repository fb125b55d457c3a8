"""The transition system of a lowered kernel: `initial()`, `successors(state)`, `step`.

A state is a hashable tuple: where each thread class stands (program point, registers,
how many threads), every mbarrier, every buffer's tile tag, the async operations in
flight, partly arrived collectives and wgmma groups. Local steps are fused into the
visible step before them, so every transition touches shared state.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple

from . import semantics as S
from .check import CheckedKernel
from .findings import Finding
from .ir import (ADVANCE, ARRIVE, ARRIVE_DROP, BAR_ARRIVE, BRANCH, CHOOSE, COLL, COLL_WAIT, COMPLETE_TX, END,
                 EXPECT_TX, JUMP, LET, LOCAL_OPS, MMA, MMA_WAIT, READ, RING, TMA_LOAD, WAIT, EvalError, Instr,
                 Program, RConst, RExpr, ROp, RRef, RRing, RVar, Site, compile_expr)
from .lower import ThreadClass
from .por import Op, Process

MAX_LOCAL_STEPS = 1_000_000
FUTURE_HORIZON = 64  # how many operations of a thread's future the reduction looks at
EMPTY = -1  # tile tag of a buffer nothing has written


class State(NamedTuple):
    locs: tuple  # per class: tuple of ((pc, env), count), sorted
    bars: tuple  # per barrier id: semantics.Barrier | None
    bufs: tuple  # per buffer id: tile tag
    flight: tuple  # sorted TMA loads in flight: (buffer, tag, bytes, barrier, site, class)
    colls: tuple  # sorted partly-arrived collectives: (key, arrived, expected)
    mmas: tuple  # per wgmma unit: (done, forming, inflight)
    exited: tuple  # per CTA: whether it has exited
    halted: str | None  # a fault ended the kernel


# Actions: ("t", class, group, outcome) a thread class step; ("l", i) load i lands; ("m", unit) a wgmma group
# completes; ("x", cta) a CTA whose threads have all finished exits.
Action = tuple


@dataclass
class CInstr:
    """A compiled instruction: closures over the thread's registers."""

    op: str
    site: int
    target: int
    live: tuple[bool, ...] | None
    a: object = None
    b: object = None
    c: object = None
    d: object = None
    e: object = None
    text: str = ""


def _vars(e) -> set[int]:
    if isinstance(e, (RVar, RRing)):
        return {e.slot}
    if isinstance(e, ROp):
        out: set[int] = set()
        for a in e.args:
            out |= _vars(a)
        return out
    if isinstance(e, RRef):
        out = set()
        for i in e.indices:
            out |= _vars(i)
        if e.cta is not None:
            out |= _vars(e.cta)
        return out
    if isinstance(e, tuple):
        out = set()
        for x in e:
            out |= _vars(x)
        return out
    return set()


def _liveness(prog: Program) -> list[frozenset[int]]:
    n = len(prog.instrs)
    uses: list[set[int]] = []
    defs: list[set[int]] = []
    succ: list[list[int]] = []
    for pc, ins in enumerate(prog.instrs):
        u, d = set(), set()
        if ins.op == LET:
            d.add(ins.args[0])
            u |= _vars(ins.args[1])
        elif ins.op == CHOOSE:
            d.add(ins.args[0])
            u |= _vars(ins.args[1:])
        elif ins.op == RING:
            d.add(ins.args[0])
        elif ins.op == ADVANCE:
            u.add(ins.args[0])
            d.add(ins.args[0])
        else:
            u |= _vars(ins.args)
            if ins.op in (MMA, MMA_WAIT):
                u.add(ins.args[-1])
        uses.append(u)
        defs.append(d)
        if ins.op == JUMP:
            succ.append([ins.target])
        elif ins.op == BRANCH:
            succ.append([pc + 1, ins.target])
        elif ins.op == END:
            succ.append([])
        else:
            succ.append([pc + 1])
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


class Layout:
    """Where each barrier and buffer element lives: flat ids, per CTA."""

    def __init__(self, kernel: CheckedKernel):
        self.ncta = kernel.cluster_size
        self.bar_base: dict[str, tuple[int, tuple[int, ...]]] = {}
        n = 0
        for b in kernel.barriers:
            self.bar_base[b.name] = (n, b.dims)
            n += b.size
        self.nbar = n
        self.buf_base: dict[str, tuple[int, tuple[int, ...]]] = {}
        n = 0
        for b in kernel.buffers:
            self.buf_base[b.name] = (n, b.dims)
            n += b.size
        self.nbuf = n
        self.bar_names = [self._name(kernel.barriers, gid, self.nbar) for gid in range(self.nbar * self.ncta)]
        self.buf_names = [self._name(kernel.buffers, gid, self.nbuf) for gid in range(self.nbuf * self.ncta)]

    def _name(self, decls, gid: int, per: int) -> str:
        cta, off = divmod(gid, per)
        for d in decls:
            if off < d.size:
                idx = []
                rem = off
                for dim in reversed(d.dims):
                    idx.append(rem % dim)
                    rem //= dim
                name = d.name + "".join(f"[{i}]" for i in reversed(idx))
                return f"cta{cta}.{name}" if self.ncta > 1 else name
            off -= d.size
        return "?"


class Model:
    """The explorer-facing transition system for one configuration."""

    def __init__(self, kernel: CheckedKernel, classes: list[ThreadClass], sites: list[Site]):
        self.kernel = kernel
        self.classes = classes
        self.sites = sites
        self.layout = Layout(kernel)
        self.wgmma = kernel.arch.startswith("sm_90")
        cache: dict[Program, list[CInstr]] = {}
        self.code: list[list[CInstr]] = []
        for cl in classes:
            if cl.program not in cache:
                cache[cl.program] = self._compile(cl.program)
            self.code.append(cache[cl.program])
        units: dict[tuple, int] = {}
        self.mma_unit: list[int] = []
        self.unit_size: list[int] = []
        for cl in classes:
            if any(i.op in (MMA, MMA_WAIT) for i in cl.program.instrs):
                key = (cl.cta, cl.role, cl.instance, cl.warpgroup)
                if key not in units:
                    units[key] = len(units)
                    self.unit_size.append(min(128, cl.role_threads - 128 * (cl.warpgroup or 0)))
                self.mma_unit.append(units[key])
            else:
                self.mma_unit.append(-1)
        self.nunits = len(units)
        self.cta_classes = [[c.id for c in classes if c.cta == k] for k in range(self.layout.ncta)]
        self.coll_classes = [c.id for c in classes if any(i.op == COLL for i in c.program.instrs)]
        self.cta_threads = sum(r.instances * r.threads for r in kernel.roles)
        self._future_cache: dict = {}
        self._op_cache: dict = {}
        self._unit_cta = [0] * self.nunits
        for cl in classes:
            if self.mma_unit[cl.id] >= 0:
                self._unit_cta[self.mma_unit[cl.id]] = cl.cta

    # ------------------------------------------------------------ compilation
    def _ref(self, ref: RRef, site: int, barrier: bool) -> Callable[[tuple, int], int]:
        base, dims = (self.layout.bar_base if barrier else self.layout.buf_base)[ref.name]
        per = self.layout.nbar if barrier else self.layout.nbuf
        ncta = self.layout.ncta
        cta_f = compile_expr(ref.cta) if ref.cta is not None else None
        if all(isinstance(i, RConst) for i in ref.indices):
            flat = 0
            for i, d in zip(ref.indices, dims):
                flat = flat * d + i.value
            off = base + flat
            if cta_f is None:
                return lambda env, cta: cta * per + off
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

    def _compile(self, prog: Program) -> list[CInstr]:
        live = _liveness(prog)
        out: list[CInstr] = []
        for pc, ins in enumerate(prog.instrs):
            mask = None
            if ins.op not in LOCAL_OPS:
                lv = tuple(i in live[pc] for i in range(prog.nslots))
                mask = lv if not all(lv) else None
            ci = CInstr(ins.op, ins.site, ins.target, mask, text=self.sites[ins.site].text if ins.site >= 0 else "")
            a = ins.args
            if ins.op == LET:
                ci.a, ci.b = a[0], compile_expr(a[1])
            elif ins.op == CHOOSE:
                ci.a, ci.b, ci.c = a[0], compile_expr(a[1]), compile_expr(a[2])
            elif ins.op in (RING, ADVANCE):
                ci.a = a[0]
            elif ins.op == BRANCH:
                ci.a = compile_expr(a[0])
            elif ins.op == WAIT:
                ci.a = self._ref(a[0], ins.site, True)
                ci.b = compile_expr(a[1])
                p = a[1]
                if isinstance(p, RRing) and p.attr == "phase":
                    slot, st, ph = p.slot, p.stages, p.phase0
                    ci.c = lambda env, slot=slot, st=st, ph=ph: env[slot] // st - ph
            elif ins.op == ARRIVE:
                ci.a = self._ref(a[0], ins.site, True)
                ci.b = compile_expr(a[1])
                ci.c = compile_expr(a[2]) if a[2] is not None else None
            elif ins.op in (EXPECT_TX, COMPLETE_TX, ARRIVE_DROP):
                ci.a = self._ref(a[0], ins.site, True)
                ci.b = compile_expr(a[1])
            elif ins.op == TMA_LOAD:
                ci.a = self._ref(a[0], ins.site, False)
                ci.b = compile_expr(a[1])
                ci.c = compile_expr(a[2])
                ci.d = self._ref(a[3], ins.site, True)
                ci.e = compile_expr(a[4]) if a[4] is not None else None
            elif ins.op == READ:
                ci.a = self._ref(a[0], ins.site, False)
                ci.b = compile_expr(a[1])
            elif ins.op == MMA:
                ci.a = tuple((self._ref(r, ins.site, False), compile_expr(t) if t is not None else None) for r, t in a[0])
                ci.b = a[1]
            elif ins.op == MMA_WAIT:
                ci.a = compile_expr(a[0])
                ci.b = a[1]
            elif ins.op in (COLL, COLL_WAIT):
                kind = a[0]
                ci.a = kind
                if kind == "bar":
                    ci.b, ci.c = compile_expr(a[1]), compile_expr(a[2])
                elif kind in ("elect", "syncwarp"):
                    ci.b = a[1]
                    ci.c = a[2] if kind == "elect" else None
            elif ins.op == BAR_ARRIVE:
                ci.b, ci.c = compile_expr(a[0]), compile_expr(a[1])
            elif ins.op not in (END, JUMP):
                raise EvalError(f"'{ins.op}' is not supported by this version of the model", ins.site)
            out.append(ci)
        return out

    # ------------------------------------------------------------ local steps
    def settle(self, c: int, pc: int, env: tuple) -> list[tuple[int, tuple]]:
        """Run a class's local steps from pc until each path reaches a visible instruction."""
        code = self.code[c]
        out: list[tuple[int, tuple]] = []
        stack = [(pc, env)]
        budget = MAX_LOCAL_STEPS
        while stack:
            pc, env = stack.pop()
            while True:
                ins = code[pc]
                op = ins.op
                budget -= 1
                if budget < 0:
                    raise EvalError("a loop runs over a million steps without a barrier, TMA or read statement", ins.site)
                if op is LET:
                    env = env[:ins.a] + (ins.b(env),) + env[ins.a + 1:]
                    pc += 1
                elif op is BRANCH:
                    pc = pc + 1 if ins.a(env) else ins.target
                elif op is JUMP:
                    pc = ins.target
                elif op is ADVANCE:
                    env = env[:ins.a] + (env[ins.a] + 1,) + env[ins.a + 1:]
                    pc += 1
                elif op is RING:
                    env = env[:ins.a] + (0,) + env[ins.a + 1:]
                    pc += 1
                elif op is CHOOSE:
                    lo, hi = ins.b(env), ins.c(env)
                    if lo > hi:
                        raise EvalError(f"choose range {lo}..{hi} is empty", ins.site)
                    for v in range(hi, lo - 1, -1):
                        stack.append((pc + 1, env[:ins.a] + (v,) + env[ins.a + 1:]))
                    break
                else:
                    if ins.live is not None:
                        env = tuple(v if keep else None for v, keep in zip(env, ins.live))
                    out.append((pc, env))
                    break
        out.reverse() if len(out) > 1 else None
        return out

    # ------------------------------------------------------------ the interface
    def initial(self) -> State:
        locs = []
        for cl in self.classes:
            env = [None] * cl.program.nslots
            if self.mma_unit[cl.id] >= 0:
                env[cl.program.instrs[next(i for i, x in enumerate(cl.program.instrs) if x.op in (MMA, MMA_WAIT))].args[-1]] = 0
            starts = self.settle(cl.id, 0, tuple(env))
            # a `choose` before the first visible statement: the class starts unsettled and its first step chooses
            start = starts[0] if len(starts) == 1 else (0, tuple(env))
            locs.append(((start, cl.size),))
        bars = []
        for _ in range(self.layout.ncta):
            for b in self.kernel.barriers:
                for _ in range(b.size):
                    bars.append(None if b.noinit else S.init(b.count))
        bufs = (EMPTY,) * (self.layout.nbuf * self.layout.ncta)
        mmas = ((0, (), ()),) * self.nunits
        return State(tuple(locs), tuple(bars), bufs, (), (), mmas, (False,) * self.layout.ncta, None)

    def successors(self, s: State) -> list[tuple[Action, State, tuple[Finding, ...]]]:
        if s.halted is not None:
            return []
        out: list = []
        for c, groups in enumerate(s.locs):
            code = self.code[c]
            for gi, ((pc, env), m) in enumerate(groups):
                ins = code[pc]
                if ins.op is END or ins.op is COLL_WAIT:
                    continue
                try:
                    self._thread(s, c, gi, pc, env, m, ins, out)
                except ZeroDivisionError:
                    raise EvalError("division by zero", ins.site) from None
        prev = None
        for i, op in enumerate(s.flight):
            if op != prev:
                out.append(self._land(s, i))
            prev = op
        for u, (done, forming, inflight) in enumerate(s.mmas):
            if inflight and inflight[0][0] == done:
                out.append(self._mma_done(s, u))
        for cta, gone in enumerate(s.exited):
            if not gone and self._cta_done(s, cta):
                out.append(self._exit(s, cta))
        return out

    def step(self, s: State, action: Action) -> tuple[State, tuple[Finding, ...]]:
        for a, t, f in self.successors(s):
            if a == action:
                return t, f
        raise KeyError(f"action {action} is not enabled")

    def terminal_findings(self, s: State) -> tuple[Finding, ...]:
        """Findings of a state with no successors: a hang when some thread has not finished."""
        if s.halted is not None:
            return ()
        blocked = []
        for c, groups in enumerate(s.locs):
            for (pc, env), m in groups:
                if self.code[c][pc].op is not END:
                    blocked.append((c, pc, env, m))
        if not blocked:
            return ()
        # who could still arrive on what: a barrier no blocked thread will ever arrive on is a root cause
        providers: set = set()
        for c, pc, env, m in blocked:
            for d in self._future(c, pc, env, m)[0]:
                if d[0] in ("arrive", "tx"):
                    providers.add(d[1])
        out: list[Finding] = []
        entries = []
        bar_ids: list[int] = []
        for c, pc, env, m in blocked:
            ins = self.code[c][pc]
            root = 1
            if ins.op is WAIT:
                gid = ins.a(env, self.classes[c].cta)
                bar_ids.append(gid)
                root = 0 if gid not in providers else 1
                if ins.c is not None and s.bars[gid] is not None:
                    off = S.alias(s.bars[gid], ins.c(env))
                    if off:
                        out.append(self._alias_finding(s, c, ins, env, gid, off, passing=False))
            elif ins.op is COLL_WAIT:
                root = 2
            entries.append((root, c, pc, self.describe_block(s, c, pc, env)))
        entries.sort(key=lambda e: (e[0], e[1]))
        # name a whole role instance when all its unfinished threads are stuck the same way
        by_unit: dict[tuple, list] = {}
        for root, c, pc, text in entries:
            by_unit.setdefault((self.classes[c].unit, text), []).append(c)
        parts = []
        seen: set = set()
        for root, c, pc, text in entries:
            key = (self.classes[c].unit, text)
            if key in seen:
                continue
            seen.add(key)
            cls = by_unit[key]
            unit_classes = [k for k in range(len(self.classes)) if self.classes[k].unit == self.classes[c].unit
                            and any(self.code[k][p].op is not END for (p, _), _ in s.locs[k])]
            who = self.classes[c].unit if set(cls) == set(unit_classes) else self.classes[c].label
            parts.append(f"{who} {text}")
        msg = "; ".join(parts[:3])
        if len(parts) > 3:
            msg += f"; and {len(parts) - 3} more blocked"
        c0, pc0 = entries[0][1], entries[0][2]
        out.insert(0, Finding("hang", msg, self.code[c0][pc0].site, c0, tuple(dict.fromkeys(bar_ids))))
        return tuple(out)

    # ------------------------------------------------------------ helpers
    def describe_block(self, s: State, c: int, pc: int, env: tuple) -> str:
        ins = self.code[c][pc]
        cl = self.classes[c]
        if ins.op is WAIT:
            gid = ins.a(env, cl.cta)
            return f"waits on {self.layout.bar_names[gid]} parity {ins.b(env) & 1} forever"
        if ins.op is COLL_WAIT:
            key, n = self._coll_key(c, ins, env)
            arrived = next((a for k, a, _ in s.colls if k == key), 0)
            return f"waits at {ins.text or ins.a} for {n - arrived} more thread(s) that never come"
        if ins.op is MMA_WAIT:
            return "waits for its mma_async groups, which can never complete"
        return f"is stuck at '{ins.text}'"

    def _move(self, s: State, c: int, gi: int, pc: int, env: tuple, m: int) -> list[tuple]:
        """New per-class tuples with group gi of class c moved to pc (after local steps); one per outcome."""
        results = []
        groups = s.locs[c]
        for loc in self.settle(c, pc, env):
            results.append(_regroup(groups, gi, loc, m))
        return results

    def _emit(self, out: list, s: State, c: int, gi: int, pc: int, env: tuple, m: int, findings: list,
              **changes) -> None:
        """Append one successor per outcome of moving group gi to pc, with other state parts changed."""
        base = s._replace(**changes) if changes else s
        cta = self.classes[c].cta
        for k, groups in enumerate(self._move(s, c, gi, pc, env, m)):
            locs = s.locs[:c] + (groups,) + s.locs[c + 1:]
            t = base._replace(locs=locs)
            out.append((("t", c, gi, k), t, tuple(findings)))

    def _exit(self, s: State, cta: int) -> tuple[Action, State, tuple[Finding, ...]]:
        """A CTA exits once its last thread has finished: nothing may still be in flight into it."""
        out = []
        per = self.layout.nbuf
        for buf, tag, nbytes, bar, site, src in s.flight:
            if buf // per == cta:
                out.append(Finding("exit-inflight",
                                   f"CTA {cta} exits while the TMA load of tile {tag} into {self.layout.buf_names[buf]} "
                                   f"({nbytes} bytes) is still in flight: undefined behaviour (may corrupt or fault)",
                                   site, src))
                break
        for u, (done, forming, inflight) in enumerate(s.mmas):
            if inflight and self._unit_cta[u] == cta:
                out.append(Finding("exit-inflight", f"CTA {cta} exits while an mma_async still reads its shared memory",
                                   inflight[0][2], inflight[0][3]))
                break
        exited = s.exited[:cta] + (True,) + s.exited[cta + 1:]
        return ("x", cta), s._replace(exited=exited), tuple(out)

    def _cta_done(self, s: State, cta: int) -> bool:
        for c in self.cta_classes[cta]:
            code = self.code[c]
            for (pc, _), _ in s.locs[c]:
                if code[pc].op is not END:
                    return False
        return True

    def _bar_events(self, events: list[str], c: int, ins: CInstr, gid: int, before, count: int = 1) -> tuple[list[Finding], str | None]:
        findings = []
        halted = None
        name = self.layout.bar_names[gid]
        who = self.classes[c].label if c >= 0 else "a TMA load"
        for ev in events:
            if ev == S.DOUBLE:
                findings.append(Finding("double-arrive", f"{who} arrives on {name} twice in phase {before.phase}: the "
                                        "extra arrival counts toward completing the phase early", ins.site, c, (gid,)))
            elif ev == S.FAULT_OVER:
                findings.append(Finding("arrive-fault", f"{who} arrives on {name} with count {count}, but only "
                                        f"{before.pending} arrival(s) are pending: the kernel faults (H200 mbar 9)",
                                        ins.site, c, (gid,)))
                halted = "arrive-fault"
            elif ev == S.FAULT_TX_ONLY:
                findings.append(Finding("arrive-fault", f"{who} arrives on {name} while its phase owes no arrivals, only "
                                        f"{before.tx} tx bytes: the kernel faults (H200 mbar 12)", ins.site, c, (gid,)))
                halted = "arrive-fault"
            elif ev == S.FAULT_TX_RANGE:
                findings.append(Finding("tx-range", f"the tx-count of {name} leaves +-(2^20-1): the kernel faults "
                                        "(H200 mbar 13)", ins.site, c, (gid,)))
                halted = "tx-range"
            elif ev == S.FAULT_UNINIT:
                findings.append(Finding("arrive-fault", f"{who} uses {name}, which was never initialised: the kernel "
                                        "faults (H200 mbar 17)", ins.site, c, (gid,)))
                halted = "arrive-fault"
            elif ev == S.DROP_TO_ZERO:
                findings.append(Finding("arrive-fault", f"arrive_drop lowers the expected count of {name} to 0: "
                                        "undefined (PTX 9.7.13.15.14)", ins.site, c, (gid,)))
        return findings, halted

    def _alias_finding(self, s: State, c: int, ins: CInstr, env: tuple, gid: int, off: int, passing: bool) -> Finding:
        b = s.bars[gid]
        intended = ins.c(env)
        name = self.layout.bar_names[gid]
        who = self.classes[c].label
        verb = "passes its wait on" if passing else "waits on"
        if off > 0:
            why = (f"{name} has already completed {b.phase} phases, {off} more than the phase {intended} it waits for: "
                   f"the waiter fell {off + 1} phases behind and parity {ins.b(env) & 1} aliases")
        else:
            why = (f"{name} has completed only {b.phase} phases but the waiter expects phase {intended} to complete: "
                   f"it is {-off} phase(s) ahead and parity {ins.b(env) & 1} aliases")
        return Finding("phase-alias", f"{who} {verb} {name}: {why}", ins.site, c, (gid,))

    def _check_tag(self, s: State, c: int, site: int, buf: int, want: int | None, what: str) -> list[Finding]:
        if want is None:
            return []
        have = s.bufs[buf]
        if have == want:
            return []
        name = self.layout.buf_names[buf]
        who = self.classes[c].label
        landing = any(op[0] == buf and op[1] == want for op in s.flight)
        holds = "nothing yet" if have == EMPTY else f"tile {have}"
        if landing or have == EMPTY or have < want:
            state = "is still in flight" if landing else "was never issued into it"
            return [Finding("stale-read", f"{who} {what} {name} for tile {want}, but the TMA load of tile {want} "
                            f"{state} ({name} holds {holds})", site, c)]
        return [Finding("overwrite", f"{who} {what} {name} for tile {want}, but {name} already holds tile {have}: "
                        f"a later load overwrote tile {want} before it was read", site, c)]

    # ------------------------------------------------------------ thread steps
    def _thread(self, s: State, c: int, gi: int, pc: int, env: tuple, m: int, ins: CInstr, out: list) -> None:
        op = ins.op
        cta = self.classes[c].cta
        if op in LOCAL_OPS:  # only at the start, before a `choose`: the step is the choice itself
            self._emit(out, s, c, gi, pc, env, m, [])
        elif op is WAIT:
            gid = ins.a(env, cta)
            b = s.bars[gid]
            if b is None or not S.wait_passes(b, ins.b(env)):
                return
            findings = []
            if ins.c is not None:
                off = S.alias(b, ins.c(env))
                if off:
                    findings.append(self._alias_finding(s, c, ins, env, gid, off, passing=True))
            self._emit(out, s, c, gi, pc + 1, env, m, findings)
        elif op is ARRIVE:
            gid = ins.a(env, cta)
            count = ins.b(env)
            tx = ins.c(env) if ins.c is not None else 0
            bars = list(s.bars)
            findings: list[Finding] = []
            halted = None
            for _ in range(m):
                events: list[str] = []
                before = bars[gid]
                bars[gid] = S.arrive(before, count, c, events, tx)
                f, h = self._bar_events(events, c, ins, gid, before, count)
                findings.extend(f)
                if h:
                    halted = h
                    break
            self._emit(out, s, c, gi, pc + 1, env, m, findings, bars=tuple(bars), halted=halted)
        elif op is EXPECT_TX or op is COMPLETE_TX or op is ARRIVE_DROP:
            gid = ins.a(env, cta)
            n = ins.b(env)
            bars = list(s.bars)
            findings = []
            halted = None
            for _ in range(m):
                events = []
                before = bars[gid]
                if op is EXPECT_TX:
                    bars[gid] = S.expect_tx(before, n, events)
                elif op is COMPLETE_TX:
                    bars[gid] = S.complete_tx(before, n, events)
                else:
                    bars[gid] = S.arrive_drop(before, n, c, events)
                f, h = self._bar_events(events, c, ins, gid, before, n)
                findings.extend(f)
                if h:
                    halted = h
                    break
            self._emit(out, s, c, gi, pc + 1, env, m, findings, bars=tuple(bars), halted=halted)
        elif op is TMA_LOAD:
            buf = ins.a(env, cta)
            tag = ins.b(env)
            nbytes = ins.c(env)
            bar = ins.d(env, cta)
            targets = [cta]
            if ins.e is not None:
                mask = ins.e(env)
                targets = [k for k in range(self.layout.ncta) if mask >> k & 1]
                if not targets:
                    raise EvalError(f"multicast mask {mask:#x} names no CTA of the cluster", ins.site)
            pb, pr = self.layout.nbuf, self.layout.nbar
            new = []
            for _ in range(m):
                for k in targets:
                    new.append((k * pb + buf % pb, tag, nbytes, k * pr + bar % pr, ins.site, c))
            flight = tuple(sorted(s.flight + tuple(new)))
            self._emit(out, s, c, gi, pc + 1, env, m, [], flight=flight)
        elif op is READ:
            buf = ins.a(env, cta)
            findings = self._check_tag(s, c, ins.site, buf, ins.b(env), "reads")
            self._emit(out, s, c, gi, pc + 1, env, m, findings)
        elif op is MMA:
            self._mma_issue(s, c, gi, pc, env, m, ins, out)
        elif op is MMA_WAIT:
            u = self.mma_unit[c]
            done = s.mmas[u][0]
            if done >= env[ins.b] - ins.a(env):
                self._emit(out, s, c, gi, pc + 1, env, m, [])
        elif op is COLL:
            self._coll_arrive(s, c, gi, pc, env, m, ins, out)
        elif op is BAR_ARRIVE:
            key = ("b", cta, ins.b(env))
            n = ins.c(env)
            self._coll_count(s, c, gi, pc, env, m, ins, out, key, n, blocking=False)
        else:
            raise EvalError(f"'{op}' is not supported by this version of the model", ins.site)

    def _mma_issue(self, s: State, c: int, gi: int, pc: int, env: tuple, m: int, ins: CInstr, out: list) -> None:
        u = self.mma_unit[c]
        cta = self.classes[c].cta
        seq = env[ins.b]
        ops = tuple((r(env, cta), t(env) if t is not None else None) for r, t in ins.a)
        done, forming, inflight = s.mmas[u]
        joined = m
        rest = []
        for f in forming:
            if f[0] == seq:
                joined += f[1]
            else:
                rest.append(f)
        findings: list[Finding] = []
        size = self.unit_size[u] if self.wgmma else m
        if joined >= size:
            for buf, tag in ops:
                findings.extend(self._check_tag(s, c, ins.site, buf, tag, "has mma_async read"))
            inflight = tuple(sorted(inflight + ((seq, ops, ins.site, c),)))
            forming = tuple(rest)
        else:
            forming = tuple(sorted(rest + [(seq, joined, ops)]))
        mmas = s.mmas[:u] + ((done, forming, inflight),) + s.mmas[u + 1:]
        env2 = env[:ins.b] + (seq + 1,) + env[ins.b + 1:]
        self._emit(out, s, c, gi, pc + 1, env2, m, findings, mmas=mmas)

    def _coll_key(self, c: int, ins: CInstr, env: tuple) -> tuple[tuple, int]:
        cl = self.classes[c]
        kind = ins.a
        if kind in ("elect", "syncwarp"):
            mask = ins.b
            lanes = min(32, cl.role_threads - 32 * (cl.warp or 0))
            n = bin(mask & ((1 << lanes) - 1)).count("1")
            key = ("e" if kind == "elect" else "w", cl.cta, cl.role, cl.instance, cl.warp, mask, ins.c if kind == "elect" else ins.site)
            return key, n
        if kind == "bar":
            return ("b", cl.cta, ins.b(env)), ins.c(env)
        if kind == "syncthreads":
            return ("b", cl.cta, 0), self.cta_threads
        return ("c",), self.cta_threads * self.layout.ncta

    def _coll_arrive(self, s: State, c: int, gi: int, pc: int, env: tuple, m: int, ins: CInstr, out: list) -> None:
        key, n = self._coll_key(c, ins, env)
        self._coll_count(s, c, gi, pc, env, m, ins, out, key, n, blocking=True)

    def _coll_count(self, s: State, c: int, gi: int, pc: int, env: tuple, m: int, ins: CInstr, out: list,
                    key: tuple, n: int, blocking: bool) -> None:
        """Arrive m threads at a collective; the last arrival releases everyone of that generation."""
        if key[0] == "b" and (n <= 0 or n % 32):
            raise EvalError(f"a named barrier's thread count must be a positive multiple of 32, not {n}", ins.site)
        arrived = m
        rest = []
        for k, a, n0 in s.colls:
            if k == key:
                arrived += a
            else:
                rest.append((k, a, n0))
        locs = list(s.locs)
        others = list(locs[c])
        del others[gi]
        locs[c] = tuple(others)
        waiting: list = []  # (local, count) placed directly at the collective's wait
        moving: list = []  # (pc to run from, count)
        if arrived < n:
            colls = rest + [(key, arrived, n)]
            if blocking:
                waiting.append(((pc + 1, self._canon(c, pc + 1, env)), m))
            else:
                moving.append((pc + 1, m))
        else:
            over = arrived - n
            colls = rest + ([(key, over, n)] if over else [])
            for wc in self.coll_classes:
                code = self.code[wc]
                groups = []
                changed = False
                for (wpc, wenv), wm in locs[wc]:
                    wi = code[wpc]
                    if wi.op is COLL_WAIT and self._coll_key(wc, wi, wenv)[0] == key:
                        groups.extend((loc, wm) for loc in self.settle(wc, wpc + 1, wenv))
                        changed = True
                    else:
                        groups.append(((wpc, wenv), wm))
                if changed:
                    locs[wc] = _merge(groups)
            if blocking:
                moving.append((pc + 2, m - over))
                if over:
                    waiting.append(((pc + 1, self._canon(c, pc + 1, env)), over))
            else:
                moving.append((pc + 1, m))
        colls_t = tuple(sorted(colls))
        outcomes = [[]]
        for start, cnt in moving:
            outcomes = [o + [(loc, cnt)] for o in outcomes for loc in self.settle(c, start, env)]
        cta = self.classes[c].cta
        for k, moved in enumerate(outcomes):
            groups = _merge(list(locs[c]) + waiting + moved)
            t = s._replace(locs=tuple(locs[:c]) + (groups,) + tuple(locs[c + 1:]), colls=colls_t)
            out.append((("t", c, gi, k), t, ()))

    def _canon(self, c: int, pc: int, env: tuple) -> tuple:
        live = self.code[c][pc].live
        return env if live is None else tuple(v if keep else None for v, keep in zip(env, live))

    # ------------------------------------------------------------ futures, for the reduction
    def process_of(self, action: Action) -> tuple:
        if action[0] == "t":
            return ("g", action[1], action[2])
        return action[:2]

    def _future(self, c: int, pc: int, env: tuple, m: int) -> tuple[tuple, bool]:
        """The operations a group will perform if nothing blocks it: concrete, cached."""
        key = (c, pc, env, m)
        hit = self._future_cache.get(key)
        if hit is not None:
            return hit
        code = self.code[c]
        cl = self.classes[c]
        cta = cl.cta
        ops: list[tuple] = []
        exhaustive = False
        try:
            if code[pc].op in LOCAL_OPS:
                nxt = self.settle(c, pc, env)
                if len(nxt) != 1:
                    raise EvalError("", -1)
                pc, env = nxt[0]
            for _ in range(FUTURE_HORIZON):
                ins = code[pc]
                op = ins.op
                nxt_env = env
                if op is END:
                    exhaustive = True
                    break
                if op is WAIT:
                    ops.append(("wait", ins.a(env, cta), ins.b(env) & 1))
                elif op is ARRIVE:
                    tx = ins.c(env) if ins.c is not None else 0
                    ops.append(("arrive", ins.a(env, cta), ins.b(env) * m, tx != 0))
                elif op is EXPECT_TX or op is COMPLETE_TX:
                    ops.append(("tx", ins.a(env, cta)))
                elif op is ARRIVE_DROP:
                    ops.append(("arrive", ins.a(env, cta), ins.b(env) * m, False))
                elif op is TMA_LOAD:
                    buf, bar = ins.a(env, cta), ins.d(env, cta)
                    targets = [cta]
                    if ins.e is not None:
                        mask = ins.e(env)
                        targets = [k for k in range(self.layout.ncta) if mask >> k & 1]
                    pb, pr = self.layout.nbuf, self.layout.nbar
                    ops.append(("load", tuple((k * pb + buf % pb, k * pr + bar % pr, k) for k in targets)))
                elif op is READ:
                    ops.append(("read", ins.a(env, cta)))
                elif op is MMA:
                    u = self.mma_unit[c]
                    seq = env[ins.b]
                    ops.append(("join", u, seq, tuple(r(env, cta) for r, _ in ins.a), m))
                    nxt_env = env[:ins.b] + (seq + 1,) + env[ins.b + 1:]
                elif op is MMA_WAIT:
                    ops.append(("mwait", self.mma_unit[c], env[ins.b] - ins.a(env)))
                elif op is COLL:
                    k, n = self._coll_key(c, ins, env)
                    ops.append(("coll", k, m))
                    ops.append(("cwait", k, n))
                    nxt = self.settle(c, pc + 2, env)
                    if len(nxt) != 1:
                        break
                    pc, env = nxt[0]
                    continue
                elif op is COLL_WAIT:
                    k, n = self._coll_key(c, ins, env)
                    ops.append(("cwait", k, n))
                    nxt = self.settle(c, pc + 1, env)
                    if len(nxt) != 1:
                        break
                    pc, env = nxt[0]
                    continue
                elif op is BAR_ARRIVE:
                    ops.append(("coll", ("b", cta, ins.b(env)), m))
                else:
                    break
                nxt = self.settle(c, pc + 1, nxt_env)
                if len(nxt) != 1:
                    break
                pc, env = nxt[0]
        except (EvalError, ZeroDivisionError):
            exhaustive = False
        if exhaustive:
            ops.append(("end", cta))
        out = (tuple(ops), exhaustive)
        self._future_cache[key] = out
        return out

    @staticmethod
    def _tx_footprint(s: State, gid: int) -> tuple:
        """Byte-only operations on a barrier: quiet while its phase still owes arrivals (see por)."""
        return ((("bar", gid), "t"),)

    def _op(self, s: State, d: tuple) -> Op:
        """A future operation with its footprint, what it provides, and what it needs, in state s."""
        kind = d[0]
        if kind not in ("wait", "mwait", "cwait"):
            op = self._op_cache.get(d)
            if op is None:
                op = self._op_cache[d] = self._op_uncached(s, d)
            return op
        return self._op_uncached(s, d)

    def _op_uncached(self, s: State, d: tuple) -> Op:
        kind = d[0]
        end = ()
        if kind == "end":
            return Op((), ((("done", d[1]), 1),))
        if kind == "wait":
            gid, parity = d[1], d[2]
            b = s.bars[gid]
            fp = ((("bar", gid), "r"),) + end
            if b is None:
                return Op(fp, needs=lambda av: False)
            if S.wait_passes(b, parity):
                return Op(fp)
            pending, tx = b.pending, b.tx
            arr, txk = ("arr", gid), ("tx", gid)
            return Op(fp, needs=lambda av: av[arr] >= pending and (tx == 0 or av[txk] > 0), need_resources=(arr, txk))
        if kind == "arrive":
            gid = d[1]
            prov = ((("arr", gid), d[2]),) + (((("tx", gid), 1),) if d[3] else ())
            return Op(((("bar", gid), "c", d[2]),) + end, prov)
        if kind == "tx":
            return Op(self._tx_footprint(s, d[1]) + end, ((("tx", d[1]), 1),))
        if kind == "load":
            spawns = tuple(Op(((("buf", b), "w"), (("rd", b), "r"), (("flight", k), "i")) + self._tx_footprint(s, bar),
                              ((("tx", bar), 1),)) for b, bar, k in d[1])
            return Op(tuple((("flight", k), "i") for _, _, k in d[1]) + end, spawns=spawns)
        if kind == "read":
            return Op(((("buf", d[1]), "r"),) + end)
        if kind == "join":
            u, seq, bufs, m = d[1], d[2], d[3], d[4]
            fp = tuple((("buf", b), "r") for b in bufs) + tuple((("rd", b), "i") for b in bufs)
            return Op(fp + end, ((("join", u, seq), m),))
        if kind == "mwait":
            u, need = d[1], d[2]
            done = s.mmas[u][0]
            fp = ((("mmadone", u), "r"),) + end
            if need <= done:
                return Op(fp)
            key = ("mdone", u, need - 1)
            return Op(fp, needs=lambda av: av[key] > 0, need_resources=(key,))
        if kind == "coll":
            return Op(((("coll", d[1]), "w"),) + end, ((("coll", d[1]), d[2]),))
        if kind == "cwait":
            key, n = d[1], d[2]
            now = next((a for k, a, _ in s.colls if k == key), 0)
            res = ("coll", key)
            return Op(end, needs=lambda av: now + av[res] >= n, need_resources=(res,))
        raise AssertionError(kind)

    def processes(self, s: State, enabled: set) -> list[Process]:
        procs: list[Process] = []
        max_seq: dict[int, int] = {}
        join_bufs: dict[tuple[int, int], tuple] = {}
        for c, groups in enumerate(s.locs):
            for gi, ((pc, env), m) in enumerate(groups):
                if self.code[c][pc].op is END:
                    continue
                if self.code[c][pc].op in LOCAL_OPS:  # an unsettled start: the head is a local choice
                    procs.append(Process(("g", c, gi), ("g", c, gi) in enabled, [Op(())], False))
                    continue
                descs, exhaustive = self._future(c, pc, env, m)
                for d in descs:
                    if d[0] == "join":
                        max_seq[d[1]] = max(max_seq.get(d[1], -1), d[2])
                        join_bufs[(d[1], d[2])] = d[3]
                procs.append(Process(("g", c, gi), ("g", c, gi) in enabled, [self._op(s, d) for d in descs], exhaustive))
        for i, (buf, tag, nbytes, bar, site, src) in enumerate(s.flight):
            key = ("l", i)
            if key not in enabled:
                continue  # a duplicate of the load before it
            cta = buf // self.layout.nbuf
            procs.append(Process(key, True, [Op(((("buf", buf), "w"), (("rd", buf), "r"), (("flight", cta), "i"))
                                                 + self._tx_footprint(s, bar), ((("tx", bar), 1),))], True))
        for u, (done, forming, inflight) in enumerate(s.mmas):
            ops = []
            cta = self._unit_cta[u]
            formed = {seq: bufs for seq, bufs, _, _ in inflight}
            joined = {seq: n for seq, n, _ in forming}
            top = max([max_seq.get(u, -1)] + list(formed) + list(joined))
            for j in range(done, top + 1):
                if j in formed:
                    bufs = [b for b, _ in formed[j]]
                else:
                    forming_bufs = next((tuple(b for b, _ in ops_) for seq, _, ops_ in forming if seq == j), None)
                    bufs = list(forming_bufs if forming_bufs is not None else join_bufs.get((u, j), ()))
                    if not bufs:
                        break  # no thread can form this group within the horizon
                fp = ((("mmadone", u), "w"), (("mmaexit", cta), "i")) + tuple((("rd", b), "i") for b in bufs)
                prov = ((("mdone", u, j), 1),)
                if j in formed:
                    ops.append(Op(fp, prov, needs=None if j == done else (lambda av, k=("mdone", u, j - 1): av[k] > 0)))
                else:
                    need = self.unit_size[u] - joined.get(j, 0)
                    jk, pk = ("join", u, j), ("mdone", u, j - 1)
                    ops.append(Op(fp, prov, needs=(lambda av, jk=jk, pk=pk, need=need, first=(j == done):
                                                   av[jk] >= need and (first or av[pk] > 0)), need_resources=(jk, pk)))
            if ops:
                procs.append(Process(("m", u), ("m", u) in enabled, ops, True))
        for cta, gone in enumerate(s.exited):
            if gone:
                continue
            left = sum(1 for c in self.cta_classes[cta] for (pc, _), _ in s.locs[c] if self.code[c][pc].op is not END)
            key = ("x", cta)
            res = ("done", cta)
            procs.append(Process(key, key in enabled, [Op(((("flight", cta), "r"), (("mmaexit", cta), "r")),
                                                          needs=lambda av, res=res, left=left: av[res] >= left,
                                                          need_resources=(res,))], True))
        budgets = {("bar", gid): b.pending for gid, b in enumerate(s.bars) if b is not None}
        return procs, budgets

    # ------------------------------------------------------------ async completions
    def _land(self, s: State, i: int) -> tuple[Action, State, tuple[Finding, ...]]:
        buf, tag, nbytes, bar, site, src = s.flight[i]
        flight = s.flight[:i] + s.flight[i + 1:]
        findings: list[Finding] = []
        for u, (done, forming, inflight) in enumerate(s.mmas):
            for seq, ops, msite, mc in inflight:
                for b, t in ops:
                    if b == buf:
                        findings.append(Finding("overwrite", f"the TMA load of tile {tag} lands in "
                                                f"{self.layout.buf_names[buf]} while the mma_async of "
                                                f"{self.classes[mc].unit} still reads tile {t} from it", site, src,
                                                notes=(("the mma_async that is still reading", msite),)))
        bufs = s.bufs[:buf] + (tag,) + s.bufs[buf + 1:]
        events: list[str] = []
        before = s.bars[bar]
        nb = S.complete_tx(before, nbytes, events)
        bars = s.bars[:bar] + (nb,) + s.bars[bar + 1:]
        ins = CInstr("land", site, -1, None)
        f, halted = self._bar_events(events, -1, ins, bar, before, nbytes)
        findings.extend(f)
        return ("l", i), s._replace(flight=flight, bufs=bufs, bars=bars, halted=halted), tuple(findings)

    def _mma_done(self, s: State, u: int) -> tuple[Action, State, tuple[Finding, ...]]:
        done, forming, inflight = s.mmas[u]
        mmas = s.mmas[:u] + ((done + 1, forming, inflight[1:]),) + s.mmas[u + 1:]
        return ("m", u), s._replace(mmas=mmas), ()


def _sort_key(g):
    (pc, env), cnt = g
    return (pc, tuple(-(1 << 62) if v is None else v for v in env), cnt)


def _merge(groups: Iterable) -> tuple:
    acc: dict = {}
    for loc, cnt in groups:
        if cnt <= 0:
            continue
        acc[loc] = acc.get(loc, 0) + cnt
    items = list(acc.items())
    if len(items) > 1:
        items.sort(key=_sort_key)
    return tuple(items)


def _regroup(groups: tuple, gi: int, loc: tuple, m: int) -> tuple:
    if len(groups) == 1:
        return ((loc, m),)
    g = list(groups)
    del g[gi]
    g.append((loc, m))
    return _merge(g)
