"""The second engine: bounded model checking of a Model's transition system in z3.

`bmc_moves` gives every move of the model as z3 terms (per thread class over its unrolled
code, per asynchronous operation, per CTA); this module chains them one transition per step
and searches for a finding at depth 0, 1, ... up to the bound. Every witness is replayed
through `model.step` before it is reported; a search that runs out of transitions before
the bound is complete, so its "no finding" is a proof.
"""
from __future__ import annotations

import time

import z3

from ..core.diagnostics import error
from ..model.ir import TCGEN05_OPS
from ..model.state import State
from ..model.system import Model
from ..search.explore import Exploration, Found, Limits
from . import bmc_bars as B
from .bmc_code import Unsupported
from .bmc_moves import Move, Moves, St

DEFAULT_DEPTH = 30  # proofs of no finding grow steeply with depth (docs/symbolic.md)


def _free(terms: list) -> set[str]:
    """The state variables (names without their step) a list of terms reads."""
    out: set[str] = set()
    seen: set[int] = set()
    stack = [t for t in terms if t is not None and not isinstance(t, bool)]
    while stack:
        t = stack.pop()
        i = t.get_id()
        if i in seen:
            continue
        seen.add(i)
        if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            name = t.decl().name()
            if "@" in name and not name.startswith(("who@", "out@")):
                out.add(name.rsplit("@", 1)[0])
        else:
            stack.extend(t.children())
    return out


