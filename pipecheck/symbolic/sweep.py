"""The parameter points one run covers, and what is said across them: conditions and static findings.

`plan` loads a spec once, builds its parameter space (one point, or every value of every
range with --all-params), splits it into z3 regions and runs the checks over parameters
alone; `verify` then lowers and explores each point, and the functions here turn the hits
of each finding into its condition ("only when K_TILES == 1 and elect() elects ...").
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..core.diagnostics import Diagnostic, Note, SpecError, call_site, called_from, error
from ..lang import ast as A
from ..lang.check import CheckedKernel, check_kernel
from ..lang.parse import load_spec
from ..model.ir import Site
from ..model.threads import ThreadClass
from .classes import (Choice, ElectSiteLike, LanePartition, ParamClasses, condition_text, names_elect,  # noqa: F401
                      param_classes, param_predicates, point_text, region_points, witness_order)
from .static import TxCollector, param_checks
from .terms import ParamSpace, Point


@dataclass
class Plan:
    ast: A.Kernel
    procs: dict[str, A.Proc]
    display: str
    kernel: CheckedKernel  # at the default point (declared defaults and -D values)
    space: ParamSpace
    points: list[Point]
    pclasses: ParamClasses
    param_findings: list[Diagnostic]
    seconds: dict[str, float] = field(default_factory=dict)
    _regions: list[tuple[str, set[Point]]] | None = None
    # set by `cover` when a limit stopped a sweep: the points whose every configuration was explored to the end
    # (or to a finding), and the limit; conditions are then stated over those points only
    complete: set[Point] | None = None
    stopped_by: str | None = None

    @property
    def incomplete(self) -> bool:
        return self.complete is not None

    def cover(self, universe: Mapping[Point, Sequence[Choice]], explored: Sequence[tuple[Point, Sequence[Choice], str | None]],
              stopped: str | None) -> None:
        """Record which points a stopped sweep explored completely (`explored`: each run's point, configurations
        and why its search stopped). A run without a limit, or a single point, changes nothing."""
        if stopped is None or len(self.points) <= 1:
            return
        done: dict[Point, set] = {}
        for point, members, why in explored:
            if why in (None, "first-finding"):
                done.setdefault(point, set()).update(members)
        self.complete = {pt for pt, cfgs in universe.items() if pt in done and done[pt] >= set(cfgs)}
        self.stopped_by = stopped

    @property
    def default(self) -> Point:
        return self.space.default

    def regions(self) -> list[tuple[str, set[Point]]]:
        if self._regions is None:
            self._regions = region_points(self.pclasses, self.space, self.points) if len(self.points) > 1 else []
        return self._regions

    def checked_at(self, point: Point) -> CheckedKernel:
        if point == tuple((p.name, p.value) for p in self.kernel.params):
            return self.kernel
        return check_kernel(self.ast, self.procs, dict(point), self.display)

    def order(self, point: Point) -> tuple:
        return witness_order(point, self.default)


def plan(path: str, overrides: Sequence[tuple[str, int]], sweep: bool, ranges: Sequence[tuple[str, int, int]],
         sources: dict[str, str]) -> Plan:
    """Load and check a spec; its parameter points, regions, and the checks over parameters alone."""
    t0 = time.perf_counter()
    kernel_ast, procs = load_spec(path, sources)
    display = next(iter(sources)) if sources else path
    kernel = check_kernel(kernel_ast, procs, dict(overrides), display)
    declared = {p.name: p for p in kernel.params}
    narrowed: dict[str, tuple[int, int]] = {}
    for name, lo, hi in ranges:
        p = declared.get(name)
        if p is None:
            raise error("usage", f"-D {name}={lo}..{hi}: the kernel has no parameter '{name}'", None)
        if p.lo is None or p.hi is None or lo > hi or lo < p.lo or hi > p.hi:
            declared_range = f"{p.lo}..{p.hi}" if p.lo is not None else "no range"
            raise error("usage", f"-D {name}={lo}..{hi} must be a non-empty part of the declared range "
                        f"({declared_range})", p.span)
        narrowed[name] = (lo, hi)
    pinned = frozenset(n for n, _ in overrides)
    space = ParamSpace(kernel_ast, kernel, sweep, narrowed, pinned)
    points = space.points()
    if not points:
        raise error("usage", "--all-params: the parameter ranges are empty", kernel.span)
    if space.default not in points:  # a narrowed range leaves the defaults out: report the first point instead
        kernel = check_kernel(kernel_ast, procs, dict(points[0]), display)
    t1 = time.perf_counter()
    preds = param_predicates(kernel_ast, kernel, space, sources)
    pclasses = param_classes(space, preds)
    t2 = time.perf_counter()
    findings = param_checks(space, kernel_ast, kernel)
    t3 = time.perf_counter()
    return Plan(kernel_ast, procs, display, kernel, space, points, pclasses, findings,
                {"load": t1 - t0, "param-classes": t2 - t1, "param-checks": t3 - t2})


def exploration_key(kernel: CheckedKernel, classes: Sequence[ThreadClass]) -> tuple:
    """Everything a Model reads: two points with equal keys explore the same graph (proved, not assumed)."""
    return (kernel.arch, kernel.cluster, tuple((b.name, b.dims, b.count, b.per_cta, b.noinit) for b in kernel.barriers),
            tuple((b.name, b.dims) for b in kernel.buffers), tuple((r.instances, r.threads) for r in kernel.roles),
            tuple(cl.shape_key() for cl in classes))


def invalid_point(exc: SpecError, point: Point, p: Plan) -> list[Diagnostic]:
    """A spec error at one point of --all-params: a finding about the declared ranges, with that point."""
    names = [x.name for x in p.space.free]
    at = point_text(point, names)
    return [Diagnostic(d.severity, d.code, f"{d.message} (with {at}, inside the declared ranges)", d.span, d.notes)
            for d in exc.diagnostics]


def condition(hits: Mapping[Point, Sequence[Choice]], universe: Mapping[Point, Sequence[Choice]],
              esites: Sequence[ElectSiteLike], partitions: Mapping[Point, LanePartition | None], p: Plan,
              witness: Point, static: bool = False) -> tuple[str, str]:
    """When a finding appears, and the witness parameter values when that depends on them ('' otherwise).

    A sweep a limit stopped states it over the points it explored, and says so: no condition as if complete."""
    names = [x.name for x in p.space.free]
    # a static check has covered every point it has configurations for; a search, the points `cover` recorded
    complete = (set(universe) if len(universe) < len(p.points) else None) if static else p.complete
    if complete is not None:
        seen = {pt: cfgs for pt, cfgs in universe.items() if pt in complete or pt in hits}
        text = condition_text(hits, seen, esites, partitions)
        shown = bool(names) and set(hits) != set(seen)
        scope = (f"at the {len(seen)} of {len(p.points)} parameter points explored (the sweep is incomplete: "
                 f"stopped by {p.stopped_by or 'a limit'}, so the points not explored may show it too)")
        return f"{text or 'any parameter values'}, {scope}", point_text(witness, names) if shown else ""
    text = condition_text(hits, universe, esites, partitions, p.regions)
    shown = bool(names) and set(hits) != set(universe)
    return text, point_text(witness, names) if shown else ""


def tx_diagnostics(collector: TxCollector, universe: Mapping[Point, Sequence[Choice]], esites: Sequence[ElectSiteLike],
                   partitions: Mapping[Point, LanePartition | None], p: Plan, sites: Sequence[Site]) -> list[Diagnostic]:
    out = []
    for key, per_point in collector.hits.items():
        _, issue, point = collector.first[key]
        cond, witness = condition(per_point, universe, esites, partitions, p, point, static=True)
        site = sites[issue.site] if 0 <= issue.site < len(sites) else None
        span, chain = call_site(site.span, site.calls) if site is not None else (None, ())  # the user's call first
        notes = chain + tuple(Note(msg + called_from(sites[s].calls), sites[s].span) if 0 <= s < len(sites) else Note(msg)
                              for msg, s in issue.notes)
        message = issue.message + (f" (only when {cond}" + (f"; witness: {witness})" if witness else ")") if cond else "")
        out.append(Diagnostic("error", issue.code, message, span, notes))
    return out


def sort_static(diags: list[Diagnostic]) -> list[Diagnostic]:
    seen: set = set()
    out = []
    for d in sorted(diags, key=Diagnostic.sort_key):
        k = (d.code, d.span, d.message)
        if k not in seen:
            seen.add(k)
            out.append(d)
    return out
