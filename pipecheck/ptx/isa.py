"""What PTX instructions compute: integer and predicate semantics as expressions, and the class
of every instruction (arithmetic, memory, protocol, control, refused).

Values are unsigned bit patterns of their register's width; signed operations reinterpret
them (`x ^ 2^(w-1)) - 2^(w-1)`), so one expression type (`model.ir.RExpr`) serves the static
evaluation here and the registers the model keeps at run time. Sources: PTX ISA 9.0, chapter
9.7 (integer, comparison, logic, data movement and conversion instructions).
"""
from __future__ import annotations

import math
import struct
from typing import Callable

from ..model.ir import ROp, RConst, RExpr, c_div, c_mod

Builder = Callable[[list[RExpr]], RExpr]

INT_TYPES = {".u8": (8, False), ".s8": (8, True), ".b8": (8, False), ".u16": (16, False), ".s16": (16, True),
             ".b16": (16, False), ".u32": (32, False), ".s32": (32, True), ".b32": (32, False), ".u64": (64, False),
             ".s64": (64, True), ".b64": (64, False), ".pred": (1, False)}
FLOAT_TYPES = {".f16": 16, ".bf16": 16, ".f32": 32, ".f64": 64, ".f16x2": 32, ".bf16x2": 32}


def width_of(typ: str) -> int:
    if typ in INT_TYPES:
        return INT_TYPES[typ][0]
    return FLOAT_TYPES.get(typ, 32)


def type_of(mods: tuple[str, ...]) -> str:
    """The last type qualifier of an opcode (`.s32` of `add.s32`, `.u64` of `cvt.u64.u32`)."""
    for m in reversed(mods):
        t = "." + m
        if t in INT_TYPES or t in FLOAT_TYPES:
            return t
    return ".b32"


def types_of(mods: tuple[str, ...]) -> list[str]:
    return ["." + m for m in mods if "." + m in INT_TYPES or "." + m in FLOAT_TYPES]


# ---------------------------------------------------------------- expressions with folding


def mask(w: int) -> int:
    return (1 << w) - 1


def fold(op: str, vals: list[int]) -> int | None:
    """The value of `op` on constants, or None where it has none (a division by zero, a shift past 64)."""
    try:
        if op == "+":
            return vals[0] + vals[1]
        if op == "-":
            return -vals[0] if len(vals) == 1 else vals[0] - vals[1]
        if op == "*":
            return vals[0] * vals[1]
        if op == "/":
            return c_div(vals[0], vals[1]) if vals[1] else None
        if op == "%":
            return c_mod(vals[0], vals[1]) if vals[1] else None
        if op == "&":
            return vals[0] & vals[1]
        if op == "|":
            return vals[0] | vals[1]
        if op == "^":
            return vals[0] ^ vals[1]
        if op == "<<":
            return vals[0] << vals[1] if 0 <= vals[1] <= 64 else None
        if op == ">>":
            return vals[0] >> vals[1] if 0 <= vals[1] <= 64 else None
        if op == "==":
            return int(vals[0] == vals[1])
        if op == "!=":
            return int(vals[0] != vals[1])
        if op == "<":
            return int(vals[0] < vals[1])
        if op == "<=":
            return int(vals[0] <= vals[1])
        if op == ">":
            return int(vals[0] > vals[1])
        if op == ">=":
            return int(vals[0] >= vals[1])
        if op == "!":
            return int(not vals[0])
        if op == "&&":
            return int(bool(vals[0]) and bool(vals[1]))
        if op == "||":
            return int(bool(vals[0]) or bool(vals[1]))
        if op == "?:":
            return vals[1] if vals[0] else vals[2]
        if op == "min":
            return min(vals)
        if op == "max":
            return max(vals)
    except (ValueError, OverflowError):
        return None
    return None


def mk(op: str, *args: RExpr) -> RExpr:
    """An expression node, folded when its arguments are constants (and for a few identities)."""
    if all(isinstance(a, RConst) for a in args):
        v = fold(op, [a.value for a in args])  # type: ignore[union-attr]
        if v is not None:
            return RConst(v)
    if op == "?:" and isinstance(args[0], RConst):
        return args[1] if args[0].value else args[2]
    if op == "&" and isinstance(args[1], RConst):
        if args[1].value == 0:
            return RConst(0)
        inner = args[0]
        if isinstance(inner, ROp) and inner.op == "&" and isinstance(inner.args[1], RConst):
            return mk("&", inner.args[0], RConst(inner.args[1].value & args[1].value))
        if bound(inner) is not None and bound(inner) <= args[1].value and args[1].value & (args[1].value + 1) == 0:
            return inner  # masking a value that already fits
    if op in ("+", "-", "|", "^", "<<", ">>") and len(args) == 2 and isinstance(args[1], RConst) and args[1].value == 0:
        return args[0]
    if op == "*" and isinstance(args[1], RConst) and args[1].value == 1:
        return args[0]
    return ROp(op, tuple(args))


