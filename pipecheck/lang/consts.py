"""Constant evaluation of .pipe expressions: what the checker, the lowering, the parameter space and the
replay's code generator compute before any thread runs (parameters, constants, counts, sizes)."""
from __future__ import annotations

from typing import Mapping

from ..core.diagnostics import Span, error
from ..core.words import did_you_mean
from ..model.ir import c_div, c_mod
from . import ast as A



def eval_const(expr: A.Expr, env: Mapping[str, int], what: str = "this value") -> int:
    """Evaluate an expression over constants only; raises SpecError naming what is not constant."""
    if isinstance(expr, A.Num):
        return expr.value
    if isinstance(expr, A.Bool):
        return int(expr.value)
    if isinstance(expr, A.Name):
        if expr.id in env:
            return env[expr.id]
        raise error("value", f"{what} must be a constant, but '{expr.id}' is not a parameter or constant defined above"
                    f"{did_you_mean(expr.id, env)}", expr.span)
    if isinstance(expr, A.Unary):
        v = eval_const(expr.operand, env, what)
        return -v if expr.op == "-" else int(not v)
    if isinstance(expr, A.Binary):
        if expr.op == "&&":
            return int(bool(eval_const(expr.left, env, what)) and bool(eval_const(expr.right, env, what)))
        if expr.op == "||":
            return int(bool(eval_const(expr.left, env, what)) or bool(eval_const(expr.right, env, what)))
        a = eval_const(expr.left, env, what)
        b = eval_const(expr.right, env, what)
        return binop(expr.op, a, b, expr.span)
    if isinstance(expr, A.Ternary):
        c = eval_const(expr.cond, env, what)
        return eval_const(expr.then if c else expr.other, env, what)
    if isinstance(expr, A.Call) and expr.func in ("min", "max") and len(expr.args) >= 1:
        vals = [eval_const(a, env, what) for a in expr.args]
        return min(vals) if expr.func == "min" else max(vals)
    raise error("value", f"{what} must be a constant expression", expr.span)


def binop(op: str, a: int, b: int, span: Span) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("/", "%"):
        if b == 0:
            raise error("value", "division by zero", span)
        return c_div(a, b) if op == "/" else c_mod(a, b)
    if op == "<<":
        if b < 0 or b > 64:
            raise error("value", f"shift by {b} is out of range 0..64", span)
        return a << b
    if op == ">>":
        if b < 0 or b > 64:
            raise error("value", f"shift by {b} is out of range 0..64", span)
        return a >> b
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if op == "==":
        return int(a == b)
    if op == "!=":
        return int(a != b)
    if op == "<":
        return int(a < b)
    if op == "<=":
        return int(a <= b)
    if op == ">":
        return int(a > b)
    if op == ">=":
        return int(a >= b)
    raise error("value", f"unknown operator {op}", span)
