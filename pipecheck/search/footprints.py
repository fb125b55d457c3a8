"""What each thread class and asynchronous operation may still do, as footprints: the model described
for the partial-order reduction (`por`).

For every group of threads the future is computed by running its own code (no shared
value decides its control flow, except waits it may block on), so each operation has a
concrete barrier, buffer and tile. Each becomes a `por.Op`: the objects it reads, writes
or increments, the resources it provides (arrivals, bytes, joins, completions), and what
it needs to run. `por` turns these into persistent sets.
"""
from __future__ import annotations

import math
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable

from ..model import semantics as S
from ..model.compiled import compile_ref
from ..model.ir import (COLL, INIT, INVAL, ARRIVE, ARRIVE_DROP, COMPLETE_TX, CP_ASYNC_ARRIVE, END, EXPECT_TX, LOCAL_OPS, MMA_COMMIT,
                        WRITE, EvalError, RConst)
from .chains import follow
from .por import NEVER, Op, Process, Shape, plan_of, shape_of

if TYPE_CHECKING:
    from ..model.system import Model
    from ..model.state import State

_CLOBBER = ("clobbered",)  # what a write leaves in the buffers over the same storage
_WAITS = frozenset({"wait", "mwait", "cwait", "wgroup"})  # the future operations that may block
_STAND_IN = Op(())
_NO_JOINS: dict = {}
_OPS_CACHE = 200_000  # futures' op lists kept (then dropped all at once: memory stays bounded)


def _elements(indices: tuple, dims: tuple[int, ...]) -> list[int]:
    """The flat offsets (within its array) a reference with these indices may name: per index, its value where it is
    a constant in range, else every value of its dimension (the whole array once a constant is out of range: the
    statement raises where it runs)."""
    if len(indices) != len(dims) or any(isinstance(i, RConst) and not 0 <= i.value < d for i, d in zip(indices, dims)):
        return list(range(math.prod(dims)))
    flats = [0]
    for i, d in zip(indices, dims):
        vals = (i.value,) if isinstance(i, RConst) else range(d)
        flats = [f * d + v for f in flats for v in vals]
    return flats