def bound(e: RExpr) -> int | None:
    """An upper bound of a non-negative expression, when one is evident (for dropping masks)."""
    if isinstance(e, RConst):
        return e.value if e.value >= 0 else None
    if isinstance(e, ROp):
        if e.op == "&" and isinstance(e.args[1], RConst) and e.args[1].value >= 0:
            return e.args[1].value
        if e.op in ("==", "!=", "<", "<=", ">", ">=", "!", "&&", "||"):
            return 1
        if e.op == ">>" and isinstance(e.args[1], RConst):
            b = bound(e.args[0])
            return b >> e.args[1].value if b is not None else None
        if e.op == "?:":
            a, b = bound(e.args[1]), bound(e.args[2])
            return max(a, b) if a is not None and b is not None else None
    from ..model.ir import RBuiltin, RElect  # identity leaves: small non-negative numbers
    if isinstance(e, RElect):
        return 1
    if isinstance(e, RBuiltin):
        return (1 << 31) - 1 if not e.name.startswith("n") else None
    return None


def wrap(e: RExpr, w: int) -> RExpr:
    return mk("&", e, RConst(mask(w)))


def signed(e: RExpr, w: int) -> RExpr:
    """The signed value of a w-bit pattern."""
    if isinstance(e, RConst):
        v = e.value & mask(w)
        return RConst(v - (1 << w) if v >> (w - 1) else v)
    b = bound(e)
    if b is not None and b < (1 << (w - 1)):
        return e
    top = RConst(1 << (w - 1))
    return mk("-", mk("^", e, top), top)


def cmp(op: str, a: RExpr, b: RExpr, typ: str) -> RExpr:
    w, sgn = INT_TYPES.get(typ, (32, False))
    if sgn:
        a, b = signed(a, w), signed(b, w)
    return mk(op, a, b)


# ---------------------------------------------------------------- integer instructions


_SETP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
         "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
_UNSIGNED_CMP = ("lo", "ls", "hi", "hs")


def setp_expr(mods: tuple[str, ...], a: RExpr, b: RExpr) -> RExpr | None:
    typ = type_of(mods)
    if typ in FLOAT_TYPES:
        return None
    c = mods[0]
    if c not in _SETP:
        return None
    if c in _UNSIGNED_CMP:
        typ = ".u" + typ[2:]
    return cmp(_SETP[c], a, b, typ)


def alu(base: str, mods: tuple[str, ...], args: list[RExpr]) -> RExpr | None:
    """The result of an integer or predicate instruction; None when this module does not model it."""
    typ = type_of(mods)
    if typ in FLOAT_TYPES and base not in ("mov", "selp", "cvt"):
        return None
    w, sgn = INT_TYPES.get(typ, (32, False))
    m = w
    if base == "mov":
        return args[0]
    if base in ("add", "sub"):
        return wrap(mk("+" if base == "add" else "-", args[0], args[1]), w)
    if base == "mul" or base == "mad":
        x, y = (signed(args[0], w), signed(args[1], w)) if sgn else (args[0], args[1])
        p = mk("*", x, y)
        if "hi" in mods:
            p = mk(">>", p, RConst(w))
            r = wrap(p, w)
        elif "wide" in mods:
            r = wrap(p, 2 * w)
            m = 2 * w
        else:
            r = wrap(p, w)
        if base == "mad":
            r = wrap(mk("+", r, args[2]), m)
        return r
    if base in ("div", "rem"):
        x, y = (signed(args[0], w), signed(args[1], w)) if sgn else (args[0], args[1])
        return wrap(mk("/" if base == "div" else "%", x, y), w)
    if base in ("min", "max"):
        x, y = (signed(args[0], w), signed(args[1], w)) if sgn else (args[0], args[1])
        return wrap(mk(base, x, y), w)
    if base == "abs":
        x = signed(args[0], w)
        return wrap(mk("?:", mk("<", x, RConst(0)), mk("-", RConst(0), x), x), w)
    if base == "neg":
        return wrap(mk("-", RConst(0), args[0]), w)
    if base in ("and", "or", "xor"):
        return mk({"and": "&", "or": "|", "xor": "^"}[base], args[0], args[1])
    if base == "not":
        return mk("^", args[0], RConst(mask(w))) if typ != ".pred" else mk("!", args[0])
    if base == "cnot":
        return mk("==", args[0], RConst(0))
    if base in ("shl", "shr"):
        n = mk("min", args[1], RConst(w)) if not isinstance(args[1], RConst) else RConst(min(args[1].value, w))
        if base == "shl":
            return wrap(mk("<<", args[0], n), w)
        if sgn:
            return wrap(mk(">>", signed(args[0], w), n), w)
        return mk(">>", args[0], n)
    if base == "selp":
        return mk("?:", args[2], args[0], args[1])
    if base == "cvt":
        tys = types_of(mods)
        if len(tys) != 2 or tys[0] in FLOAT_TYPES or tys[1] in FLOAT_TYPES:
            return None
        (dw, _), (sw, ss) = INT_TYPES[tys[0]], INT_TYPES[tys[1]]
        v = args[0]
        if ss:
            v = signed(wrap(v, sw), sw)
        else:
            v = wrap(v, sw)
        return wrap(v, dw)
    if base == "bfe":
        pos, ln = args[1], args[2]
        if not (isinstance(pos, RConst) and isinstance(ln, RConst)):
            return None
        p, n = pos.value & 0xFF, ln.value & 0xFF
        if n == 0:
            return RConst(0)
        field = wrap(mk(">>", args[0], RConst(min(p, w))), n)
        if sgn:
            return wrap(signed(field, n), w)
        return field
    if base == "bfi":
        pos, ln = args[2], args[3]
        if not (isinstance(pos, RConst) and isinstance(ln, RConst)):
            return None
        p, n = pos.value & 0xFF, ln.value & 0xFF
        fm = mask(n) << p
        return wrap(mk("|", mk("&", args[1], RConst(mask(w) ^ fm)), mk("&", mk("<<", args[0], RConst(p)), RConst(fm))), w)
    return None


