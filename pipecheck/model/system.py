"""The transition system of a lowered kernel: `initial()`, `successors(state)`, `step`.

A state is a hashable tuple: where each thread class stands (program point, registers,
how many threads), every mbarrier, every buffer's tile tag, and the asynchronous work in
flight (TMA loads and cp.async copies, wgmma/tcgen05 groups, bulk stores, pending
commit arrivals). Local steps are fused into the visible step before them, so every
transition touches shared state. Findings are raised by the transition that shows them
(hazards.py); copies landing and other asynchronous events are in events.py.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable

from ..core.words import join_words
from . import semantics as S
from .compiled import CInstr, compile_program
from .events import AsyncEvents
from .findings import Finding
from .hazards import Hazards
from .ir import (PROBE, TRAP, ADVANCE, ARRIVE, ARRIVE_DROP, BAR_ARRIVE, BRANCH, CHOOSE, COLL, COLL_WAIT, COMMIT_GROUP, COMPLETE_TX,
                 CP_ASYNC, CP_ASYNC_ARRIVE, END, EXPECT_TX, FENCE_INIT, FENCE_PROXY, INIT, INVAL, JUMP, LET, LOCAL_OPS,
                 MMA, MMA_COMMIT, MMA_WAIT, READ, RING, T5_AFTER, T5_BEFORE, TMA_LOAD, TMA_STORE, TMEM_ALLOC, TMEM_DEALLOC,
                 TMEM_RELINQUISH, WAIT, WAIT_GROUP, WRITE, EvalError,
                 Program, Site)
from .kernel import KernelShape
from .layout import Layout
from .tcgen05 import Tcgen05Order
from .state import EMPTY, FAR_K, Action, State, merge_groups, regroup, seen_in_warp
from .threads import ThreadClass, compact_names

MAX_LOCAL_STEPS = 1_000_000


def _fenced(st) -> bool:
    """A barrier init's visibility record that a sync arrival publishes: fenced, or fenced and seen in its warp."""
    return st == 1 or seen_in_warp(st)


def _published(key: tuple):
    """What a completed collective makes of the inits published at it (PTX ISA: mbarrier.init, bar.warp.sync, the
    memory consistency model): a cluster sync makes them visible everywhere (the record goes), a named barrier or
    syncthreads to its CTA; a warp's meeting (bar.warp.sync, elect.sync, a reconvergence) orders memory only among
    that warp's lanes, so there they stay fenced and seen in that warp only (a later CTA sync still publishes
    them); setmaxnreg orders no memory."""
    kind = key[0]
    if kind == "c":
        return None
    if kind == "b":
        return "cta"
    if kind in ("e", "w", "r"):
        return ("warp",) + key[1:5]  # (cta, role, instance, warp)
    return 1


_GOES, _ENDS, _STOPS, _FAILS = 0, 1, 2, 3  # how one statement of a future leaves it (Model._future_step)
FUTURE_HORIZON = 64  # how many operations of a thread's future `future` looks at (the reduction's look-ahead)


