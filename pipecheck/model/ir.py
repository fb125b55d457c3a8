"""Resolved expressions and flat instructions: what `lower` produces and `model` executes.

Expressions are small hashable trees; `compile_expr` turns one into a Python closure over
a thread's environment tuple. Instructions are hashable too, so identical programs of two
thread classes compare equal (that is how classes and configurations are merged).
"""
from __future__ import annotations

import functools

from dataclasses import dataclass, field
from typing import Callable

from ..core.diagnostics import Span
from ..core.records import record


# C integer arithmetic: division truncates toward zero, the remainder takes the dividend's sign
def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_mod(a: int, b: int) -> int:
    return a - b * c_div(a, b)


# ---------------------------------------------------------------- expressions


@record
class RConst:
    value: int


@record
class RVar:
    slot: int
    name: str


@record
class RBuiltin:
    name: str  # lane | warp | thread | instance | cta | cta_x | cta_y | warpgroup


@record
class RElect:
    """The value of `elect(mask)` at one site: true on the elected lane."""

    mask: int
    site: int


@record
class RRing:
    slot: int
    name: str
    stages: int
    phase0: "int | RExpr"  # an expression over the thread's identity until specialised
    attr: str  # index | phase | count


@record
class RChoice:
    """A kernel-scope `choose` element: fixed by the configuration."""

    name: str
    index: tuple["RExpr", ...]


@record
class ROp:
    op: str  # unary "-" "!"; binary operators; "?:"; "min"; "max"; "chk" (cond, value, PTX line: ir._chk)
    args: tuple["RExpr", ...]


RExpr = RConst | RVar | RBuiltin | RElect | RRing | RChoice | ROp


class EvalError(Exception):
    """A runtime value error in the spec (index out of range, division by zero)."""

    def __init__(self, message: str, site: int, code: str = "value"):
        super().__init__(message)
        self.site = site
        self.code = code  # the diagnostic's code: "value", or "rule" for a rule only a thread's CTA decides

    def __reduce__(self):  # it crosses from a --jobs process with its site and code
        return type(self), (str(self), self.site, self.code)


class ValueFault(ArithmeticError):
    """A runtime arithmetic error in a spec expression; the model adds the statement's location."""


def _div(a: int, b: int) -> int:
    if b == 0:
        raise ValueFault("division by zero")
    return c_div(a, b)


def _mod(a: int, b: int) -> int:
    if b == 0:
        raise ValueFault("division by zero")
    return c_mod(a, b)


def _shl(a: int, b: int) -> int:
    if not 0 <= b <= 64:  # the range the checker allows for constant shifts
        raise ValueFault(f"shift by {b} is out of range 0..64")
    return a << b


def _shr(a: int, b: int) -> int:
    if not 0 <= b <= 64:
        raise ValueFault(f"shift by {b} is out of range 0..64")
    return a >> b


def _chk(ok, v: int, line: int) -> int:
    """`chk(cond, value, line)`: the value where the condition holds; otherwise the PTX front end's run-time refusal
    (the threads of one class would touch different buffers at an access of PTX line `line`)."""
    if not ok:
        raise ValueFault(f"PTX line {line}: threads of one class access different buffers here (their addresses "
                         "differ by their identity and a run-time value); pipecheck cannot model them as one class")
    return v


