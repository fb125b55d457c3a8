"""Every flat instruction sorted by what it does to the protocol: which registers it defines,
which values it reads, and, for the synchronization instructions, which operand is the barrier,
the count, the bytes, the parity or the buffer.

`decode` is the only place that knows the operand order of each PTX spelling (PTX ISA 9.0:
9.7.13.15 mbarrier, 9.7.9.25 cp.async.bulk(.tensor), 9.7.15 wgmma, 9.7.13.4 elect.sync,
9.7.9.7 shfl.sync, 9.7.13.1 bar/barrier, 9.7.9.22 mapa, 9.7.13.3 fence). An instruction that may
touch shared memory or another thread in a way not listed here is `refuse`d by name.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.diagnostics import error
from . import syntax as X
from .flatten import Body, Op
from .isa import ALU, IGNORED, INT_TYPES, type_of, width_of

# kinds
ALU_K, LOAD_K, STORE_K, BRANCH_K, EXIT_K, IGNORE_K, REFUSE_K = "alu", "load", "store", "branch", "exit", "ignore", "refuse"
PROTO_K = "protocol"


@dataclass(frozen=True)
class Decoded:
    kind: str
    dests: tuple[tuple[str, int], ...] = ()  # (register, width)
    srcs: tuple[X.Operand, ...] = ()  # values read (for ALU: in the instruction's order)
    what: str = ""  # protocol: init | arrive | expect_tx | complete_tx | arrive_drop | wait | probe | elect | shfl |
    #                 bar_sync | bar_arrive | syncthreads | tma_load | tma_store | bulk_commit | bulk_wait | wg_fence |
    #                 wg_commit | wg_wait | mma | fence_proxy | fence_init | read | write | cluster_arrive |
    #                 cluster_wait | setmaxnreg | t5_mma | t5_commit | t5_before | t5_after
    roles: tuple[tuple[str, X.Operand], ...] = ()  # protocol operands by name: ("bar", op), ("count", op), ...
    space: str = ""  # load/store: param | shared | global | local | const
    reason: str = ""  # refuse: why
    pair: bool = False  # t5_mma / t5_commit / tma_load with `.cta_group::2`: the CTA pair's form (PTX ISA 9.7.16)


def _reg(o: X.Operand) -> str | None:
    return o.name if isinstance(o, X.Reg) else None


def _dest_regs(o: X.Operand, w: int) -> tuple[tuple[str, int], ...]:
    if isinstance(o, X.Reg):
        return ((o.name, w),)
    if isinstance(o, X.Pair):
        out = []
        a, b = o.a, o.b
        if isinstance(a, X.Reg):
            out.append((a.name, w))
        if isinstance(b, X.Reg):
            out.append((b.name, 1))
        return tuple(out)
    if isinstance(o, X.Vec):
        return tuple((i.name, w) for i in o.items if isinstance(i, X.Reg))
    return ()


def _space(mods: tuple[str, ...]) -> str:
    for m in mods:
        s = m.split("::")[0]
        if s in ("param", "shared", "global", "local", "const"):
            return s
    return "generic"


def _roles(**kw: X.Operand | None) -> tuple[tuple[str, X.Operand], ...]:
    return tuple((k, v) for k, v in kw.items() if v is not None)


def decode(op: Op, regs: dict[str, str]) -> Decoded:
    base, mods = op.base, op.mods
    ops = op.operands
    name = op.opcode
    if base in ("bra", "brx"):
        return Decoded(BRANCH_K)
    if base in ("exit", "ret"):
        return Decoded(EXIT_K)
    if base in ("trap", "brkpt"):  # `trap.assert`: a call to __assertfail (flatten)
        return Decoded(PROTO_K, what="trap")
    if name.startswith("nop.") or base in IGNORED:
        return Decoded(IGNORE_K)
    if base == "mbarrier":
        return _mbarrier(op, regs)
    if name.startswith("pipecheck.wait"):
        return Decoded(PROTO_K, _dest_regs(ops[0], 1), (), "wait", _roles(bar=_addr(ops[1]), parity=ops[2]))
    if base == "elect":
        return Decoded(PROTO_K, _dest_regs(ops[0], 32), (ops[1],), "elect", _roles(mask=ops[1]))
    if base == "shfl":
        w = 32
        return Decoded(PROTO_K, _dest_regs(ops[0], w), tuple(ops[1:]), "shfl",
                       _roles(value=ops[1], lane=ops[2], clamp=ops[3], mask=ops[4] if len(ops) > 4 else X.Imm(-1)))
    if base in ("bar", "barrier"):
        return _barrier(op)
    if base == "cp":
        return _cp(op, regs)
    if base == "wgmma":
        if "fence" in mods:
            return Decoded(PROTO_K, (), (), "wg_fence")
        if "commit_group" in mods:
            return Decoded(PROTO_K, (), (), "wg_commit")
        if "wait_group" in mods:
            return Decoded(PROTO_K, (), (ops[0],), "wg_wait", _roles(pending=ops[0]))
        if "mma_async" in mods:
            # d, a (descriptor or registers), b descriptor, scale-d, ...: the accumulators are not the protocol's
            a, b = ops[1], ops[2]
            return Decoded(PROTO_K, (), (), "mma", _roles(a=a if not isinstance(a, X.Vec) else None, b=b))
        return Decoded(REFUSE_K, reason=f"`{name}` is a wgmma form pipecheck does not model")
    if base == "fence":
        if "proxy" in mods and "async" in mods:
            return Decoded(PROTO_K, (), (), "fence_proxy")
        if "mbarrier_init" in mods:
            return Decoded(PROTO_K, (), (), "fence_init")
        return Decoded(IGNORE_K)  # fence.sc/acq_rel: ordering the model's steps already have
    if base == "membar":
        return Decoded(IGNORE_K)
    if base == "setmaxnreg":
        return Decoded(PROTO_K, (), (), "setmaxnreg")
    if base in ("ld", "ldu", "ldmatrix"):
        space = "shared" if base == "ldmatrix" else _space(mods)
        w = width_of(type_of(mods)) if base != "ldmatrix" else 32
        if "v2" in mods or "v4" in mods or "v8" in mods:
            pass
        return Decoded(LOAD_K, _dest_regs(ops[0], w), (ops[1],), "read" if space == "shared" else "", _roles(addr=_addr(ops[1])),
                       space)
    if base in ("st", "stmatrix"):
        space = "shared" if base == "stmatrix" else _space(mods)
        return Decoded(STORE_K, (), (ops[1],) if len(ops) > 1 else (), "write" if space == "shared" else "",
                       _roles(addr=_addr(ops[0])), space)
    if base in ("atom", "red", "multimem", "cp.reduce"):
        space = _space(mods)
        if space in ("shared", "generic"):
            return Decoded(REFUSE_K, reason=f"`{name}` is an atomic on {space} memory, which may be a barrier's "
                                            "or a buffer's: pipecheck does not model atomics")
        return Decoded(LOAD_K, _dest_regs(ops[0], width_of(type_of(mods))) if base == "atom" else (), (), "", (), space)
    if base in ("vote", "match", "redux", "activemask"):
        return Decoded(LOAD_K, _dest_regs(ops[0], 32), (), "", (), "warp")  # lanes' data: not known per thread
    if base == "tcgen05":
        return _tcgen05(op)
    if base == "clusterlaunchcontrol":
        return _clc(op)
    if base == "tensormap":
        return Decoded(REFUSE_K, reason=f"`{name}` (sm_100) is not modelled by the PTX front end yet")
    if base in ALU or name.startswith(("cvt.", "cvta.", "mapa.", "mul.", "mad.")):
        typ = type_of(mods)
        w = width_of(typ)
        if base == "setp":
            w = 1
        if base in ("cvta", "mapa"):
            w = 64 if typ in (".u64", ".b64") else 32
        return Decoded(ALU_K, _dest_regs(ops[0], w), tuple(ops[1:]))
    return Decoded(REFUSE_K, reason=f"`{name}` is an instruction the PTX front end does not know")


def _addr(o: X.Operand) -> X.Operand:
    """The address inside `[...]` (its first part)."""
    if isinstance(o, X.Addr):
        return o.parts[0]
    return o


def _mbarrier(op: Op, regs: dict[str, str]) -> Decoded:
    mods, ops, name = op.mods, op.operands, op.opcode
    if "init" in mods:
        return Decoded(PROTO_K, (), (), "init", _roles(bar=_addr(ops[0]), count=ops[1]))
    if "inval" in mods:
        return Decoded(PROTO_K, (), (), "inval", _roles(bar=_addr(ops[0])))
    if mods and mods[0] in ("try_wait", "test_wait"):
        # the `.parity` form names the phase by its parity; the other form by the state token an arrive returned,
        # which holds the parity of the phase that arrive landed in (H200: benchmarks/hw/probe_phase_token.cu):
        # both wait on that parity, and the model gives a token register that parity when the arrive runs
        return Decoded(PROTO_K, _dest_regs(ops[0], 1), (), "probe", _roles(bar=_addr(ops[1]), parity=ops[2]))
    if mods and mods[0] == "expect_tx":
        return Decoded(PROTO_K, (), (), "expect_tx", _roles(bar=_addr(ops[0]), tx=ops[1]))
    if mods and mods[0] == "complete_tx":
        return Decoded(PROTO_K, (), (), "complete_tx", _roles(bar=_addr(ops[0]), tx=ops[1]))
    if mods and mods[0] in ("arrive", "arrive_drop"):
        state = ops[0]
        dests = _dest_regs(state, 64)
        bar = _addr(ops[1])
        rest = ops[2:]
        what = "arrive" if mods[0] == "arrive" else "arrive_drop"
        if "noComplete" in mods:
            return Decoded(REFUSE_K, reason=f"`{name}` (.noComplete) is not modelled")
        if "expect_tx" in mods:
            return Decoded(PROTO_K, dests, (), what, _roles(bar=bar, tx=rest[0] if rest else None,
                                                            count=rest[1] if len(rest) > 1 else None))
        return Decoded(PROTO_K, dests, (), what, _roles(bar=bar, count=rest[0] if rest else None))
    if mods and mods[0] == "pending_count":
        return Decoded(LOAD_K, _dest_regs(ops[0], 32), (), "", (), "barrier")
    return Decoded(REFUSE_K, reason=f"`{name}` is an mbarrier operation pipecheck does not model")


def _tcgen05(op: Op) -> Decoded:
    """tcgen05 (PTX ISA 9.7.16): the MMA reads its SMEM operands through matrix descriptors (the same start
    address field as wgmma's) until it completes; `commit` arrives on a barrier once this thread's earlier
    MMAs have; the fences order tcgen05 work around thread syncs. Tensor memory itself is not modelled
    from PTX (its addresses come from `alloc` through shared memory): `ld`/`st`/`wait`/`alloc`/`dealloc`/
    `relinquish_alloc_permit` move no protocol state, and an `ld`'s registers are values pipecheck cannot know."""
    mods, ops, name = op.mods, op.operands, op.opcode
    kind = mods[0] if mods else ""
    # cta_group::2: the MMA of a CTA pair, issued by the even CTA, reading both CTAs' SMEM at the same
    # descriptors; its commit tracks the pair's MMAs (9.7.16.10, 9.7.16.12)
    pair = "cta_group::2" in mods
    if pair and kind == "cp":
        return Decoded(REFUSE_K, reason=f"`{name}` (cta_group::2) is not modelled by the PTX front end yet")
    if kind == "mma":
        if "ws" in mods or "sp" in mods or any(m.startswith("block_scale") for m in mods):
            return Decoded(REFUSE_K, reason=f"`{name}` is a tcgen05.mma form pipecheck does not model")
        # [d_tmem], a (descriptor, or [a_tmem]), b descriptor, idesc, ...
        a, b = ops[1], ops[2]
        return Decoded(PROTO_K, (), (), "t5_mma", _roles(a=None if isinstance(a, X.Addr) else a, b=b), pair=pair)
    if kind == "commit":
        mc = any(m.startswith("multicast") for m in mods)
        return Decoded(PROTO_K, (), (), "t5_commit", _roles(bar=_addr(ops[0]), mask=ops[1] if mc and len(ops) > 1 else None),
                       pair=pair)
    if kind.startswith("fence::"):
        return Decoded(PROTO_K, (), (), "t5_after" if kind == "fence::after_thread_sync" else "t5_before")
    if kind == "ld":
        return Decoded(LOAD_K, _dest_regs(ops[0], 32), (), "", (), "tmem")
    if kind in ("st", "alloc", "dealloc", "relinquish_alloc_permit") or kind.startswith("wait::"):
        return Decoded(IGNORE_K)
    return Decoded(REFUSE_K, reason=f"`{name}` is a tcgen05 operation pipecheck does not model yet")


def _clc(op: Op) -> Decoded:
    """Cluster launch control (PTX ISA 9.7.13.17-18). `try_cancel` writes a 16-byte response asynchronously and
    completes its bytes on the barrier (every CTA's with `.multicast::cluster::all`): a TMA load of 16 bytes.
    `query_cancel.is_canceled` decodes a response read from shared memory into a predicate: the model's answer to
    the thread's n-th query (n < the run's `clc` choice); `get_first_ctaid` gives which cluster's tile, a value
    pipecheck does not know."""
    mods, ops, name = op.mods, op.operands, op.opcode
    if mods and mods[0] == "try_cancel" and len(ops) >= 2:
        mc = any(m.startswith("multicast") for m in mods)
        return Decoded(PROTO_K, (), (), "tma_load", _roles(dst=_addr(ops[0]), size=X.Imm(16), bar=_addr(ops[1]),
                                                           mask=X.Imm(-1) if mc else None))
    if mods and mods[0] == "query_cancel" and ops:
        if "is_canceled" in mods:
            return Decoded(PROTO_K, _dest_regs(ops[0], 1), (), "query_cancel")
        return Decoded(LOAD_K, _dest_regs(ops[0], 32), (), "", (), "clc")
    return Decoded(REFUSE_K, reason=f"`{name}` is a cluster launch control form pipecheck does not model")


def _barrier(op: Op) -> Decoded:
    mods, ops, name = op.mods, op.operands, op.opcode
    if op.base == "barrier" and mods and mods[0] == "cluster":
        if "arrive" in mods:
            return Decoded(PROTO_K, (), (), "cluster_arrive")
        if "wait" in mods:
            return Decoded(PROTO_K, (), (), "cluster_wait")
    if op.base == "bar" and mods and mods[0] == "warp":
        return Decoded(PROTO_K, (), (), "syncwarp", _roles(mask=ops[0] if ops else X.Imm(-1)))
    if "red" in mods:
        return Decoded(REFUSE_K, reason=f"`{name}` (a barrier reduction) is not modelled")
    kind = mods[0] if mods else "sync"
    if kind in ("sync", "arrive") or (op.base == "barrier" and kind in ("sync", "arrive", "aligned")):
        arrive = "arrive" in mods
        bid = ops[0] if ops else X.Imm(0)
        count = ops[1] if len(ops) > 1 else None
        return Decoded(PROTO_K, (), (), "bar_arrive" if arrive else "bar_sync", _roles(id=bid, count=count))
    return Decoded(REFUSE_K, reason=f"`{name}` is a barrier form pipecheck does not model")


def _cp(op: Op, regs: dict[str, str]) -> Decoded:
    mods, ops, name = op.mods, op.operands, op.opcode
    if name.startswith("cp.async.bulk.commit_group"):
        return Decoded(PROTO_K, (), (), "bulk_commit")
    if name.startswith("cp.async.bulk.wait_group"):
        return Decoded(PROTO_K, (), (), "bulk_wait", _roles(pending=ops[0]), space="read" if "read" in mods else "")
    if name.startswith("cp.async.bulk.prefetch"):
        return Decoded(IGNORE_K)
    if name.startswith("cp.async.bulk"):
        tensor = "tensor" in mods
        # `.cta_group::2` (the SM100 2-SM load, 9.7.9.25): the bytes land in the issuer's SMEM and complete on
        # the barrier of the pair's even CTA (CUTLASS clears the address's peer bit)
        pair = "cta_group::2" in mods
        mods = tuple(m for m in mods if not m.startswith("cta_group::"))
        # cp.async.bulk{.tensor.Nd}.<dst>.<src>...
        i = 4 if tensor else 2
        dst, src = (mods[i].split("::")[0], mods[i + 1].split("::")[0]) if len(mods) > i + 1 else ("", "")
        if dst == "shared" and src == "global":
            mc = "multicast" in name
            if tensor:
                # [dst], [tmap, {coords}], [mbar] {, ctaMask} {, cache hint}
                rest = ops[3:]
                return Decoded(PROTO_K, (), (), "tma_load", _roles(dst=_addr(ops[0]), tmap=_addr(ops[1]), bar=_addr(ops[2]),
                                                                   mask=rest[0] if mc and rest else None), pair=pair)
            # [dst], [src], size, [mbar] {, ctaMask}
            rest = ops[4:]
            return Decoded(PROTO_K, (), (), "tma_load", _roles(dst=_addr(ops[0]), size=ops[2], bar=_addr(ops[3]),
                                                               mask=rest[0] if mc and rest else None), pair=pair)
        if pair:
            return Decoded(REFUSE_K, reason=f"`{name}` (cta_group::2) is a bulk copy form pipecheck does not model")
        if dst == "global" and src == "shared":
            if tensor:
                return Decoded(PROTO_K, (), (), "tma_store", _roles(src=_addr(ops[1]), tmap=_addr(ops[0])))
            return Decoded(PROTO_K, (), (), "tma_store", _roles(src=_addr(ops[1]), size=ops[2]))
        if dst == "shared" and src == "shared":
            return Decoded(REFUSE_K, reason=f"`{name}` (a shared-to-shared bulk copy) is not modelled")
        return Decoded(REFUSE_K, reason=f"`{name}` is a bulk copy form pipecheck does not model")
    if name.startswith("cp.reduce.async.bulk"):
        return Decoded(PROTO_K, (), (), "tma_store", _roles(src=_addr(ops[1]) if len(ops) > 1 else ops[0]))
    if name.startswith("cp.async"):
        return Decoded(REFUSE_K, reason=f"`{name}` (cp.async) is not modelled by the PTX front end yet")
    return Decoded(REFUSE_K, reason=f"`{name}` is not known")


def prepare(body: Body) -> Body:
    """Collapse each `try_wait` spin loop into one blocking wait (`pipecheck.wait`): the loop
    `L: try_wait.parity P, [b], ph; @P bra OUT; bra L` (or `@!P bra L`) waits until the phase
    completes (PTX 9.7.13.15.16); as a loop of probes a hang would look like a livelock."""
    ops = list(body.ops)
    for i, op in enumerate(ops):
        if op.base != "mbarrier" or "try_wait" not in op.mods or op.guard is not None:
            continue
        p = _reg(op.operands[0]) if op.operands else None
        if p is None:
            continue
        nxt = ops[i + 1] if i + 1 < len(ops) else None
        nxt2 = ops[i + 2] if i + 2 < len(ops) else None
        wait = Op("pipecheck.wait." + ".".join(op.mods), op.operands[:3], None, False, op.line, op.col, op.loc, -1,
                  op.call_depth)
        if nxt is not None and nxt.base == "bra" and nxt.guard == p and nxt.negated and nxt.target == i:
            ops[i] = wait
            ops[i + 1] = Op("nop.spin", (), None, False, nxt.line, nxt.col, nxt.loc)
        elif nxt is not None and nxt2 is not None and nxt.base == "bra" and nxt.guard == p and not nxt.negated \
                and nxt2.base == "bra" and nxt2.guard is None and nxt2.target == i:
            ops[i] = wait
            ops[i + 1] = Op("bra.uni", (), None, False, nxt.line, nxt.col, nxt.loc, nxt.target)
            ops[i + 2] = Op("nop.spin", (), None, False, nxt2.line, nxt2.col, nxt2.loc)
    _backoff_waits(ops, body.regs)
    # a one-shot probe that only decides whether to skip a blocking wait on the same barrier and parity
    # (CUTLASS's consumer_try_wait + consumer_wait): taking the wait is the same protocol, so the probe reads
    # "not yet" and the wait does the work (a probe that decides anything else stays a PROBE)
    for i, op in enumerate(ops):
        if op.base != "mbarrier" or "try_wait" not in op.mods or op.guard is not None or len(op.operands) < 3:
            continue
        # (a debug build puts CUTLASS's role check, `@p bra; brkpt`, between the probe and its branch)
        tainted = {_reg(op.operands[0])}  # the probe's result and what is computed from it
        for j in range(i + 1, min(i + 12, len(ops))):
            br = ops[j]
            if br.base != "bra" and br.operands and any(_reg(o) in tainted for o in br.operands[1:]):
                tainted.add(_reg(br.operands[0]))
            if br.base == "bra" and br.guard in tainted and br.target > j:
                tgt = br.target
                waits = [k for k in range(j + 1, tgt) if ops[k].opcode.startswith("pipecheck.wait")
                         and ops[k].operands[1:3] == op.operands[1:3]]
                if waits:
                    ops[i] = Op("mov.pred", (op.operands[0], X.Imm(0)), None, False, op.line, op.col, op.loc, -1,
                                op.call_depth)
                    break
    _refuse_spins(body, ops)
    return Body(ops, body.regs, body.file)


LOOP_LIMIT = 96  # instructions a back-off wait loop may span


def successors(ops: list[Op], j: int) -> list[int]:
    """Where control can go from flat instruction j (a `brx`, `exit`, `ret` or `trap` ends the walk)."""
    op = ops[j]
    if op.base == "bra":
        return [op.target] if op.guard is None else [j + 1, op.target]
    if op.base in ("exit", "ret", "trap", "brx") or j + 1 >= len(ops):
        return []
    return [j + 1]


def _tries(op: Op) -> bool:
    """An mbarrier try_wait / test_wait, in either form."""
    return op.base == "mbarrier" and bool(op.mods) and op.mods[0] in ("try_wait", "test_wait")


def _probe(op: Op) -> bool:
    """A try whose result a register holds (what a back-off wait region is made of)."""
    return _tries(op) and op.guard is None and len(op.operands) >= 3 and _reg(op.operands[0]) is not None


def _quiet(op: Op) -> bool:
    """Nothing another thread can see, and no memory: arithmetic, timer reads, branches, sleeps."""
    return op.base in ALU or op.base in IGNORED or op.base in ("bra", "setp", "selp", "not") \
        or op.opcode.startswith("nop.")


def _decision(ops: list[Op], i: int) -> tuple[int, int] | None:
    """Where control goes from probe i once the probe's result decides a branch: (where `true` goes, where
    `false` goes), following the straight code after it (the result copied through selp / setp / not); None
    when a branch the result does not decide, or anything but arithmetic, comes first."""
    p = _reg(ops[i].operands[0])
    known: list[dict[str, int]] = [{p: 1}, {p: 0}]
    j = i + 1
    for _ in range(LOOP_LIMIT):
        if j >= len(ops):
            return None
        op = ops[j]
        if op.base == "bra":
            if op.guard is None:
                j = op.target
                continue
            if op.guard not in known[0] or op.guard not in known[1]:
                return None
            t1, t0 = (op.target if bool(k[op.guard]) != op.negated else j + 1 for k in known)
            if t1 == t0:
                j = t1
                continue
            return t1, t0
        if not _quiet(op) or not op.operands:
            return None
        dest = _reg(op.operands[0])
        for k in known:
            vals = [k.get(o.name) if isinstance(o, X.Reg) else o.value if isinstance(o, X.Imm) else None
                    for o in op.operands[1:]]
            v = None
            if None not in vals:
                if op.base == "selp" and len(vals) == 3:
                    v = vals[0] if vals[2] else vals[1]
                elif op.base == "mov" and len(vals) == 1:
                    v = vals[0]
                elif op.base == "not" and len(vals) == 1 and "pred" in op.mods:
                    v = int(not vals[0])
                elif op.base == "setp" and len(vals) == 2 and op.mods[0] in ("eq", "ne"):
                    v = int((vals[0] == vals[1]) == (op.mods[0] == "eq"))
            if dest is not None:
                if v is None:
                    k.pop(dest, None)
                else:
                    k[dest] = v
        j += 1
    return None


class _Flow:
    """What the back-off recogniser asks of the whole body, worked out once, when first asked: each instruction's
    predecessors and the registers it reads."""

    def __init__(self, ops: list[Op], regs: dict[str, str]):
        self.ops, self.regs = ops, regs
        self._preds: dict[int, list[int]] | None = None
        self._reads: list[set[str]] | None = None

    def entered_elsewhere(self, region: set[int], i: int) -> bool:
        """Whether control enters the region anywhere but at i."""
        if self._preds is None:
            self._preds = {}
            for j in range(len(self.ops)):
                for k in successors(self.ops, j):
                    self._preds.setdefault(k, []).append(j)
        return any(j not in region for k in region if k != i for j in self._preds.get(k, ()))

    def read_outside(self, region: set[int]) -> set[str]:
        """The registers read anywhere outside the region."""
        if self._reads is None:
            self._reads = []
            for o in self.ops:
                dests = {r for r, _ in decode(o, self.regs).dests}
                got = {r for x in o.operands for r in X.registers(x) if r not in dests or x is not o.operands[0]}
                if o.guard:
                    got.add(o.guard)
                self._reads.append(got)
        return {r for j, got in enumerate(self._reads) if j not in region for r in got}


def _wait_region(ops: list[Op], i: int, regs: dict[str, str], flow: _Flow) -> tuple[set[int], int] | None:
    """The code from probe i to where a completed phase leaves it, when that code is one blocking wait: the
    region (every instruction reachable from i short of the way out, within LOOP_LIMIT) holds only quiet
    instructions and probes of the same barrier and phase; each probe's `true` leaves for the way out at once,
    its `false` cannot get there without trying again (whatever a timer or spin count says); the region is
    entered only at i, and nothing it computes is read after it."""
    first = _decision(ops, i)
    if first is None:
        return None
    out = first[0]
    near = range(max(0, i - LOOP_LIMIT), min(len(ops), i + LOOP_LIMIT))
    region, stack = {i}, [i]
    while stack:
        for k in successors(ops, stack.pop()):
            if k == out or k in region:
                continue
            if k not in near:
                return None
            region.add(k)
            stack.append(k)
    if len(region) < 2 or not (region & {first[1]}):
        return None
    what = ops[i].operands[1:3]
    probes = [j for j in region if _probe(ops[j])]
    if any(not _quiet(ops[j]) for j in region if j not in probes) or any(ops[j].operands[1:3] != what for j in probes):
        return None
    for q in probes:
        d = _decision(ops, q)
        if d is None or d[0] != out:
            return None
        seen, stack = set(), [d[1]]
        while stack:  # from where `false` goes, the way out only after another probe
            j = stack.pop()
            if j == out:
                return None
            if j in seen or _probe(ops[j]):
                continue
            seen.add(j)
            stack.extend(successors(ops, j))
    if flow.entered_elsewhere(region, i):
        return None
    defined = {r for j in region if j != i for r, _ in decode(ops[j], regs).dests}
    if defined & flow.read_outside(region):
        return None
    return region, out


def _backoff_waits(ops: list[Op], regs: dict[str, str]) -> None:
    """Collapse a try_wait with a back-off into one blocking wait: libcu++'s `cuda::barrier::wait` (CUDA 13.0,
    docs/ptx.md) tries the phase once, and while it has not completed counts spins, reads `%globaltimer` and
    sleeps (`nanosleep`) before trying again (`_wait_region` says when such code is a wait)."""
    flow = _Flow(ops, regs)
    for i, op in enumerate(ops):
        if not _probe(op) or i + 1 >= len(ops):
            continue
        found = _wait_region(ops, i, regs, flow)
        if found is None:
            continue
        region, out = found
        ops[i] = Op("pipecheck.wait." + ".".join(op.mods), op.operands[:3], None, False, op.line, op.col, op.loc, -1,
                    op.call_depth)
        nxt = ops[i + 1]
        ops[i + 1] = Op("bra.uni", (), None, False, nxt.line, nxt.col, nxt.loc, out)
        for j in region - {i, i + 1}:  # no longer reachable: the probes in it are not spin loops of their own
            o = ops[j]
            ops[j] = Op("nop.spin", (), None, False, o.line, o.col, o.loc)
        flow = _Flow(ops, regs)  # the body changed


def _refuse_spins(body: Body, ops: list[Op]) -> None:
    """A probe on a cycle of quiet instructions is a spin loop that `prepare` did not recognise as a wait: as a
    loop of probes a hang would look like a thread that keeps running, so it is refused, never explored."""
    for i, op in enumerate(ops):
        if not _tries(op):
            continue
        near = range(max(0, i - LOOP_LIMIT), min(len(ops), i + LOOP_LIMIT))
        seen, stack = set(), list(successors(ops, i))
        while stack:
            j = stack.pop()
            if j == i:
                raise error("rule", f"PTX line {op.line}: `{op.opcode}` spins in a loop pipecheck does not read as "
                            "a wait (the loop does more than try the phase again, or leaves it another way): "
                            "exploring it would hide a hang", body.span(i))
            if j in seen or j not in near or not _quiet(ops[j]):
                continue
            seen.add(j)
            stack.extend(successors(ops, j))


__all__ = ["Decoded", "decode", "prepare", "successors", "INT_TYPES"]
