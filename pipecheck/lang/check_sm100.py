"""The checks of the sm_100 statements that span a CTA pair or the grid: `cta_group 2` on tcgen05.mma and
TMA loads, and cluster launch control (`try_cancel`, `query_cancel`). Split from check.py; pure functions.
"""
from __future__ import annotations

from ..core.diagnostics import SpecError, error
from . import ast as A
from .consts import eval_const
from ..model.kernel import CLC_CHOICE

CLC_RESPONSE_BYTES = 16  # clusterlaunchcontrol.try_cancel writes a 16-byte response (PTX ISA 9.7.13.21)


def cta_group(e: A.Expr | None, env, arch: str, cluster_size: int, what: str) -> int:
    """The constant of `cta_group N` (1 or 2); 2 needs sm_100 and CTA pairs (an even cluster size)."""
    if e is None:
        return 1
    try:
        n = eval_const(e, env, "a cta_group")
    except SpecError:
        raise error("value", "a cta_group must be a constant (1 or 2)", e.span) from None
    if n not in (1, 2):
        raise error("rule", f"cta_group is 1 or 2 (PTX ISA 9.7.16: one CTA or a CTA pair), not {n}", e.span)
    if n == 2:
        if not arch.startswith("sm_100"):
            raise error("rule", f"{what} with cta_group 2 is an sm_100 form (PTX ISA 9.7.16); this kernel is arch {arch} "
                        "(write `arch sm_100`)", e.span)
        if cluster_size % 2:
            raise error("rule", f"{what} with cta_group 2 works on a CTA pair (ranks 2k and 2k+1 of the cluster), "
                        f"but the cluster has {cluster_size} CTA(s): declare an even cluster (`cluster 2`)", e.span)
    return n


def peer_of_leader() -> A.Expr:
    """The odd CTA of the issuing (leader) CTA's pair: cta + 1 (the leader's rank is even)."""
    return A.Binary("+", A.Name("cta"), A.Num(1))


def pair_leader() -> A.Expr:
    """The even CTA of the issuing CTA's pair: cta - cta % 2 (whose barrier a 2-SM load completes on)."""
    return A.Binary("-", A.Name("cta"), A.Binary("%", A.Name("cta"), A.Num(2)))


# ---------------------------------------------------------------- cluster launch control (PTX ISA 9.7.13.17-18)
MAX_CLC = 16


def clc_decl(item: A.Clc, env, kchoose_decl):
    """`clc N`: a kernel choice 0..N, fixed for the run: the first k responses are canceled clusters (more work),
    the next fails. Every k is explored (a configuration)."""
    try:
        n = eval_const(item.count, env, "clc's bound")
    except SpecError:
        raise error("value", "clc's bound must be a constant", item.count.span) from None
    if not 0 <= n <= MAX_CLC:
        raise error("value", f"clc's bound {n} is outside 0..{MAX_CLC}", item.count.span)
    return kchoose_decl(CLC_CHOICE, (), 0, n, item.span)


def clc_statement(ctx, s, what: str) -> None:
    """What try_cancel and query_cancel need: sm_100, a `clc N` item, a 16-byte response buffer in SMEM."""
    if not ctx.arch.startswith("sm_100"):
        raise error("rule", f"{what} is cluster launch control, which exists on sm_100 only (PTX ISA 9.7.13.17); "
                    f"this kernel is arch {ctx.arch} (write `arch sm_100`)", s.span)
    if CLC_CHOICE not in ctx.kchooses:
        raise error("rule", f"{what} needs the kernel item `clc N`: how many more clusters cluster launch control "
                    "may hand this one (every count 0..N is explored)", s.span)
    buf = ctx.buffers.get(s.buffer.name)
    if buf is not None and (buf.space != "smem" or buf.bytes != CLC_RESPONSE_BYTES or buf.over is not None):
        raise error("rule", f"a try_cancel response is {CLC_RESPONSE_BYTES} bytes of shared memory (PTX ISA 9.7.13.17): "
                    f"declare `smem {s.buffer.name}[...] bytes {CLC_RESPONSE_BYTES}`", s.buffer.span)
