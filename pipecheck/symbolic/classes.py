"""Configuration classes with z3: which elected lanes and which parameter values explore alike.

Elected lanes: every identity-dependent static expression of the lowered roles becomes a z3
term over the lane; the satisfiable valuations of those terms (all-SAT, blocking each class
once found) split the lanes into classes whose threads run the same code, so one elected
lane per class stands for all of them. Parameters: the comparisons of parameters the spec
branches on (`if`, ternaries, min/max, empty loops) split each range into regions. The
conditions of findings are stated over both, in the spec's words.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Protocol, Sequence

import z3

from ..core.records import record
from ..lang import ast as A
from ..lang.check import CheckedKernel, Inlined
from ..lang.lower import RoleCode, signature_nodes
from ..model.ir import RChoice, RElect, RExpr, ROp, expr_text
from ..model.threads import FULL_MASK
from .predicates import smallest
from .terms import ParamSpace, Point, Term, Unsupported, as_bool, as_int, ast_term, ir_term, mentions_only

MAX_REGIONS = 256
_EXPRS = (A.Num, A.Bool, A.Name, A.Attr, A.Index, A.Unary, A.Binary, A.Ternary, A.Call)


class ElectSiteLike(Protocol):
    mask: int
    line: int


# ---------------------------------------------------------------- elected lanes


@record
class LaneClass:
    """Lanes that are interchangeable: elected or not, they run the same code in every warp."""

    lanes: tuple[int, ...]
    where: tuple[str, ...]  # the distinguishing expressions with their values, e.g. "lane == 0 is false"


@dataclass
class LanePartition:
    classes: list[LaneClass]
    of_lane: dict[int, int]
    atoms: int  # identity-dependent terms, after dropping the constant ones
    solver_calls: int


@dataclass
class _Atom:
    term: Term
    text: str  # the spec expression it instantiates (lowered form)
    elect_free: bool  # the expression does not read elect() itself


def _masks_in(e: RExpr) -> set[int]:
    if isinstance(e, RElect):
        return {e.mask}
    if isinstance(e, ROp):
        return set().union(*(_masks_in(a) for a in e.args)) if e.args else set()
    if isinstance(e, RChoice):
        return set().union(*(_masks_in(i) for i in e.index)) if e.index else set()
    return set()


def _choice_term(kernel: CheckedKernel, choices: Mapping[str, tuple[int, ...]], builtin, elect):
    def term(e: RChoice) -> Term:
        decl = next(c for c in kernel.kchooses if c.name == e.name)
        values = choices[e.name]
        flat: Term = z3.IntVal(0)
        for i, d in zip(e.index, decl.dims):
            flat = flat * d + as_int(ir_term(i, builtin, elect, term))
        out: Term = z3.IntVal(values[-1])
        for j in range(len(values) - 2, -1, -1):
            out = z3.If(flat == j, values[j], out)
        return out
    return term


def _bare(text: str) -> str:
    """`(lane == 0)` -> `lane == 0` when the outer parentheses enclose the whole expression."""
    if text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(text) - 1:
                return text
        return text[1:-1]
    return text


def lane_partition(kernel: CheckedKernel, codes: Sequence[RoleCode], masks: Sequence[int],
                   choices: Mapping[str, tuple[int, ...]]) -> LanePartition:
    """Split the lanes of the elect masks into interchangeable classes with z3 (all-SAT)."""
    lane = z3.Int("lane")
    domain_lanes = sorted({ln for m in masks for ln in range(32) if m >> ln & 1})
    atoms: list[_Atom] = []
    seen: set = set()
    cx = kernel.cluster[0]
    cy = kernel.cluster[1] if len(kernel.cluster) > 1 else 1

    def add(term: Term, text: str, elect_free: bool) -> None:
        t = z3.simplify(term)
        if z3.is_int_value(t) or z3.is_true(t) or z3.is_false(t):
            return  # the same for every lane
        if t.sexpr() in seen:
            return
        seen.add(t.sexpr())
        atoms.append(_Atom(t, text, elect_free))

    if len(masks) > 1 or (masks and masks[0] != FULL_MASK):
        for m in masks:  # a renaming of lanes must keep every mask's lanes inside it
            add(z3.Or([lane == ln for ln in range(32) if m >> ln & 1]), f"lane in elect({m:#x})'s mask", True)
    for code in codes:
        if not code.elect_masks:
            continue
        role = kernel.roles[code.role_index]
        nodes = signature_nodes(code)
        for cta in range(kernel.cluster_size):
            for inst in range(role.instances):
                for warp in range((role.threads + 31) // 32):
                    thread = 32 * warp + lane
                    idents: dict[str, Term] = {
                        "lane": lane, "thread": thread, "warp": z3.IntVal(warp), "warpgroup": thread / 128,
                        "instance": z3.IntVal(inst), "cta": z3.IntVal(cta), "cta_x": z3.IntVal(cta % cx),
                        "cta_y": z3.IntVal((cta // cx) % cy)}
                    if role.threads < 32 * (warp + 1):
                        add(thread < role.threads, f"lane exists in warp {warp}", True)
                    for node in nodes:
                        nmasks = sorted(_masks_in(node))
                        for combo in itertools.product((False, True), repeat=len(nmasks)):
                            picked = dict(zip(nmasks, combo))
                            elect = lambda e, picked=picked: z3.BoolVal(picked[e.mask])  # noqa: E731
                            builtin = idents.__getitem__
                            try:
                                term = ir_term(node, builtin, elect, _choice_term(kernel, choices, builtin, elect))
                            except Unsupported:
                                term = None
                            if term is None:  # z3 cannot take it: keep the lanes apart, soundly
                                for ln in domain_lanes:
                                    add(lane == ln, f"lane {ln}", True)
                                continue
                            add(term, _bare(expr_text(node)), not nmasks)
    calls = 0
    solver = z3.Solver()
    solver.add(z3.Or([lane == ln for ln in domain_lanes]))
    found: list[tuple[list[int], list]] = []
    while True:
        calls += 1
        if solver.check() != z3.sat:
            break
        model = solver.model()
        values = [model.eval(a.term, model_completion=True) for a in atoms]
        cls = z3.And([a.term == v for a, v in zip(atoms, values)]) if atoms else z3.BoolVal(True)
        members = z3.Solver()
        members.add(z3.Or([lane == ln for ln in domain_lanes]), cls)
        lanes: list[int] = []
        while True:
            calls += 1
            if members.check() != z3.sat:
                break
            ln = members.model().eval(lane, model_completion=True).as_long()
            lanes.append(ln)
            members.add(lane != ln)
        found.append((sorted(lanes), values))
        solver.add(z3.Not(cls))
    found.sort(key=lambda f: f[0][0])
    classes = []
    for lanes, values in found:
        where = []
        for i, a in enumerate(atoms):
            varying = any(not z3.eq(values[i], other[i]) for _, other in found)
            if not varying or not a.elect_free or a.text.startswith("lane exists") or a.text.startswith("lane in elect"):
                continue
            v = values[i]
            text = f"{a.text} is {'true' if z3.is_true(v) else 'false'}" if z3.is_bool(v) else f"{a.text} = {v}"
            if text not in where:
                where.append(text)
        classes.append(LaneClass(tuple(lanes), tuple(where) if len(where) <= 2 else ()))
    of_lane = {ln: i for i, c in enumerate(classes) for ln in c.lanes}
    return LanePartition(classes, of_lane, len(atoms), calls)


def elect_orbits(partition: LanePartition, masks: Sequence[int]) -> list[tuple[tuple[int, ...], list[tuple[int, ...]]]]:
    """Group elected-lane choices (one lane per mask) that a renaming of interchangeable lanes maps onto each other.

    Two choices are in one orbit when each mask's lane lies in the same class and the same masks
    share a lane: then a permutation inside the classes carries one onto the other.
    """
    orbits: dict[tuple, list[tuple[int, ...]]] = {}
    per_mask = [[ln for ln in range(32) if m >> ln & 1] for m in masks]
    for pick in itertools.product(*per_mask):
        key = (tuple(partition.of_lane[ln] for ln in pick), tuple(pick.index(ln) for ln in pick))
        orbits.setdefault(key, []).append(pick)
    return [(members[0], members) for members in orbits.values()]


# ---------------------------------------------------------------- parameter regions


@record
class Predicate:
    """A comparison of parameters the spec branches on."""

    term: z3.BoolRef
    text: str
    line: int


@dataclass
class ParamRegion:
    values: tuple[bool, ...]
    formula: z3.BoolRef
    text: str


@dataclass
class ParamClasses:
    predicates: list[Predicate]
    regions: list[ParamRegion]
    solver_calls: int = 0


def _source(span, sources: Mapping[str, str]) -> str:
    text = sources.get(span.file)
    if text is None or span.line <= 0:
        return ""
    lines = text.splitlines()
    if span.end_line == span.line and span.end_col > span.col and span.line <= len(lines):
        return lines[span.line - 1][span.col - 1: span.end_col - 1].strip()
    return ""


def _render(e: A.Expr) -> str:
    if isinstance(e, A.Num):
        return str(e.value)
    if isinstance(e, A.Bool):
        return "true" if e.value else "false"
    if isinstance(e, A.Name):
        return e.id
    if isinstance(e, A.Unary):
        return f"{e.op}{_render(e.operand)}"
    if isinstance(e, A.Binary):
        return f"{_render(e.left)} {e.op} {_render(e.right)}"
    if isinstance(e, A.Ternary):
        return f"({_render(e.cond)} ? {_render(e.then)} : {_render(e.other)})"
    if isinstance(e, A.Call):
        return f"{e.func}({', '.join(_render(a) for a in e.args)})"
    return "?"


def param_predicates(kernel: A.Kernel, checked: CheckedKernel, space: ParamSpace,
                     sources: Mapping[str, str]) -> list[Predicate]:
    """Every parameter-only condition the spec branches on, once each, in source order."""
    names = space.env
    out: dict[str, Predicate] = {}

    def add(term: Term, text: str, line: int) -> None:
        t = as_bool(term)
        key = z3.simplify(t).sexpr()
        if key not in out:
            out[key] = Predicate(t, text, line)

    def cond(e: A.Expr) -> None:
        """A condition: its parameter-only parts (through && || !) are branch points."""
        if mentions_only(e, names):
            try:
                add(ast_term(e, names), _source(e.span, sources) or _render(e), e.span.line)
            except Unsupported:
                pass
            expr(e)
            return
        if isinstance(e, A.Binary) and e.op in ("&&", "||"):
            cond(e.left)
            cond(e.right)
        elif isinstance(e, A.Unary) and e.op == "!":
            cond(e.operand)
        else:
            expr(e)

    def expr(e: A.Expr | None) -> None:
        if e is None:
            return
        if isinstance(e, A.Ternary):
            cond(e.cond)
            expr(e.then)
            expr(e.other)
        elif isinstance(e, A.Call):
            if e.func in ("min", "max") and len(e.args) == 2 and all(mentions_only(a, names) for a in e.args):
                try:
                    add(ast_term(A.Binary("<", e.args[0], e.args[1], e.span), names),
                        f"{_render(e.args[0])} < {_render(e.args[1])}", e.span.line)
                except Unsupported:
                    pass
            for a in e.args:
                expr(a)
        elif isinstance(e, A.Binary):
            expr(e.left)
            expr(e.right)
        elif isinstance(e, A.Unary):
            expr(e.operand)
        elif isinstance(e, A.Index):
            expr(e.obj)
            expr(e.index)

    def visit(v: object) -> None:
        if isinstance(v, tuple):
            for y in v:
                visit(y)
        elif isinstance(v, Inlined):
            visit(v.body)
        elif isinstance(v, A.If):
            cond(v.cond)
            visit(v.then)
            visit(v.other)
        elif isinstance(v, A.For):
            expr(v.lo)
            expr(v.hi)
            if mentions_only(v.lo, names) and mentions_only(v.hi, names):
                try:
                    var = v.var.split("'")[0]
                    add(ast_term(v.lo, names) < ast_term(v.hi, names),
                        f"{_render(v.lo)} < {_render(v.hi)} (the loop over {var} runs)", v.span.line)
                except Unsupported:
                    pass
            visit(v.body)
        elif isinstance(v, _EXPRS):
            expr(v)
        elif hasattr(v, "__dataclass_fields__"):
            for f in v.__dataclass_fields__:
                if f != "span":
                    visit(getattr(v, f))

    for item in kernel.items:
        if isinstance(item, (A.Const, A.Smem, A.MBarrier)):
            visit(item)
    for role in checked.roles:
        visit(role.body)
    return sorted(out.values(), key=lambda p: (p.line, p.text))


def param_classes(space: ParamSpace, predicates: list[Predicate]) -> ParamClasses:
    """Split the parameter space by the valuations of the branch predicates (all-SAT)."""
    out = ParamClasses(predicates, [])
    if not space.free:
        return out
    solver = space.solver()
    while len(out.regions) < MAX_REGIONS:
        out.solver_calls += 1
        if solver.check() != z3.sat:
            break
        model = solver.model()
        values = tuple(z3.is_true(model.eval(p.term, model_completion=True)) for p in predicates)
        formula = z3.And([p.term if v else z3.Not(p.term) for p, v in zip(predicates, values)]) if predicates \
            else z3.BoolVal(True)
        out.regions.append(ParamRegion(values, formula, ""))
        solver.add(z3.Not(formula))
    for r in out.regions:
        r.text = formula_text(space, r.formula, [(p, v) for p, v in zip(predicates, r.values)])
    out.regions.sort(key=lambda r: (r.text, r.values))
    return out


def _bounds(space: ParamSpace, formula: z3.BoolRef, var: z3.ArithRef) -> tuple[int, int] | None:
    out = []
    for goal in ("min", "max"):
        opt = z3.Optimize()
        opt.set("timeout", 10_000)
        opt.add(*space.constraints, formula)
        h = opt.minimize(var) if goal == "min" else opt.maximize(var)
        if opt.check() != z3.sat:
            return None
        v = opt.lower(h) if goal == "min" else opt.upper(h)
        if not z3.is_int_value(v):
            return None
        out.append(v.as_long())
    return out[0], out[1]


def _interval_text(name: str, lo: int, hi: int, full: tuple[int, int]) -> str:
    if lo == hi:
        return f"{name} == {lo}"
    if hi == full[1]:
        return f"{name} >= {lo}"
    if lo == full[0]:
        return f"{name} <= {hi}"
    return f"{name} in {lo}..{hi}"


def formula_text(space: ParamSpace, formula: z3.BoolRef, fallback: list[tuple[Predicate, bool]] = ()) -> str:
    """A set of parameter values in the user's terms: per-parameter intervals when it is a box."""
    parts = []
    box = []
    for p in space.free:
        b = _bounds(space, formula, p.var)
        full = _bounds(space, z3.BoolVal(True), p.var)
        if b is None or full is None:
            return "no parameter value"
        box.append(z3.And(p.var >= b[0], p.var <= b[1]))
        if b != full:
            parts.append(_interval_text(p.name, b[0], b[1], full))
    s = space.solver()
    s.add(*box, z3.Not(formula))
    if s.check() == z3.unsat:
        return " and ".join(parts)
    if fallback:
        return " and ".join(p.text if v else f"not ({p.text})" for p, v in fallback)
    return "for some parameter values"


