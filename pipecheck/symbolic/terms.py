"""Spec expressions as z3 terms, and the parameter space they range over.

`ParamSpace` holds one integer variable per parameter, constrained to its declared range (or
fixed), with every constant as a term over them; `ast_term` and `ir_term` translate syntax-tree
and lowered expressions with C semantics (division toward zero, booleans as 0/1).
"""
from __future__ import annotations


from typing import Callable, Iterator, Mapping

import z3

from ..core.diagnostics import SpecError, error
from ..core.records import record
from ..lang import ast as A
from ..lang.check import CheckedKernel
from ..lang.consts import eval_const
from ..model.ir import RBuiltin, RChoice, RConst, RElect, RExpr, ROp

MAX_POINTS = 4096  # parameter points --all-params explores at most
Term = z3.ExprRef
Point = tuple[tuple[str, int], ...]  # every parameter's value, in declaration order


class Unsupported(Exception):
    """An expression z3 is not given (a name it does not know, a shift by a non-constant amount)."""


def as_int(t: Term) -> z3.ArithRef:
    return z3.If(t, 1, 0) if z3.is_bool(t) else t


def as_bool(t: Term) -> z3.BoolRef:
    return t if z3.is_bool(t) else t != 0


def _abs(a: z3.ArithRef) -> z3.ArithRef:
    return z3.If(a >= 0, a, -a)


