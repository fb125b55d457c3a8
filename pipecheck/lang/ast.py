"""The syntax tree of a .pipe file: frozen records (core/records.py) built by `parse`.

Every node carries a `span` that takes no part in equality, so two specs that say the
same thing compare equal wherever they were written.
"""
from __future__ import annotations

from dataclasses import field

from ..core.diagnostics import Span
from ..core.records import record

NOSPAN = Span("<builtin>", 0, 0)


def _span() -> Span:
    return field(default=NOSPAN, compare=False, hash=False, repr=False)


# ---------------------------------------------------------------- expressions


@record
class Num:
    value: int
    span: Span = _span()


@record
class Bool:
    value: bool
    span: Span = _span()


@record
class Name:
    id: str
    span: Span = _span()


@record
class Attr:
    obj: "Expr"
    name: str
    span: Span = _span()


@record
class Index:
    obj: "Expr"
    index: "Expr"
    span: Span = _span()


@record
class Unary:
    op: str  # "-" | "!"
    operand: "Expr"
    span: Span = _span()


@record
class Binary:
    op: str
    left: "Expr"
    right: "Expr"
    span: Span = _span()


@record
class Ternary:
    cond: "Expr"
    then: "Expr"
    other: "Expr"
    span: Span = _span()


@record
class Call:
    func: str
    args: tuple["Expr", ...]
    span: Span = _span()


Expr = Num | Bool | Name | Attr | Index | Unary | Binary | Ternary | Call


@record
class Ref:
    """A barrier or buffer element: `full[st.index]`, `D[t % 2]`, `A`."""

    name: str
    indices: tuple[Expr, ...]
    span: Span = _span()


# ---------------------------------------------------------------- statements


@record
class Let:
    name: str
    value: Expr
    span: Span = _span()


@record
class Choose:
    name: str
    lo: Expr | None
    hi: Expr | None
    span: Span = _span()


@record
class RingDecl:
    name: str
    stages: Expr
    phase: Expr | None
    span: Span = _span()


@record
class Advance:
    ring: str
    span: Span = _span()


@record
class For:
    var: str
    lo: Expr
    hi: Expr
    body: tuple["Stmt", ...]
    span: Span = _span()


@record
class If:
    cond: Expr
    then: tuple["Stmt", ...]
    other: tuple["Stmt", ...]
    span: Span = _span()


@record
class Wait:
    barrier: Ref
    parity: Expr
    cta: Expr | None = None
    span: Span = _span()


@record
class Arrive:
    barrier: Ref
    count: Expr | None
    expect_tx: Expr | None
    cta: Expr | None
    span: Span = _span()


@record
class ExpectTx:
    barrier: Ref
    bytes: Expr
    cta: Expr | None
    span: Span = _span()


@record
class CompleteTx:
    barrier: Ref
    bytes: Expr
    cta: Expr | None
    span: Span = _span()


@record
class ArriveDrop:
    barrier: Ref
    count: Expr | None
    span: Span = _span()


@record
class TmaLoad:
    buffer: Ref
    tile: Expr
    bytes: Expr | None
    tensormap: str | None
    barrier: Ref | None
    multicast: Expr | None
    cta: Expr | None  # `on cta r`: lands in CTA r's buffer and completes on CTA r's barrier (2-SM load)
    # `cta_group 2`: lands in the issuer's buffer and completes on the barrier of its pair's leader (even) CTA
    cta_group: Expr | None = None
    span: Span = _span()


@record
class TmaStore:
    buffer: Ref
    tile: Expr | None
    bytes: Expr | None
    tensormap: str | None
    barrier: Ref | None  # always an error: stores complete through bulk groups
    span: Span = _span()


@record
class Read:
    buffer: Ref
    tile: Expr
    span: Span = _span()


@record
class Write:
    buffer: Ref
    tile: Expr
    span: Span = _span()


@record
class Operand:
    buffer: Ref
    tile: Expr | None
    span: Span = _span()


@record
class MmaAsync:
    operands: tuple[Operand, ...]
    out: Operand | None = None  # `into ACC[j] tile t`: the accumulator it writes (tcgen05 TMEM)
    # `cta_group 2` (tcgen05.mma.cta_group::2): the leader CTA's MMA reads both CTAs' operands, writes both halves
    cta_group: Expr | None = None
    span: Span = _span()


@record
class MmaWait:
    pending: Expr
    span: Span = _span()


@record
class MmaCommit:
    barrier: Ref
    multicast: Expr | None
    span: Span = _span()


@record
class CpAsync:
    buffer: Ref
    tile: Expr
    span: Span = _span()


@record
class CpAsyncArrive:
    barrier: Ref
    span: Span = _span()


@record
class CommitGroup:
    span: Span = _span()