_PY_OPS = {"+": "+", "-": "-", "*": "*", "&": "&", "|": "|", "^": "^",
           "==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def expr_source(e: RExpr) -> str:
    """Python source for an expression over `e` (the environment tuple)."""
    if isinstance(e, RConst):
        return repr(int(e.value))
    if isinstance(e, RVar):
        return f"e[{e.slot}]"
    if isinstance(e, RRing):
        if e.attr == "count":
            return f"e[{e.slot}]"
        if e.attr == "index":
            return f"(e[{e.slot}] % {e.stages})"
        return f"(((e[{e.slot}] // {e.stages}) + {e.phase0}) & 1)"
    if isinstance(e, ROp):
        a = [expr_source(x) for x in e.args]
        if e.op == "-" and len(a) == 1:
            return f"(-{a[0]})"
        if e.op == "!":
            return f"(not {a[0]})"
        if e.op == "&&":
            return f"(bool({a[0]}) and bool({a[1]}))"
        if e.op == "||":
            return f"(bool({a[0]}) or bool({a[1]}))"
        if e.op == "/":
            return f"_div({a[0]}, {a[1]})"
        if e.op == "%":
            return f"_mod({a[0]}, {a[1]})"
        if e.op == "?:":
            return f"({a[1]} if {a[0]} else {a[2]})"
        if e.op in ("<<", ">>"):
            return f"{'_shl' if e.op == '<<' else '_shr'}({a[0]}, {a[1]})"
        if e.op in ("min", "max"):
            return f"{e.op}({', '.join(a)})"
        if e.op == "chk":
            return f"_chk({a[0]}, {a[1]}, {a[2]})"
        return f"({a[0]} {_PY_OPS[e.op]} {a[1]})"
    raise TypeError(f"not a runtime expression: {e!r}")


def compile_expr(e: RExpr) -> Callable[[tuple], int]:
    if isinstance(e, RConst):
        v = int(e.value)
        return lambda env: v
    return _lambda(expr_source(e))


@functools.cache
def _lambda(src: str) -> Callable[[tuple], int]:
    """The function of one expression's source (pure: equal sources share one function)."""
    return eval(f"lambda e: int({src})", {"_div": _div, "_mod": _mod, "_shl": _shl, "_shr": _shr, "_chk": _chk, "min": min,
                                           "max": max})


def expr_text(e: RExpr) -> str:
    """The expression as a person would write it (for reports)."""
    if isinstance(e, RConst):
        return str(e.value)
    if isinstance(e, RVar):
        return e.name
    if isinstance(e, RRing):
        return f"{e.name}.{e.attr}"
    if isinstance(e, RBuiltin):
        return e.name
    if isinstance(e, RElect):
        return "elect()" if e.mask == 0xFFFFFFFF else f"elect({e.mask:#x})"
    if isinstance(e, RChoice):
        return e.name + "".join(f"[{expr_text(i)}]" for i in e.index)
    if isinstance(e, ROp):
        a = [expr_text(x) for x in e.args]
        if len(a) == 1:
            return f"{e.op}{a[0]}"
        if e.op == "?:":
            return f"({a[0]} ? {a[1]} : {a[2]})"
        if e.op in ("<<", ">>"):
            return f"{'_shl' if e.op == '<<' else '_shr'}({a[0]}, {a[1]})"
        if e.op in ("min", "max"):
            return f"{e.op}({', '.join(a)})"
        if e.op == "chk":  # the PTX front end's same-buffer check: the value is what a person reads
            return a[1]
        return f"({a[0]} {e.op} {a[1]})"
    return "?"


# ---------------------------------------------------------------- instructions


@record
class RRef:
    """A barrier or buffer element, resolved to its declaration; `cta` None is the thread's own."""

    name: str
    indices: tuple[RExpr, ...]
    cta: RExpr | None = None


@record
class Site:
    """Where an instruction comes from: its statement, and the procedure calls that led there."""

    span: Span
    text: str
    via: tuple[Span, ...] = ()
    proc: str | None = None
    # the procedure calls from the user's statement down (.pipe): each call's span and the procedure it enters
    calls: tuple[tuple[Span, str], ...] = ()


# Instruction opcodes. Locals are executed eagerly (fused into the step before them).
LET, CHOOSE, RING, ADVANCE, JUMP, BRANCH = "let", "choose", "ring", "advance", "jump", "branch"
LOCAL_OPS = frozenset({LET, CHOOSE, RING, ADVANCE, JUMP, BRANCH})
WAIT, ARRIVE, EXPECT_TX, COMPLETE_TX, ARRIVE_DROP = "wait", "arrive", "expect_tx", "complete_tx", "arrive_drop"
TMA_LOAD, READ, WRITE, MMA, MMA_WAIT, MMA_COMMIT = "tma_load", "read", "write", "mma", "mma_wait", "mma_commit"
COLL, COLL_WAIT, BAR_ARRIVE, END = "coll", "coll_wait", "bar_arrive", "end"
TMA_STORE, COMMIT_GROUP, WAIT_GROUP, FENCE_PROXY = "tma_store", "commit_group", "wait_group", "fence_proxy"
INIT, INVAL, FENCE_INIT, EXIT, CP_ASYNC_ARRIVE = "init", "inval", "fence_init", "exit", "cp_async_arrive"
CP_ASYNC = "cp_async"
# tcgen05 (sm_100): the fences around a thread sync, and the CTA's tensor memory
T5_BEFORE, T5_AFTER = "tcgen05_before_thread_sync", "tcgen05_after_thread_sync"
TMEM_ALLOC, TMEM_DEALLOC, TMEM_RELINQUISH = "tmem_alloc", "tmem_dealloc", "tmem_relinquish"
TCGEN05_OPS = frozenset({T5_BEFORE, T5_AFTER, TMEM_ALLOC, TMEM_DEALLOC, TMEM_RELINQUISH})
PROBE = "probe"  # mbarrier.try_wait/test_wait as a test: a register gets whether the phase completed
TRAP = "trap"  # PTX `trap`, `brkpt`, a failed device assert: the kernel stops with an error
PTX_ONLY_OPS = frozenset({PROBE, TRAP})  # what only the PTX front end emits (the .pipe language has no spelling)

# Operations whose effect another thread can observe (beyond reading shared state).
SIGNALLING_OPS = frozenset({ARRIVE, EXPECT_TX, COMPLETE_TX, ARRIVE_DROP, TMA_LOAD, WRITE, MMA_COMMIT, BAR_ARRIVE,
                            TMA_STORE, COMMIT_GROUP, INIT, INVAL, CP_ASYNC_ARRIVE, CP_ASYNC, FENCE_PROXY,
                            FENCE_INIT, TMEM_ALLOC, TMEM_DEALLOC})


@record
class Instr:
    op: str
    args: tuple = ()
    site: int = -1
    target: int = -1  # jump / branch-if-false target


@dataclass(frozen=True, eq=False)
class Program:
    """One thread class's code: flat instructions; pc len-1 is END. Hashes once (programs are dict keys)."""

    instrs: tuple[Instr, ...]
    nslots: int
    slot_names: tuple[str, ...] = field(default=())
    # every arrive of this program is unrecorded (no per-phase record of arrivers for double-arrive): set by a
    # front end whose arrivals cannot be told once per round (PTX), so arrivals of several warps commute
    unrecorded: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.instrs, self.nslots)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Program) or self._hash != other._hash:  # type: ignore[attr-defined]
            return False
        return self.instrs == other.instrs and self.nslots == other.nslots

    def key(self) -> tuple:
        return (self._hash, self.nslots)  # type: ignore[attr-defined]

    def successors(self) -> list[list[int]]:
        """The pcs control can reach from each instruction: its control-flow graph."""
        out: list[list[int]] = []
        for pc, ins in enumerate(self.instrs):
            if ins.op == JUMP:
                out.append([ins.target])
            elif ins.op == BRANCH:
                out.append([pc + 1, ins.target])
            elif ins.op == END:
                out.append([])
            else:
                out.append([pc + 1])
        return out