class Encoding:
    """The transition system of one Model, unrolled step by step into z3 constraints."""

    def __init__(self, model: Model):
        self.model = model
        self.mv = Moves(model)
        self.nmovers = len(self.mv.kinds)
        self.steps: list[St] = []
        self.outs: list = []
        self.who: list = []
        self.cs: list = []
        self.bad_at: list[tuple] = []  # per transition: (a finding, a spec error, something not encoded)
        self._moves: dict[int, dict[tuple[int, int], Move]] = {}
        self._guards: dict[int, list] = {}
        self.fp: dict[tuple[int, int], tuple[frozenset, frozenset]] = {}  # (mover, node) -> (reads, writes)
        s0 = self._fresh(0)
        self.cs += self.mv.initial(s0)
        self.steps.append(s0)

    def _fresh(self, t: int) -> St:
        s = self.mv.fresh(t)
        self.outs.append(B.bv(f"out@{t}"))
        return s

    # -- the moves of one state, with their footprints for the reduction
    def moves(self, t: int) -> dict[tuple[int, int], Move]:
        if t not in self._moves:
            s, out = self.steps[t], self.outs[t]
            got = {}
            for x in range(self.nmovers):
                thread = self.mv.kinds[x][0] == "t"
                for i in self.mv.nodes_of(x, t):
                    node = self.mv.codes[x].nodes[i] if thread else None
                    if node is not None and self.mv.enabled(s, x, node) is None:
                        continue
                    mv = self.mv.move(s, x, i, out)
                    got[(x, i)] = mv
                    if (x, i) not in self.fp:
                        terms = [mv.guard, mv.bad, mv.unsup, mv.nout]
                        terms += [u for _, cnd, val in mv.upd for u in (cnd, val)]
                        reads = _free(terms) | ({f"loc{x}"} if thread else set())
                        writes = {name for name, _, _ in mv.upd} | ({"*"} if node is not None and node.error else set())
                        self.fp[(x, i)] = (frozenset(reads | writes), frozenset(writes))
            self._moves[t] = got
        return self._moves[t]

    def guards(self, t: int) -> list:
        """Per mover, whether it can move in state t."""
        if t not in self._guards:
            s = self.steps[t]
            per: list[list] = [[] for _ in range(self.nmovers)]
            for (x, i), mv in self.moves(t).items():
                if self.mv.kinds[x][0] == "t":
                    per[x].append(z3.And(self.mv.at(s, x, i), mv.guard))
                else:
                    per[x].append(mv.guard)
            self._guards[t] = [z3.Or(g) if g else B.FALSE for g in per]
        return self._guards[t]

    def _dependent(self, t: int, a: int, b: int):
        """Whether the moves of movers a and b in state t may not commute: a formula over their nodes, or None
        when they never commute."""
        s = self.steps[t]
        mv = self.moves(t)
        at = lambda x, i: self.mv.at(s, x, i) if self.mv.kinds[x][0] == "t" else B.TRUE  # noqa: E731
        nb = [j for j in self.mv.nodes_of(b, t) if (b, j) in mv]
        terms = []
        always = True
        for i in (i for i in self.mv.nodes_of(a, t) if (a, i) in mv):
            ra, wa = self.fp[(a, i)]
            deps = [j for j in nb if "*" in wa or "*" in self.fp[(b, j)][1] or wa & self.fp[(b, j)][0]
                    or self.fp[(b, j)][1] & ra]
            always = always and len(deps) == len(nb)
            if deps:
                terms.append(z3.And(at(a, i), z3.Or([at(b, j) for j in deps])) if len(deps) < len(nb) else at(a, i))
        if always:
            return None
        return z3.Or(terms) if terms else B.FALSE

    def extend(self) -> None:
        """Add the transition from the last state to a new one."""
        t = len(self.steps) - 1
        s = self.steps[t]
        nx = self._fresh(t + 1)
        who, out = B.bv(f"who@{t}"), self.outs[t]
        self.who.append(who)
        g = self.guards(t)
        cs = [who >= 0, who < self.nmovers, out >= 0]
        for x, guard in enumerate(g):
            cs.append(z3.Implies(who == x, guard))
        if t > 0:  # partial-order reduction: of two adjacent independent moves, only the lower-numbered goes first
            prev = self.who[t - 1]
            for a in range(self.nmovers):
                for b in range(a):
                    dep = self._dependent(t - 1, a, b)
                    if dep is not None:
                        cs.append(z3.Implies(z3.And(prev == a, who == b), dep))
        upd: dict[str, list] = {}
        bad, err, unsup = [], [], []
        for (x, i), mv in self.moves(t).items():
            here = who == x
            if self.mv.kinds[x][0] == "t":
                here = z3.And(here, self.mv.at(s, x, i))
                if self.mv.codes[x].nodes[i].error is not None:
                    err.append(here)
            cs.append(z3.Implies(here, mv.nout if mv.nout is not None else out == 0))
            for name, cond, value in mv.upd:
                upd.setdefault(name, []).append((z3.And(here, cond), value))
            bad.append(z3.And(here, mv.bad))
            unsup.append(z3.And(here, mv.unsup))
        for name, var in nx.v.items():  # every variable keeps its value unless a move changed it
            v = s.v[name]
            for cond, value in reversed(upd.get(name, [])):
                v = z3.If(cond, value, v)
            cs.append(var == v)
        self.cs += cs
        self.steps.append(nx)
        self.bad_at.append((z3.Or(bad) if bad else B.FALSE, z3.Or(err) if err else B.FALSE,
                            z3.Or(unsup) if unsup else B.FALSE))

    def hang(self, t: int):
        """State t has no move left and some thread unfinished."""
        return z3.And(z3.Not(z3.Or(self.guards(t))), self.mv.unfinished(self.steps[t]))


# ---------------------------------------------------------------- the search


def _solver(assertions: list, extra, timeout: float | None) -> z3.Solver:
    """A fresh bit-blasting solver per question: much faster on these queries than one incremental solver."""
    s = z3.Then("simplify", "propagate-values", "solve-eqs", "bit-blast", "sat").solver()
    if timeout is not None:
        s.set("timeout", max(1, int(1000 * timeout)))
    s.add(*assertions)
    s.add(extra)
    return s


def refuse_unmodelled(model: Model, sites: list) -> None:
    """The statements the bmc encoding does not model, refused by name at the first one (exit 2): tcgen05
    ordering and tensor memory (model/tcgen05.py) are the explicit engine's only."""
    for code in model.code:
        for ins in code:
            if ins.op in TCGEN05_OPS:
                raise error("usage", f"--engine bmc does not model tcgen05 ordering or tensor memory "
                            f"('{ins.text}'); verify this spec with the explicit engine (the default)",
                            sites[ins.site].span if 0 <= ins.site < len(sites) else None)


