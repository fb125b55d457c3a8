"""The mbarrier rules of `semantics.py` written over z3 terms, for the bmc engine.

Each operation returns the barrier after it and whether `semantics` would raise an event
the model reports (a fault, a double arrival, an expected count dropped to zero). A step
that raises one ends the search there, so the state after it need not be exact.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from .. import semantics as S

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


def complete(b: Bar) -> Bar:
    """S._complete_if_ready: a phase completes when pending == 0 and tx == 0 exactly."""
    done = z3.And(b.pending == 0, b.tx == 0)
    return Bar(b.live, z3.If(done, b.phase + 1, b.phase), z3.If(done, b.expected, b.pending), b.expected,
               z3.If(done, 0, b.tx), {k: z3.And(z3.Not(done), v) for k, v in b.arr.items()})


def arrive(b: Bar, count: int, who, tx: int, first) -> tuple[Bar, Any]:
    """S.arrive for one thread; `first` as in the model (the class's first thread in this phase)."""
    t = b.tx + tx if tx else b.tx
    bad = z3.Or(_out_of_range(t) if tx else FALSE, b.pending == 0, b.pending < count)
    if who in b.arr:
        bad = z3.Or(bad, z3.And(first, b.arr[who]))
        arr = dict(b.arr)
        arr[who] = z3.Or(b.arr[who], first)
    else:
        arr = b.arr
    return complete(Bar(b.live, b.phase, b.pending - count, b.expected, t, arr)), bad


def tx(b: Bar, delta: int) -> tuple[Bar, Any]:
    """S.expect_tx (delta > 0) and S.complete_tx (delta < 0, bytes landing)."""
    moved = b.replace(tx=b.tx + delta)
    return complete(moved), z3.Or(z3.Not(b.live), _out_of_range(moved.tx))


def repeat(b: Bar, op: str, m: int, count: int = 1, who=None, txb: int = 0) -> tuple[Bar, Any]:
    """m threads of one class doing an arrive-like op one after another, as model._barrier_op does:
    a later thread is `first` only when the phase moved on since the thread before it."""
    bad = z3.Not(b.live)
    prev = None
    for _ in range(m):
        first = TRUE if prev is None else b.phase != prev
        prev = b.phase
        if op == "arrive":
            b, e = arrive(b, count, who, txb, first)
        elif op == "drop":
            expected = b.expected - count
            bad = z3.Or(bad, expected <= 0)
            b, e = arrive(b.replace(expected=expected), count, who, 0, first)
        else:
            b, e = tx(b, count if op == "expect" else -count)
        bad = z3.Or(bad, e)
    return b, bad
