"""Conditions as formulas: the smallest predicate over named integers that holds at exactly the failing points.

`smallest` is given the explored points (parameter values, or the elements of a kernel `choose`) and the
ones that show a finding, and returns "K_TILES > STAGES", "K0 != K1", "(TILES == 1 and K == 2) or S == 4", or
None when no formula of at most MAX_ATOMS atoms fits (the caller then lists the points). Deterministic and
bounded: atoms in a fixed order, smaller formulas first, at most BUDGET combinations tried.
"""
from __future__ import annotations


from itertools import combinations
from typing import Sequence

from ..core.records import record

MAX_ATOMS = 3
BUDGET = 400_000  # combinations of atoms tried in all (each is a few integer operations on bitsets)
WIDE = 160  # atoms considered for formulas of two atoms
NARROW = 48  # and of three


@record
class Atom:
    text: str
    mask: int  # bit i: the atom holds at point i
    var: int = 0  # the first variable it names: a conjunction is printed in declaration order


def atoms(names: Sequence[str], rows: Sequence[tuple[int, ...]]) -> list[Atom]:
    """Every comparison of a variable with one of its values, and of two variables with each other (also
    off by one), in a fixed order, simplest first; of the atoms true at the same points only the first."""
    n = len(rows)
    full = (1 << n) - 1
    out: list[Atom] = []
    seen = {0, full}

    def put(text: str, mask: int, var: int) -> None:
        if mask not in seen:
            seen.add(mask)
            out.append(Atom(text, mask, var))

    def add(text: str, holds, var: int) -> None:
        mask = 0
        for i, row in enumerate(rows):
            if holds(row):
                mask |= 1 << i
        put(text, mask, var)

    values = [sorted({r[k] for r in rows}) for k in range(len(names))]
    eq: list[dict[int, int]] = [{c: 0 for c in vs} for vs in values]  # per variable and value: where it has it
    for i, row in enumerate(rows):
        for k, v in enumerate(row):
            eq[k][v] |= 1 << i
    for k, name in enumerate(names):
        for c in values[k]:
            put(f"{name} == {c}", eq[k][c], k)
    for k, name in enumerate(names):
        for c in values[k]:
            put(f"{name} != {c}", full & ~eq[k][c], k)
    for k, name in enumerate(names):
        below = 0
        for c in values[k]:
            below |= eq[k][c]
            put(f"{name} <= {c}", below, k)
        above = 0
        for c in reversed(values[k]):
            above |= eq[k][c]
            put(f"{name} >= {c}", above, k)
    pairs = list(combinations(range(len(names)), 2))
    for shift in (0, 1, -1):
        tail = "" if shift == 0 else f" + {shift}" if shift > 0 else f" - {-shift}"
        for a, b in pairs:
            x, y = names[a], names[b]
            if shift == 0:
                add(f"{x} == {y}", lambda r, a=a, b=b: r[a] == r[b], a)
                add(f"{x} != {y}", lambda r, a=a, b=b: r[a] != r[b], a)
            else:
                add(f"{x} == {y}{tail}", lambda r, a=a, b=b, s=shift: r[a] == r[b] + s, a)
            # the larger side first when nothing is added: "K_TILES > STAGES", not "STAGES < K_TILES"
            add(f"{x} > {y}{tail}", lambda r, a=a, b=b, s=shift: r[a] > r[b] + s, a)
            add(f"{y} > {x}" if shift == 0 else f"{x} < {y}{tail}", lambda r, a=a, b=b, s=shift: r[a] < r[b] + s, a)
            add(f"{x} >= {y}{tail}", lambda r, a=a, b=b, s=shift: r[a] >= r[b] + s, a)
            add(f"{y} >= {x}" if shift == 0 else f"{x} <= {y}{tail}", lambda r, a=a, b=b, s=shift: r[a] <= r[b] + s, a)
    return out


def smallest(names: Sequence[str], rows: Sequence[tuple[int, ...]], hit: Sequence[int]) -> str | None:
    """The text of the smallest formula true at exactly the rows indexed by `hit`; None if none fits."""
    if not rows or not names:
        return None
    want = 0
    for i in hit:
        want |= 1 << i
    full = (1 << len(rows)) - 1
    if want in (0, full):
        return None
    pool = atoms(names, rows)
    for a in pool:
        if a.mask == want:
            return a.text
    over = [a for a in pool if a.mask & want == want]  # may be a conjunct
    under = [a for a in pool if a.mask & ~want == 0]  # may be a disjunct
    budget = [BUDGET]

    def spend(n: int) -> bool:
        budget[0] -= n
        return budget[0] >= 0

    # two atoms
    for group, op, join in ((over[:WIDE], "and", lambda x, y: x & y), (under[:WIDE], "or", lambda x, y: x | y)):
        if not spend(len(group) * (len(group) - 1) // 2):
            return None
        for a, b in combinations(group, 2):
            if join(a.mask, b.mask) == want:
                return _joined(op, a, b)
    if MAX_ATOMS < 3:
        return None
    # three atoms: a and b and c; a or b or c; (a and b) or c; (a or b) and c
    for group, op, join in ((over[:NARROW], "and", lambda x, y: x & y), (under[:NARROW], "or", lambda x, y: x | y)):
        if not spend(len(group) ** 3 // 6):
            return None
        for a, b, c in combinations(group, 3):
            if join(join(a.mask, b.mask), c.mask) == want:
                return _joined(op, a, b, c)
    for c in under[:NARROW]:  # (a and b) or c: a and b covers what c leaves, and nothing outside
        rest = want & ~c.mask
        cands = [a for a in pool if a.mask & rest == rest][:NARROW]
        if not spend(len(cands) ** 2 // 2):
            return None
        for a, b in combinations(cands, 2):
            if (a.mask & b.mask) | c.mask == want:
                return f"({_joined('and', a, b)}) or {c.text}"
    for c in over[:NARROW]:  # (a or b) and c: inside c, a or b picks out the failing points
        cands = [a for a in pool if a.mask & c.mask & ~want == 0][:NARROW]
        if not spend(len(cands) ** 2 // 2):
            return None
        for a, b in combinations(cands, 2):
            if (a.mask | b.mask) & c.mask == want:
                return f"({_joined('or', a, b)}) and {c.text}"
    return None


def _joined(op: str, *parts: Atom) -> str:
    return f" {op} ".join(a.text for a in sorted(parts, key=lambda a: a.var))  # stable: ties keep search order