# ---------------------------------------------------------------- floats (static values only)


def f_from(bits: int, w: int) -> float:
    if w == 64:
        return struct.unpack("<d", struct.pack("<Q", bits & mask(64)))[0]
    return struct.unpack("<f", struct.pack("<I", bits & mask(32)))[0]


def f_to(x: float, w: int) -> int:
    if w == 64:
        return struct.unpack("<Q", struct.pack("<d", x))[0]
    try:
        return struct.unpack("<I", struct.pack("<f", x))[0]
    except OverflowError:
        return struct.unpack("<I", struct.pack("<f", math.copysign(math.inf, x)))[0]


_FSETP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
          "equ": "==", "neu": "!=", "ltu": "<", "leu": "<=", "gtu": ">", "geu": ">="}


def float_static(base: str, mods: tuple[str, ...], vals: list[int]) -> int | None:
    """A floating-point instruction on known bit patterns: setp, arithmetic, conversions."""
    typ = type_of(mods)
    if base == "setp":
        w = FLOAT_TYPES.get(typ, 32)
        a, b = f_from(vals[0], w), f_from(vals[1], w)
        c = mods[0]
        if c in ("num", "nan"):
            nan = math.isnan(a) or math.isnan(b)
            return int(nan if c == "nan" else not nan)
        if c not in _FSETP:
            return None
        if math.isnan(a) or math.isnan(b):
            return int(c.endswith("u") or c == "ne")
        return fold(_FSETP[c], [a, b])  # type: ignore[list-item]
    w = FLOAT_TYPES.get(typ)
    if w not in (32, 64):
        return None
    xs = [f_from(v, w) for v in vals]
    try:
        if base == "add":
            return f_to(xs[0] + xs[1], w)
        if base == "sub":
            return f_to(xs[0] - xs[1], w)
        if base == "mul":
            return f_to(xs[0] * xs[1], w)
        if base in ("fma", "mad"):
            return f_to(xs[0] * xs[1] + xs[2], w)
        if base == "neg":
            return f_to(-xs[0], w)
        if base == "abs":
            return f_to(abs(xs[0]), w)
    except (OverflowError, ValueError):
        return None
    return None


# ---------------------------------------------------------------- instruction classes

# Instructions that move data or compute without touching memory or other threads.
ALU = frozenset({"mov", "add", "sub", "mul", "mad", "div", "rem", "min", "max", "abs", "neg", "and", "or", "xor",
                 "not", "cnot", "shl", "shr", "selp", "setp", "cvt", "bfe", "bfi", "popc", "clz", "brev", "prmt",
                 "lop3", "fma", "rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh", "copysign", "testp",
                 "slct", "set", "mul24", "mad24", "sad", "fns", "bmsk", "szext", "dp4a", "dp2a", "cvt.pack",
                 "min.xorsign", "cvta", "mapa", "isspacep", "getctarank"})
# Instructions that matter to no protocol and touch no shared memory.
IGNORED = frozenset({"prefetch", "prefetchu", "applypriority", "discard", "createpolicy", "pmevent", "nanosleep",
                     "griddepcontrol", "nop"})
# Warp-level collectives that wait for every lane of their member mask (PTX 9.7.13.x, `.sync`).
WARP_SYNC = frozenset({"shfl", "vote", "match", "redux", "bar.warp", "activemask"})