def search(model: Model, limits: Limits = Limits(), depth: int = DEFAULT_DEPTH) -> Exploration:
    """Bounded search for a finding; the result has the explorer's shape (path of model actions)."""
    start = time.perf_counter()

    def result(complete: bool, d: int, found: list[Found], stopped: str | None, **extra) -> Exploration:
        return Exploration(complete, d, d, d, found, stopped, time.perf_counter() - start,
                           extra={"engine": "bmc", "bound": depth, **extra})

    try:
        enc = Encoding(model)
    except Unsupported as exc:
        return result(False, 0, [], "bmc-unsupported", unsupported=str(exc))
    for d in range(0, depth + 1):
        left = None if limits.timeout is None else limits.timeout - (time.perf_counter() - start)
        if left is not None and left <= 0:
            return result(False, d, [], "timeout")
        if d > 0:
            enc.extend()
        goal = z3.Or([enc.hang(d)] + (list(enc.bad_at[d - 1]) if d > 0 else []))
        s = _solver(enc.cs, goal, left)
        res = s.check()
        if res == z3.sat:
            found, note = _replay(enc, s.model(), d)
            if found is None:
                return result(False, d, [], note)
            return result(True, d, found, "first-finding")
        if res == z3.unknown:
            return result(False, d, [], "timeout")
        more = _solver(enc.cs, z3.Or(enc.guards(d)), left).check()
        if more == z3.unsat:  # every execution ends within d steps: no finding anywhere
            return result(True, d, [], None)
        if more == z3.unknown:
            return result(False, d, [], "timeout")
    return result(False, depth, [], "depth-bound")


def _replay(enc: Encoding, zm: z3.ModelRef, d: int) -> tuple[list[Found] | None, str]:
    """Turn z3's path into model actions and re-run it through model.step; only findings it shows are kept."""
    model = enc.model
    mv = enc.mv
    ev = lambda term: zm.eval(term, model_completion=True)  # noqa: E731
    if d > 0 and z3.is_true(ev(enc.bad_at[d - 1][2])):
        return None, "bmc-unsupported"
    state: State = model.initial()
    path: list = []
    found: list[Found] = []
    for t in range(d):
        x = ev(enc.who[t]).as_long()
        out = ev(enc.outs[t]).as_long()
        kind, k = mv.kinds[x]
        s = enc.steps[t]
        if kind == "t":
            if len(state.locs[k]) != 1:
                return None, "bmc-unsupported"
            action: tuple = ("t", k, 0, out)
        elif kind == "l":
            entry = mv.flights[k][2]
            if entry not in state.flight:
                return None, "bmc-replay-failed"
            action = ("l", state.flight.index(entry))
        elif kind == "s":
            c, i, buf = mv.stores[k]
            site = model.code[c][mv.codes[c].nodes[i].pc].site
            entry = (c, ev(s.v[f"sg{k}"]).as_signed_long(), buf, ev(s.v[f"stag{k}"]).as_signed_long(),
                     ev(s.v[f"st{k}"]).as_long() - 1, site)
            if entry not in state.stores:
                return None, "bmc-replay-failed"
            action = ("s", state.stores.index(entry))
        elif kind == "k":
            entry = mv.commits[k][2]
            if entry not in state.commits:
                return None, "bmc-replay-failed"
            action = ("k", state.commits.index(entry))
        else:
            action = (kind, k)
        path.append(action)
        try:
            state, findings = model.step(state, action)
        except KeyError:
            return None, "bmc-replay-failed"
        if findings:
            found.extend(Found(f, tuple(path), False) for f in findings)
            return found, ""
    if not model.successors(state):
        found.extend(Found(f, tuple(path), True) for f in model.terminal_findings(state))
    return (found or None), ("" if found else "bmc-replay-failed")
