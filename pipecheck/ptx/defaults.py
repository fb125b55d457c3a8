"""Default values for the kernel parameters a PTX protocol depends on, chosen so that every loop is
exercised: a k-loop runs at least 2 x stages + 1 times per tile (every stage is reused, the ring wraps
twice), a tile loop runs at least twice; byte counts of expect_tx are 32 KiB, pointers are null.

The search only runs the kernel's own arithmetic: each candidate value is evaluated, the lowest-lane
configuration's classes are lowered, and their programs are run once with every wait passing to count
how often each wait executes and on how many barriers (a ring's stages). Every choice is reported with
the reason, and `-D param_<offset>=N` overrides it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ..core.diagnostics import SpecError
from ..model.ir import WAIT
from . import syntax as X
from .decode import LOAD_K, PROTO_K, STORE_K
from .frontend import Parsed, WalkTooLong, class_codes, concrete_walk, configurations, evaluate_at, program_at

TX_DEFAULT = 32768
MAX_STEPS = 200_000
LADDER_TOP = 1 << 16


@dataclass(frozen=True)
class Choice:
    offset: int
    value: int
    nbytes: int
    why: str
    small: int | None = None  # a loop bound: the value that runs its loop once (tried first, pipeline.ptx)
    searched: bool = True  # False: the user set it (-D, a captured launch), so no default was looked for
    # a loop bound: the values `--all-params` sweeps, from the one that runs its loop once to the default, a
    # step apart (the value that adds one k-loop trip, estimated from two runs of the kernel's arithmetic)
    sweep: tuple[int, ...] = ()


def _derived(ev, start_reg: str) -> set[str]:
    """Registers computed from a register by moves and address arithmetic (a parameter's uses)."""
    out = {start_reg}
    ops = ev.body.ops
    grew = True
    while grew:
        grew = False
        for i, op in enumerate(ops):
            d = ev.decoded[i]
            if op.base not in ("mov", "add", "sub", "cvta", "mad", "mul", "cvt", "shl", "and", "or"):
                continue
            if any(isinstance(o, X.Reg) and o.name in out for o in op.operands[1:]):
                for r, _ in d.dests:
                    if r not in out:
                        out.add(r)
                        grew = True
    return out


def _uses(ev, regs: set[str]) -> tuple[bool, bool]:
    """(used as a memory address, used as a tx byte count)."""
    addr = tx = False
    for i, d in enumerate(ev.decoded):
        if d.kind in (LOAD_K, STORE_K) and d.space in ("global", "generic", "const", "local"):
            for _, o in d.roles:
                if _mentions(o, regs):
                    addr = True
        if d.kind == PROTO_K and d.what in ("arrive", "expect_tx", "complete_tx"):
            for k, o in d.roles:
                if k == "tx" and _mentions(o, regs):
                    tx = True
    return addr, tx


def _mentions(o, regs: set[str]) -> bool:
    if isinstance(o, X.Reg):
        return o.name in regs
    if isinstance(o, X.BinOp):
        return _mentions(o.a, regs) or _mentions(o.b, regs)
    if isinstance(o, X.Addr):
        return any(_mentions(q, regs) for q in o.parts)
    return False


def _counts(pz: Parsed, values: dict) -> dict[int, tuple[int, int]] | None:
    """Per ring of barriers a class waits on: (its trips, its barriers), keyed by the first PTX wait site of
    the ring, the most of any class; None when the values make the kernel invalid (a refused value, a loop
    that runs too long).

    A ring is the barriers of the wait sites of one class that share a barrier: nvcc peels a k-loop's first
    trip into its own wait site, and that site's wait on stage 0 and the loop's on every stage are one ring.
    A wait repeated at once on the same barrier and parity (a try, then the blocking wait) is one trip."""
    try:
        prog = program_at(pz, values, values)
        cfg = configurations(prog, "lowest")[0]
        codes = class_codes(prog, cfg)
    except SpecError:
        return None
    out: dict[int, tuple[int, int]] = {}
    flat = {v: k for k, v in prog.site_index.items()}  # ir site -> PTX instruction: stable across evaluations
    for cta, wg, members, code in codes:
        waits: list[tuple[int, object, object]] = []  # (PTX site, barrier, parity) in the order the class runs
        try:
            for ins, ev in concrete_walk(code, MAX_STEPS):
                if ins.op == WAIT:
                    waits.append((flat.get(ins.site, -1), ev(ins.args[0].addr), ev(ins.args[1])))
        except (ArithmeticError, IndexError, WalkTooLong):
            return None
        ring: dict[int, int] = {}  # site -> its ring's first site (sites that share a barrier, joined)
        owner: dict[object, int] = {}
        for site, bar, _ in waits:
            root = ring.setdefault(site, site)
            other = owner.setdefault(bar, root)
            if other != root:
                lo, hi = min(other, root), max(other, root)
                for k, v in ring.items():
                    if v == hi:
                        ring[k] = lo
                for k, v in owner.items():
                    if v == hi:
                        owner[k] = lo
        trips: dict[int, int] = {}
        bars: dict[int, set] = {}
        last = None
        for site, bar, parity in waits:
            key = ring[site]
            if (bar, parity) != last:
                trips[key] = trips.get(key, 0) + 1
            last = (bar, parity)
            bars.setdefault(key, set()).add(bar)
        for key, n in trips.items():
            if n > out.get(key, (0, 0))[0]:
                out[key] = (n, len(bars[key]))
    return out


def choose_defaults(pz: Parsed, fixed: Callable[[int, int], int | None] | None = None) -> list[Choice]:
    """A default per parameter the kernel reads. A parameter `fixed(offset, bytes)` gives a value for (-D, a
    captured launch) keeps it and is not searched (each search runs the kernel's arithmetic dozens of times);
    the others are chosen with those values in place."""
    memo: dict[tuple, dict | None] = {}

    def counts(vals: dict) -> dict[int, tuple[int, int]] | None:  # `_counts`, once per set of values
        key = tuple(sorted(vals.items()))
        if key not in memo:
            memo[key] = _counts(pz, vals)
        return memo[key]

    ev = evaluate_at(pz, {})
    reads: dict[int, tuple[int, bool, int]] = {}  # offset -> (width, float, op)
    values: dict[int, tuple[int, int]] = {}
    choices: dict[int, Choice] = {}
    for _ in range(3):  # reads behind other parameters appear once those are set
        new = False
        for r in ev.param_reads:
            if r.offset not in reads:
                reads[r.offset] = (r.width, r.is_float, r.op)
                new = True
        for off, (w, is_float, op) in sorted(reads.items()):
            if off in choices:
                continue
            nb = max(1, w // 8)
            given = fixed(off, nb) if fixed is not None else None
            if given is not None:
                choices[off] = Choice(off, given, nb, "set", searched=False)
                values[off] = (given, nb)
                continue
            dest = ev.decoded[op].dests[0][0] if ev.decoded[op].dests else None
            addr, tx = _uses(ev, _derived(ev, dest)) if dest else (False, False)
            if is_float:
                choices[off] = Choice(off, 0, nb, "a floating-point value (0)")
            elif tx:
                choices[off] = Choice(off, TX_DEFAULT, nb, f"an expect_tx byte count ({TX_DEFAULT})")
            elif addr:
                choices[off] = Choice(off, 0, nb, "a pointer (null)")
            else:
                choices[off] = Choice(off, 1, nb, "")
            values[off] = (choices[off].value, nb)
        if not new:
            break
        ev = evaluate_at(pz, values)
    base = counts(values) or {}
    # only the parameters the protocol slice reads can steer it
    # (at two points: a loop that runs once at 1 is straight-line code there)
    relevant: set[int] = set()
    for probe in ((1, 257) if any(c.why == "" for c in choices.values()) else ()):
        trial = {o: ((probe, v[1]) if choices[o].why == "" else v) for o, v in values.items()}
        prog = program_at(pz, trial, trial)
        relevant |= {r.offset for r in prog.ev.param_reads if r.op in prog.sl.ops}
    for off, c in list(choices.items()):
        if c.why == "" and off not in relevant:
            choices[off] = Choice(off, 1, c.nbytes, "steers no loop (1)")
    ints = [off for off, c in sorted(choices.items()) if c.why == ""]
    k_like, tile_like = [], []
    for off in ints:
        c2 = None
        for probe in (2, 257):  # a count of k-tiles grows with K / tile size: 257 passes a 128 tile
            trial = dict(values)
            trial[off] = (probe, values[off][1])
            c2 = counts(trial)
            if c2 is not None and c2 != base:
                break
        if c2 is None or c2 == base:
            choices[off] = Choice(off, 1, values[off][1], "steers no loop (1)")
            continue
        grown = {s for s in set(c2) | set(base) if c2.get(s, (0, 0))[0] > base.get(s, (0, 0))[0]}
        rings = {s for s in grown if max(c2.get(s, (0, 0))[1], base.get(s, (0, 0))[1]) > 2}
        (k_like if grown and grown == rings else tile_like).append(off)
    for off in k_like:  # the k-loop: the ring wraps twice on every stage ring it drives
        hi, stages = _smallest_enough(values, off, base, counts)
        values[off] = (hi, values[off][1])
        # one value per trip count: a trip count grows by one every `step` (the tile size along the loop)
        step = max(1, (hi - 1) // (2 * stages)) if stages else hi
        choices[off] = Choice(off, hi, values[off][1], f"drives a k-loop: the smallest value that runs it 2 x {stages} "
                                                       f"+ 1 = {2 * stages + 1} times on the {stages}-stage ring", 1,
                              sweep=tuple(sorted({min(hi, 1 + step * n) for n in range(2 * stages + 1)} | {1, hi})))
    for off in tile_like:
        values[off] = (2, values[off][1])
        choices[off] = Choice(off, 2, values[off][1], "drives a tile loop: 2 tiles", 1, sweep=(1, 2))
    return [choices[o] for o in sorted(choices)]


def _smallest_enough(values: dict, off: int, base: dict, counts: Callable[[dict], dict | None]
                     ) -> tuple[int, int]:
    """The smallest value of the k-loop bound at `off` that runs the loop 2 x stages + 1 times on every stage
    ring it drives (the ring wraps twice), and the stages: (value, stages). Values below are assumed to run it
    fewer times (a trip count only grows with its bound), so any probe order finds the same value; the
    probes follow the trip counts: a ring's trips grow by one every `t` values (t, the tile size along the
    loop, from two runs), so the next probe after a short one is where its rings would reach their count,
    and in the final bracket the value `t x (2 x stages) + 1` is tried before halving."""
    seen: dict[int, dict[int, tuple[int, int]]] = {}  # value -> its rings' (trips, barriers)

    def enough(v: int) -> tuple[bool, int]:
        c = counts({**values, off: (v, values[off][1])})
        if c is None:
            return False, 0
        seen[v] = c
        rings = [(n, sz) for n, sz in c.values() if sz > 2]
        return bool(rings) and all(n >= 2 * sz + 1 for n, sz in rings), max((sz for _, sz in rings), default=0)

    def per_trip(key: int, size: int) -> float | None:
        """Values per trip of one ring, from the two runs furthest apart where it has `size` barriers (where it
        has fewer, the loop did not reach every stage, or nvcc's peeled trips are counted apart)."""
        pts = sorted((v, c[key][0]) for v, c in seen.items() if c.get(key, (0, 0))[1] == size)
        if len(pts) < 2 or pts[-1][1] == pts[0][1]:
            return None
        return (pts[-1][0] - pts[0][0]) / (pts[-1][1] - pts[0][1])

    def short(v: int) -> list[tuple[int, int]]:  # the rings of a run at v short of their count: (key, barriers)
        return [(k, sz) for k, (n, sz) in seen.get(v, {}).items() if sz > 2 and n < 2 * sz + 1]

    # a trip count grows as ceil(v / t): two points give t, and the first value with 2 x stages + 1 trips
    c2 = counts({**values, off: (257, values[off][1])}) or {}
    n1 = max((n for n, sz in base.values()), default=0)
    n2 = max((n for n, sz in c2.values()), default=0)
    sz = max((z for _, z in c2.values()), default=0)
    guess = 2
    if n2 > n1 and sz > 2:
        guess = max(1, round(256 / (n2 - n1))) * (2 * sz) + 1
    seen[257] = c2
    lo, hi = 1, None  # lo: known (or, at 1, taken) to fall short; hi: the smallest value known to suffice
    v = guess
    while hi is None:
        if v >= LADDER_TOP:  # no value suffices below the top of the ladder: the first rung past it, as before
            top = guess * 2
            while top < LADDER_TOP:
                top *= 2
            return top, enough(top)[1]
        if enough(v)[0]:
            hi = v
            break
        lo = max(lo, v)
        target = 2 * v
        rings = short(v)
        steps = [per_trip(k, z) for k, z in rings]
        if rings and all(t is not None for t in steps):
            target = max(v + math.ceil((2 * z + 1 - seen[v][k][0]) * t) for (k, z), t in zip(rings, steps))
        v = max(v + 1, min(target, 4 * v))
    if hi - lo > 1:  # the value where a ring short at `lo` (else one of hi's) reaches its count, if trips grow
        # as ceil(v / t)
        rings = short(lo) if lo in seen else [(k, sz) for k, (n, sz) in seen[hi].items() if sz > 2]
        for k, z in rings:
            t = per_trip(k, z)
            x = round(t) * (2 * z) + 1 if t is not None and t >= 1 else 0
            if lo < x <= hi:
                if enough(x)[0]:
                    hi = x
                    if x - 1 > lo and not enough(x - 1)[0]:
                        lo = x - 1
                else:
                    lo = x
            break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid)[0]:
            hi = mid
        else:
            lo = mid
    return hi, enough(hi)[1]
