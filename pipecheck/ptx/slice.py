"""The protocol slice of a PTX body: the instructions that decide what the synchronization does.

Seeds are the synchronization instructions, shared-memory accesses and exits. An instruction
is kept when a kept instruction reads a register it defines (data dependence, per register),
and a conditional branch when a kept instruction is control-dependent on it (post-dominator
tree, Ferrante-Ottenstein-Warren). Everything else (the MMA's accumulators, epilogue math,
global stores) is dropped; a dropped branch becomes a jump to its immediate post-dominator,
since nothing kept lies between them.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import syntax as X
from .decode import EXIT_K, LOAD_K, PROTO_K, REFUSE_K, STORE_K
from .evaluate import Evaluation, _reads, basic_blocks  # noqa: PLC2701 (one reader of operands for both stages)

VIRTUAL_EXIT = -1


@dataclass
class Cfg:
    starts: list[int]  # first instruction of each block, in program order
    end: dict[int, int]  # block start -> one past its last instruction
    block_of: list[int]
    succ: dict[int, list[int]]  # block start -> successor block starts (only edges the evaluation found possible)


def cfg_of(ev: Evaluation) -> Cfg:
    ops = ev.body.ops
    n = len(ops)
    starts, end, block_of = basic_blocks(ops, ev.decoded)
    succ: dict[int, list[int]] = {}
    for s in starts:
        if not ev.reach[s]:
            continue
        last = end[s] - 1
        op = ops[last]
        if op.base in ("bra", "brx"):
            succ[s] = sorted(t for t in ev.taken.get(last, set()) if t < n)
        elif ev.decoded[last].kind == EXIT_K and op.guard is None:
            succ[s] = []
        elif ev.decoded[last].kind == EXIT_K:
            succ[s] = [end[s]] if end[s] < n else []
        else:
            succ[s] = [end[s]] if end[s] < n else []
    return Cfg(starts, end, block_of, succ)


def postdominators(cfg: Cfg) -> dict[int, int]:
    """Immediate post-dominator of every reachable block (VIRTUAL_EXIT for the exits); blocks that
    cannot reach an exit (an endless loop) have none (Cooper, Harvey, Kennedy's iteration)."""
    nodes = list(cfg.succ)
    preds_r: dict[int, list[int]] = {n: list(cfg.succ[n]) or [VIRTUAL_EXIT] for n in nodes}  # successors = preds in reverse
    rsucc: dict[int, list[int]] = {VIRTUAL_EXIT: []}
    for n in nodes:
        for p in preds_r[n]:
            rsucc.setdefault(p, []).append(n)
    # reverse post-order of the reverse graph from the virtual exit
    order: list[int] = []
    seen = {VIRTUAL_EXIT}
    stack: list[tuple[int, int]] = [(VIRTUAL_EXIT, 0)]
    while stack:
        n, k = stack.pop()
        kids = rsucc.get(n, [])
        if k < len(kids):
            stack.append((n, k + 1))
            c = kids[k]
            if c not in seen:
                seen.add(c)
                stack.append((c, 0))
        else:
            order.append(n)
    order.reverse()
    index = {n: i for i, n in enumerate(order)}
    idom: dict[int, int] = {VIRTUAL_EXIT: VIRTUAL_EXIT}

    def intersect(a: int, b: int) -> int:
        while a != b:
            while index[a] > index[b]:
                a = idom[a]
            while index[b] > index[a]:
                b = idom[b]
        return a
    changed = True
    while changed:
        changed = False
        for n in order[1:]:
            ps = [p for p in preds_r[n] if p in idom]
            if not ps:
                continue
            new = ps[0]
            for p in ps[1:]:
                new = intersect(p, new)
            if idom.get(n) != new:
                idom[n] = new
                changed = True
    idom.pop(VIRTUAL_EXIT, None)
    return idom


@dataclass
class Slice:
    ops: set[int]  # kept instructions (ALU, protocol, accesses, exits)
    branches: set[int]  # kept conditional branches
    jump_to: dict[int, int]  # dropped conditional branch -> where control continues (an instruction index)
    regs: set[str]
    cfg: Cfg


def protocol_reads(ev: Evaluation, i: int) -> list[str]:
    """The registers whose values matter for instruction i being kept: for a synchronization instruction
    its barrier, count, bytes, parity...; for an access its address; for arithmetic all its sources."""
    op, d = ev.body.ops[i], ev.decoded[i]
    out: list[str] = [op.guard] if op.guard else []
    if d.kind == PROTO_K or d.what in ("read", "write"):
        for k, o in d.roles:
            if d.what in ("shfl", "elect") and k != "mask":
                continue  # the values a shuffle moves and its lane are the evaluation's, not the protocol's
            out.extend(_regs_in(o))
        return out
    if d.kind == EXIT_K:
        return out
    return _reads(op, d)


_IDENTITY_REGS = ("%tid", "%ctaid", "%nctaid", "%ntid", "%laneid", "%warpid", "%cluster", "%nclusterid", "%clusterid")


def _regs_in(o: X.Operand) -> list[str]:
    """The registers an operand reads, less the special registers of the thread's identity."""
    return [r for r in X.registers(o) if not r.startswith(_IDENTITY_REGS)]


def protocol_slice(ev: Evaluation) -> Slice:
    ops = ev.body.ops
    n = len(ops)
    cfg = cfg_of(ev)
    defs: dict[str, list[int]] = {}
    for i in range(n):
        if ev.reach[i]:
            for r, _ in ev.decoded[i].dests:
                defs.setdefault(r, []).append(i)
    kept: set[int] = set()
    for i in range(n):
        if not ev.reach[i]:
            continue
        d = ev.decoded[i]
        if d.kind in (PROTO_K, EXIT_K, REFUSE_K) or (d.kind in (LOAD_K, STORE_K) and d.what in ("read", "write")):
            kept.add(i)
    ipdom = postdominators(cfg)
    # control dependence: branch block -> the blocks whose execution it decides
    deps: dict[int, set[int]] = {}
    for a, ss in cfg.succ.items():
        if len(ss) < 2:
            continue
        stop = ipdom.get(a)
        for s in ss:
            x: int | None = s
            while x is not None and x != stop and x != VIRTUAL_EXIT:
                deps.setdefault(a, set()).add(x)
                x = ipdom.get(x)
    regs: set[str] = set()
    branches: set[int] = set()
    work = list(kept)
    blocks_with_kept: set[int] = set()
    while True:
        while work:
            i = work.pop()
            blocks_with_kept.add(cfg.block_of[i])
            for r in protocol_reads(ev, i):
                if r not in regs:
                    regs.add(r)
                    for j in defs.get(r, ()):
                        if j not in kept:
                            kept.add(j)
                            work.append(j)
        grew = False
        for a, ds in deps.items():
            last = cfg.end[a] - 1
            if last in branches:
                continue
            if ipdom.get(a) is None or ds & blocks_with_kept:
                branches.add(last)
                op = ops[last]
                if op.guard is not None:
                    kept.add(last)
                    work.append(last)
                grew = True
        if not grew and not work:
            break
    jump_to: dict[int, int] = {}
    for a, ss in cfg.succ.items():
        last = cfg.end[a] - 1
        if len(ss) < 2 or last in branches:
            continue
        p = ipdom.get(a)
        if p is not None and p != VIRTUAL_EXIT:
            jump_to[last] = p
    return Slice(kept, branches, jump_to, regs, cfg)