class Model:
    """The explorer-facing transition system for one configuration."""

    def __init__(self, kernel: KernelShape, classes: list[ThreadClass], sites: list[Site], lockstep: bool = False,
                 every: "Any" = None, ordered_stores: bool = True, meetings: bool = False):
        self.kernel = kernel
        # a warp's meeting (elect, syncwarp, --lockstep reconvergence) that every lane still to come stands at is
        # one move of all of them (`meeting`); part of the reduction (search/footprints.py bundles its members)
        self.meetings = meetings
        # --every K (offset.Plan): per class, its loop guards over K; None for an ordinary run
        self.kplans = [every.classes[cl.id] for cl in classes] if every is not None else None
        self.lockstep = lockstep
        self.classes = classes
        self.sites = sites
        self.layout = Layout(kernel)
        self.wgmma = kernel.arch.startswith("sm_90")
        cache: dict[Program, list[CInstr]] = {}
        self.code: list[list[CInstr]] = []
        for cl in classes:
            if cl.program not in cache:
                cache[cl.program] = compile_program(cl.program, self.layout, sites)
            self.code.append(cache[cl.program])
        units: dict[tuple, int] = {}
        self.mma_unit: list[int] = []
        self.unit_size: list[int] = []
        self.unit_cta: list[int] = []
        self.unit_label: list[str] = []
        for cl in classes:
            if any(i.op in (MMA, MMA_WAIT, MMA_COMMIT) for i in cl.program.instrs):
                # wgmma groups belong to a warpgroup; a tcgen05 MMA to the one thread that issues it
                key = (cl.cta, cl.role, cl.instance, cl.warpgroup) if self.wgmma else ("class", cl.id)
                if key not in units:
                    units[key] = len(units)
                    self.unit_size.append(min(128, cl.role_threads - 128 * (cl.warpgroup or 0)) if self.wgmma else cl.size)
                    self.unit_cta.append(cl.cta)
                    self.unit_label.append(cl.unit if self.wgmma else cl.label)
                self.mma_unit.append(units[key])
            else:
                self.mma_unit.append(-1)
        self.nunits = len(units)
        labels = [cl.label for cl in classes]
        self.hazards = Hazards(self.layout, labels, self.unit_label, [cl.cta for cl in classes],
                               [cl.who != "" and cl.size > 1 for cl in classes],
                               [(cl.cta, cl.role, cl.instance, cl.warp) for cl in classes])
        self.t5 = Tcgen05Order(self.layout, [cl.program for cl in classes], labels, [cl.cta for cl in classes],
                               self.wgmma)
        full_waits = any(i.op is WAIT_GROUP and not i.c for code in self.code for i in code)
        self.events = AsyncEvents(self.layout, self.hazards, labels, self.unit_cta, self.unit_label, full_waits,
                                  ordered_stores, self.t5)
        self.cta_classes = [[c.id for c in classes if c.cta == k] for k in range(self.layout.ncta)]
        self.coll_classes = [c.id for c in classes if any(i.op is COLL for i in self.code[c.id])]
        self.cta_threads = sum(cl.size for cl in classes if cl.cta == 0)
        self.reconv = self._reconvergence_counts()
        self.uses_init = any(i.op in (INIT, FENCE_INIT) for cl in classes for i in cl.program.instrs)
        self.partners = self._lockstep_partners() if lockstep else {}
        warps: dict[tuple, list[int]] = {}
        for cl in classes:
            warps.setdefault((cl.cta, cl.role, cl.instance, cl.warp), []).append(cl.id)
        # per class, the classes of its warp that may arrive at its warp's meetings (itself among them)
        self.warp_mates = [tuple(warps[(cl.cta, cl.role, cl.instance, cl.warp)]) if any(
            i.op is COLL and i.a in WARP_MEETINGS for i in self.code[cl.id]) else () for cl in classes]
        self.horizon = FUTURE_HORIZON if every is None else every.horizon
        # --every, K far: how many loop guards a future may cross (the plan's NEAR counts on it)
        self.crossings = None if every is None else every.crossings
        self.future_cache: dict = {}
        self.step_cache: dict = {}

    def _lockstep_partners(self) -> dict[tuple[int, int], tuple[tuple[int, int], ...]]:
        """--lockstep: the classes of one warp that execute a statement execute it together (SIMT).

        Maps (class, pc) to every (class, pc) of its warp at the same statement."""
        by_site: dict[tuple, list[tuple[int, int]]] = {}
        for cl in self.classes:
            for pc, ins in enumerate(self.code[cl.id]):
                if ins.op in LOCAL_OPS or ins.op in (END, COLL, COLL_WAIT) or ins.site < 0:
                    continue
                by_site.setdefault((cl.cta, cl.role, cl.instance, cl.warp, ins.site), []).append((cl.id, pc))
        out = {}
        for members in by_site.values():
            if len({c for c, _ in members}) > 1:
                for m in members:
                    out[m] = tuple(sorted(members))
        return out

    def _reconvergence_counts(self) -> dict[tuple, int]:
        """--lockstep: how many lanes of each warp reach each reconvergence point."""
        out: dict[tuple, int] = {}
        for cl in self.classes:
            for ins in self.code[cl.id]:
                if ins.op is COLL and ins.a == "reconv":
                    key = ("r", cl.cta, cl.role, cl.instance, cl.warp, ins.site)
                    out[key] = out.get(key, 0) + cl.size
        return out

    # ------------------------------------------------------------ local steps
    def settle(self, c: int, pc: int, env: tuple) -> list[tuple[int, tuple]]:
        """Run a class's local steps from pc until each path reaches a visible instruction."""
        code = self.code[c]
        out: list[tuple[int, tuple]] = []
        stack = [(pc, env)]
        budget = MAX_LOCAL_STEPS
        kp = self.kplans[c] if self.kplans is not None else None
        crossed: set = set()
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
                    if kp is not None and pc in kp.guards and env[kp.kslot] >= FAR_K:
                        env, pc = self._local_loop(kp, pc, env, ins, crossed)
                        continue
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
        if len(out) > 1:
            out.reverse()
        return out

    @staticmethod
    def _local_loop(kp: Any, pc: int, env: tuple, ins: CInstr, crossed: set) -> tuple[tuple, int]:
        """--every, K far: a guard crossing. Crossing it twice in one step with the same registers but for the
        counters means the body has no visible statement on this path, for any K: the loop is left at once,
        with its counters dead (for every K the thread would leave it with nothing else changed)."""
        key = (pc, tuple(None if i in kp.family else v for i, v in enumerate(env)))
        if key not in crossed:
            crossed.add(key)
            return env, pc + 1
        if kp.exit_live[pc]:
            raise EvalError("--every: the loop body has no visible statement on this thread's path and its "
                            "counters are used after the loop, so where it ends depends on K", ins.site)
        return tuple(None if i in kp.family else v for i, v in enumerate(env)), ins.target

    def canon(self, c: int, pc: int, env: tuple) -> tuple:
        live = self.code[c][pc].live
        return env if live is None else tuple(v if keep else None for v, keep in zip(env, live))

    # ------------------------------------------------------------ a group's own future
    def future(self, c: int, pc: int, env: tuple, m: int, horizon: int = 0) -> tuple[tuple, bool]:
        """The operations a group performs if nothing blocks it (cut at a `choose` or the horizon: `horizon`
        statements, 0 for the model's own)."""
        if not horizon or self.crossings is not None:  # (--every: the horizon is part of the plan's bound)
            horizon = self.horizon
        key = (c, pc, env, m) if horizon == self.horizon else (c, pc, env, m, horizon)
        hit = self.future_cache.get(key)
        if hit is not None:
            return hit
        ops: list[tuple] = []
        exhaustive = False
        try:
            if self.code[c][pc].op in LOCAL_OPS:
                nxt = self.settle(c, pc, env)
                if len(nxt) != 1:
                    raise EvalError("", -1)
                pc, env = nxt[0]
            steps = self.step_cache
            kp = self.kplans[c] if self.crossings is not None else None
            counters = () if kp is None or env[kp.kslot] is None or env[kp.kslot] < FAR_K else \
                tuple((v, env[v]) for v in kp.loopvars if env[v] is not None)
            # each step keeps the step after it once looked up (futures walk the same chains over and over)
            prev = entry = None
            for _ in range(horizon):
                if entry is None:
                    entry = steps.get((c, pc, env, m))
                    if entry is None:
                        entry = self._future_step(c, pc, env, m)
                    if prev is not None:
                        prev[3] = entry
                added, nxt, how, after = entry
                ops.extend(added)
                if how is _GOES:
                    pc, env = nxt
                    prev, entry = entry, after
                    if counters and any(env[v] is not None and env[v] - x > self.crossings for v, x in counters):
                        break  # --every, K far: no further than the plan's NEAR allows (cut: not exhaustive)
                    continue
                exhaustive = how is _ENDS
                break
        except (EvalError, ArithmeticError):
            exhaustive = False
        if exhaustive:
            ops.append(("end", self.classes[c].cta))
        out = (tuple(ops), exhaustive)
        self.future_cache[key] = out
        return out

    def _stepped(self, key: tuple, ops: list, nxt: tuple | None, how: int) -> list:
        hit = self.step_cache[key] = [tuple(ops), nxt, how, None]  # the last: the step at nxt, once linked
        return hit

    def _future_step(self, c: int, pc: int, env: tuple, m: int) -> list:
        """One statement of a future, kept per place (futures from nearby places share all but their first
        statements): the operations it adds, where the group settles next, and whether the future goes on
        (`_GOES`), ends with the thread (`_ENDS`), stops short (`_STOPS`) or cannot be followed (`_FAILS`)."""
        key = (c, pc, env, m)
        model = self
        code = model.code[c]
        cta = model.classes[c].cta
        lay = model.layout
        ops: list[tuple] = []
        try:
            ins = code[pc]
            op = ins.op
            env2 = env
            skip = 1
            if op is END:
                return self._stepped(key, ops, None, _ENDS)
            if op is WAIT:
                ops.append(("wait", ins.a(env, cta), ins.b(env) & 1))
            elif op is ARRIVE or op is ARRIVE_DROP:
                tx = ins.c(env) if op is ARRIVE and ins.c is not None else 0
                n = ins.b(env)
                # plain single arrivals left out of the double-arrive record: they commute (por "u")
                unit = ins.once and n == 1 and tx == 0 and ins.e is None
                ops.append(("arrive", ins.a(env, cta), n * m, tx * m, unit))
                if ins.e is not None:  # the token it writes is the barrier's phase when it runs: the future ends
                    return self._stepped(key, ops, None, _STOPS)
            elif op is EXPECT_TX or op is COMPLETE_TX:
                ops.append(("tx", ins.a(env, cta)))
            elif op is TMA_LOAD:
                places = lay.load_targets(ins.a(env, cta), ins.d(env, cta), ins.e(env) if ins.e is not None else None)
                ops.append(("load", tuple((b, g, b // lay.nbuf) for b, g in places), ins.c(env), m))
            elif op is CP_ASYNC:
                ops.append(("cpasync", ins.a(env, cta), c))
                env2 = env[:ins.d] + (env[ins.d] + 1,) + env[ins.d + 1:]
            elif op is CP_ASYNC_ARRIVE:
                ops.append(("late_arrive", (ins.a(env, cta),), m))
            elif op is READ:
                ops.append(("read", ins.a(env, cta)))
            elif op is WRITE:
                ops.append(("write", ins.a(env, cta), ins.b(env)))
            elif op is FENCE_PROXY:
                ops.append(("fence", c))
            elif op is TMA_STORE:
                ops.append(("store", ins.a(env, cta), c))
            elif op is COMMIT_GROUP:
                ops.append(("commit", c))
                env2 = env[:ins.b] + (env[ins.b] + 1,) + env[ins.b + 1:]
            elif op is WAIT_GROUP:
                ops.append(("wgroup", c, env[ins.b] - ins.a(env), ins.c))
            elif op is MMA:
                u = model.mma_unit[c]
                seq = env[ins.b]
                outs = tuple(r(env, cta) for r, _ in ins.c)
                ops.append(("join", u, seq, tuple(r(env, cta) for r, _ in ins.a), m, outs))
                env2 = env[:ins.b] + (seq + 1,) + env[ins.b + 1:]
            elif op is MMA_WAIT:
                ops.append(("mwait", model.mma_unit[c], env[ins.b] - ins.a(env)))
            elif op is MMA_COMMIT:
                gid = ins.a(env, cta)
                bars = (gid,)
                if ins.e is not None:
                    bars = tuple(lay.bar_in(k, gid) for k in lay.ctas(ins.e(env)))
                ops.append(("late_arrive", bars, 1))
            elif op is COLL or op is COLL_WAIT:
                k, n = model.coll_key(c, ins, env)
                if op is COLL:
                    ops.append(("coll", k, m, n, c))
                    skip = 2
                ops.append(("cwait", k, n))
            elif op is BAR_ARRIVE:
                ops.append(("coll", ("b", cta, ins.b(env)), m, ins.c(env), c))
            elif op is INIT or op is INVAL:
                ops.append(("init", ins.a(env, cta), c))
            elif op is FENCE_INIT:
                ops.append(("finit", c))
            elif op is T5_BEFORE or op is T5_AFTER or op is TMEM_RELINQUISH:
                ops.append(("t5", c))  # the class's own ordering flags (model/tcgen05.py)
            elif op is TMEM_ALLOC or op is TMEM_DEALLOC:
                ops.append(("tmem", cta))
            elif op is TRAP:  # the thread (and the kernel) ends here
                ops.append(("trap", c))
                return self._stepped(key, ops, None, _ENDS)
            elif op is PROBE:  # what follows depends on the barrier's state: the future ends here
                ops.append(("probe", ins.a(env, cta)))
                return self._stepped(key, ops, None, _STOPS)
            else:
                return self._stepped(key, ops, None, _STOPS)
            nxt = model.settle(c, pc + skip, env2)
            if len(nxt) != 1:
                return self._stepped(key, ops, None, _STOPS)
            return self._stepped(key, ops, nxt[0], _GOES)
        except (EvalError, ArithmeticError):
            return self._stepped(key, ops, None, _FAILS)

    # ------------------------------------------------------------ the interface
    def initial(self, k: int | None = None) -> State:
        """The start; with --every, `k` is the value of the loop bound every thread reads (FAR_K: far)."""
        locs = []
        for cl in self.classes:
            env = [None] * cl.program.nslots
            if self.kplans is not None:
                env[self.kplans[cl.id].kslot] = FAR_K if k is None else k
            for ins in cl.program.instrs:  # hidden counters start at 0
                if ins.op in (MMA, MMA_WAIT, MMA_COMMIT, COMMIT_GROUP, WAIT_GROUP, CP_ASYNC, CP_ASYNC_ARRIVE):
                    env[ins.args[-1]] = 0
            starts = self.settle(cl.id, 0, tuple(env))
            # a `choose` before the first visible statement: the class starts unsettled and its first step chooses
            start = starts[0] if len(starts) == 1 else (0, tuple(env))
            locs.append(((start, cl.size),))
        bars = []
        for cta in range(self.layout.ncta):
            for b in self.kernel.barriers:
                for _ in range(b.size):
                    bars.append(None if b.noinit else S.init(b.count_in(cta)))
        bufs = (EMPTY,) * (self.layout.nbuf * self.layout.ncta)
        mmas = ((0, (), ()),) * self.nunits
        return State(tuple(locs), tuple(bars), bufs, (), (), mmas, (), (), (), (), (False,) * self.layout.ncta, None)

    def successors(self, s: State) -> list[tuple[Action, State, tuple[Finding, ...]]]:
        return [x for _, moves in self.lazy_successors(s) for x in (moves() if callable(moves) else moves)]

    def lazy_successors(self, s: State) -> list[tuple[Action, Any]]:
        """The successors as `successors` lists them, per thread group and asynchronous event that can move:
        (its first action, its moves), the moves a list or a function that makes the list, so that a reduction
        builds only those it keeps. Made when asked: the events, and a group's arrival at a collective
        (always possible, and the dearest move to make: it may release every waiter)."""
        if s.halted is not None:
            return []
        out: list = []
        for c, groups in enumerate(s.locs):
            code = self.code[c]
            for gi, ((pc, env), m) in enumerate(groups):
                ins = code[pc]
                op = ins.op
                if op is END or op is COLL_WAIT:
                    continue
                try:
                    if (op is COLL or op is BAR_ARRIVE) and (c, pc) not in self.partners \
                            and self.meeting(s, c, gi) is None:
                        self.coll_of(c, ins, env)  # its errors now, as making the move would raise them
                        out.append((("t", c, gi, 0), partial(self.group_successors, s, c, gi)))
                        continue
                    moves: list = []
                    self._group_moves(s, c, gi, pc, env, m, ins, moves)
                except ArithmeticError as e:  # ir.ValueFault: division by zero, a shift out of range
                    raise EvalError(str(e) or "division by zero", ins.site) from None
                if moves:
                    out.append((moves[0][0], moves))
        out.extend((action, partial(_listed, make, s, i)) for action, make, i in self._ready_events(s))
        return out

    def _ready_events(self, s: State) -> list[tuple[Action, Callable[[State, int], tuple], int]]:
        """The asynchronous events and CTA exits that can happen in s, in `lazy_successors`' order: (action, the
        call that makes its one move from s and the index, the index) of each landing (one of copies alike), MMA,
        bulk store's step, commit's arrival and exit."""
        ev = self.events
        out: list = []
        prev = None
        for i, fl in enumerate(s.flight):
            if fl != prev:
                out.append((("l", i), ev.land, i))
            prev = fl
        for u, (done, _, inflight) in enumerate(s.mmas):
            if inflight and inflight[0][0] == done:
                out.append((("m", u), ev.mma_done, u))
        for i in range(len(s.stores)):
            if ev.store_ready(s, i):
                out.append((("s", i), ev.store_step, i))
        for i, k in enumerate(s.commits):
            if ev.commit_ready(s, k):
                out.append((("k", i), ev.commit_fire, i))
        for cta, gone in enumerate(s.exited):
            if not gone and self.cta_done(s, cta):
                out.append((("x", cta), ev.exit, cta))
        return out

    def probe_schedules(self) -> tuple[Callable[[State], tuple | None], ...]:
        """The schedules `explore`'s probe follows (search/explore.py `_probe`), each as the one move it makes in a
        state ((action, state after, findings), None where nothing can move), made alone: `late_move`, where
        asynchronous work completes as late as the threads let it, then `early_move`, where it completes at once.
        Between them they show most missing waits: a thread that reads before its wait (late), and asynchronous
        work that overtakes a thread still using its buffer (early)."""
        return self.late_move, self.early_move

    def late_move(self, s: State) -> tuple | None:
        """The first thread group's move (in `lazy_successors`' order), else a CTA's exit, else an asynchronous
        event (a landing, an MMA or a commit's arrival before a bulk store's step: a store reads its buffer last of
        all): threads run as far as they can before any asynchronous work completes, and a CTA exits as soon as its
        threads have ended."""
        if s.halted is not None:
            return None
        return self._thread_move(s) or self._event_move(s, ("x",), ("l", "m", "k"), ("s",))

    def early_move(self, s: State) -> tuple | None:
        """An asynchronous event (as `late_move` orders them), else the first thread group's move, else a CTA's
        exit."""
        if s.halted is not None:
            return None
        return self._event_move(s, ("l", "m", "k"), ("s",)) or self._thread_move(s) or self._event_move(s, ("x",))

    def _thread_move(self, s: State) -> tuple | None:
        for c, groups in enumerate(s.locs):
            for gi in range(len(groups)):
                moves = self.group_successors(s, c, gi)
                if moves:
                    return moves[0]
        return None

    def _event_move(self, s: State, *order: tuple[str, ...]) -> tuple | None:
        """The move of the first event of s (`_ready_events`) of the first kinds in `order` that has one."""
        ready = self._ready_events(s)
        for kinds in order:
            for action, make, i in ready:
                if action[0] in kinds:
                    return make(s, i)
        return None

    def step(self, s: State, action: Action) -> tuple[State, tuple[Finding, ...]]:
        if action[0] == "c":  # a group's private run taken as one move (search/chains.py): its steps in turn
            done = self.steps(s, action)
            return done[-1][1], tuple(f for _, _, fs in done for f in fs)
        for a, t, f in self._moves(s, action):
            if a == action:
                return t, f
        raise KeyError(f"action {action} is not enabled")

    def steps(self, s: State, action: Action) -> list[tuple[Action, State, tuple[Finding, ...]]]:
        """One move as [(action, state after, findings)]: a run's steps one by one (a witness shows each)."""
        out = []
        for sub in action[1] if action[0] == "c" else (action,):
            s, f = self.step(s, sub)
            out.append((sub, s, f))
        return out

    def statement(self, c: int, pc: int, env: tuple, m: int) -> tuple | None:
        """The future operations (descriptions, as `future` lists them) of the one statement a group of m threads
        of class c runs at a settled place, or None where it cannot be followed."""
        entry = self.step_cache.get((c, pc, env, m)) or self._future_step(c, pc, env, m)
        return None if entry[2] is _FAILS else entry[0]

    def group_successors(self, s: State, c: int, gi: int) -> list:
        """The successors of s that are moves of group gi of class c (none where it has ended or waits at a
        collective)."""
        if c >= len(s.locs) or gi >= len(s.locs[c]):
            return []
        (pc, env), m = s.locs[c][gi]
        ins = self.code[c][pc]
        out: list = []
        if ins.op is END or ins.op is COLL_WAIT:
            return out
        try:
            self._group_moves(s, c, gi, pc, env, m, ins, out)
        except ArithmeticError as e:  # as in successors
            raise EvalError(str(e) or "division by zero", ins.site) from None
        return out

    def _moves(self, s: State, action: Action) -> list:
        """The successors of s that `action` may be, as `successors` makes them: those of its thread group or
        its event alone (a witness is replayed step by step, and a state has tens of moves)."""
        if s.halted is not None:
            return []
        kind = action[0]
        ev = self.events
        if kind == "t":
            return self.group_successors(s, action[1], action[2])
        i = action[1]
        if kind == "l":
            ok = i < len(s.flight) and (i == 0 or s.flight[i] != s.flight[i - 1])
            return [ev.land(s, i)] if ok else []
        if kind == "m":
            ok = i < len(s.mmas) and bool(s.mmas[i][2]) and s.mmas[i][2][0][0] == s.mmas[i][0]
            return [ev.mma_done(s, i)] if ok else []
        if kind == "s":
            return [ev.store_step(s, i)] if i < len(s.stores) and ev.store_ready(s, i) else []
        if kind == "k":
            return [ev.commit_fire(s, i)] if i < len(s.commits) and ev.commit_ready(s, s.commits[i]) else []
        if kind == "x":
            return [ev.exit(s, i)] if i < len(s.exited) and not s.exited[i] and self.cta_done(s, i) else []
        return self.successors(s)

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
        # a barrier no blocked thread will ever arrive on is a root cause: name its waiters first
        providers: set = set()
        for c, pc, env, m in blocked:
            for d in self.future(c, pc, env, m)[0]:
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
                        out.append(self.hazards.phase_alias(s, c, ins, env, gid, off, passing=False))
            elif ins.op is COLL_WAIT:
                root = 2
            entries.append((root, c, pc, self.describe_block(s, c, pc, env)))
        entries.sort(key=lambda e: (e[0], e[1]))
        parts = self._group_blocked(s, entries)
        msg = "; ".join(parts[:3])
        if len(parts) > 3:
            msg += f"; and {len(parts) - 3} more blocked"
        c0, pc0 = entries[0][1], entries[0][2]
        out.insert(0, Finding("hang", msg, self.code[c0][pc0].site, c0, tuple(dict.fromkeys(bar_ids))))
        return tuple(out)

    def _group_blocked(self, s: State, entries: list) -> list[str]:
        """Name a whole role instance when all its unfinished threads are stuck the same way, whole warps by
        their range, and instances stuck alike together: `consumer[0..1] warps 1-3 wait on ...`."""
        by_text: dict[str, list[int]] = {}
        for _, c, _, text in entries:
            by_text.setdefault(text, []).append(c)
        parts = []
        seen: set[str] = set()
        for _, c, _, text in entries:
            if text in seen:
                continue
            seen.add(text)
            stuck = set(by_text[text])
            units: dict[str, list[int]] = {}
            for k in by_text[text]:
                units.setdefault(self.classes[k].unit, []).append(k)
            groups = []
            for unit, ks in units.items():
                unfinished = {j for j, cl in enumerate(self.classes) if cl.unit == unit and not self.class_done(s, j)}
                members = frozenset(t for k in dict.fromkeys(ks) for t in self.classes[k].members)
                groups.append((self.classes[ks[0]], members, unfinished <= stuck))
            names = compact_names(groups)
            who = join_words(names)
            several = len(names) > 1 or any(x in names[0].split(" ")[0] for x in ("..", ",")) \
                or any(f" {w} " in f"{names[0]} " for w in ("lanes", "threads", "warps"))
            verb = _plural(text) if several else text
            parts.append(f"{who} {verb}")
        return parts

    # ------------------------------------------------------------ descriptions
    def describe_block(self, s: State, c: int, pc: int, env: tuple) -> str:
        ins = self.code[c][pc]
        cl = self.classes[c]
        if ins.op is WAIT:
            gid = ins.a(env, cl.cta)
            if s.bars[gid] is None:
                return f"waits on {self.layout.bar_names[gid]}, which is not initialised"
            return f"waits on {self.layout.bar_names[gid]} parity {ins.b(env) & 1} forever"
        if ins.op is COLL_WAIT:
            key, n = self.coll_key(c, ins, env)
            arrived = next((a for k, a, _ in s.colls if k == key), 0)
            return f"waits at {ins.text or ins.a} for {n - arrived} more thread(s) that never come"
        if ins.op is MMA_WAIT:
            return "waits for its mma_async groups, which can never complete"
        if ins.op is WAIT_GROUP:
            return "waits for its bulk stores, which can never complete"
        return f"is stuck at '{ins.text}'"

    def class_done(self, s: State, c: int) -> bool:
        code = self.code[c]
        return all(code[pc].op is END for (pc, _), _ in s.locs[c])

    def cta_done(self, s: State, cta: int) -> bool:
        return all(self.class_done(s, c) for c in self.cta_classes[cta])

    def _bar_name(self, gid: int) -> str:
        return self.layout.bar_names[gid]

    def _buf_name(self, gid: int) -> str:
        return self.layout.buf_names[gid]

    # ------------------------------------------------------------ moving groups
    def _emit(self, out: list, s: State, c: int, gi: int, pc: int, env: tuple, m: int, findings: list,
              **changes) -> None:
        """Append one successor per outcome of moving group gi of class c to pc (after its local steps)."""
        base = s._replace(**changes) if changes else s
        groups = s.locs[c]
        for k, loc in enumerate(self.settle(c, pc, env)):
            moved = regroup(groups, gi, loc, m)
            out.append((("t", c, gi, k), base._replace(locs=s.locs[:c] + (moved,) + s.locs[c + 1:]), tuple(findings)))

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
            findings = self.hazards.barrier_use(s, c, gid, ins.site, "waits on")
            if ins.c is not None:
                off = S.alias(b, ins.c(env))
                if off:
                    findings.append(self.hazards.phase_alias(s, c, ins, env, gid, off, passing=True))
            if self.t5.passes_barrier(s, gid, c):
                self._emit(out, s, c, gi, pc + 1, env, m, findings, t5=self.t5.passed(s.t5, (c,)))
            else:
                self._emit(out, s, c, gi, pc + 1, env, m, findings)
        elif op is TRAP:  # the kernel stops with an error: nothing after it runs (the search goes no further)
            what = self.sites[ins.site].text if 0 <= ins.site < len(self.sites) else "a trap"
            finding = Finding("trap", f"{self.hazards.labels[c]} reaches {what}: the kernel stops with an error",
                              ins.site, c)
            self._emit(out, s, c, gi, len(self.code[c]) - 1, env, m, [finding])
        elif op is PROBE:  # try_wait / test_wait as a test: the register holds whether the phase has completed
            gid = ins.a(env, cta)
            b = s.bars[gid]
            done = int(b is not None and S.wait_passes(b, ins.b(env)))
            findings = self.hazards.barrier_use(s, c, gid, ins.site, "tests")
            self._emit(out, s, c, gi, pc + 1, env[:ins.c] + (done,) + env[ins.c + 1:], m, findings)
        elif op is ARRIVE or op is EXPECT_TX or op is COMPLETE_TX or op is ARRIVE_DROP:
            self._barrier_op(s, c, gi, pc, env, m, ins, out)
        elif op is TMA_LOAD:
            buf, tag, nbytes, bar = ins.a(env, cta), ins.b(env), ins.c(env), ins.d(env, cta)
            mask = ins.e(env) if ins.e is not None else None
            places = self.layout.load_targets(buf, bar, mask)  # 2-SM loads: another CTA's buffer or barrier
            if not places:
                raise EvalError(f"multicast mask {mask:#x} names no CTA of the cluster", ins.site)
            findings = []
            new = []
            for lb, gid in places:
                use = self.hazards.barrier_use(s, c, gid, ins.site, "issues a TMA load completing on")
                findings += use + self.hazards.async_init_visible(s, c, gid, ins.site, use)
                new += [(lb, tag, nbytes, gid, ins.site, c, -1)] * m
            self._emit(out, s, c, gi, pc + 1, env, m, findings, flight=tuple(sorted(s.flight + tuple(new))))
        elif op is CP_ASYNC:
            buf, tag, seq = ins.a(env, cta), ins.b(env), env[ins.d]
            new = ((buf, tag, 0, -1, ins.site, c, seq),)
            env2 = env[:ins.d] + (seq + 1,) + env[ins.d + 1:]
            self._emit(out, s, c, gi, pc + 1, env2, m, [], flight=tuple(sorted(s.flight + new)))
        elif op is CP_ASYNC_ARRIVE:
            gid = ins.a(env, cta)
            k = ("cp", c, env[ins.d], (gid,), ins.site, c, (c, ("cp", env[ins.d])), m)
            self._emit(out, s, c, gi, pc + 1, env, m, [], commits=tuple(sorted(s.commits + (k,))))
        elif op is READ:
            buf = ins.a(env, cta)
            findings = self.hazards.read_hazards(s, c, ins.site, buf, ins.b(env), "reads")
            if self.t5.is_tmem(buf):  # tcgen05.ld
                f, t5 = self.t5.work(s, c, ins.site, f"reads {self._buf_name(buf)} (tcgen05.ld)")
                findings = findings + f + self.t5.use_after_free(s, c, buf, ins.site, "reads")
                self._emit(out, s, c, gi, pc + 1, env, m, findings, t5=t5)
            else:
                self._emit(out, s, c, gi, pc + 1, env, m, findings)
        elif op is WRITE:
            buf, tag = ins.a(env, cta), ins.b(env)
            findings = self.hazards.write_hazards(s, c, ins.site, buf, f"{self.classes[c].label} writes", landing=False)
            dirty = tuple(sorted(set(s.dirty) - {(buf, c, True)} | {(buf, c, False)}))
            t5 = s.t5
            if self.t5.is_tmem(buf):  # tcgen05.st
                f, t5 = self.t5.work(s, c, ins.site, f"writes {self._buf_name(buf)} (tcgen05.st)")
                findings = findings + f + self.t5.use_after_free(s, c, buf, ins.site, "writes")
            self._emit(out, s, c, gi, pc + 1, env, m, findings, bufs=self.hazards.retag(s.bufs, buf, tag), dirty=dirty,
                       t5=t5)
        elif op is FENCE_PROXY:
            dirty = tuple(d for d in s.dirty if not (d[1] == c and not d[2]))
            # fence.proxy.async also orders this thread's barrier inits before later async-proxy operations
            self._emit(out, s, c, gi, pc + 1, env, m, [], dirty=dirty, vis=self._fence_inits(s, c))
        elif op is TMA_STORE:
            self._store_issue(s, c, gi, pc, env, m, ins, out)
        elif op is COMMIT_GROUP:
            n = env[ins.b]
            stores = tuple(sorted((cl, n, b, t, st, si) if cl == c and seq == -1 else (cl, seq, b, t, st, si)
                                  for cl, seq, b, t, st, si in s.stores))
            env2 = env[:ins.b] + (n + 1,) + env[ins.b + 1:]
            self._emit(out, s, c, gi, pc + 1, env2, m, [], stores=stores)
        elif op is WAIT_GROUP:
            limit = env[ins.b] - ins.a(env)
            if any(cl == c and 0 <= seq < limit and (stage == 0 or not ins.c)
                   for cl, seq, b, t, stage, si in s.stores):
                return
            self._emit(out, s, c, gi, pc + 1, env, m, [])
        elif op is MMA:
            self._mma_issue(s, c, gi, pc, env, m, ins, out)
        elif op is MMA_WAIT:
            if s.mmas[self.mma_unit[c]][0] >= env[ins.b] - ins.a(env):
                self._emit(out, s, c, gi, pc + 1, env, m, [])
        elif op is MMA_COMMIT:
            gid = ins.a(env, cta)
            bars = (gid,)
            if ins.e is not None:
                bars = tuple(self.layout.bar_in(k, gid) for k in self.layout.ctas(ins.e(env)))
            who = (c, ins.d(env) if ins.d is not None else ("commit", env[ins.b]))
            k = ("mma", self.mma_unit[c], env[ins.b], bars, ins.site, c, who, 1)
            self._emit(out, s, c, gi, pc + 1, env, m, [], commits=tuple(sorted(s.commits + (k,))))
        elif op is INIT:
            gid, count = ins.a(env, cta), ins.b(env)
            findings = []
            if s.bars[gid] is not None:
                b = s.bars[gid]
                # only arrivals (or tx) already counted in the open phase are lost; a fresh phase loses nothing yet
                lost = ("its pending arrivals are silently dropped (H200 mbar 16)" if b.pending < b.expected or b.tx
                        else "it resets to phase 0, so a waiter on the parity of its later phases waits on the wrong "
                             "phase (H200 mbar 16: a re-init is silent)" if b.phase
                        else "it must be invalidated (inval) before it is initialised again")
                findings.append(Finding("uninit-barrier", f"{self.classes[c].label} re-initialises {self._bar_name(gid)} "
                                        f"while it is live: {lost}", ins.site, c, (gid,)))
            if not 1 <= count <= S.MAX_COUNT:
                raise EvalError(f"init count {count} is outside 1..{S.MAX_COUNT}", ins.site)
            bars = s.bars[:gid] + (S.init(count),) + s.bars[gid + 1:]
            vis = tuple(sorted([v for v in s.vis if v[0] != gid] + [(gid, c, 0)]))
            self._emit(out, s, c, gi, pc + 1, env, m, findings, bars=bars, vis=vis)
        elif op is INVAL:
            gid = ins.a(env, cta)
            bars = s.bars[:gid] + (None,) + s.bars[gid + 1:]
            vis = tuple(v for v in s.vis if v[0] != gid)
            self._emit(out, s, c, gi, pc + 1, env, m, [], bars=bars, vis=vis)
        elif op is FENCE_INIT:
            self._emit(out, s, c, gi, pc + 1, env, m, [], vis=self._fence_inits(s, c))
        elif op is T5_BEFORE or op is T5_AFTER:
            self._emit(out, s, c, gi, pc + 1, env, m, [], t5=self.t5.fence(s, c, before=op is T5_BEFORE))
        elif op is TMEM_ALLOC or op is TMEM_DEALLOC:
            findings, t5 = self.t5.work(s, c, ins.site, "allocates tensor memory" if op is TMEM_ALLOC
                                        else "deallocates tensor memory", asynchronous=False)
            if op is TMEM_ALLOC:
                t5 = self.t5.alloc(s._replace(t5=t5), cta)
            else:
                f, t5 = self.t5.dealloc(s._replace(t5=t5), c, cta, ins.site)
                findings += f
            self._emit(out, s, c, gi, pc + 1, env, m, findings, t5=t5)
        elif op is TMEM_RELINQUISH:  # the CTA allocates no more: orders nothing the model tracks
            self._emit(out, s, c, gi, pc + 1, env, m, [])
        elif op is COLL or op is BAR_ARRIVE:
            key, n = self.coll_of(c, ins, env)
            self._coll_count(s, c, gi, pc, env, m, ins, out, key, n, blocking=op is COLL)
        else:
            raise EvalError(f"'{op}' is not supported by this version of the model", ins.site)

    @staticmethod
    def _fence_inits(s: State, c: int) -> tuple:
        """fence_barrier_init or fence_proxy_async by class c: its unfenced inits are fenced (visibility state 1)."""
        if not s.vis:
            return s.vis
        return tuple(sorted((g, cl, 1 if cl == c and st == 0 else st) for g, cl, st in s.vis))

    @staticmethod
    def group_at(s: State, c: int, pc: int) -> int | None:
        """The index of class c's group standing at pc, or None (lanes at one statement are one group)."""
        return next((j for j, ((p, _), _) in enumerate(s.locs[c]) if p == pc), None)

    def _group_moves(self, s: State, c: int, gi: int, pc: int, env: tuple, m: int, ins: CInstr, out: list) -> None:
        """The moves of group gi of class c (at pc, not ended or waiting at a collective)."""
        if (c, pc) in self.partners:
            self._together(s, c, gi, pc, out)
            return
        members = self.meeting(s, c, gi) if ins.op is COLL else None  # (a meeting is a collective)
        if members is None:
            self._thread(s, c, gi, pc, env, m, ins, out)
        elif members[0] == (c, gi):  # the first member moves them all; the others have no move of their own
            self._compose(s, c, gi, [(mc, s.locs[mc][gj][0][0]) for mc, gj in members], out)

    def meeting(self, s: State, c: int, gi: int) -> tuple[tuple[int, int], ...] | None:
        """The groups (class, group) that make up a warp meeting with group gi of class c, first the one whose
        move it is, when every lane the meeting still waits for stands at it; else None (also where the group is
        not at a warp meeting, or meetings are off: `meetings`).

        Then their arrivals are one move: an arrival before the last changes only what its warp alone reads (the
        meeting's count, where its own lanes stand: they wait there for the rest), so it commutes with every move
        of every other thread and is never disabled; any schedule is the same as one where the warp's arrivals
        come together, at the last of them. Only where no lane of them has writes or barrier inits that a sync
        would publish (`dirty`, `vis`): those records are read by other threads' moves."""
        if not self.meetings or len(self.warp_mates[c]) < 2:
            return None
        (pc, env), _ = s.locs[c][gi]
        ins = self.code[c][pc]
        if ins.op is not COLL or ins.a not in WARP_MEETINGS:
            return None
        key, n = self.coll_key(c, ins, env)
        arrived = next((a for k, a, _ in s.colls if k == key), 0)
        members = []
        total = arrived
        for mc in self.warp_mates[c]:
            code = self.code[mc]
            for gj, ((mpc, menv), mm) in enumerate(s.locs[mc]):
                mi = code[mpc]
                if mi.op is COLL and mi.a == ins.a and self.coll_key(mc, mi, menv)[0] == key:
                    members.append((mc, gj))
                    total += mm
        if total != n or len(members) < 2:
            return None
        classes = {mc for mc, _ in members}
        if any(cl in classes and not sy for _, cl, sy in s.dirty) or any(cl in classes and _fenced(st)
                                                                       for _, cl, st in s.vis):
            return None
        members.sort()
        return tuple(members)

    def _together(self, s: State, c: int, gi: int, pc: int, out: list) -> None:
        """--lockstep: the lowest class of a warp's converged set runs the statement for all of them at once."""
        members = self.partners[(c, pc)]
        if members[0][0] != c:
            return
        places = []
        for mc, mpc in members:
            gj = self.group_at(s, mc, mpc)
            if gj is None:
                return  # a lane of this warp has not reached the statement yet: wait for it
            places.append((mc, mpc))
        self._compose(s, c, gi, places, out)

    def _compose(self, s: State, c: int, gi: int, places: list[tuple[int, int]], out: list) -> None:
        """The statements of several groups (class, place) run one after another as the move of group gi of class c
        (a lockstep warp's statement, a warp meeting); none when one of them is blocked."""
        states: list[tuple[State, tuple]] = [(s, ())]
        for mc, mpc in places:
            nxt: list[tuple[State, tuple]] = []
            for cur, found in states:
                gj = self.group_at(cur, mc, mpc)
                if gj is None:
                    continue
                (_, env), m = cur.locs[mc][gj]
                step: list = []
                self._thread(cur, mc, gj, mpc, env, m, self.code[mc][mpc], step)
                nxt.extend((t, found + f) for _, t, f in step)
            states = nxt
            if not states:
                return  # blocked for one of them: blocked for all
        for k, (t, found) in enumerate(states):
            out.append((("t", c, gi, k), t, found))

    def _barrier_op(self, s: State, c: int, gi: int, pc: int, env: tuple, m: int, ins: CInstr, out: list) -> None:
        op = ins.op
        gid = ins.a(env, self.classes[c].cta)
        n = ins.b(env)
        tx = ins.c(env) if op is ARRIVE and ins.c is not None else 0
        what = {ARRIVE: "arrives on", EXPECT_TX: "expects tx on", COMPLETE_TX: "completes tx on",
                ARRIVE_DROP: "arrive_drops on"}[op]
        findings = self.hazards.barrier_use(s, c, gid, ins.site, what)
        t5 = s.t5
        if op is ARRIVE or op is ARRIVE_DROP:  # an mbarrier arrival is a thread sync (tcgen05 ordering)
            f, t5 = self.t5.sync(s, c, ins.site, f"{what} {self._bar_name(gid)}", gid)
            findings += f
        if s.exited[gid // self.layout.nbar]:
            self._emit(out, s, c, gi, pc + 1, env, m, findings, t5=t5)  # the arrival goes nowhere
            return
        bars = list(s.bars)
        halted = None
        who = None if ins.once else (c, ins.d(env) if ins.d is not None else None)
        recorded = -1  # the phase in which this class's arrival was recorded: its other threads are not doubles
        tokens: list[int] = []  # with a token register: each thread's token, the parity of the phase it arrived in
        for i in range(m):
            events: list[str] = []
            before = bars[gid]
            if ins.e is not None:
                tokens.append(before.phase & 1 if before is not None else 0)
            first = before is None or before.phase != recorded
            if before is not None:
                recorded = before.phase
            if op is ARRIVE:
                bars[gid] = S.arrive(before, n, who, events, tx, first)
            elif op is EXPECT_TX:
                bars[gid] = S.expect_tx(before, n, events)
            elif op is COMPLETE_TX:
                bars[gid] = S.complete_tx(before, n, events)
            else:
                bars[gid] = S.arrive_drop(before, n, who, events, first)
            f, h = self.hazards.barrier_events(events, c, ins.site, gid, before, n)
            findings.extend(f)
            if h:
                halted = h
                break
            left = m - 1 - i
            b = bars[gid]
            if left and op is ARRIVE and not tx and b is not None and b.phase == recorded and b.pending > left * n:
                # the class's other threads: plain arrivals of this phase (not recorded again) that neither
                # complete it nor fault, so each only lowers the pending count, as S.arrive would one by one
                bars[gid] = b._replace(pending=b.pending - left * n)
                tokens += tokens[-1:] * left
                break
        if ins.e is None or not tokens:
            self._emit(out, s, c, gi, pc + 1, env, m, findings, bars=tuple(bars), halted=halted, t5=t5)
        else:
            self._token_emit(out, s, c, gi, pc + 1, env, ins.e, tokens, m, findings,
                             bars=tuple(bars), halted=halted, t5=t5)

    def _token_emit(self, out: list, s: State, c: int, gi: int, pc: int, env: tuple, slot: int, tokens: list[int],
                    m: int, findings: list, **changes) -> None:
        """Move group gi past an arrive that wrote each thread's phase token (PTX `mbarrier.arrive` with a state
        destination: the phase the arrival landed in, H200 benchmarks/hw/probe_phase_token.cu): threads whose
        tokens differ (an arrival landed in the next phase) go on as two groups."""
        if len(set(tokens)) == 1 or len(tokens) < m:  # (a halted barrier: the kernel stops, one group will do)
            self._emit(out, s, c, gi, pc, env[:slot] + (tokens[0],) + env[slot + 1:], m, findings, **changes)
            return
        base = s._replace(**changes)
        rest = s.locs[c][:gi] + s.locs[c][gi + 1:]
        parts = [(self.settle(c, pc, env[:slot] + (t,) + env[slot + 1:]), tokens.count(t)) for t in sorted(set(tokens))]
        for k, (la, lb) in enumerate((a, b) for a in parts[0][0] for b in parts[1][0]):
            groups = merge_groups(list(rest) + [(la, parts[0][1]), (lb, parts[1][1])])
            out.append((("t", c, gi, k), base._replace(locs=s.locs[:c] + (groups,) + s.locs[c + 1:]), tuple(findings)))

    def _store_issue(self, s: State, c: int, gi: int, pc: int, env: tuple, m: int, ins: CInstr, out: list) -> None:
        buf = ins.a(env, self.classes[c].cta)
        tag = ins.b(env) if ins.b is not None else s.bufs[buf]
        who = self.classes[c].label
        findings = []
        if ins.b is not None and s.bufs[buf] != tag:
            holds = "nothing" if s.bufs[buf] == EMPTY else f"tile {s.bufs[buf]}"
            findings.append(Finding("stale-read", f"{who}'s TMA store of tile {tag} reads {self._buf_name(buf)}, which "
                                    f"holds {holds}: the store is not ordered after the writes of its tile", ins.site, c))
        span = (buf,) + self.layout.overlaps[buf]
        writers = sorted({cl for b, cl, _ in s.dirty if b in span})
        if writers:
            names = ", ".join(self.classes[w].label for w in writers)
            findings.append(Finding("missing-proxy-fence", f"{who}'s TMA store reads {self._buf_name(buf)}, written by "
                                    f"{names} with ordinary stores that no fence_proxy_async made visible to the async "
                                    "proxy before the sync", ins.site, c))
        dirty = tuple(d for d in s.dirty if d[0] not in span)
        stores = tuple(sorted(s.stores + ((c, -1, buf, tag, 0, ins.site),)))
        self._emit(out, s, c, gi, pc + 1, env, m, findings, stores=stores, dirty=dirty)

    def _mma_issue(self, s: State, c: int, gi: int, pc: int, env: tuple, m: int, ins: CInstr, out: list) -> None:
        """wgmma: the group forms once the whole warpgroup issued it; tcgen05.mma: at once."""
        u = self.mma_unit[c]
        cta = self.classes[c].cta
        seq = env[ins.b]
        ops = tuple((r(env, cta), t(env) if t is not None else None) for r, t in ins.a)
        # the accumulators it writes when it completes: (buffer, tile) pairs, both CTAs' halves with cta_group 2
        result = tuple((r(env, cta), t(env) if t is not None else None) for r, t in ins.c)
        done, forming, inflight = s.mmas[u]
        joined = m
        rest = []
        for f in forming:
            if f[0] == seq:
                joined += f[1]
            else:
                rest.append(f)
        findings: list[Finding] = []
        t5 = s.t5
        if not self.wgmma:  # tcgen05.mma
            findings, t5 = self.t5.work(s, c, ins.site, "issues an mma_async (tcgen05.mma)")
            for buf, _ in result:
                findings += self.t5.use_after_free(s, c, buf, ins.site, "issues an mma_async into")
        if joined >= self.unit_size[u]:
            for buf, tag in ops:
                findings.extend(self.hazards.read_hazards(s, c, ins.site, buf, tag, "reads",
                                                   f"the mma_async of {self.unit_label[u]}"))
            inflight = tuple(sorted(inflight + ((seq, ops, ins.site, c, result),)))
            forming = tuple(rest)
        else:
            forming = tuple(sorted(rest + [(seq, joined, ops)]))
        mmas = s.mmas[:u] + ((done, forming, inflight),) + s.mmas[u + 1:]
        env2 = env[:ins.b] + (seq + 1,) + env[ins.b + 1:]
        self._emit(out, s, c, gi, pc + 1, env2, m, findings, mmas=mmas, t5=t5)

    # ------------------------------------------------------------ collectives
    def coll_key(self, c: int, ins: CInstr, env: tuple) -> tuple[tuple, int]:
        cl = self.classes[c]
        kind = ins.a
        if kind in ("elect", "syncwarp"):
            mask = ins.b
            lanes = min(32, cl.role_threads - 32 * (cl.warp or 0))
            n = bin(mask & ((1 << lanes) - 1)).count("1")
            key = ("e" if kind == "elect" else "w", cl.cta, cl.role, cl.instance, cl.warp, mask,
                   ins.c if kind == "elect" else ins.site)
            return key, n
        if kind == "bar":
            return ("b", cl.cta, ins.b(env)), ins.c(env)
        if kind == "syncthreads":
            return ("b", cl.cta, 0), self.cta_threads
        if kind == "setmaxnreg":  # setmaxnreg.sync.aligned: the warpgroup's threads at this statement
            wg = cl.warpgroup or 0
            return ("n", cl.cta, cl.role, cl.instance, wg, ins.site), min(128, cl.role_threads - 128 * wg)
        if kind == "reconv":
            key = ("r", cl.cta, cl.role, cl.instance, cl.warp, ins.site)
            return key, self.reconv[key]
        return ("c",), self.cta_threads * self.layout.ncta

    def coll_of(self, c: int, ins: CInstr, env: tuple) -> tuple[tuple, int]:
        """(key, threads) of the collective a COLL or BAR_ARRIVE statement arrives at; an error where a named
        barrier's thread count is not a positive multiple of 32."""
        if ins.op is BAR_ARRIVE:
            key, n = ("b", self.classes[c].cta, ins.b(env)), ins.c(env)
        else:
            key, n = self.coll_key(c, ins, env)
        if key[0] == "b" and ins.a != "syncthreads" and (n <= 0 or n % 32):
            raise EvalError(f"a named barrier's thread count must be a positive multiple of 32, not {n}", ins.site)
        return key, n

    def _coll_count(self, s: State, c: int, gi: int, pc: int, env: tuple, m: int, ins: CInstr, out: list,
                    key: tuple, n: int, blocking: bool) -> None:
        """Arrive m threads at a collective (`coll_of`); the last arrival releases everyone of that generation."""
        arrived = m
        rest = []
        for k, a, n0 in s.colls:
            if k == key:
                arrived += a
            else:
                rest.append((k, a, n0))
        thread_sync = key[0] in ("b", "c")  # a named barrier, syncthreads or cluster_sync (tcgen05 ordering)
        found: tuple = ()
        t5 = s.t5
        if thread_sync:
            f, t5 = self.t5.sync(s, c, ins.site, f"arrives at '{ins.text}'", key=key)
            found = tuple(f)
        # arriving at a sync publishes this thread's fenced barrier inits and ends its window to fence its writes
        # (both records are kept sorted: where nothing of this class changes, they stay as they are)
        dirty = tuple(sorted((b, cl, True) if cl == c else (b, cl, sy) for b, cl, sy in s.dirty)) \
            if any(cl == c and not sy for _, cl, sy in s.dirty) else s.dirty
        vis = tuple(sorted((g, cl, ("pub", key)) if cl == c and _fenced(st) else (g, cl, st) for g, cl, st in s.vis)) \
            if any(cl == c and _fenced(st) for _, cl, st in s.vis) else s.vis
        locs = list(s.locs)
        others = list(locs[c])
        del others[gi]
        locs[c] = tuple(others)
        waiting: list = []
        moving: list = []
        released: list = []  # (class, alternative places) of every group this arrival releases
        if arrived < n:
            colls = rest + [(key, arrived, n)]
            if blocking:
                waiting.append(((pc + 1, self.canon(c, pc + 1, env)), m))
            else:
                moving.append((pc + 1, m))
        else:
            over = arrived - n
            colls = rest + ([(key, over, n)] if over else [])
            for wc in self.coll_classes:
                code = self.code[wc]
                keep = []
                for (wpc, wenv), wm in locs[wc]:
                    wi = code[wpc]
                    if wi.op is COLL_WAIT and self.coll_key(wc, wi, wenv)[0] == key:
                        # a released group may reach a `choose`: its outcomes are alternatives, not a split
                        released.append((wc, [(loc, wm) for loc in self.settle(wc, wpc + 1, wenv)]))
                    else:
                        keep.append(((wpc, wenv), wm))
                if len(keep) != len(locs[wc]):
                    locs[wc] = tuple(keep)
            if blocking:
                moving.append((pc + 2, m - over))
                if over:
                    waiting.append(((pc + 1, self.canon(c, pc + 1, env)), over))
            else:
                moving.append((pc + 1, m))
            if vis:
                vis = tuple(sorted(v for v in ((g, cl, _published(key) if st == ("pub", key) else st)
                                               for g, cl, st in vis) if v[2] is not None))
            if thread_sync:  # the generation orders tcgen05 work only if one of its threads did some before it
                t5 = self.t5.released(t5, key, ([c] if blocking and m > over else []) + [wc for wc, _ in released],
                                      c if over else -1)
        colls_t = tuple(sorted(colls))
        outcomes: list[list] = [[]]  # each: (class, place) pairs, one per moved group
        for start, cnt in moving:
            outcomes = [o + [(c, (loc, cnt))] for o in outcomes for loc in self.settle(c, start, env)]
        for wc, alternatives in released:
            outcomes = [o + [(wc, alt)] for o in outcomes for alt in alternatives]
        for k, moved in enumerate(outcomes):
            new_locs = list(locs)
            new_locs[c] = tuple(list(new_locs[c]) + waiting)
            for mc, place in moved:
                new_locs[mc] = tuple(new_locs[mc]) + (place,)
            for mc in {c} | {mc for mc, _ in moved}:
                new_locs[mc] = merge_groups(new_locs[mc])
            t = s._replace(locs=tuple(new_locs), colls=colls_t, dirty=dirty, vis=vis, t5=t5)
            out.append((("t", c, gi, k), t, found))



def _listed(make: Any, *args: Any) -> list:
    """[make(*args)]: an event's one successor as the list `Model.lazy_successors` promises."""
    return [make(*args)]


WARP_MEETINGS = frozenset({"elect", "syncwarp", "reconv"})  # collectives of one warp's lanes (`Model.meeting`)


def _plural(text: str) -> str:
    for sing, plur in (("waits ", "wait "), ("is stuck", "are stuck")):
        if text.startswith(sing):
            return (plur + text[len(sing):]).replace("for its ", "for their ")
    return text
