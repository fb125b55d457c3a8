"""The bmc engine's state and moves: `model.State` as named z3 variables, `model.py`'s transitions as z3 terms.

A mover is a thread class (at one node of its unrolled code), a copy in flight, an MMA unit, a bulk store,
an owed commit arrival or a CTA; its move is a guard, variable updates and the model's finding condition.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

from ..model.ir import (ARRIVE, ARRIVE_DROP, BAR_ARRIVE, COLL, COLL_WAIT, COMMIT_GROUP, COMPLETE_TX, CP_ASYNC,
                        CP_ASYNC_ARRIVE, END, EXPECT_TX, FENCE_INIT, FENCE_PROXY, INIT, INVAL, MMA, MMA_COMMIT,
                        MMA_WAIT, READ, TMA_LOAD, TMA_STORE, WAIT, WAIT_GROUP, WRITE)
from ..model.state import CLOBBERED
from ..model.system import Model
from . import bmc_bars as B
from .bmc_code import ClassCode, Node, Unsupported, unroll

FALSE, TRUE = B.FALSE, B.TRUE
VIS_FENCED, VIS_CTA, VIS_PUB = 1, 2, 3  # a visibility entry's state: 0 initialised, 1 fenced, 2 CTA-visible, 3+k
DIRTY, SYNCED = 1, 2  # a (buffer, class) write not yet fenced: before / after the class passed a sync
READING, WRITING = 1, 2  # a bulk store's stage


@dataclass
class Move:
    guard: Any  # whether it can fire (a class: besides standing at the node)
    upd: list  # (variable, condition, value): the variable takes the value when the move fires and the condition holds
    bad: Any = FALSE  # the model reports a finding on this step
    unsup: Any = FALSE  # a behaviour the encoding does not cover
    nout: Any = None  # the constraint on the outcome index (None: it is 0)


@dataclass
class St:
    """The state variables at one depth (name -> z3 variable), and terms built once per state."""

    t: int
    v: dict
    cache: dict = field(default_factory=dict)


class Moves:
    """The model's shared state as named z3 variables, and every move over them."""

    def __init__(self, model: Model):
        self.model = model
        lay = model.layout
        self.codes: list[ClassCode] = [unroll(model, c) for c in range(len(model.classes))]
        self.flights: list[tuple] = []  # (class, node, entry)
        self.stores: list[tuple] = []  # (class, node, buffer)
        self.commits: list[tuple] = []  # (class, node, entry)
        self.slot: dict[tuple[int, int], list[int]] = {}
        self.store_slot: dict[tuple[int, int], int] = {}
        self.commit_slot: dict[tuple[int, int], int] = {}
        whos: dict[int, dict] = {}
        self.dyn: set[int] = set()  # barriers an init or inval changes
        self.drops: set[int] = set()  # barriers an arrive_drop lowers the expected count of
        self.vis_bars: set[int] = set()
        self.seqs: dict[tuple[int, int], tuple] = {}  # (unit, seq) -> (operands, result)
        self.dirty_pairs: set[tuple[int, int]] = set()
        keys: dict = {}
        for c, code in enumerate(self.codes):
            for i, n in enumerate(code.nodes):
                if n.error is not None:
                    continue
                a = n.args
                for e in a.get("flights", ()):
                    self.slot.setdefault((c, i), []).append(len(self.flights))
                    self.flights.append((c, i, e))
                if "commit" in a:
                    self.commit_slot[(c, i)] = len(self.commits)
                    self.commits.append((c, i, a["commit"]))
                    for g in a["commit"][3]:
                        whos.setdefault(g, {})[a["commit"][6]] = None
                if n.op is TMA_STORE:
                    self.store_slot[(c, i)] = len(self.stores)
                    self.stores.append((c, i, a["buf"]))
                elif n.op in (ARRIVE, ARRIVE_DROP):
                    whos.setdefault(a["gid"], {})[a["who"]] = None
                    if n.op is ARRIVE_DROP:
                        self.drops.add(a["gid"])
                elif n.op in (INIT, INVAL):
                    self.dyn.add(a["gid"])
                    if n.op is INIT:
                        self.vis_bars.add(a["gid"])
                elif n.op is WRITE:
                    self.dirty_pairs.add((a["buf"], c))
                elif n.op is MMA:
                    q = (a["unit"], a["seq"])
                    if self.seqs.setdefault(q, (a["ops"], a["result"])) != (a["ops"], a["result"]):
                        raise Unsupported("an MMA group whose classes name different operands")
                elif n.op in (COLL, BAR_ARRIVE):
                    keys[a["key"]] = None
                elif n.op is COLL_WAIT:
                    keys[self.wait_key(c, n)] = None
        self.whos = {g: list(w) for g, w in whos.items()}
        self.keys = list(keys)
        self.key_index = {k: i for i, k in enumerate(self.keys)}
        self.init = model.initial()
        self.nbars = len(self.init.bars)
        for g, b in enumerate(self.init.bars):
            if b is None:
                self.dyn.add(g)
        ncls = len(self.codes)
        # movers: classes, copies in flight, MMA units, bulk stores, commit arrivals, CTAs (the replay's order too)
        self.kinds = ([("t", c) for c in range(ncls)] + [("l", k) for k in range(len(self.flights))]
                      + [("m", u) for u in range(model.nunits)] + [("s", k) for k in range(len(self.stores))]
                      + [("k", k) for k in range(len(self.commits))] + [("x", k) for k in range(lay.ncta)])
        self.twin = {}  # a copy identical to the one before it lands after it (they are interchangeable)
        for k in range(1, len(self.flights)):
            if self.flights[k][:2] == self.flights[k - 1][:2] and self.flights[k][2] == self.flights[k - 1][2]:
                self.twin[k] = k - 1

    def wait_key(self, c: int, n: Node):
        return self.model.coll_key(c, self.model.code[c][n.pc], n.env)[0]

    # ------------------------------------------------------------ variables
    def schema(self) -> list[tuple[str, bool]]:
        """(name, is Boolean) of every state variable."""
        m = self.model
        out = [(f"loc{c}", False) for c in range(len(self.codes))]
        for g in range(self.nbars):
            if g in self.dyn:
                out.append((f"b{g}.live", True))
            out += [(f"b{g}.{f}", False) for f in ("ph", "pe", "tx")]
            if self.expected_varies(g):
                out.append((f"b{g}.ex", False))
            out += [(f"b{g}.a{j}", True) for j in range(len(self.whos.get(g, ())))]
        out += [(f"buf{b}", False) for b in range(len(self.init.bufs))]
        out += [(f"fl{k}", True) for k in range(len(self.flights))]
        out += [(f"done{u}", False) for u in range(m.nunits)]
        for u, q in self.seqs:
            out += [(f"jo{u}.{q}", False), (f"fo{u}.{q}", True)]
        for k in range(len(self.stores)):
            out += [(f"st{k}", False), (f"sg{k}", False), (f"stag{k}", False)]
        out += [(f"cm{k}", True) for k in range(len(self.commits))]
        out += [(f"dt{b}.{c}", False) for b, c in sorted(self.dirty_pairs)]
        for g in sorted(self.vis_bars):
            out += [(f"vc{g}", False), (f"vs{g}", False)]
        out += [(f"co{i}", False) for i in range(len(self.keys))]
        out += [(f"ex{k}", True) for k in range(m.layout.ncta)]
        return out

    def fresh(self, t: int) -> St:
        return St(t, {name: (z3.Bool if b else B.bv)(f"{name}@{t}") for name, b in self.schema()})

    def initial(self, s: St) -> list:
        """Constraints: s is the model's initial state."""
        init = self.init
        v = s.v
        cs = [v[f"loc{c}"] == code.start for c, code in enumerate(self.codes)]
        for g, b0 in enumerate(init.bars):
            if g in self.dyn:
                cs.append(v[f"b{g}.live"] == (b0 is not None))
            ph, pe, ex, tx = (b0.phase, b0.pending, b0.expected, b0.tx) if b0 is not None else (0, 0, 0, 0)
            cs += [v[f"b{g}.ph"] == ph, v[f"b{g}.pe"] == pe, v[f"b{g}.tx"] == tx]
            if self.expected_varies(g):
                cs.append(v[f"b{g}.ex"] == ex)
            cs += [z3.Not(v[f"b{g}.a{j}"]) for j in range(len(self.whos.get(g, ())))]
        cs += [v[f"buf{b}"] == tag for b, tag in enumerate(init.bufs)]
        for name, isbool in self.schema():
            if name.startswith(("fl", "fo", "cm", "ex")):
                cs.append(z3.Not(v[name]))
            elif name.startswith(("done", "jo", "st", "dt", "co")) and not name.startswith("stag"):
                cs.append(v[name] == 0)
            elif name.startswith("vc"):
                cs.append(v[name] == -1)
        return cs

    # ------------------------------------------------------------ reading the state
    def at(self, s: St, c: int, i: int):
        key = ("at", c, i)
        if key not in s.cache:
            s.cache[key] = s.v[f"loc{c}"] == i
        return s.cache[key]

    def bar(self, s: St, g: int) -> B.Bar:
        v = s.v
        live = v[f"b{g}.live"] if g in self.dyn else TRUE
        arr = {w: v[f"b{g}.a{j}"] for j, w in enumerate(self.whos.get(g, ()))}
        ex = v[f"b{g}.ex"] if self.expected_varies(g) else B.val(self.init.bars[g].expected)
        return B.Bar(live, v[f"b{g}.ph"], v[f"b{g}.pe"], ex, v[f"b{g}.tx"], arr)

    def expected_varies(self, g: int) -> bool:
        """Whether a barrier's expected count can change (init, arrive_drop); else it is the declared count."""
        return g in self.dyn or g in self.drops

    def put_bar(self, upd: list, g: int, cond, b: B.Bar, dyn: bool) -> None:
        if dyn:
            upd.append((f"b{g}.live", cond, b.live))
        for f, x in (("ph", b.phase), ("pe", b.pending), ("tx", b.tx)):
            upd.append((f"b{g}.{f}", cond, x))
        if self.expected_varies(g):
            upd.append((f"b{g}.ex", cond, b.expected))
        for j, x in enumerate(b.arr.values()):
            upd.append((f"b{g}.a{j}", cond, x))

    def mma_inflight(self, s: St, q: tuple[int, int], done_plus: int = -1):
        """MMA group q is formed and not complete (done_plus: a unit whose completion counter is one higher)."""
        done = s.v[f"done{q[0]}"] + (1 if q[0] == done_plus else 0)
        return z3.And(s.v[f"fo{q[0]}.{q[1]}"], done <= q[1])

    def use_bad(self, s: St, c: int, g: int):
        """model._use: the barrier's CTA has exited, or its init is not yet visible to this class."""
        lay = self.model.layout
        cta = g // lay.nbar if lay.nbar else 0
        bad = [s.v[f"ex{cta}"]]
        if g in self.vis_bars:
            vc, vs = s.v[f"vc{g}"], s.v[f"vs{g}"]
            own = self.model.classes[c].cta == cta
            bad.append(z3.And(vc >= 0, vc != c, vs != VIS_CTA if own else TRUE))
        return z3.Or(bad)

    def read_bad(self, s: St, buf: int, want: int | None):
        """model._read_hazards: anything but the wanted tile, or a copy or MMA result landing over it."""
        if want is None:
            return FALSE
        bad = [s.v[f"buf{buf}"] != want]
        bad += [s.v[f"fl{k}"] for k, (_, _, e) in enumerate(self.flights) if e[0] == buf and e[1] != want]
        bad += [self.mma_inflight(s, q) for q, (_, res) in self.seqs.items() if any(rb == buf for rb, _ in res)]
        return z3.Or(bad)

    def write_bad(self, s: St, buf: int, landing: bool, done_plus: int = -1):
        """model._write_hazards: a store or MMA still reads the storage, a copy lands in it, a live barrier there."""
        lay = self.model.layout
        bad = []
        for b in (buf,) + lay.overlaps[buf]:
            bad += [s.v[f"st{k}"] == READING for k, (_, _, sb) in enumerate(self.stores) if sb == b]
            bad += [self.mma_inflight(s, q, done_plus) for q, (ops, _) in self.seqs.items()
                    if any(ob == b for ob, _ in ops)]
            if not landing:
                bad += [s.v[f"fl{k}"] for k, (_, _, e) in enumerate(self.flights) if e[0] == b]
        bad += [self.bar(s, g).live for g in lay.bar_overlaps[buf]]
        return z3.Or(bad) if bad else FALSE

    def tags(self, upd: list, cond, buf: int, tag) -> None:
        upd.append((f"buf{buf}", cond, tag))
        for h in self.model.layout.overlaps[buf]:
            upd.append((f"buf{h}", cond, B.val(CLOBBERED)))

    # ------------------------------------------------------------ moves
    def enabled(self, s: St, c: int, n: Node, alone: bool = True):
        """When class c at node n can fire; None when it never fires by itself (finished, waiting at a collective,
        or --lockstep: a statement the lowest class of its warp runs for it)."""
        if n.op is END or n.op is COLL_WAIT:
            return None
        if alone and (c, n.pc) in self.model.partners and self.model.partners[(c, n.pc)][0][0] != c:
            return None
        if n.error is not None:
            return TRUE
        a, v = n.args, s.v
        if n.op is WAIT:
            b = self.bar(s, a["gid"])
            return z3.And(b.live, z3.Extract(0, 0, b.phase) != a["parity"])
        if n.op is MMA_WAIT:
            return v[f"done{a['unit']}"] >= a["need"]
        if n.op is WAIT_GROUP:
            pending = [z3.And(v[f"st{k}"] != 0, v[f"sg{k}"] >= 0, v[f"sg{k}"] < a["limit"],
                              TRUE if not a["read_only"] else v[f"st{k}"] == READING)
                       for k, (sc, _, _) in enumerate(self.stores) if sc == c]
            return z3.Not(z3.Or(pending)) if pending else TRUE
        return TRUE

    def move(self, s: St, x: int, i: int, out) -> Move:
        kind, k = self.kinds[x]
        if kind == "t":
            return self._thread(s, k, i, out)
        return getattr(self, "_async_" + kind)(s, k)

    @staticmethod
    def _pick(succ: list[int], out):
        v = B.val(succ[-1] if succ else -1)
        for o in range(len(succ) - 2, -1, -1):
            v = z3.If(out == o, succ[o], v)
        return v

    def _thread(self, s: St, c: int, i: int, out, alone: bool = True) -> Move:
        n = self.codes[c].nodes[i]
        if alone and n.error is None and (c, n.pc) in self.model.partners:
            return self._together(s, c, i, out)
        guard = self.enabled(s, c, n, alone)
        if n.error is not None:
            return Move(guard, [(f"loc{c}", TRUE, B.val(i))])
        m = self.model.classes[c].size
        a, v, op = n.args, s.v, n.op
        upd: list = []
        if op is COLL or op is BAR_ARRIVE:
            return self._coll(s, c, i, n, out, m)
        move = Move(guard, upd, nout=out < max(1, len(n.succ)))
        upd.append((f"loc{c}", TRUE, self._pick(n.succ, out)))
        if op is WAIT:
            g = a["gid"]
            bad = [self.use_bad(s, c, g)]
            if a["intended"] is not None:
                ph = v[f"b{g}.ph"]
                bad.append(z3.Or(ph > a["intended"] + 1, ph < a["intended"]))
            move.bad = z3.Or(bad)
        elif op in (ARRIVE, ARRIVE_DROP, EXPECT_TX, COMPLETE_TX):
            g = a["gid"]
            what = {ARRIVE: "arrive", ARRIVE_DROP: "drop", EXPECT_TX: "expect", COMPLETE_TX: "complete"}[op]
            nb, bad = B.repeat(self.bar(s, g), what, m, a.get("count", a.get("n")), a.get("who"), a.get("tx", 0))
            self.put_bar(upd, g, TRUE, nb, g in self.dyn)
            move.bad = z3.Or(self.use_bad(s, c, g), bad)
        elif op is TMA_LOAD or op is CP_ASYNC:
            upd += [(f"fl{k}", TRUE, TRUE) for k in self.slot.get((c, i), ())]
            move.bad = z3.Or([z3.Or(self.use_bad(s, c, g), self.async_init_bad(s, g)) for g in a.get("uses", ())]
                             or [FALSE])
        elif op is CP_ASYNC_ARRIVE or op is MMA_COMMIT:
            upd.append((f"cm{self.commit_slot[(c, i)]}", TRUE, TRUE))
        elif op is READ:
            move.bad = self.read_bad(s, a["buf"], a["want"])
        elif op is WRITE:
            move.bad = self.write_bad(s, a["buf"], landing=False)
            self.tags(upd, TRUE, a["buf"], B.val(a["tag"]))
            upd.append((f"dt{a['buf']}.{c}", TRUE, B.val(DIRTY)))
        elif op is FENCE_PROXY:
            for b, d in self.dirty_pairs:
                if d == c:
                    x = v[f"dt{b}.{c}"]
                    upd.append((f"dt{b}.{c}", x == DIRTY, B.val(0)))
            self._fence_inits(upd, v, c)  # model: fence.proxy.async fences the class's inits too
        elif op is TMA_STORE:
            buf, want = a["buf"], a["want"]
            span = (buf,) + self.model.layout.overlaps[buf]
            bad = [v[f"buf{buf}"] != want] if want is not None else []
            for b, d in sorted(self.dirty_pairs):
                if b in span:
                    bad.append(v[f"dt{b}.{d}"] != 0)
                    upd.append((f"dt{b}.{d}", TRUE, B.val(0)))
            k = self.store_slot[(c, i)]
            upd += [(f"st{k}", TRUE, B.val(READING)), (f"sg{k}", TRUE, B.val(-1)),
                    (f"stag{k}", TRUE, B.val(want) if want is not None else v[f"buf{buf}"])]
            move.bad = z3.Or(bad) if bad else FALSE
        elif op is COMMIT_GROUP:
            for k, (sc, _, _) in enumerate(self.stores):
                if sc == c:
                    upd.append((f"sg{k}", z3.And(v[f"st{k}"] != 0, v[f"sg{k}"] == -1), B.val(a["n"])))
        elif op is MMA:
            q = (a["unit"], a["seq"])
            joined = v[f"jo{q[0]}.{q[1]}"] + m
            forms = joined >= self.model.unit_size[q[0]]
            upd += [(f"jo{q[0]}.{q[1]}", TRUE, z3.If(forms, 0, joined)), (f"fo{q[0]}.{q[1]}", forms, TRUE)]
            reads = [self.read_bad(s, b, t) for b, t in a["ops"]]
            move.bad = z3.And(forms, z3.Or(reads)) if reads else FALSE
        elif op is INIT:
            g = a["gid"]
            old = self.bar(s, g)
            nb = B.Bar(TRUE, B.val(0), B.val(a["count"]), B.val(a["count"]), B.val(0), {w: FALSE for w in old.arr})
            self.put_bar(upd, g, TRUE, nb, True)
            upd += [(f"vc{g}", TRUE, B.val(c)), (f"vs{g}", TRUE, B.val(0))]
            move.bad = old.live
        elif op is INVAL:
            g = a["gid"]
            upd.append((f"b{g}.live", TRUE, FALSE))
            if g in self.vis_bars:
                upd.append((f"vc{g}", TRUE, B.val(-1)))
        elif op is FENCE_INIT:
            self._fence_inits(upd, v, c)
        return move

    def _fence_inits(self, upd: list, v: dict, c: int) -> None:
        for g in sorted(self.vis_bars):
            upd.append((f"vs{g}", z3.And(v[f"vc{g}"] == c, v[f"vs{g}"] == 0), B.val(VIS_FENCED)))

    def async_init_bad(self, s: St, g: int):
        """model.hazards.async_init_visible: an async-proxy use of a barrier whose init no fence followed."""
        if g not in self.vis_bars:
            return FALSE
        return z3.And(s.v[f"vc{g}"] >= 0, s.v[f"vs{g}"] == 0)

    def _together(self, s: St, c: int, i: int, out) -> Move:
        """model._together (--lockstep): the classes of one warp at one statement run it one after another in
        a single step; blocked for one, blocked for all."""
        members = self.model.partners[(c, self.codes[c].nodes[i].pc)]
        cands = {mc: [i] if mc == c else [j for j in self.codes[mc].live(s.t) if self.codes[mc].nodes[j].pc == mpc]
                 for mc, mpc in members}
        # the model's outcomes are the product of the members' alternatives, the first member's most significant
        rest, digits = out, {}
        for mc, _ in reversed(members[1:]):
            if any(len(self.codes[mc].nodes[j].succ) > 1 for j in cands[mc]):
                radix = B.val(1)
                for j in cands[mc]:
                    radix = z3.If(self.at(s, mc, j), B.val(len(self.codes[mc].nodes[j].succ)), radix)
                digits[mc] = z3.URem(rest, radix)
                rest = z3.UDiv(rest, radix)
        digits[c] = rest
        cur = s
        guard, bad, unsup, touched, nout = [], [], [], {}, []
        for mc, mpc in members:
            parts = [(self.at(cur, mc, j), self._thread(cur, mc, j, digits.get(mc, B.val(0)), alone=False))
                     for j in cands[mc]]
            guard.append(z3.Or([z3.And(a, mv.guard) for a, mv in parts]) if parts else FALSE)
            bad += [z3.And(a, mv.bad) for a, mv in parts]
            unsup += [z3.And(a, mv.unsup) for a, mv in parts]
            nout.append(z3.Or([z3.And(a, mv.nout) for a, mv in parts]) if parts else FALSE)
            nv = dict(cur.v)
            for a, mv in parts:
                for name, cond, value in mv.upd:
                    nv[name] = z3.If(z3.And(a, cond), value, nv[name])
                    touched[name] = None
            cur = St(s.t, nv)
        upd = [(name, TRUE, cur.v[name]) for name in touched]
        return Move(z3.And(guard), upd, z3.Or(bad) if bad else FALSE, z3.Or(unsup) if unsup else FALSE, z3.And(nout))

    def _coll(self, s: St, c: int, i: int, n: Node, out, m: int) -> Move:
        """model._coll_count: arrive m threads; the last arrival releases every waiter of the generation."""
        v = s.v
        key, count = n.args["key"], n.args["n"]
        ki = self.key_index[key]
        arrived = v[f"co{ki}"] + m
        last = arrived >= count
        upd: list = [(f"co{ki}", TRUE, z3.If(last, 0, arrived))]
        unsup = [arrived > count]  # the class would split: some of it goes on, the rest waits
        # the released waiters, in the model's order; one whose next step is a `choose` adds a digit to the
        # outcome index (the model's outcomes are the product: the mover's alternatives, then each waiter's)
        released: list[tuple[int, list[int]]] = []
        for d, code in enumerate(self.codes):
            ws = [w for w in code.live(s.t) if code.nodes[w].op is COLL_WAIT and d != c
                  and self.wait_key(d, code.nodes[w]) == key]
            if ws:
                released.append((d, ws))
        rest, digits = out, {}
        for d, ws in reversed(released):
            if any(len(self.codes[d].nodes[w].succ) > 1 for w in ws):
                radix = B.val(1)
                for w in ws:
                    radix = z3.If(z3.And(last, self.at(s, d, w)), B.val(len(self.codes[d].nodes[w].succ)), radix)
                digits[d] = z3.URem(rest, radix)
                rest = z3.UDiv(rest, radix)
        if n.op is COLL:
            nout = z3.If(last, rest < len(n.succ), rest == 0)
            upd.append((f"loc{c}", TRUE, z3.If(last, self._pick(n.succ, rest), n.wait_node)))
        else:
            nout = rest < max(1, len(n.succ))
            upd.append((f"loc{c}", TRUE, self._pick(n.succ, rest)))
        for b, d in sorted(self.dirty_pairs):  # a sync ends this class's window to fence its writes
            if d == c:
                upd.append((f"dt{b}.{c}", v[f"dt{b}.{c}"] != 0, B.val(SYNCED)))
        pub = VIS_PUB + ki
        for g in sorted(self.vis_bars):  # a sync publishes this class's fenced inits; the release makes them visible
            vs = z3.If(z3.And(v[f"vc{g}"] == c, v[f"vs{g}"] == VIS_FENCED), B.val(pub), v[f"vs{g}"])
            shown = z3.And(last, vs == pub)
            if key[0] != "c":
                upd.append((f"vs{g}", TRUE, z3.If(shown, B.val(VIS_CTA), vs)))
            else:
                upd += [(f"vs{g}", TRUE, vs), (f"vc{g}", shown, B.val(-1))]
        for d, ws in released:
            for w in ws:
                succ = self.codes[d].nodes[w].succ
                upd.append((f"loc{d}", z3.And(last, self.at(s, d, w)),
                            self._pick(succ, digits[d]) if d in digits else B.val(succ[0])))
        return Move(TRUE, upd, FALSE, z3.Or(unsup), nout)

    # ------------------------------------------------------------ asynchronous movers
    def _async_l(self, s: St, k: int) -> Move:
        """model._land: copy k lands (tags; a TMA load's bytes complete_tx its barrier)."""
        v = s.v
        buf, tag, nbytes, g = self.flights[k][2][:4]
        guard = v[f"fl{k}"] if k not in self.twin else z3.And(v[f"fl{k}"], z3.Not(v[f"fl{self.twin[k]}"]))
        upd: list = [(f"fl{k}", TRUE, FALSE)]
        bad = [self.write_bad(s, buf, landing=True)]
        self.tags(upd, TRUE, buf, B.val(tag))
        if g >= 0:
            nb, b_bad = B.tx(self.bar(s, g), -nbytes)
            self.put_bar(upd, g, TRUE, nb, g in self.dyn)
            bad.append(b_bad)
        return Move(guard, upd, z3.Or(bad))

    def _async_m(self, s: St, u: int) -> Move:
        """model._mma_done: the oldest group of unit u completes (and writes its result)."""
        v = s.v
        done = v[f"done{u}"]
        mine = [(q, r) for (uu, q), (_, r) in self.seqs.items() if uu == u]
        guard = z3.Or([z3.And(done == q, v[f"fo{u}.{q}"]) for q, _ in mine]) if mine else FALSE
        upd: list = [(f"done{u}", TRUE, done + 1)]
        bad = []
        for q, res in mine:
            now = done == q
            for rb, rt in res:  # both CTAs' accumulator halves with cta_group 2
                bad.append(z3.And(now, self.write_bad(s, rb, landing=True, done_plus=u)))
                self.tags(upd, now, rb, B.val(rt) if rt is not None else v[f"buf{rb}"])
        return Move(guard, upd, z3.Or(bad) if bad else FALSE)

    def _async_s(self, s: St, k: int) -> Move:
        """model._store_step: bulk store k finishes reading its SMEM, then finishes writing."""
        st = s.v[f"st{k}"]
        return Move(st != 0, [(f"st{k}", TRUE, z3.If(st == READING, B.val(WRITING), B.val(0)))])

    def _async_k(self, s: St, k: int) -> Move:
        """model._commit_fire: an owed arrival (tcgen05.commit, cp.async.mbarrier.arrive) once its work completed."""
        v = s.v
        kind, unit, upto, bars, _, _, who, m = self.commits[k][2]
        if kind == "mma":
            ready = v[f"done{unit}"] >= upto
        else:
            ready = z3.Not(z3.Or([v[f"fl{j}"] for j, (_, _, e) in enumerate(self.flights)
                                  if e[5] == unit and e[3] < 0 and e[6] < upto] or [FALSE]))
        upd: list = [(f"cm{k}", TRUE, FALSE)]
        bad = []
        lay = self.model.layout
        for g in bars:
            bad.append(v[f"ex{g // lay.nbar}"])
            nb, b_bad = B.repeat(self.bar(s, g), "arrive", m, 1, who)
            self.put_bar(upd, g, TRUE, nb, g in self.dyn)
            bad.append(b_bad)
        return Move(z3.And(v[f"cm{k}"], ready), upd, z3.Or(bad) if bad else FALSE)

    def _async_x(self, s: St, cta: int) -> Move:
        """model._exit: a CTA whose threads all finished exits; anything still in flight into it is a finding."""
        v = s.v
        m, lay = self.model, self.model.layout
        fin = []
        for c in m.cta_classes[cta]:
            ends = self.codes[c].ends_by(s.t)
            fin.append(z3.Or([self.at(s, c, e) for e in ends]) if ends else FALSE)
        bad = [v[f"fl{k}"] for k, (_, _, e) in enumerate(self.flights) if e[0] // lay.nbuf == cta]
        bad += [self.mma_inflight(s, q) for q, (ops, res) in self.seqs.items()
                if m.unit_cta[q[0]] == cta or any(b // lay.nbuf == cta for b, _ in ops + res)]
        bad += [v[f"st{k}"] == READING for k, (_, _, b) in enumerate(self.stores) if b // lay.nbuf == cta]
        bad += [v[f"cm{k}"] for k, (_, _, e) in enumerate(self.commits) if any(g // lay.nbar == cta for g in e[3])]
        return Move(z3.And(z3.Not(v[f"ex{cta}"]), *fin), [(f"ex{cta}", TRUE, TRUE)], z3.Or(bad) if bad else FALSE)

    # ------------------------------------------------------------ the replay's side
    def nodes_of(self, x: int, t: int) -> list[int]:
        kind, k = self.kinds[x]
        return self.codes[k].live(t) if kind == "t" else [0]

    def unfinished(self, s: St):
        """Some class has not reached its end."""
        out = []
        for c, code in enumerate(self.codes):
            ends = code.ends_by(s.t)
            out.append(z3.Not(z3.Or([self.at(s, c, e) for e in ends])) if ends else TRUE)
        return z3.Or(out)