@record
class WaitGroup:
    pending: Expr
    read_only: bool
    span: Span = _span()


@record
class FenceProxyAsync:
    span: Span = _span()


@record
class FenceBarrierInit:
    span: Span = _span()


@record
class Tcgen05:
    """A tcgen05 statement without operands (sm_100): `before_thread_sync` / `after_thread_sync` (the
    tcgen05.fence forms), `alloc` / `dealloc` / `relinquish` (the CTA's tensor memory)."""

    kind: str
    span: Span = _span()


@record
class SetMaxNReg:
    """`setmaxnreg inc|dec N` (setmaxnreg.sync.aligned): a warpgroup collective."""

    direction: str
    count: Expr
    span: Span = _span()


@record
class SyncWarp:
    mask: Expr | None
    span: Span = _span()


@record
class SyncThreads:
    span: Span = _span()


@record
class ClusterSync:
    span: Span = _span()


@record
class BarSync:
    id: Expr
    count: Expr
    blocking: bool  # bar_sync blocks; bar_arrive only counts
    span: Span = _span()


@record
class Init:
    barrier: Ref
    count: Expr
    cta: Expr | None
    span: Span = _span()


@record
class Inval:
    barrier: Ref
    span: Span = _span()


@record
class Exit:
    span: Span = _span()


@record
class Break:
    """`break`: leaves the innermost `for` (a tile loop driven by cluster launch control's answer)."""
    span: Span = _span()


@record
class TryCancel:
    """`try_cancel R[i] tile n barrier b [multicast]`: clusterlaunchcontrol.try_cancel (PTX ISA 9.7.13.17)."""
    buffer: Ref
    tile: Expr
    barrier: Ref
    multicast: bool
    span: Span = _span()


@record
class QueryCancel:
    """`let v = query_cancel R[i] tile n`: reads the response, v = clusterlaunchcontrol.query_cancel.is_canceled."""
    name: str
    buffer: Ref
    tile: Expr
    span: Span = _span()


@record
class Clc:
    """`clc N` (kernel item): cluster launch control may hand this cluster up to N more clusters' work."""
    count: Expr
    span: Span = _span()


@record
class CallStmt:
    proc: str
    args: tuple[Expr, ...]
    span: Span = _span()


Stmt = (
    Let | Choose | RingDecl | Advance | For | If | Wait | Arrive | ExpectTx | CompleteTx
    | ArriveDrop | TmaLoad | TmaStore | Read | Write | MmaAsync | MmaWait | MmaCommit
    | CpAsync | CpAsyncArrive | CommitGroup | WaitGroup | FenceProxyAsync | FenceBarrierInit | Tcgen05 | SetMaxNReg | SyncWarp
    | SyncThreads | ClusterSync | BarSync | Init | Inval | Exit | CallStmt
)


# ---------------------------------------------------------------- declarations


@record
class Arch:
    name: str
    span: Span = _span()


@record
class Param:
    name: str
    default: Expr
    lo: Expr | None
    hi: Expr | None
    span: Span = _span()


@record
class Const:
    name: str
    value: Expr
    span: Span = _span()


@record
class Smem:
    name: str
    dims: tuple[Expr, ...]
    bytes: Expr
    over: Ref | None
    space: str = "smem"  # smem | tmem
    span: Span = _span()


@record
class MBarrier:
    name: str
    dims: tuple[Expr, ...]
    count: Expr
    noinit: bool
    span: Span = _span()


@record
class Cluster:
    dims: tuple[Expr, ...]
    span: Span = _span()


@record
class Role:
    name: str
    dims: tuple[Expr, ...]
    shape: str  # thread | warp | warpgroup | threads | warps | warpgroups
    size: Expr | None
    body: tuple[Stmt, ...]
    span: Span = _span()


@record
class KChoose:
    name: str
    dims: tuple[Expr, ...]
    lo: Expr | None
    hi: Expr | None
    span: Span = _span()


@record
class TensorMapField:
    name: str
    value: Expr | tuple[Expr, ...]
    span: Span = _span()


@record
class TensorMap:
    name: str
    fields: tuple[TensorMapField, ...]
    span: Span = _span()


@record
class Proc:
    name: str
    params: tuple[str, ...]
    body: tuple[Stmt, ...]
    span: Span = _span()


@record
class Import:
    path: str
    span: Span = _span()


KItem = Arch | Param | Const | Smem | MBarrier | Cluster | Role | KChoose | TensorMap | Proc


@record
class Kernel:
    name: str
    items: tuple[KItem, ...]
    span: Span = _span()


@record
class SpecFile:
    path: str
    imports: tuple[Import, ...]
    kernels: tuple[Kernel, ...]
    procs: tuple[Proc, ...]
    span: Span = _span()
