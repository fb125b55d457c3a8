"""The mbarrier rules of `semantics.py` written over z3 terms, for the bmc engine.

Each operation returns the barrier after it and whether `semantics` raises an event the model reports
(a fault, a double arrival, a count dropped to zero); such a step ends the search, so what follows is free.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from ..model import semantics as S

WIDTH = 32  # bit-vectors, not integers: the search is then pure SAT after bit-blasting, much faster


def bv(name: str) -> z3.BitVecRef:
    return z3.BitVec(name, WIDTH)


def val(v: int) -> z3.BitVecRef:
    return z3.BitVecVal(v, WIDTH)


FALSE = z3.BoolVal(False)
TRUE = z3.BoolVal(True)


@dataclass
class Bar:
    live: Any  # initialised and not invalidated (semantics: the Barrier is not None)
    phase: Any
    pending: Any
    expected: Any
    tx: Any
    arr: dict  # who (class, ring round) -> Bool: recorded as arrived in the current phase

    def replace(self, **kw) -> "Bar":
        d = dict(live=self.live, phase=self.phase, pending=self.pending, expected=self.expected, tx=self.tx,
                 arr=self.arr)
        d.update(kw)
        return Bar(**d)


def _out_of_range(tx) -> Any:
    return z3.Or(tx > S.MAX_TX, tx < -S.MAX_TX)


def complete(b: Bar) -> tuple[Bar, Any]:
    """S._complete_if_ready: a phase completes when pending == 0 and tx == 0 exactly. Also returns whether it did;
    the arrivals recorded in the phase are the caller's to clear (see `repeat`)."""
    done = z3.And(b.pending == 0, b.tx == 0)
    return Bar(b.live, z3.If(done, b.phase + 1, b.phase), z3.If(done, b.expected, b.pending), b.expected,
               z3.If(done, 0, b.tx), b.arr), done


def repeat(b: Bar, op: str, m: int, count: int = 1, who=None, txb: int = 0) -> tuple[Bar, Any]:
    """m threads of one class doing an op one after another, as model._barrier_op does (`first` as there).

    Only the first thread can arrive twice: a later one is `first` only right after a completion, which
    cleared the recorded arrivals. So the recorded arrivals after the m threads follow from two facts: did any
    thread complete the phase (all cleared), and did the last one (then this class's arrival is not recorded).
    """
    if op == "arrive" and count == 1 and not txb and m > 1 and z3.is_bv_value(b.expected) \
            and b.expected.as_long() >= 1:
        return _arrive_many(b, m, who)
    bad = [z3.Not(b.live)]
    if who is not None and who in b.arr:
        bad.append(b.arr[who])  # S.arrive: the first thread finds its class already recorded in this phase
    any_done, done = FALSE, FALSE
    for _ in range(m):
        if op in ("arrive", "drop"):
            if op == "drop":
                b = b.replace(expected=b.expected - count)
                bad.append(b.expected <= 0)
            t = b.tx + txb if txb else b.tx
            if txb:
                bad.append(_out_of_range(t))
            bad += [b.pending == 0, b.pending < count]
            b, done = complete(b.replace(pending=b.pending - count, tx=t))
        else:
            b = b.replace(tx=b.tx + (count if op == "expect" else -count))
            bad.append(_out_of_range(b.tx))
            b, done = complete(b)
        any_done = z3.Or(any_done, done)
    arr = {k: z3.And(v, z3.Not(any_done)) for k, v in b.arr.items()}
    if who is not None and who in arr:
        arr[who] = z3.Not(done)
    return b.replace(arr=arr), z3.Or(bad)


def _arrive_many(b: Bar, m: int, who) -> tuple[Bar, Any]:
    """`repeat` for m single arrivals on a barrier whose expected count E is fixed, in closed form (a warpgroup's
    128 arrivals would otherwise be 128 chained terms): with tx owed, no phase completes and each arrival needs
    a pending one; with none owed, the first P arrivals complete the phase and every E after that another."""
    e = b.expected.as_long()
    p, owed = b.pending, b.tx != 0
    bad = [z3.Not(b.live), p < 1, z3.And(owed, p < m)]
    if who is not None and who in b.arr:
        bad.append(b.arr[who])
    few = z3.Or(owed, p > m)  # no completion
    r = val(m) - p
    q, rem = z3.UDiv(r, e), z3.URem(r, e)
    phase = z3.If(few, b.phase, b.phase + 1 + q)
    pending = z3.If(few, p - m, e - rem)
    any_done = z3.Not(few)
    last = z3.And(any_done, rem == 0)
    arr = {k: z3.And(v, few) for k, v in b.arr.items()}
    if who is not None and who in arr:
        arr[who] = z3.Not(last)
    return Bar(b.live, phase, pending, b.expected, b.tx, arr), z3.Or(bad)


def tx(b: Bar, delta: int) -> tuple[Bar, Any]:
    """S.complete_tx of a landing copy (delta < 0): one event, as `repeat` with m = 1."""
    return repeat(b, "expect" if delta > 0 else "complete", 1, abs(delta))
