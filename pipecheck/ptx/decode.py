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
    if base == "tensormap" or base == "clusterlaunchcontrol":
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
        if "parity" not in mods:
            return Decoded(REFUSE_K, reason=f"`{name}` waits on a phase token; pipecheck reads the `.parity` form only")
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
        if op.base != "mbarrier" or "try_wait" not in op.mods or "parity" not in op.mods or op.guard is not None:
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
    return Body(ops, body.regs, body.file)


__all__ = ["Decoded", "decode", "prepare", "INT_TYPES"]
