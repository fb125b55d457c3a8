"""Symmetry of identical role instances and warps: states that differ only in which is which are one state.

Instances of a role whose thread classes have the same code and sizes (`consumer[4]`
whose code never reads `instance`) are interchangeable, and so are the warps of one role
instance whose classes have the same code and lanes (the four warps of a math warpgroup
whose lanes 0 and 1 each signal). Each state is replaced by a canonical one: first the
warps of every instance, then the instances, sorted by everything that belongs to them,
with every class, MMA unit and collective renamed accordingly. A wrapper around any model
with that state layout; switch it off with --no-symmetry.
"""
from __future__ import annotations

import pickle
from collections import Counter
from typing import Any, Iterator

from ..model.ir import COLL
from ..model.state import State
from ..model.system import Model


_WARP_KEYS = ("e", "w", "r")  # collectives of one warp: (kind, cta, role, instance, warp, ...)
_PICKLES = 200_000  # warp places kept with their bytes (then dropped all at once: memory stays bounded)
_CANONS = 20_000  # states kept with their canonical state (then dropped all at once)


class Symmetric:
    def __init__(self, model: Model):
        self.model = model
        self.groups = self._groups(model)
        self.warp_groups = self._warp_groups(model)
        self._pickled: dict[tuple, bytes] = {}  # where a warp's classes stand -> the bytes that order warps
        self._canons: dict[State, State] = {}  # a state -> its canonical state (`canon`)

    @staticmethod
    def _warp_groups(model: Model) -> list[list[tuple[tuple, tuple[int, ...]]]]:
        """Per role instance: lists of interchangeable warps as ((cta, role, instance, warp), classes).

        Warps are interchangeable when their classes pair up with the same code, lanes and MMA unit,
        and every class that spans several warps holds the same lanes of each."""
        by_inst: dict[tuple, list] = {}
        for cl in model.classes:
            by_inst.setdefault((cl.cta, cl.role, cl.instance), []).append(cl)
        groups = []
        for (cta, role, inst), cls in sorted(by_inst.items()):
            own: dict[int, list] = {}
            spanning = []
            for cl in cls:
                warps = {t // 32 for t in cl.members}
                if len(warps) == 1:
                    own.setdefault(next(iter(warps)), []).append(cl)
                else:
                    spanning.append(cl)
            by_shape: dict[tuple, list] = {}
            # setmaxnreg meets per warpgroup (its collective names the warpgroup): swap warps only within one
            nreg = any(i.op is COLL and i.a == "setmaxnreg" for c in cls for i in model.code[c.id])
            for w, wcls in sorted(own.items()):
                wcls.sort(key=lambda c: c.members)
                shape = tuple((tuple(t % 32 for t in c.members), c.program, model.mma_unit[c.id]) for c in wcls)
                shape += ((w // 4,) if nreg else ())
                by_shape.setdefault(shape, []).append((w, tuple(c.id for c in wcls)))
            for members in by_shape.values():
                if len(members) < 2:
                    continue
                warps = [w for w, _ in members]
                if any(len({tuple(t % 32 for t in c.members if t // 32 == w) for w in warps}) > 1 for c in spanning):
                    continue
                groups.append([((cta, role, inst, w), ids) for w, ids in members])
        return groups

    @staticmethod
    def _groups(model: Model) -> list[list[tuple[int, tuple[int, ...], tuple[int, ...]]]]:
        """Per (cta, role): lists of interchangeable instances as (instance, classes, MMA units)."""
        by_role: dict[tuple[int, int], dict[int, list]] = {}
        for cl in model.classes:
            by_role.setdefault((cl.cta, cl.role), {}).setdefault(cl.instance, []).append(cl)
        groups = []
        for (cta, role), insts in sorted(by_role.items()):
            if len(insts) < 2:
                continue
            by_shape: dict[tuple, list] = {}
            for inst, cls in sorted(insts.items()):
                shape = tuple((c.size, c.warp, c.warpgroup, c.program, c.members) for c in cls)
                units = tuple(dict.fromkeys(model.mma_unit[c.id] for c in cls if model.mma_unit[c.id] >= 0))
                by_shape.setdefault(shape, []).append((inst, tuple(c.id for c in cls), units))
            for members in by_shape.values():
                if len(members) > 1:
                    groups.append(members)
        return groups

    @property
    def active(self) -> bool:
        return bool(self.groups or self.warp_groups)

    # ------------------------------------------------------------ the transition-system interface
    def initial(self) -> State:
        return self.canon(self.model.initial())

    def successors(self, s: State) -> list:
        return self.canon_successors(self.model.successors(s))

    def raw_successors(self, s: State) -> list:
        """The model's successors of s, not yet canonical (por.Reduced maps only those it keeps)."""
        return self.model.successors(s)

    def lazy_successors(self, s: State) -> list:
        """The model's successors of s per group and event, made when asked (`Model.lazy_successors`), not yet
        canonical."""
        return self.model.lazy_successors(s)

    def probe_schedules(self) -> tuple:
        """`Model.probe_schedules`, each move's state canonical."""
        def canonical(move_of):
            def move(s: State) -> tuple | None:
                m = move_of(s)
                return None if m is None else (m[0], self.canon(m[1]), m[2])
            return move
        return tuple(canonical(m) for m in self.model.probe_schedules())

    def canon_successors(self, succ: list) -> list:
        return [(a, self.canon(t), f) for a, t, f in succ]

    def step(self, s: State, action: Any):
        t, f = self.model.step(s, action)
        return self.canon(t), f

    def steps(self, s: State, action: Any) -> list:
        """`Model.steps`, with the state after the last step canonical (as `step` leaves it)."""
        out = self.model.steps(s, action)
        a, t, f = out[-1]
        out[-1] = (a, self.canon(t), f)
        return out

    def terminal_findings(self, s: State):
        return self.model.terminal_findings(s)

    # ------------------------------------------------------------ canonical states
    def _signature(self, s: State, classes: tuple[int, ...], units: tuple[int, ...], warp: tuple = (),
                   owned: dict | None = None) -> bytes:
        """What tells a role instance's (or a warp's) classes apart from another's; `owned` (`_owned`): the state's
        records by the class they belong to, when several signatures of one state are taken."""
        local = {c: k for k, c in enumerate(classes)}
        lu = {u: k for k, u in enumerate(units)}

        def rc(c):
            return local.get(c, ("x", c))

        if owned is None:
            owned = self._owned(s, classes)
        mine = [owned[c] for c in classes if c in owned]
        mmas = tuple((d, f, tuple((q, ops, site, rc(c), out) for q, ops, site, c, out in inf))
                     for d, f, inf in (s.mmas[u] for u in units))
        stores = sorted((rc(c), q, b, t, st, si) for o in mine for c, q, b, t, st, si in o[0])
        dirty = sorted((b, rc(c), y) for o in mine for b, c, y in o[1])
        flight = sorted(op[:5] for o in mine for op in o[2])
        commits = sorted((k[0], lu.get(k[1], rc(k[1])) if k[0] == "mma" else rc(k[1]), k[2], k[3], rc(k[5]), k[7])
                         for o in mine for k in o[3])
        arrivers = tuple(sorted(gr for o in mine for gr in o[4]))
        colls = tuple((k[0],) + k[5:] + (a, n) for k, a, n in self._warp_colls(s, warp)) if warp else ()
        sig = (tuple(s.locs[c] for c in classes), mmas, tuple(stores), tuple(dirty), tuple(flight), tuple(commits),
               arrivers, colls)
        return pickle.dumps(sig, 5)

    @staticmethod
    def _owned(s: State, classes: tuple[int, ...] | None = None) -> dict:
        """Per class (of `classes`; None: every class), its records in s: bulk stores, dirty buffers, copies in
        flight, commits, and the (barrier, round) of its recorded arrivals."""
        out: dict = {}

        def rec(c):
            hit = out.get(c)
            if hit is None:
                hit = out[c] = ([], [], [], [], [])
            return hit
        want = None if classes is None else set(classes)
        # each record by the class it belongs to: a store's issuer, a dirty write's writer, a copy's or commit's source
        for k, (records, at) in enumerate(((s.stores, 0), (s.dirty, 1), (s.flight, 5), (s.commits, 5))):
            for e in records:
                if want is None or e[at] in want:
                    rec(e[at])[k].append(e)
        for g, b in enumerate(s.bars):
            if b is not None:
                for c, r in b.arrivers:
                    if want is None or c in want:
                        rec(c)[4].append((g, r))
        return out

    def canon(self, s: State) -> State:
        """The canonical state of s. Kept for the last states mapped (`_CANONS`): replaying a witness (the cause
        grouping, the report) maps the very states its search mapped."""
        memo = self._canons
        hit = memo.get(s)
        if hit is None:
            hit = self._canon(s)
            if len(memo) >= _CANONS:
                memo.clear()
            memo[s] = hit
        return hit

    def _canon(self, s: State) -> State:
        if self.warp_groups:
            s = self._canon_warps(s)
        if not self.groups:
            return s
        cmap: dict[int, int] = {}
        umap: dict[int, int] = {}
        imap: dict[tuple, int] = {}
        for members in self.groups:
            order = sorted(range(len(members)), key=lambda i: self._signature(s, members[i][1], members[i][2]))
            if order == list(range(len(members))):
                continue
            role_key = None
            for new, old in enumerate(order):
                inst_new, cls_new, units_new = members[new]
                inst_old, cls_old, units_old = members[old]
                for a, b in zip(cls_old, cls_new):
                    cmap[a] = b
                for a, b in zip(units_old, units_new):
                    umap[a] = b
                role_key = (self.model.classes[cls_new[0]].cta, self.model.classes[cls_new[0]].role)
                imap[role_key + (inst_old,)] = inst_new
        if not cmap:
            return s
        return self._rename(s, cmap, umap, imap)

    def _canon_warps(self, s: State) -> State:
        cmap: dict[int, int] = {}
        wmap: dict[tuple, int] = {}
        locs = s.locs
        pk = self._pickled
        owned = None  # the state's records by class, once a signature is needed
        for members in self.warp_groups:
            # where the warps stand tells them apart most of the time; the whole signature breaks ties
            keys: list = []
            for _, cls in members:
                where = tuple([locs[c] for c in cls])
                k = pk.get(where)
                if k is None:
                    if len(pk) >= _PICKLES:
                        pk.clear()
                    k = pk[where] = pickle.dumps(where, 5)
                keys.append(k)
            if len(set(keys)) < len(keys):  # only warps that stand together need the rest of the signature
                seen = Counter(keys)
                if owned is None:
                    owned = self._owned(s)
                # warps that stand together and own no record (no store, write, copy, commit, arrival or warp
                # collective of theirs) have equal signatures: their order stays as it is without taking them
                marked = {k for k, (where, cls) in zip(keys, members)
                          if seen[k] > 1 and (any(c in owned for c in cls) or any(self._warp_colls(s, where)))}
                keys = [(k, self._signature(s, cls, (), where, owned) if k in marked else b"")
                        for k, (where, cls) in zip(keys, members)]
            order = sorted(range(len(members)), key=keys.__getitem__)
            if order == list(range(len(members))):
                continue
            for new, old in enumerate(order):
                (where_new, cls_new), (where_old, cls_old) = members[new], members[old]
                for a, b in zip(cls_old, cls_new):
                    cmap[a] = b
                wmap[where_old] = where_new[3]
        if not cmap:
            return s
        return self._rename(s, cmap, {}, {}, wmap)

    @staticmethod
    def _warp_colls(s: State, warp: tuple) -> Iterator[tuple]:
        """The warp-level collectives of this warp (cta, role, instance, warp) that have arrivals in s."""
        return (e for e in s.colls if e[0][0] in _WARP_KEYS and e[0][1:5] == warp)

    def _rename(self, s: State, cmap: dict[int, int], umap: dict[int, int], imap: dict[tuple, int],
                wmap: dict[tuple, int] | None = None) -> State:
        c_ = lambda c: cmap.get(c, c)  # noqa: E731
        u_ = lambda u: umap.get(u, u)  # noqa: E731
        locs = list(s.locs)
        for a, b in cmap.items():
            locs[b] = s.locs[a]
        mmas = list(s.mmas)
        for a, b in umap.items():
            d, f, inf = s.mmas[a]
            mmas[b] = (d, f, tuple((q, ops, site, c_(c), out) for q, ops, site, c, out in inf))
        for u in range(len(mmas)):
            if u not in umap:
                d, f, inf = mmas[u]
                if any(c in cmap for _, _, _, c, _ in inf):
                    mmas[u] = (d, f, tuple((q, ops, site, c_(c), out) for q, ops, site, c, out in inf))
        bars = tuple(b if b is None or not any(c in cmap for c, _ in b.arrivers)
                     else b._replace(arrivers=frozenset((c_(c), r) for c, r in b.arrivers)) for b in s.bars)
        flight = tuple(sorted(op[:5] + (c_(op[5]), op[6]) for op in s.flight))
        stores = tuple(sorted((c_(c), q, b, t, st, si) for c, q, b, t, st, si in s.stores))
        dirty = tuple(sorted((b, c_(c), y) for b, c, y in s.dirty))
        vis = tuple(sorted((g, c_(c), st) for g, c, st in s.vis))
        commits = tuple(sorted((k[0], u_(k[1]) if k[0] == "mma" else c_(k[1]), k[2], k[3], k[4], c_(k[5]),
                                (c_(k[6][0]),) + tuple(k[6][1:]), k[7]) for k in s.commits))
        colls = tuple(sorted((self._rename_key(k, imap, wmap), a, n) for k, a, n in s.colls))
        t5 = tuple(sorted((e[0], e[1], c_(e[2])) if e[0] == "c" else
                          (e[0], self._rename_key(e[1], imap, wmap), c_(e[2])) if e[0] == "a" else
                          e if e[0] == "f" else (e[0], c_(e[1])) for e in s.t5)) if s.t5 else s.t5
        return State(tuple(locs), bars, s.bufs, flight, colls, tuple(mmas), stores, dirty, vis, commits, s.exited,
                     s.halted, t5)

    @staticmethod
    def _rename_key(key: tuple, imap: dict[tuple, int], wmap: dict[tuple, int] | None = None) -> tuple:
        if key[0] in _WARP_KEYS:  # warp-level collectives name their role instance and warp
            if wmap:
                warp = wmap.get(key[1:5])
                if warp is not None:
                    return key[:4] + (warp,) + key[5:]
            inst = imap.get((key[1], key[2], key[3]))
            if inst is not None:
                return key[:3] + (inst,) + key[4:]
        return key