# ---------------------------------------------------------------- conditions of findings


def _runs(values: Iterable[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for v in sorted(set(values)):
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def lanes_text(lanes: Iterable[int]) -> str:
    runs = _runs(lanes)
    if len(runs) == 1 and runs[0][0] == runs[0][1]:
        return f"lane {runs[0][0]}"
    return "a lane in " + ", ".join(f"{a}" if a == b else f"{a}..{b}" for a, b in runs)


def _values_text(name: str, values: set[int], every: set[int]) -> str:
    runs = _runs(values)
    full = (min(every), max(every))
    if len(runs) == 1:
        return _interval_text(name, runs[0][0], runs[0][1], full)
    return f"{name} in {{{', '.join(str(a) if a == b else f'{a}..{b}' for a, b in runs)}}}"


def point_text(point: Point, names: Sequence[str] | None = None) -> str:
    return ", ".join(f"{n}={v}" for n, v in point if names is None or n in names)


Regions = Sequence[tuple[str, set[Point]]] | Callable[[], Sequence[tuple[str, set[Point]]]]


def points_text(hit: Sequence[Point], universe: Sequence[Point], regions: Regions = ()) -> str:
    """The parameter values of `hit` among `universe`, as intervals, regions, or a short list.

    `regions` may be a function: the points of each region are only worked out when needed.
    """
    hit_set, every = set(hit), list(dict.fromkeys(universe))
    if len(hit_set) == len(every):
        return ""
    names = [n for n, _ in every[0]]
    varying = [i for i, n in enumerate(names) if len({p[i][1] for p in every}) > 1]
    per = {i: {p[i][1] for p in hit_set} for i in varying}
    size = 1
    for i in varying:
        size *= len(per[i])
    box = ""
    if size == len(hit_set):  # a box: one set of values per parameter
        parts = []
        intervals = True
        for i in varying:
            all_values = {p[i][1] for p in every}
            if per[i] != all_values:
                parts.append(_values_text(names[i], per[i], all_values))
                intervals = intervals and len(_runs(per[i])) == 1
        box = " and ".join(parts)
        if intervals:
            return box
    regions = regions() if callable(regions) else regions
    chosen = [text for text, pts in regions if pts and pts <= hit_set]
    exact = bool(chosen) and set().union(*(pts for text, pts in regions if pts and pts <= hit_set)) == hit_set
    if exact and len(chosen) == 1:  # one of the spec's own branch conditions
        return chosen[0]
    # a small formula over the parameters that holds at exactly these points (docs/symbolic.md)
    formula = smallest([names[i] for i in varying], [tuple(p[i][1] for i in varying) for p in every],
                       [k for k, p in enumerate(every) if p in hit_set])
    if formula is not None:
        return formula
    if exact:
        return " or ".join(f"({t})" if " and " in t else t for t in chosen)
    if box:
        return box
    listed = sorted(hit_set)
    shown = "; ".join(point_text(tuple(p[i] for i in varying)) for p in listed[:3])
    more = f"; and {len(listed) - 3} more" if len(listed) > 3 else ""
    return f"{len(listed)} of {len(every)} parameter values ({shown}{more})"


class Choice(Protocol):
    """One configuration of one parameter point (a lower.Config): elected lanes and kernel choices."""

    elect: tuple[tuple[int, int], ...]
    choices: tuple[tuple[str, tuple[int, ...]], ...]


def configs_text(hit: Sequence[Choice], every: Sequence[Choice], esites: Sequence[ElectSiteLike],
                 partition: LanePartition | None = None) -> str:
    """The elected lanes and kernel choices of `hit` among `every`, in the spec's words; '' when all."""
    if len(set(hit)) == len(set(every)):
        return ""
    parts = []
    masks = sorted({m for c in every for m, _ in c.elect})
    for m in masks:
        chosen = sorted({ln for c in hit for mm, ln in c.elect if mm == m})
        allm = sorted({ln for c in every for mm, ln in c.elect if mm == m})
        if chosen != allm:
            lines = sorted({s.line for s in esites if s.mask == m})
            where = f" (line {', '.join(map(str, lines))})" if lines else ""
            call = "elect()" if m == FULL_MASK else f"elect({m:#x})"
            # the lane set says it all; the predicates that split the lanes are in docs/symbolic.md's output
            parts.append(f"{call}{where} elects {lanes_text(chosen)}")
    for name in sorted({n for c in every for n, _ in c.choices}):
        chosen_v = sorted({v for c in hit for n, v in c.choices if n == name})
        all_v = sorted({v for c in every for n, v in c.choices if n == name})
        if chosen_v != all_v:
            fmt = lambda v: str(v[0]) if len(v) == 1 else str(list(v))  # noqa: E731
            width = len(all_v[0])
            formula = None
            if len(chosen_v) > 1 and all(len(v) == width for v in all_v):
                elems = [name] if width == 1 else [f"{name}[{i}]" for i in range(width)]
                formula = smallest(elems, all_v, [k for k, v in enumerate(all_v) if v in chosen_v])
            parts.append(formula if formula is not None else f"{name} = {fmt(chosen_v[0])}" if len(chosen_v) == 1
                         else f"{name} in {{{', '.join(fmt(v) for v in chosen_v)}}}")
    return " and ".join(parts)


def names_elect(hits: Mapping[Point, Sequence[Choice]], universe: Mapping[Point, Sequence[Choice]]) -> bool:
    """Whether a finding's condition depends on the elected lane: at some point, the lanes of some mask that
    show it are not all the lanes explored there. When not, nothing about the H200's choice is to be said."""
    for point, chosen in hits.items():
        every = universe.get(point, ())
        for m in sorted({m for c in every for m, _ in c.elect}):
            if {ln for c in chosen for mm, ln in c.elect if mm == m} != {ln for c in every for mm, ln in c.elect if mm == m}:
                return True
    return False


def condition_text(hits: Mapping[Point, Sequence[Choice]], universe: Mapping[Point, Sequence[Choice]],
                   esites: Sequence[ElectSiteLike], partitions: Mapping[Point, LanePartition | None],
                   regions: Regions = ()) -> str:
    """When a finding appears: parameter values and elected lanes / choices; '' when always."""
    by_text: dict[str, list[Point]] = {}
    for point, chosen in hits.items():
        by_text.setdefault(configs_text(chosen, universe[point], esites, partitions.get(point)), []).append(point)
    all_points = list(universe)
    def grouped(t: str) -> str:  # "K == 1 or K == 3" joined with "and ...": keep it one clause
        return f"({t})" if " or " in t else t

    if len(by_text) == 1:
        (ctext, pts), = by_text.items()
        ptext = points_text(pts, all_points, regions)
        if ptext and ctext:
            return f"{grouped(ptext)} and {grouped(ctext)}"
        return ptext or ctext
    parts = []
    for ctext, pts in sorted(by_text.items(), key=lambda kv: min(kv[1])):
        ptext = points_text(pts, all_points, regions) or "any parameter values"
        parts.append(grouped(ptext) + (f" and {grouped(ctext)}" if ctext else ""))
    return "; or ".join(parts)


def region_points(classes: ParamClasses, space: ParamSpace, points: Sequence[Point]) -> list[tuple[str, set[Point]]]:
    """Which of the explored points lie in each region (for conditions that are unions of regions)."""
    out = []
    for r in classes.regions:
        pts = set()
        for pt in points:
            subst = [(p.var, z3.IntVal(v)) for p, (_, v) in zip(space.params, pt)]
            if z3.is_true(z3.simplify(z3.substitute(r.formula, *subst))):
                pts.add(pt)
        out.append((r.text, pts))
    return out


def witness_order(point: Point, default: Point) -> tuple:
    """Prefer witnesses close to the default parameters: fewest values changed, then smallest."""
    changed = sum(1 for (_, a), (_, b) in zip(point, default) if a != b)
    return (changed, tuple(v for _, v in point))