def c_div(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    """C division (toward zero); z3's integer division rounds toward minus infinity for b > 0."""
    q = _abs(a) / _abs(b)
    return z3.If((a >= 0) == (b >= 0), q, -q)


def c_mod(a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    return a - b * c_div(a, b)


def _const(t: Term) -> int | None:
    s = z3.simplify(as_int(t))
    return s.as_long() if z3.is_int_value(s) else None


def _bits(op: str, a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    x, y = z3.Int2BV(a, 64), z3.Int2BV(b, 64)
    r = x & y if op == "&" else x | y if op == "|" else x ^ y
    return z3.BV2Int(r, is_signed=True)


def apply(op: str, args: list[Term]) -> Term:
    """One operator of the language on z3 terms."""
    if op == "!":
        return z3.Not(as_bool(args[0]))
    if op == "-" and len(args) == 1:
        return -as_int(args[0])
    if op == "&&":
        return z3.And(as_bool(args[0]), as_bool(args[1]))
    if op == "||":
        return z3.Or(as_bool(args[0]), as_bool(args[1]))
    if op == "?:":
        c, a, b = args
        if z3.is_bool(a) and z3.is_bool(b):
            return z3.If(as_bool(c), a, b)
        return z3.If(as_bool(c), as_int(a), as_int(b))
    if op in ("min", "max"):
        out = as_int(args[0])
        for x in args[1:]:
            x = as_int(x)
            out = z3.If(x < out, x, out) if op == "min" else z3.If(x > out, x, out)
        return out
    a, b = as_int(args[0]), as_int(args[1])
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return c_div(a, b)
    if op == "%":
        return c_mod(a, b)
    if op in ("<<", ">>"):
        k = _const(b)
        if k is None or not 0 <= k <= 64:
            raise Unsupported(f"a shift by a non-constant amount ({op})")
        return a * (1 << k) if op == "<<" else a / (1 << k)
    if op in ("&", "|", "^"):
        return _bits(op, a, b)
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    raise Unsupported(f"operator {op}")


def ast_term(e: A.Expr, env: Mapping[str, Term]) -> Term:
    """A syntax-tree expression over the names of `env` (parameters and constants)."""
    if isinstance(e, A.Num):
        return z3.IntVal(e.value)
    if isinstance(e, A.Bool):
        return z3.BoolVal(e.value)
    if isinstance(e, A.Name):
        if e.id in env:
            return env[e.id]
        raise Unsupported(f"'{e.id}' is not a parameter or constant")
    if isinstance(e, A.Unary):
        return apply(e.op, [ast_term(e.operand, env)])
    if isinstance(e, A.Binary):
        return apply(e.op, [ast_term(e.left, env), ast_term(e.right, env)])
    if isinstance(e, A.Ternary):
        return apply("?:", [ast_term(e.cond, env), ast_term(e.then, env), ast_term(e.other, env)])
    if isinstance(e, A.Call) and e.func in ("min", "max"):
        return apply(e.func, [ast_term(a, env) for a in e.args])
    raise Unsupported(type(e).__name__)


def ir_term(e: RExpr, builtin: Callable[[str], Term], elect: Callable[[RElect], Term],
            choice: Callable[[RChoice], Term] | None = None) -> Term:
    """A lowered static expression, with identity (`lane`, `thread`, ...) and elect() given as terms."""
    if isinstance(e, RConst):
        return z3.IntVal(int(e.value))
    if isinstance(e, RBuiltin):
        return builtin(e.name)
    if isinstance(e, RElect):
        return elect(e)
    if isinstance(e, RChoice):
        if choice is None:
            raise Unsupported(f"kernel choice {e.name}")
        return choice(e)
    if isinstance(e, ROp):
        return apply(e.op, [ir_term(a, builtin, elect, choice) for a in e.args])
    raise Unsupported(type(e).__name__)


def mentions_only(e: A.Expr, names: Mapping[str, object]) -> bool:
    """Whether every name in `e` is one of `names` (so its value is fixed by the parameters)."""
    if isinstance(e, (A.Num, A.Bool)):
        return True
    if isinstance(e, A.Name):
        return e.id in names
    if isinstance(e, A.Unary):
        return mentions_only(e.operand, names)
    if isinstance(e, A.Binary):
        return mentions_only(e.left, names) and mentions_only(e.right, names)
    if isinstance(e, A.Ternary):
        return all(mentions_only(x, names) for x in (e.cond, e.then, e.other))
    if isinstance(e, A.Call):
        return e.func in ("min", "max") and all(mentions_only(a, names) for a in e.args)
    return False


# ---------------------------------------------------------------- the parameter space


@record
class SpaceParam:
    name: str
    var: z3.ArithRef
    default: int  # the value a plain `verify` uses (the declared default, or -D)
    fixed: bool  # one value only: no range, a -D value, or not sweeping
    decl: A.Param


class ParamSpace:
    """The parameter values a run covers: every value of every range with --all-params, else one point."""

    def __init__(self, kernel: A.Kernel, checked: CheckedKernel, sweep: bool,
                 narrowed: Mapping[str, tuple[int, int]] | None = None, pinned: frozenset[str] = frozenset()):
        narrowed = dict(narrowed or {})
        self.kernel = kernel
        self.narrowed = narrowed
        self.env: dict[str, Term] = {}
        self.constraints: list[z3.BoolRef] = []
        self.params: list[SpaceParam] = []
        values = {p.name: p.value for p in checked.params}
        for item in kernel.items:
            if isinstance(item, A.Param):
                var = z3.Int(item.name)
                ranged = item.lo is not None and item.hi is not None
                fixed = not sweep or not ranged or item.name in pinned  # -D NAME=VALUE pins a parameter
                if fixed:
                    self.constraints.append(var == values[item.name])
                else:
                    self.constraints.append(ast_term(item.lo, self.env) <= var)
                    self.constraints.append(var <= ast_term(item.hi, self.env))
                    if item.name in narrowed:
                        lo, hi = narrowed[item.name]
                        self.constraints += [var >= lo, var <= hi]
                self.env[item.name] = var
                self.params.append(SpaceParam(item.name, var, values[item.name], fixed, item))
            elif isinstance(item, A.Const):
                try:
                    self.env[item.name] = ast_term(item.value, self.env)
                except Unsupported:
                    pass  # a constant z3 cannot express stays out of the symbolic checks
        self.default: Point = tuple((p.name, p.default) for p in self.params)

    @property
    def free(self) -> list[SpaceParam]:
        return [p for p in self.params if not p.fixed]

    def solver(self) -> z3.Solver:
        s = z3.Solver()
        s.set("timeout", 10_000)
        s.add(*self.constraints)
        return s

    def point_of(self, model: z3.ModelRef) -> Point:
        return tuple((p.name, model.eval(p.var, model_completion=True).as_long()) for p in self.params)

    def points(self, limit: int = MAX_POINTS) -> list[Point]:
        """Every point, in declaration order of the parameters; raises a usage error past `limit`."""
        out: list[Point] = []
        for pt in self._enumerate():
            out.append(pt)
            if len(out) > limit:
                shown = ", ".join(f"{p.name} in {_range_text(p)}" for p in self.free)
                raise error("usage", f"--all-params: the parameter ranges ({shown}) hold more than {limit} "
                            f"configurations; narrow one with -D NAME=LO..HI", self.kernel.span)
        return out

    def _enumerate(self) -> Iterator[Point]:
        items = [it for it in self.kernel.items if isinstance(it, (A.Param, A.Const))]
        byname = {p.name: p for p in self.params}

        def walk(i: int, env: dict[str, int], acc: tuple) -> Iterator[Point]:
            if i == len(items):
                yield acc
                return
            item = items[i]
            if isinstance(item, A.Const):
                env2 = dict(env)
                try:
                    env2[item.name] = eval_const(item.value, env)
                except SpecError:
                    pass  # the point is invalid; check_kernel reports it with its location
                yield from walk(i + 1, env2, acc)
                return
            sp = byname[item.name]
            if sp.fixed:
                values = range(sp.default, sp.default + 1)
            else:
                try:
                    lo, hi = eval_const(item.lo, env), eval_const(item.hi, env)
                except SpecError:
                    return
                if item.name in self.narrowed:
                    nlo, nhi = self.narrowed[item.name]
                    lo, hi = max(lo, nlo), min(hi, nhi)
                values = range(lo, hi + 1)
            for v in values:
                yield from walk(i + 1, {**env, item.name: v}, acc + ((item.name, v),))

        yield from walk(0, {}, ())


def _range_text(p: SpaceParam) -> str:
    d = p.decl
    try:
        return f"{eval_const(d.lo, {})}..{eval_const(d.hi, {})}"
    except SpecError:
        return "its range"

