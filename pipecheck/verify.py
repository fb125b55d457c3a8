"""The pipeline for one spec: load, check, split configurations, explore each, collect a result.

`verify_file` is the only function here that touches the file system; everything it
returns is data, which the reports render.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

from .check import CheckedKernel, check_kernel
from .compact import Interner
from .configs import ConfigClass, ElectSite, config_classes, elect_sites
from .diagnostics import Diagnostic, Span, SpecError, error
from .explore import Exploration, Found, Limits, explore
from .findings import Finding
from .ir import EvalError, Site
from .lower import Config, lowest_lane, resolve_roles, split_classes
from .model import Model
from .parse import load_spec
from .por import Reduced
from .symbolic import static, sweep
from .symmetry import Symmetric
from .symbolic.terms import Point

VERDICTS = ("verified", "findings", "inconclusive")
# states of the lockstep re-run that decides whether findings need lanes to run apart: a few times
# what the main run explored (the re-run has no partial-order reduction), within these bounds
SCHEDULING_BUDGET = (2_000, 5, 50_000)
EXIT_CODES = {"verified": 0, "findings": 1, "inconclusive": 3}


@dataclass(frozen=True)
class Options:
    overrides: tuple[tuple[str, int], ...] = ()
    elect: str = "any"  # "any": every lane PTX allows; "lowest": the H200's observed choice
    limits: Limits = Limits(max_states=2_000_000, stop_at_first=True)
    reduce: bool = True  # partial-order reduction (switchable for measurement)
    all_params: bool = False  # every value of every declared parameter range, not only the defaults
    ranges: tuple[tuple[str, int, int], ...] = ()  # -D NAME=LO..HI: narrow a range for all_params
    explore: bool = True  # False: static checks only (`pipecheck check`)
    engine: str = "explicit"  # "bmc": bounded model checking in z3 (symbolic/bmc.py), to `depth` steps
    depth: int = 30  # the bound of the bmc engine, in transitions
    lockstep: bool = False  # each warp reconverges at the end of every branch (--lockstep)
    check_scheduling: bool = True  # say which findings need independent thread scheduling
    only: tuple[Config, ...] | None = None  # explore only the configuration classes holding these
    symmetry: bool = True  # identical role instances are interchangeable (switchable for measurement)
    # "classes": threads with the same code move as counted classes (the counter abstraction);
    # "warps" / "threads": each warp / thread of a class is its own process (for measurement)
    counter: str = "classes"
    compact: bool = True  # the visited set stores states as interned ids (compact.py), not as tuples
    every: str | None = None  # --every K: one folded exploration for every value of this loop bound (every.py)


@dataclass
class Run:
    """One configuration class explored."""

    cclass: ConfigClass
    model: Model
    exploration: Exploration
    point: Point = ()  # the parameter values it ran with
    system: object = None  # what was explored: the model, possibly wrapped by symmetry (for replaying witnesses)

    @property
    def config(self) -> Config:
        return self.cclass.representative


@dataclass
class Issue:
    """One finding as reported: its shortest witness and the configurations that show it."""

    finding: Finding
    witness: Found
    run: Run
    configs: list[Config]
    condition: str
    on_hardware: bool | None  # whether the H200's elect choice shows it; None without elect()
    needs_independent_scheduling: bool = False  # gone when every warp reconverges after each branch

    @property
    def code(self) -> str:
        return self.finding.code


@dataclass
class Result:
    spec: str
    kernel: CheckedKernel
    options: Options
    verdict: str
    issues: list[Issue]
    runs: list[Run]
    sites: list[Site]
    sources: dict[str, str]
    esites: list[ElectSite]
    seconds: float
    stopped: str | None = None
    static: list[Diagnostic] = field(default_factory=list)
    plan: sweep.Plan | None = None  # parameter points and regions, and the time of each symbolic step
    every: object = None  # every.Every: what a --every run said for all values of the bound

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def states(self) -> int:
        return sum(r.exploration.states for r in self.runs)

    @property
    def params(self) -> dict[str, int]:
        return {p.name: p.value for p in self.kernel.params}


def _site_span(sites: list[Site], idx: int) -> Span | None:
    return sites[idx].span if 0 <= idx < len(sites) else None


def load_checked(path: str, overrides: Mapping[str, int], sources: dict[str, str]) -> CheckedKernel:
    kernel, procs = load_spec(path, sources)
    display = next(iter(sources)) if sources else path
    return check_kernel(kernel, procs, dict(overrides), display)


def verify_file(path: str, options: Options = Options(),
                progress: Callable[[int, int, float], None] | None = None,
                reuse: tuple[sweep.Plan, dict[str, str]] | None = None) -> Result:
    """Verify one spec; raises SpecError (with diagnostics) when the spec itself is wrong.

    `reuse`: the plan and sources of an earlier run with the same parameters (no re-parsing)."""
    if options.every is not None:
        from .every import verify_every  # noqa: PLC0415 (every.py builds on this module)
        return verify_every(path, options, progress)
    start = time.perf_counter()
    if reuse is not None:
        plan, sources = replace(reuse[0], seconds=dict(reuse[0].seconds)), reuse[1]
    else:
        sources = {}
        plan = sweep.plan(path, options.overrides, options.all_params, options.ranges, sources)
    kernel = plan.kernel
    codes, sites = resolve_roles(kernel, sources, options.lockstep)
    esites = elect_sites(codes, sites)
    runs: list[Run] = []
    stopped = None
    expected = 0
    universe: dict[Point, list[Config]] = {}
    partitions: dict = {}
    collector = static.TxCollector()
    invalid: list[Diagnostic] = []
    explored: dict[tuple, tuple[Model, Exploration, object]] = {}
    lane_cache: dict = {}
    t_classes = t_static = 0.0
    for point in plan.points:
        try:
            t0 = time.perf_counter()
            k = plan.checked_at(point)
            pcodes, psites = (codes, sites) if k is kernel else resolve_roles(k, sources, options.lockstep)
            cclasses = config_classes(k, pcodes, options.elect, lane_cache)
            if options.only is not None:
                cclasses = [cc for cc in cclasses if any(cfg in cc.members for cfg in options.only)]
            t1 = time.perf_counter()
            for cc in cclasses:
                collector.add(point, (plan.order(point), len(runs)), cc.members, static.tx_accounting(k, cc.classes, psites))
            t_classes, t_static = t_classes + t1 - t0, t_static + time.perf_counter() - t1
        except (SpecError, EvalError) as exc:
            if not options.all_params:
                raise _spec_error(exc, sites)
            invalid += sweep.invalid_point(_spec_error(exc, sites), point, plan)
            continue
        universe[point] = [cfg for cc in cclasses for cfg in cc.members]
        partitions[point] = next((cc.partition for cc in cclasses if cc.partition is not None), None)
        expected += len(cclasses)
        for cc in cclasses if options.explore and not stopped else ():
            limits = options.limits
            if limits.timeout is not None:
                left = limits.timeout - (time.perf_counter() - start)
                if left <= 0:
                    stopped = "timeout"
                    break
                limits = Limits(limits.max_states, left, limits.max_memory_mb, limits.stop_at_first, limits.past_findings)
            classes = cc.classes if options.counter == "classes" else split_classes(k, cc.classes, options.counter)
            key = sweep.exploration_key(k, classes)
            try:
                if key not in explored:  # equal keys explore the same graph: once is enough
                    model = Model(k, classes, psites, options.lockstep)
                    base = model
                    if options.symmetry:
                        sym = Symmetric(model)
                        base = sym if sym.active else model
                    if options.engine == "bmc":
                        from .symbolic import bmc  # z3's bounded search: only for --engine bmc
                        explored[key] = (model, bmc.search(model, limits, options.depth), model)
                    else:
                        system = Reduced(base) if options.reduce else base
                        encode = Interner() if options.compact else None
                        explored[key] = (model, explore(system, limits, progress, encode), base)
            except EvalError as exc:
                if not options.all_params:
                    raise _spec_error(exc, sites) from None
                invalid += sweep.invalid_point(_spec_error(exc, sites), point, plan)
                break
            model, exp, base = explored[key]
            runs.append(Run(cc, model, exp, point, base))
            if exp.stopped and exp.stopped != "first-finding":
                stopped = exp.stopped
    plan.seconds.update({"classes": t_classes, "byte-accounting": t_static})
    issues = _collect(runs, universe, partitions, esites, plan)
    if issues and not options.lockstep and options.check_scheduling and stopped is None and options.engine == "explicit":
        _mark_scheduling(path, issues, options, None if options.all_params else (plan, sources))
    found = plan.param_findings + sweep.tx_diagnostics(collector, universe, esites, partitions, plan, sites) + invalid
    findings = sweep.sort_static(found)
    if issues or findings:
        verdict = "findings"
    elif options.explore and (stopped or len(runs) < expected):
        verdict = "inconclusive"
    else:
        verdict = "verified"
    return Result(path, kernel, options, verdict, issues, runs, sites, sources, esites,
                  time.perf_counter() - start, stopped, findings, plan)


def _mark_scheduling(path: str, issues: list[Issue], options: Options,
                     reuse: tuple[sweep.Plan, dict[str, str]] | None) -> None:
    """Run again with every warp reconverging after each branch (--lockstep): when that run verifies,
    every finding needed lanes of a warp to run apart. Otherwise nothing is claimed."""
    floor, factor, cap = SCHEDULING_BUDGET
    explored = sum({id(i.run): i.run.exploration.states for i in issues}.values())
    limits = replace(options.limits, stop_at_first=True, max_states=min(cap, max(floor, factor * explored)))
    failing = tuple(i.run.config for i in issues)  # only the configurations that showed something
    again = verify_file(path, replace(options, lockstep=True, check_scheduling=False, limits=limits, only=failing,
                                      all_params=False), reuse=reuse)
    if again.verdict == "verified":
        for i in issues:
            i.needs_independent_scheduling = True


def _spec_error(exc: SpecError | EvalError, sites: list[Site]) -> SpecError:
    if isinstance(exc, SpecError):
        return exc
    return error("value", str(exc), _site_span(sites, exc.site))


def _collect(runs: list[Run], universe: dict[Point, list[Config]], partitions: dict, esites: list[ElectSite],
             plan: sweep.Plan) -> list[Issue]:
    masks = sorted({m for cfgs in universe.values() for cfg in cfgs for m, _ in cfg.elect})
    by_key: dict[tuple, list[tuple[Run, Found]]] = {}
    for run in runs:
        for found in run.exploration.found:
            by_key.setdefault(found.finding.key, []).append((run, found))
    issues = []
    for key, hits in by_key.items():
        # the witness: at the default parameters if it shows there, else the nearest point; then the shortest
        run, found = min(hits, key=lambda h: (plan.order(h[0].point), len(h[1].path), runs.index(h[0])))
        per_point: dict[Point, list[Config]] = {}
        for r, _ in hits:
            per_point.setdefault(r.point, []).extend(r.cclass.members)
        configs = [cfg for cfgs in per_point.values() for cfg in cfgs]
        condition, witness = sweep.condition(per_point, universe, esites, partitions, plan, run.point)
        condition += f" (witness: {witness})" if witness else ""
        on_hw: bool | None = None
        if masks:
            on_hw = any(all(cfg.elected(m, True) == lowest_lane(m) for m in masks) for cfg in configs)
        issues.append(Issue(found.finding, found, run, configs, condition, on_hw))
    order = {c: i for i, c in enumerate(["hang", "arrive-fault", "tx-range", "stale-read", "overwrite", "double-arrive",
                                         "phase-alias", "store-reuse", "missing-proxy-fence", "exit-inflight"])}
    issues.sort(key=lambda i: (order.get(i.code, 99), len(i.witness.path), i.finding.site, i.finding.message))
    return issues