class Footprints:
    def __init__(self, model: "Model"):
        self.m = model
        self.op_cache: dict = {}
        self.fut_cache: dict[tuple, _Future] = {}  # per (class, pc, registers, count, quiet)
        self.desc_info: dict[tuple, _Future] = {}  # per distinct (descriptions, exhaustive)
        self.ops_cache: dict[tuple, tuple[list[Op], tuple]] = {}
        self.drops = any(i.op is ARRIVE_DROP for code in model.code for i in code)
        # the classes whose barrier inits the visibility record follows (model.State.vis)
        self.initialisers = frozenset(c for c, code in enumerate(model.code) if any(i.op is INIT for i in code)) \
            if model.uses_init else frozenset()
        # (a use reads both a class's record and what releases of its published inits do to it: `_releases`)
        self.vis_reads = tuple(e for c in sorted(self.initialisers) for e in ((("vis", c), "r"), (("pubv", c), "r")))
        self.written = [self._written(c) for c in range(len(model.classes))]
        self.init_owners = self._init_owners()
        self.tx_least = self._tx_least()
        self.cta_of = [cl.cta for cl in model.classes]
        # the classes whose groups may meet their warp as one move (model.Model.meeting): bundled like lockstep lanes
        self.meets = tuple(c for c, mates in enumerate(model.warp_mates) if len(mates) > 1) if model.meetings else ()
        # with tcgen05 ordering, the classes whose mbarrier arrivals may mark a barrier as ordering their tcgen05 work
        # (model/tcgen05.py `sync`), which a wait that passes later reads (`passes_barrier`): such an arrival and a
        # wait on that barrier do not commute even when the arrival completes nothing
        self.t5_marks = frozenset(c for c, w in enumerate(model.t5.workers) if w) if model.t5.active else frozenset()

    def process_of(self, action: tuple) -> tuple:
        if action[0] == "t":
            return ("g", action[1], action[2])
        return action[:2]

    def chain(self, s: "State", move: tuple, keys: tuple, commutes: Callable[[list], bool]) -> tuple:
        """The move of the thread groups `keys` (the mover first) that alone are persistent in s, run on through
        their private steps (search/chains.py)."""
        if any(k[0] != "g" for k in keys):
            return move
        return follow(self.m, self.op, s, move, tuple((k[1], k[2]) for k in keys), commutes)

    def _written(self, c: int) -> tuple[int, ...]:
        """The buffers class c may write with ordinary stores: per index of each write's reference, the value where
        it is a constant of the class (`D[instance][st.index]` of one role instance), else the whole dimension."""
        lay = self.m.layout
        cta = self.m.classes[c].cta
        out: set[int] = set()
        for ins in self.m.classes[c].program.instrs:
            if ins.op is not WRITE:
                continue
            ref = ins.args[0]
            base, dims = lay.buf_base[ref.name]
            if ref.cta is None:
                out.update(cta * lay.nbuf + base + f for f in _elements(ref.indices, dims))
                continue
            if all(isinstance(i, RConst) for i in ref.indices):
                try:  # the element the model's own reference resolves to (an out-of-range one raises)
                    out.add(compile_ref(lay, ref, -1, False)((), cta))
                    continue
                except EvalError:
                    pass
            out.update(cta * lay.nbuf + base + f for f in range(math.prod(dims)))
        return tuple(sorted(out))

    def _init_owners(self) -> dict[int, frozenset]:
        """Per barrier, the classes whose code may init or inval it: only they can hold its visibility entry
        (model.State.vis). By the barrier array's name, in the class's own CTA unless the reference names one."""
        lay = self.m.layout
        out: dict[int, set] = {}
        for c, cl in enumerate(self.m.classes):
            for ins in cl.program.instrs:
                if ins.op is not INIT and ins.op is not INVAL:
                    continue
                ref = ins.args[0]
                if ref.cta is None and all(isinstance(i, RConst) for i in ref.indices):
                    try:  # the element the model's own reference resolves to
                        out.setdefault(compile_ref(lay, ref, -1, True)((), cl.cta), set()).add(c)
                        continue
                    except EvalError:
                        pass
                base, dims = lay.bar_base[ref.name]  # an index it computes, or another CTA's: the whole array
                for k in range(lay.ncta) if ref.cta is not None else (cl.cta,):
                    for off in range(math.prod(dims)):
                        out.setdefault(k * lay.nbar + base + off, set()).add(c)
        return {g: frozenset(v) for g, v in out.items()}

    def _tx_least(self) -> list[int]:
        """Per barrier, the fewest bytes each arrival on it expects: the least constant `expect_tx` of
        its arrivals when every arrival on the barrier's array expects some, and no thread changes its
        tx-count otherwise; 0 when unknown. Then a phase that still owes an arrival cannot complete
        before that many bytes more land in it (it completes at tx 0; PTX 9.7.13.15).

        A wait on such a barrier needs those bytes, not just a landing: with one of a stage's two copies (A and B)
        frozen, the other cannot let the consumer through in a walk. Session 25 applied it to every barrier (it was
        kept to barriers that multicast loads complete on, as it had cost states elsewhere with the closure of that
        time: #3722 381 -> 1,077, pingpong 3,376 -> 8,402); with today's it takes pingpong 7/15/8 to a path."""
        m = self.m
        lay = m.layout
        least: dict[str, int] = {}
        unknown: set[str] = set()
        for cl in m.classes:
            for ins in cl.program.instrs:
                if ins.op in (ARRIVE_DROP, EXPECT_TX, COMPLETE_TX, MMA_COMMIT, CP_ASYNC_ARRIVE):
                    unknown.add(ins.args[0].name)
                elif ins.op is ARRIVE:
                    tx = ins.args[2]
                    if isinstance(tx, RConst) and tx.value > 0:
                        least[ins.args[0].name] = min(least.get(ins.args[0].name, tx.value), tx.value)
                    else:
                        unknown.add(ins.args[0].name)
        out = [0] * (lay.nbar * lay.ncta)
        if m.uses_init:  # a re-init may give the memory another count: keep to the arrivals
            return out
        for name, (base, dims) in lay.bar_base.items():
            if name in unknown or name not in least:
                continue
            for k in range(lay.ncta):
                for off in range(math.prod(dims)):
                    out[k * lay.nbar + base + off] = least[name]
        return out

    # ------------------------------------------------------------ footprints
    def _tmem_use(self, buf: int) -> tuple:
        """A TMEM access reads whether the CTA's tensor memory is still allocated (tmem_dealloc writes it)."""
        cta = self.m.t5.tmem_ctas.get(buf)
        return () if cta is None else ((("tmem", cta), "r"),)

    def _bar_use(self, gid: int) -> tuple:
        cta = gid // self.m.layout.nbar if self.m.layout.nbar else 0
        fp: tuple = ((("exited", cta), "r"),)
        # a barrier's use reads the visibility of the inits of every class that initialises barriers
        return fp + self.vis_reads

    def _t5_mark(self, gid: int) -> tuple:
        """What a tcgen05.commit arrival, or an arrival of a class of `t5_marks`, adds to its footprint: the mark it
        may leave on the barrier, which every wait on it reads (none without tcgen05 ordering)."""
        return ((("t5c", gid), "i"),) if self.t5_marks else ()

    def _landing(self, buf: int, bar: int, cta: int, provider: tuple, nbytes: int | None) -> Op:
        lay = self.m.layout
        fp: tuple = tuple((("buf", b), "w") for b in (buf,) + lay.overlaps[buf])
        fp += ((("rd", buf), "r"), (("srd", buf), "r"), (("inflight", buf), "i"), (("flight", cta), "i"))
        if bar >= 0:
            fp += ((("bar", bar), "t", nbytes),)
            if nbytes:
                return Op(fp, (provider, (("txb", bar), nbytes)))
        return Op(fp, (provider,))

    def _future(self, c: int, pc: int, env: tuple, m: int, quiet: bool, horizon: int = 0) -> "_Future":
        """What the reduction keeps of a group's future, built once per (class, place, count) and kept
        per distinct descriptions; `quiet`: the class has nothing left to publish (see `processes`); `horizon`:
        the statements it looks at (0: the model's own)."""
        key = (c, pc, env, m, quiet) if not horizon else (c, pc, env, m, quiet, horizon)
        hit = self.fut_cache.get(key)
        if hit is None:
            descs, exhaustive = self.m.future(c, pc, env, m, horizon)
            if c in self.t5_marks:  # its arrivals mark their barriers (`t5_marks`)
                descs = tuple(d + ("t5",) if d[0] == "arrive" else d for d in descs)
            if quiet:
                # nothing of this class's to publish up to its next init: its syncs and fences before that init
                # do not touch the visibility record (see `processes`)
                first = next((j for j, d in enumerate(descs) if d[0] == "init"), len(descs))
                descs = tuple(_unpublishing(d) if j < first else d for j, d in enumerate(descs))
            hit = self.desc_info.get((descs, exhaustive))
            if hit is None:
                hit = self.desc_info[(descs, exhaustive)] = _Future(self, descs, exhaustive, len(self.desc_info))
            self.fut_cache[key] = hit
        return hit

    def _ops(self, s: "State", f: "_Future", colls: dict, needs: dict) -> tuple[list[Op], tuple | None]:
        """The ops of a future in state s and their walk (`por.plan_of`): only its waits depend on the state,
        the rest are built once; the whole list is kept per what its waits see (most futures do not change
        from a state to the next). `needs`: the bulk groups' counts of this state, per wait on them."""
        if not f.dyn:
            return f.tmpl, f.plan
        bars = s.bars
        vals = f.bars_seen(bars) if f.bars_seen is not None else ()
        if f.sources:
            vals += tuple(colls.get(a, 0) if k == 1 else s.mmas[a][0] if k == 2 else self._store_need(s, a, needs)
                          for k, a in f.sources)
        key = (f.serial, vals)
        done = self.ops_cache.get(key)
        if done is not None:
            return done
        descs = f.descs
        ops = f.tmpl.copy()
        # a later wait on the same barrier (or collective) needs the completions the earlier
        # ones waited for and one more: count them, so a future stops where its phases run out
        level: dict = {}
        for j, src in zip(f.dyn, f.src_of):
            now = vals[src]
            d = descs[j]
            kind = d[0]
            if kind == "wait" and not self.m.uses_init:  # (a re-init restarts the phases)
                lv = level.get(d[1], 0)
                if now is not None and not S.wait_passes(now, d[2], lv):
                    level[d[1]] = lv + 1
                ops[j] = self._wait(s, d, lv)
            elif kind == "cwait":  # the generations before this one: their thread counts
                before = level.get(d[1], 0)
                level[d[1]] = before + d[2]
                ops[j] = self._cwait(d, now, before)
            else:
                ops[j] = self.op(s, d)
        if len(self.ops_cache) >= _OPS_CACHE:
            self.ops_cache.clear()
        done = self.ops_cache[key] = (ops, plan_of(ops, f.shape or f.set_shape(ops)))
        return done

    def _wait(self, s: "State", d: tuple, lv: int) -> Op:
        """A wait after `lv` earlier completions of its barrier in the same future (0: the first): it
        passes once the barrier completed `lv` phases (parity differs) or needs the arrivals of one
        more (at least one per phase where arrive.drop may lower the count); the first also needs
        bytes while the phase owes tx."""
        gid, parity = d[1], d[2]
        b = s.bars[gid]
        least = self.tx_least[gid]
        key = (d, None if b is None else (b.phase & 1, b.pending, b.expected, b.tx if lv == 0 or least else 0), lv)
        hit = self.op_cache.get(key)
        if hit is None:
            fp = ((("bar", gid), "r"),) + self._bar_use(gid) + (((("t5c", gid), "r"),) if self.t5_marks else ())
            if b is None:
                hit = Op(fp, needs=NEVER)
            elif S.wait_passes(b, parity, lv):
                hit = Op(fp)
            else:
                arr = ("arr", gid)
                if lv == 0:
                    needs = ((arr, b.pending),) + (((("tx", gid), 1),) if b.tx else ())
                else:
                    needs = ((arr, b.pending + lv * (1 if self.drops else b.expected)),)
                if least:
                    # every arrival still owed expects at least `least` bytes: the phases to pass
                    # need those bytes to land, besides the arrivals (`_tx_least`)
                    needs += ((("txb", gid), b.tx + (least if b.pending else 0) + lv * least),)
                # the completions it needs (lv + 1): an arrival that cannot complete a phase while it passes commutes
                # with it (por `_late_waits`)
                hit = Op(fp, needs=needs, phases=lv + 1)
            self.op_cache[key] = hit
        return hit

    def _cwait(self, d: tuple, now: int, before: int) -> Op:
        """A use of one named barrier in a future, after earlier generations of `before` threads in all
        (0: the first), with `now` threads arrived at it: it needs those arrivals and its own
        generation's, less those already in."""
        key = (d, now, before)
        hit = self.op_cache.get(key)
        if hit is None:
            res, want = ("coll", d[1]), before + d[2]
            hit = self.op_cache[key] = Op((), needs=((res, want - now),))
        return hit

    def op(self, s: "State", d: tuple) -> Op:
        kind = d[0]
        if kind == "wait":  # depends on the barrier's counts only
            return self._wait(s, d, 0)
        if kind == "cwait":  # on the arrivals at the collective so far
            return self._cwait(d, next((a for k, a, _ in s.colls if k == d[1]), 0), 0)
        if kind == "mwait":
            key: tuple = (d, s.mmas[d[1]][0])
        elif kind == "wgroup":  # on the bulk groups of the thread still reading / writing
            key = (d, self._store_need(s, d))
        else:
            key = d
        hit = self.op_cache.get(key)
        if hit is None:
            hit = self.op_cache[key] = self._op(s, d)
        return hit

    def _op(self, s: "State", d: tuple) -> Op:
        """One future operation in state s: its footprint, what it provides, what it needs."""
        lay = self.m.layout
        kind = d[0]
        if kind == "end":
            return Op((), ((("done", d[1]), 1),))
        if kind == "arrive":
            gid = d[1]
            prov = ((("arr", gid), d[2]),) + (((("tx", gid), 1),) if d[3] else ())
            mark = self._t5_mark(gid) if len(d) > 5 else ()  # (a class of `t5_marks`: `_future`)
            return Op(((("bar", gid), "u" if d[4] else "c", d[2], d[3]),) + self._bar_use(gid) + mark, prov)
        if kind == "tx":  # a thread's own expect_tx / complete_tx: bytes the balance does not follow
            return Op(((("bar", d[1]), "t", None),) + self._bar_use(d[1]), ((("tx", d[1]), 1),))
        if kind == "load":
            fp: tuple = ()
            spawns = []
            for buf, bar, k in d[1]:
                fp += ((("flight", k), "i"), (("inflight", buf), "i")) + self._bar_use(bar)
                # one landing per issuing thread (m of them)
                spawns.extend([self._landing(buf, bar, k, (("tx", bar), 1), d[2])] * d[3])
            return Op(fp, spawns=tuple(spawns))
        if kind == "cpasync":
            buf, c = d[1], d[2]
            k = buf // lay.nbuf
            return Op(((("flight", k), "i"), (("inflight", buf), "i")),
                      spawns=(self._landing(buf, -1, k, (("cp", c), 1), None),))
        if kind == "late_arrive":  # tcgen05.commit / cp.async arrive: the arrival comes later, by itself
            fp = tuple((("commits", g // lay.nbar), "i") for g in d[1])
            arrivals = tuple(Op(((("bar", g), "c", d[2]),) + self._bar_use(g) + ((("commits", g // lay.nbar), "i"),)
                                + self._t5_mark(g), ((("arr", g), d[2]),)) for g in d[1])
            return Op(fp, spawns=arrivals)
        if kind == "trap":  # raises its finding whatever the state; touches nothing
            return Op(((("trap", d[1]), "w"),))
        if kind == "probe":  # reads the barrier's counts, never blocks
            return Op(((("bar", d[1]), "r"),) + self._bar_use(d[1]))
        if kind == "read":
            buf = d[1]
            return Op(((("buf", buf), "r"), (("inflight", buf), "r"), (("mmaout", buf), "r")) + self._tmem_use(buf))
        if kind == "write":
            buf = d[1]
            # writers of the same tile commute (the tag ends the same), and so do their clobbers of aliases
            fp = ((("buf", buf), "k", d[2]),) + tuple((("buf", b), "k", _CLOBBER) for b in lay.overlaps[buf])
            fp += tuple(x for b in (buf,) + lay.overlaps[buf]
                        for x in ((("srd", b), "r"), (("rd", b), "r"), (("inflight", b), "r")))
            fp += ((("dirty", buf), "i"),) + tuple((("bar", g), "r") for g in lay.bar_overlaps[buf])
            return Op(fp + self._tmem_use(buf))
        if kind == "fence":  # it makes only its own class's writes visible: the buffers it may write
            # and fences its own barrier inits (model.State.vis; none to fence: d[2], see `_unpublishing`)
            fp = tuple((("dirty", b), "i") for b in self.written[d[1]])
            return Op(fp + (((("vis", d[1]), "w"),) if d[1] in self.initialisers and len(d) < 3 else ()))
        if kind == "store":
            buf, c = d[1], d[2]
            k = buf // lay.nbuf
            span = (buf,) + lay.overlaps[buf]
            fp = ((("buf", buf), "r"), (("srd", buf), "i"), (("stores", k), "i")) + tuple((("dirty", b), "w") for b in span)
            steps = Op(((("srd", buf), "i"), (("sgrp", c), "i"), (("stores", k), "i")), ((("sread", c), 1), (("sdone", c), 1)))
            return Op(fp, spawns=(steps,))
        if kind == "commit":
            return Op(((("sgrp", d[1]), "i"),))
        if kind == "wgroup":
            c, read_only = d[1], d[3]
            need = self._store_need(s, d)
            res = ("sread" if read_only else "sdone", c)
            fp = ((("sgrp", c), "r"),)
            if need == 0:
                return Op(fp)
            return Op(fp, needs=((res, need),))
        if kind == "join":
            u, seq, bufs, m, outs = d[1], d[2], d[3], d[4], d[5]
            fp = tuple((("buf", b), "r") for b in bufs) + tuple((("rd", b), "i") for b in bufs)
            for out in outs:  # both CTAs' accumulator halves with cta_group 2
                fp += ((("mmaout", out), "i"),) + self._tmem_use(out)
            return Op(fp, ((("join", u, seq), m),))
        if kind == "mwait":
            u, need = d[1], d[2]
            if need <= s.mmas[u][0]:
                return Op(())
            key = ("mdone", u, need - 1)
            return Op((), needs=((key, 1),))
        if kind == "coll":
            # arrivals at one collective commute while they fit its generation (budget: the threads still owed)
            # a sync publishes the arriving class's own fenced inits: only an initialiser's arrival touches them
            # (the entry carries the arrival's own thread count, d[3], at which it completes a generation: see
            # por._loudness; no tx bytes)
            fp = ((("coll", d[1]), "c", d[2], 0, d[3]),) + (((("vis", d[4]), "w"),) if d[4] in self.initialisers else ())
            return Op(fp, ((("coll", d[1]), d[2]),))
        if kind == "init":
            # an init (or inval) replaces the barrier's visibility entry, whoever initialised it before: it writes the
            # record of its own class and of every class that may hold an entry for this barrier (`init_owners`)
            owners = self.init_owners.get(d[1], frozenset()) | {d[2]}
            return Op(((("bar", d[1]), "w"),) + tuple((("vis", c), "w") for c in sorted(owners & self.initialisers)))
        if kind == "finit":  # publishes the class's own inits only
            return Op(((("vis", d[1]), "w"),) if d[1] in self.initialisers else ())
        if kind == "t5":  # a tcgen05 fence changes only its own class's ordering flags
            return Op(())
        if kind == "tmem":  # tmem_alloc / tmem_dealloc: the CTA's tensor memory, against every use of it
            cta = d[1]
            tm = self.m.t5.tmem_ctas
            return Op(((("tmem", cta), "w"),) + tuple((("buf", b), "r") for b in sorted(tm) if tm[b] == cta))
        raise AssertionError(kind)

    @staticmethod
    def _store_need(s: "State", d: tuple, memo: dict | None = None) -> int:
        if memo is not None:
            hit = memo.get(d)
            if hit is not None:
                return hit
        c, limit, read_only = d[1], d[2], d[3]
        n = sum(1 for cl, seq, b, t, st, si in s.stores if cl == c and 0 <= seq < limit and (st == 0 or not read_only))
        if memo is not None:
            memo[d] = n
        return n

    # ------------------------------------------------------------ every process of a state
    def processes(self, s: "State", enabled: set, horizons: dict | None = None) -> tuple[list[Process], dict]:
        """Every process of state s (thread groups, copies in flight, MMA units, bulk stores, commits, exits) with
        its future's ops, and the budgets of the barriers and collectives (`por._loudness`). `horizons`: per thread
        group key, how many times the model's horizon its future looks at, where not once (`por.Reduced.expand`
        lengthens the futures a walk ran past)."""
        model = self.m
        lay = model.layout
        key: tuple  # a process's key, and the keys of the op caches: tuples of several shapes
        need: Any
        hit: Any
        prov: Any
        procs: list[Process] = []
        max_seq: dict[int, int] = {}
        join_info: dict[int, dict[int, tuple]] = {}  # per MMA unit, per group the futures join: (bufs, outs)
        colls = {k: a for k, a, _ in s.colls}
        bundles = self._bundles(s, enabled) if model.partners or self.meets else {}
        if bundles:  # lanes that move with an enabled leader are enabled: their heads are part of its move
            enabled = set(enabled) | {k for b in bundles.values() if b[0] in enabled for k in b}
        coll_keys: set = set()  # the named barriers and collectives the futures arrive at
        store_needs: dict = {}  # per wait on bulk groups, what it needs in this state (futures share them)
        initialisers = self.initialisers
        futures: list[tuple[int, _Future]] = []  # (process index, its future) of the thread groups of initialisers
        left = [0] * len(s.exited)  # per CTA, its thread groups that have not ended (its exit waits for them)
        cta_of = self.cta_of
        for c, groups in enumerate(s.locs):
            code = model.code[c]
            # nothing of this class's to publish now (none of its inits unfenced or fenced and unpublished): its syncs
            # and fences up to its next init do not touch the visibility record (`_future`)
            quiet = c in initialisers and not any(v[1] == c and v[2] in (0, 1) for v in s.vis)
            for gi, ((pc, env), m) in enumerate(groups):
                op = code[pc].op
                if op is END:
                    continue
                left[cta_of[c]] += 1
                key = ("g", c, gi)
                if op in LOCAL_OPS:  # an unsettled start: the head is a local choice
                    procs.append(Process(key, key in enabled, [Op(())], False))
                    continue
                if horizons and key in horizons:
                    f = self._future(c, pc, env, m, quiet, horizons[key] * model.horizon)
                else:
                    f = self.fut_cache.get((c, pc, env, m, quiet)) or self._future(c, pc, env, m, quiet)
                for u, top, joined in f.unit_joins:
                    if top > max_seq.get(u, -1):
                        max_seq[u] = top
                    per_unit = join_info.get(u)
                    if per_unit is None:
                        join_info[u] = dict(joined)
                    else:
                        per_unit.update(joined)
                if f.colls:
                    coll_keys.update(f.colls)
                ops, plan = self._ops(s, f, colls, store_needs)
                if s.vis:
                    futures.append((len(procs), f))
                procs.append(Process(key, key in enabled, ops, f.exhaustive, f.provides, bundles.get(key, ()),
                                     f.shape, plan))
        if s.vis and initialisers:
            self._releases(s, procs, futures)
        for i, (buf, tag, nbytes, bar, site, src, seq) in enumerate(s.flight):
            key = ("l", i)
            if key in enabled:  # not a duplicate of the copy before it
                prov = (("tx", bar), 1) if bar >= 0 else (("cp", src), 1)
                procs.append(Process(key, True, *self._single(
                    ("l", buf, bar, prov, nbytes), lambda: self._landing(buf, bar, buf // lay.nbuf, prov, nbytes))))
        for u, (done, forming, inflight) in enumerate(s.mmas):
            # the ops are a function of the unit's own groups and what the futures say of them: built once
            joins = join_info.get(u, _NO_JOINS)
            key = ("m", u, done, forming, inflight, max_seq.get(u, -1), tuple(sorted(joins.items())))
            hit = self.op_cache.get(key)
            if hit is None:
                ops = self._mma_ops(u, done, forming, inflight, max_seq.get(u, -1), joins)
                if ops:
                    shape = shape_of(ops)
                    hit = (ops, frozenset(r for op in ops for r, _ in op.all_provides), shape, plan_of(ops, shape))
                self.op_cache[key] = hit
            if hit is not None:
                ops, provides, shape, plan = hit
                procs.append(Process(("m", u), ("m", u) in enabled, ops, True, provides, (), shape, plan))
        for i, (c, seq, buf, tag, stage, site) in enumerate(s.stores):
            key = ("s", i)
            on = key in enabled
            procs.append(Process(key, on, *self._fixed(("s", c, buf, stage, on), lambda: self._store_ops(c, buf, stage, on))))
        for i, (kind, who, upto, bars, site, c, _, cnt) in enumerate(s.commits):
            key = ("k", i)
            if key in enabled:
                need = None
            elif kind == "mma":
                need = ("mdone", who, upto - 1), 1
            else:
                need = ("cp", who), sum(1 for op in s.flight if op[5] == who and op[3] < 0 and op[6] < upto)
            procs.append(Process(key, need is None, *self._fixed(("k", bars, cnt, need),
                                                                 lambda: self._commit_ops(bars, cnt, need))))
        for cta, gone in enumerate(s.exited):
            if gone:
                continue
            key = ("x", cta)
            n = left[cta]
            procs.append(Process(key, key in enabled, *self._single(("x", cta, n), lambda: self._exit(cta, n))))
        # per barrier: the arrivals its phase still owes, the tx bytes, and its count for `por._late_waits`; the count
        # not where arrive.drop lowers it (a phase's arrivals are not known ahead), nor with tcgen05 ordering, where an
        # arrival that completes nothing still marks the barrier as ordering its class's tcgen05 work, which a wait
        # that passes later reads (model/tcgen05.py `sync`, `passes_barrier`)
        counts = not self.drops and not self.m.t5.active
        budgets: dict = {}
        for gid, b in enumerate(s.bars):
            if b is not None:
                obj = ("bar", gid)
                budgets[obj] = b.pending
                budgets[(obj, "tx")] = (b.tx, S.MAX_TX)
                if counts:
                    budgets[(obj, "count")] = b.expected
        for key in coll_keys:
            # the threads already in: each arrival completes a generation at its own count, so the budget is
            # the smallest count among the arrivals a closure step weighs, less these (por._loudness)
            budgets[(("coll", key), "arrived")] = colls.get(key, 0)
        return procs, budgets

    def _releases(self, s: "State", procs: list[Process], futures: list[tuple[int, "_Future"]]) -> None:
        """The arrival that completes a sync's generation turns the inits published there (visibility
        ("pub", key), model._coll_count) into visible ones: a change to the records of the classes that
        published, which a sync arrival's own footprint (its class's record, or none) does not name. So every
        arrival at a sync where some class has published, or may publish in its known future before its next
        arrival there, touches that class's release object ("pubv", c) (a future cut off by the horizon is the
        reduction's business: its process joins the set when a walk reaches the cut). A release commutes with
        every other change to the record (an init replaces an entry whatever its state, a fence turns unfenced
        entries into fenced ones and an arrival fenced ones into published ones: none of them reads or makes a
        published entry of that sync), so it is an increment ("i"), against the uses of barriers, which read
        ("pubv", c) with ("vis", c). Only states with inits still unpublished pay for this; after the set-up
        `s.vis` holds nothing but visible entries."""
        pubs: dict[tuple, set] = {}
        for g, c, st in s.vis:
            if isinstance(st, tuple):
                pubs.setdefault(st[1], set()).add(c)
        unfenced = {c for _, c, st in s.vis if st == 0}
        fenced = {c for _, c, st in s.vis if st == 1}
        for i, f in futures:
            c = procs[i].key[1]
            if c not in self.initialisers:
                continue
            s0, s1 = c in unfenced, c in fenced
            for d in f.descs:
                kind = d[0]
                if kind == "init":
                    s0 = True
                elif kind == "finit" or kind == "fence":
                    s1 = s1 or s0
                elif kind == "coll":
                    if s1:
                        pubs.setdefault(d[1], set()).add(c)
                    s1 = False  # its fenced inits are published there
        if not pubs:
            return
        for i, f in futures:
            descs = f.descs
            if not any(d[0] == "coll" and d[1] in pubs for d in descs):
                continue
            p = procs[i]
            ops = list(p.ops)
            for j, d in enumerate(descs[:len(ops)]):
                if d[0] == "coll" and d[1] in pubs:
                    extra = tuple((("pubv", c), "i") for c in sorted(pubs[d[1]]))
                    if extra:
                        op = ops[j]
                        ops[j] = Op(op.footprint + extra, op.provides, op.needs, op.spawns)
            procs[i] = Process(p.key, p.enabled, ops, p.exhaustive, p.provides, p.bundle)

    @staticmethod
    def _exit(cta: int, left: int) -> Op:
        """A CTA's exit: once its `left` unfinished groups are done, it reads what may still be in flight."""
        res = ("done", cta)
        fp = tuple((obj, "r") for obj in (("flight", cta), ("mmaexit", cta), ("stores", cta), ("commits", cta))) \
            + ((("exited", cta), "w"),)
        return Op(fp, needs=((res, left),))

    def _store_ops(self, c: int, buf: int, stage: int, enabled: bool) -> list[Op]:
        """A bulk store's steps still to come (read, then done); one held back behind an older store of its class
        (events.store_ready) waits for that one's step."""
        k = buf // self.m.layout.nbuf
        needs = None if enabled else (((("sread" if stage == 0 else "sdone"), c), 1),)
        done_op = Op(((("sgrp", c), "i"), (("stores", k), "i")), ((("sdone", c), 1),), needs=needs if stage == 1 else None)
        if stage:
            return [done_op]
        return [Op(((("srd", buf), "i"), (("sgrp", c), "i"), (("stores", k), "i")), ((("sread", c), 1),), needs=needs),
                done_op]

    def _commit_ops(self, bars: tuple, cnt: int, need: tuple | None) -> list[Op]:
        """A commit's arrivals on its barriers, once `need` (what it waits for; None: nothing) is there."""
        nbar = self.m.layout.nbar
        fp = tuple(x for g in bars for x in (((("bar", g), "c", cnt),) + self._bar_use(g) + ((("commits", g // nbar), "i"),)
                                             + self._t5_mark(g)))
        prov = tuple((("arr", g), cnt) for g in bars)
        return [Op(fp, prov, needs=None if need is None else (need,))]

    def _fixed(self, key: tuple, build: Callable[[], list[Op]]) -> tuple:
        """The ops, exhaustive flag, provisions, bundle, shape and plan of a process whose ops are a function of
        `key`, built once per key."""
        hit = self.op_cache.get(key)
        if hit is None:
            ops = build()
            shape = shape_of(ops)
            hit = self.op_cache[key] = (ops, True, frozenset(r for op in ops for r, _ in op.all_provides), (), shape,
                                        plan_of(ops, shape))
        return hit

    def _single(self, key: tuple, build: Callable[[], Op]) -> tuple:
        """The ops, exhaustive flag, provisions, bundle, shape and plan of a process of one op, built once per key."""
        hit = self.op_cache.get(key)
        if hit is None:
            op = build()
            shape = shape_of([op])
            hit = self.op_cache[key] = ([op], True, frozenset(r for r, _ in op.all_provides), (), shape,
                                        plan_of([op], shape))
        return hit

    def _bundles(self, s: "State", enabled: set) -> dict[tuple, tuple]:
        """For each group whose move is also other groups' (a statement its warp runs together under --lockstep, a
        warp meeting every lane stands at), the keys of every group in that move, the one whose move it is first."""
        model = self.m
        out: dict[tuple, tuple] = {}
        for c in self.meets:
            code = model.code[c]
            for gi, ((pc, _), _) in enumerate(s.locs[c]):
                if code[pc].op is not COLL:  # (a meeting is a collective)
                    continue
                members = model.meeting(s, c, gi)
                if members is not None and members[0] == (c, gi):
                    keys = tuple(("g", mc, gj) for mc, gj in members)
                    for k in keys:
                        out[k] = keys
        for c, groups in enumerate(s.locs):
            for gi, ((pc, _), _) in enumerate(groups):
                members = model.partners.get((c, pc))
                if members is None or members[0][0] != c:
                    continue
                keys = []
                for mc, mpc in members:
                    gj = model.group_at(s, mc, mpc)
                    if gj is not None:
                        keys.append(("g", mc, gj))
                if len(keys) == len(members):
                    for k in keys:
                        out[k] = tuple(keys)
        return out

    def _mma_ops(self, u: int, done: int, forming: tuple, inflight: tuple, max_seq: int, join_info: dict) -> list[Op]:
        """The MMA unit u's groups from `done` on: those in flight, forming, or that the futures join (`max_seq`: the
        last of those, `join_info`: per group, its buffers and outputs)."""
        model = self.m
        cta = model.unit_cta[u]
        formed = {seq: (ops, outs) for seq, ops, _, _, outs in inflight}
        joined = {seq: n for seq, n, _ in forming}
        top = max([max_seq] + list(formed) + list(joined))
        ops: list[Op] = []
        for j in range(done, top + 1):
            if j in formed:
                bufs = [b for b, _ in formed[j][0]]
                outs = tuple(b for b, _ in formed[j][1])
            else:
                forming_ops = next((o for seq, _, o in forming if seq == j), None)
                if forming_ops is not None:
                    bufs, outs = [b for b, _ in forming_ops], join_info.get(j, ((), ()))[1]
                elif j in join_info:
                    bufs, outs = list(join_info[j][0]), join_info[j][1]
                else:
                    break  # no thread can form this group within the horizon
            # a cta_group 2 MMA reads and writes the peer CTA too: the peer's exit must wait for it
            ctas = {cta} | {b // model.layout.nbuf for b in bufs} | {b // model.layout.nbuf for b in outs}
            fp = ((("mmadone", u), "w"),) + tuple((("mmaexit", k), "i") for k in sorted(ctas)) \
                + tuple((("rd", b), "i") for b in bufs)
            for out in outs:
                fp += ((("mmaout", out), "i"), (("buf", out), "w")) + tuple((("buf", h), "w") for h in model.layout.overlaps[out])
            prov = ((("mdone", u, j), 1),)
            if j in formed:
                prev = ("mdone", u, j - 1)
                ops.append(Op(fp, prov, needs=None if j == done else ((prev, 1),)))
            else:
                need = model.unit_size[u] - joined.get(j, 0)
                jk, pk = ("join", u, j), ("mdone", u, j - 1)
                ops.append(Op(fp, prov, needs=((jk, need),) + (() if j == done else ((pk, 1),))))
        return ops



class _Future:
    """One future's descriptions and what every state shares of them: the ops of everything but its waits,
    what the waits read (`bars_seen`: the mbarriers; `sources`: collectives, MMA units, bulk groups), what it
    may provide, its collectives and joins; `shape` is built from the first whole op list."""
    __slots__ = ("descs", "exhaustive", "serial", "dyn", "sources", "src_of", "tmpl", "plan", "provides", "shape",
                 "colls", "unit_joins", "bars_seen")

    def __init__(self, fp: Footprints, descs: tuple, exhaustive: bool, serial: int):
        self.descs = descs
        self.exhaustive = exhaustive
        self.serial = serial
        self.dyn = tuple(j for j, d in enumerate(descs) if d[0] in _WAITS)
        read = [_source(descs[j]) for j in self.dyn]
        found = dict.fromkeys(read)  # (in the order first read)
        # the mbarriers first: `_ops` takes what the waits see of them from the state's barriers at once (`bars_seen`),
        # then the others one by one (`sources`)
        srcs = sorted(found, key=lambda src: src[0] != 0)
        place = {src: n for n, src in enumerate(srcs)}
        self.src_of = tuple(place[src] for src in read)
        bar_ids = [a for k, a in srcs if k == 0]
        self.bars_seen = None if not bar_ids else itemgetter(*bar_ids) if len(bar_ids) > 1 else \
            (lambda bars, g=bar_ids[0]: (bars[g],))
        self.sources = tuple(src for src in srcs if src[0] != 0)
        # (a wait's place holds a stand-in: `_ops` puts the wait of each state there)
        self.tmpl = [fp.op(None, d) if d[0] not in _WAITS else _STAND_IN for d in descs]  # type: ignore[arg-type]
        prov: set = set()
        for d, op in zip(descs, self.tmpl):
            if d[0] not in _WAITS:  # waits provide nothing
                prov.update(r for r, _ in op.provides)
                prov.update(r for sp in op.spawns for r, _ in sp.provides)
        self.provides = frozenset(prov)
        self.shape: Shape | None = None
        self.plan: tuple | None = None
        if not self.dyn:
            self.plan = plan_of(self.tmpl, self.set_shape(self.tmpl))
        self.colls = tuple(d[1] for d in descs if d[0] == "coll")
        # per MMA unit the future joins: the last group it joins and, per group, its buffers and outputs (the last
        # join of a group wins, as in `Footprints.processes`)
        units: dict[int, dict[int, tuple]] = {}
        for d in descs:
            if d[0] == "join":
                units.setdefault(d[1], {})[d[2]] = (d[3], d[5])
        self.unit_joins = tuple((u, max(per), tuple(per.items())) for u, per in units.items())

    def set_shape(self, ops: list[Op]) -> Shape:
        """Footprints and provisions depend on the descriptions alone (a wait's state only decides
        its `needs`), so one shape serves every state; every wait may block."""
        self.shape = shape_of(ops, self.dyn)
        return self.shape


def _source(d: tuple) -> tuple:
    """What a wait of a future reads of the state: (0, barrier), (1, collective), (2, MMA unit) or (3, its bulk-group
    description)."""
    kind = d[0]
    return (0, d[1]) if kind == "wait" else (1, d[1]) if kind == "cwait" else (2, d[1]) if kind == "mwait" else (3, d)


def _unpublishing(d: tuple) -> tuple:
    """A future operation of a class that has no barrier init to publish when it runs (none fenced or unfenced in
    the record, no init of its own before it): its sync arrival and fences leave the visibility record as it is."""
    kind = d[0]
    if kind == "coll":
        return d[:4] + (-1,)
    if kind == "finit":
        return ("finit", -1)
    if kind == "fence":
        return d[:2] + (False,)
    return d
