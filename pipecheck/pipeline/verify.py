"""The pipeline for one spec: load, check, split configurations, explore each, collect a result.

`verify_file` is the only function here that touches the file system; everything it
returns is data, which the reports render.
"""
from __future__ import annotations

import mmap
import struct
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Callable, Mapping

from ..core import collector
from ..core.diagnostics import Diagnostic, SpecError
from ..lang.check import CheckedKernel, check_kernel
from ..lang.lower import resolve_roles
from ..lang.parse import load_spec
from ..model.ir import EvalError
from ..ptx.launch import is_launch_file
from ..model.system import Model
from ..model.threads import Config, lowest_lane, split_classes
from ..search.explore import Exploration, Found, explore
from ..search.symmetry import Symmetric
from ..symbolic import static, sweep
from ..symbolic.terms import Point
from . import causes
from .configurations import ConfigClass, ElectSite, config_classes, elect_sites
from . import limits as watch
from .result import Issue, Options, Result, Run, spec_error
from .searches import CauseBudget, Search, SearchResults, limits_now, reduced_system

PTX_SUFFIXES = (".ptx", ".cu", ".cuh")  # pipeline.ptx.PTX_SUFFIXES (tests/test_census.py checks they agree)
# states of the lockstep re-run that decides whether findings need lanes to run apart: a few times
# what the main run explored (the re-run has no partial-order reduction), within these bounds
SCHEDULING_BUDGET = (2_000, 5, 50_000)
# static findings that say the kernel cannot launch: reported at once, nothing is searched
LAUNCH = ("smem-budget",)


def load_checked(path: str, overrides: Mapping[str, int], sources: dict[str, str]) -> CheckedKernel:
    kernel, procs = load_spec(path, sources)
    display = next(iter(sources)) if sources else path
    return check_kernel(kernel, procs, dict(overrides), display)


def verify_file(path: str, options: Options = Options(),
                progress: Callable[[int, int, float], None] | None = None,
                reuse: tuple[sweep.Plan, dict[str, str]] | None = None) -> Result:
    """Verify one spec; raises SpecError (with diagnostics) when the spec itself is wrong.

    --timeout and --max-memory hold in every phase (pipeline/limits.py): a run they stop before
    any finding is inconclusive, saying in which phase; before the spec is checked, the
    `LimitReached` goes to the caller. `reuse`: the plan and sources of an earlier run with the
    same parameters (no re-parsing)."""
    guard = watch.watch(options.limits)
    # (the collector outside the watch: its timer is disarmed before the collector is on again, so no limit raised
    # by the timer can leave it off)
    with collector.paused(), guard as w:
        try:
            return _verify_file(path, options, progress, reuse)
        except watch.LimitReached as hit:
            if not isinstance(guard, watch.Watch) or "kernel" not in w.stash:
                raise  # the outermost run reports it; before the spec is checked there is no kernel to name
            w.disarm()
            st = w.stash
            return Result(path, st["kernel"], options, "inconclusive", [], list(st.get("runs", [])),
                          st.get("sites", []), st.get("sources", {}), [], hit.seconds, hit.limit, [],
                          st.get("plan"), stopped_in=hit.where)


def _verify_file(path: str, options: Options, progress: Callable[[int, int, float], None] | None,
                 reuse: tuple[sweep.Plan, dict[str, str]] | None) -> Result:
    if path.endswith(PTX_SUFFIXES) or is_launch_file(path):  # a compiled kernel: the PTX front end (imported
        from .ptx import verify_ptx  # only then: it is a fifth of the start-up of a .pipe run)
        return verify_ptx(path, options, progress)
    if options.every is not None:
        from .every import verify_every  # the loop-offset search (search/loop_offset.py): only for --every
        return verify_every(path, options, progress, ordinary=verify_file)
    start = time.perf_counter()
    if reuse is not None:
        plan, sources = replace(reuse[0], seconds=dict(reuse[0].seconds)), reuse[1]
    else:
        sources = {}
        plan = sweep.plan(path, options.overrides, options.all_params, options.ranges, sources)
    kernel = plan.kernel
    watch.stash(kernel=kernel, sources=sources, plan=plan)
    if not options.all_params and any(d.code in LAUNCH for d in plan.param_findings):  # it cannot launch
        return Result(path, kernel, options, "findings", [], [], [], sources, [], time.perf_counter() - start,
                      None, sweep.sort_static(plan.param_findings), plan)
    watch.phase("lowering", "the roles at the default parameters")
    codes, sites = resolve_roles(kernel, sources, options.lockstep)
    esites = elect_sites(codes, sites)
    runs: list[Run] = []
    watch.stash(runs=runs, sites=sites)
    stopped = None
    expected = 0
    universe: dict[Point, list[Config]] = {}
    partitions: dict = {}
    collector = static.TxCollector()
    invalid: list[Diagnostic] = []
    explored: dict[tuple, tuple[Model, Exploration, object]] = {}
    lane_cache: dict = {}
    budget = CauseBudget(options.limits.stop_at_first, options.cause_budget)  # states past first findings (causes.py)
    seconds = {"classes": 0.0, "byte-accounting": 0.0}
    # The points are prepared (checked, lowered, split into configuration classes, statically checked, their
    # models built) one at a time as the searches ask for them, and consumed in order below: with --jobs the
    # searches of the next points run while this one's results come in, with the same outcome as one process.
    prepared: deque[_Point] = deque()
    pending: deque[Search] = deque()  # searches of the prepared points, not yet handed to `results`
    points = iter(enumerate(plan.points, 1))
    planned: set = set()  # exploration keys an earlier plan explores

    def prepare() -> bool:
        nxt = next(points, None)
        if nxt is None:
            return False
        n, point = nxt
        at = f"parameter point {n} of {len(plan.points)}, {len(runs)} configuration(s) explored"
        try:
            t0 = time.perf_counter()
            watch.phase("checking", at)
            k = plan.checked_at(point)
            watch.phase("lowering", at)
            pcodes, psites = (codes, sites) if k is kernel else resolve_roles(k, sources, options.lockstep)
            watch.phase("class building", at)
            cclasses = config_classes(k, pcodes, options.elect, lane_cache)
            if options.only is not None:
                cclasses = [cc for cc in cclasses if any(cfg in cc.members for cfg in options.only)]
            t1 = time.perf_counter()
            watch.phase("static checks", at)
            tx = [static.tx_accounting(k, cc.classes, psites) for cc in cclasses]  # collected when it is consumed
            seconds["classes"] += t1 - t0
            seconds["byte-accounting"] += time.perf_counter() - t1
        except (SpecError, EvalError) as exc:
            prepared.append(_Point(n, point, at, error=exc))
            return True
        # each configuration class's exploration key, and for the first of each key, its model (built here, in
        # order) and its search; a model that cannot be built ends the point's list there
        plans: list[_Plan] = []
        for cc in cclasses if options.explore else ():
            classes = cc.classes if options.counter == "classes" else split_classes(k, cc.classes, options.counter)
            key = sweep.exploration_key(k, classes)
            if key in planned:  # equal keys explore the same graph: once is enough
                plans.append(_Plan(cc, key, classes))
                continue
            try:
                watch.phase("model building", at)
                model = Model(k, classes, psites, options.lockstep, ordered_stores=options.reduce, meetings=options.meetings)
            except EvalError as exc:
                plans.append(_Plan(cc, key, classes, error=exc))
                break
            planned.add(key)
            plans.append(_Plan(cc, key, classes, model, _symmetric(model, options), searched=options.engine != "bmc"))
            if options.engine != "bmc":
                # (the lockstep re-check of its findings starts beside it at its first finding, where --jobs lets a
                # second process run: `_mark_scheduling`)
                # (or before it, on a CPU the search leaves idle, once the search has run a while without one)
                rechecks = _checks_scheduling(options) and not options.all_params and options.jobs > 1
                recheck = partial(_scheduling_call, path, options, (plan, sources), cc.representative) \
                    if rechecks else None
                early = partial(EarlyRecheck, path, options, (plan, sources), cc.representative) if rechecks else None
                pending.append(Search(partial(reduced_system, model, plans[-1].base, options),
                                      partial(limits_now, options.limits, start), recheck, early))
        prepared.append(_Point(n, point, at, k, psites, cclasses, plans, tx))
        return True

    def searches() -> Iterator[Search]:
        while True:
            while not pending:
                if not prepare():
                    return
            yield pending.popleft()

    results = SearchResults(searches(), budget, options.jobs, progress)
    try:
        while prepared or prepare():
            pt = prepared.popleft()
            if watch.tripped():  # a limit passed between phases (with a finding in hand, the watch waits for this)
                stopped = stopped or watch.tripped()
                break
            if pt.error is not None:
                if not options.all_params:
                    raise spec_error(pt.error, sites)
                invalid += sweep.invalid_point(spec_error(pt.error, sites), pt.point, plan)
                continue
            for cc, tx in zip(pt.cclasses, pt.tx):  # (the point's order alone sorts them: it differs between points)
                collector.add(pt.point, (plan.order(pt.point), pt.n), cc.members, tx)
            universe[pt.point] = [cfg for cc in pt.cclasses for cfg in cc.members]
            partitions[pt.point] = next((cc.partition for cc in pt.cclasses if cc.partition is not None), None)
            expected += len(pt.cclasses)
            if stopped:  # a search stopped by a limit: the points after it are not explored (no results are read)
                continue
            left = list(pt.plans)
            while left:
                p = left.pop(0)
                if options.limits.timeout is not None and time.perf_counter() - start >= options.limits.timeout:
                    stopped = "timeout"
                    break
                try:
                    if p.error is not None:
                        raise p.error
                    if p.key not in explored:
                        explored[p.key] = _explore(p, pt, results, options, start)
                except EvalError as exc:
                    if not options.all_params:
                        raise spec_error(exc, sites) from None
                    invalid += sweep.invalid_point(spec_error(exc, sites), pt.point, plan)
                    for rest in left:  # the point's other searches are not run
                        if rest.searched:
                            results.skip()
                    break
                model, exp, base = explored[p.key]
                runs.append(Run(p.cc, model, exp, pt.point, base))
                if exp.found:
                    watch.found()
                if exp.stopped and exp.stopped != "first-finding":
                    stopped = exp.stopped
    finally:
        results.close()
    plan.seconds.update(seconds)
    if stopped is not None:
        watch.wrap_up()  # a stopped run still collects and reports what it found
    watch.phase("conditions", f"{len(runs)} configuration(s) explored")
    plan.cover(universe, [(r.point, r.cclass.members, r.exploration.stopped) for r in runs], stopped)
    found = any(r.exploration.found for r in runs)
    issues = _collect(runs, universe, partitions, esites, plan) if found and not options.verdict_only else []
    try:
        if issues and _checks_scheduling(options) and stopped is None:
            _mark_scheduling(path, issues, options, None if options.all_params else (plan, sources))
    finally:
        for r in runs:  # re-checks started beside searches whose findings were not re-checked after all
            if r.exploration.beside is not None:
                r.exploration.beside.cancel()
                r.exploration.beside = None
    causes.mark_latent(issues)
    findings = sweep.sort_static(plan.param_findings + sweep.tx_diagnostics(collector, universe, esites, partitions,
                                                                            plan, sites) + invalid)
    if found or findings:
        verdict = "findings"
    elif options.explore and (stopped or len(runs) < expected):
        verdict = "inconclusive"
    else:
        verdict = "verified"
    return Result(path, kernel, options, verdict, issues, runs, sites, sources, esites,
                  time.perf_counter() - start, stopped, findings, plan)


@dataclass
class _Plan:
    """One configuration class of a point: its exploration key, and for the first class of each key, the model
    and whether a search of `SearchResults` is its (else bmc, or a key an earlier plan explores)."""

    cc: ConfigClass
    key: tuple
    classes: list
    model: Model | None = None
    base: object = None
    searched: bool = False
    error: EvalError | None = None  # its model could not be built


@dataclass
class _Point:
    """A parameter point, prepared: checked, lowered, its configuration classes and their plans (or the error)."""

    n: int
    point: Point
    at: str
    kernel: CheckedKernel | None = None
    sites: list = field(default_factory=list)
    cclasses: list = field(default_factory=list)
    plans: list[_Plan] = field(default_factory=list)
    tx: list = field(default_factory=list)  # per configuration class, its byte accounting (static.tx_accounting)
    error: Exception | None = None


def _symmetric(model: Model, options: Options) -> object:
    if options.symmetry:
        sym = Symmetric(model)
        if sym.active:
            return sym
    return model


def _explore(p: _Plan, pt: _Point, results: SearchResults, options: Options, start: float) -> tuple:
    """(model, exploration, system) of one plan: its search's result, bmc's, or (a key whose first plan was
    not explored: an evaluation error there) a search of its own, here."""
    if p.model is None:
        model = Model(pt.kernel, p.classes, pt.sites, options.lockstep, ordered_stores=options.reduce, meetings=options.meetings)
        base = _symmetric(model, options)
        if options.engine != "bmc":
            system, encode = reduced_system(model, base, options)
            watch.phase("search", pt.at)
            return model, explore(system, limits_now(options.limits, start), None, encode), base
        p = replace(p, model=model, base=base)
    if options.engine == "bmc":
        from ..symbolic import bmc  # z3's bounded search: only for --engine bmc
        bmc.refuse_unmodelled(p.model, pt.sites)
        watch.phase("bmc", pt.at)
        return p.model, bmc.search(p.model, limits_now(options.limits, start), options.depth), p.model
    watch.phase("search", pt.at)
    return p.model, results.next(), p.base


def _checks_scheduling(options: Options) -> bool:
    """Whether a run's findings are re-checked with every warp reconverging after each branch (`_mark_scheduling`)."""
    return not options.lockstep and options.check_scheduling and options.engine == "explicit"


def _scheduling_budget(explored: int | None) -> int:
    """The states each search of `_scheduling_run` may explore, given the states the findings' own searches
    `explored` (None: not known yet, the most it may ever have)."""
    floor, factor, cap = SCHEDULING_BUDGET
    return cap if explored is None else min(cap, max(floor, factor * explored))


def _scheduling_run(path: str, options: Options, failing: tuple, at: tuple, reuse: tuple | None,
                    explored: int | None, progress: Callable[[int, int, float], None] | None = None) -> Result:
    """The --lockstep run of `_mark_scheduling`: the configurations `failing` at parameters `at`, depth-first (any
    finding answers the question, and it meets one sooner), within a budget of states set by the states the
    findings' own searches `explored` (`_scheduling_budget`)."""
    limits = replace(options.limits, stop_at_first=True, max_states=_scheduling_budget(explored), depth_first=True,
                     probe=True)
    return verify_file(path, replace(options, lockstep=True, check_scheduling=False, limits=limits, only=failing,
                                     all_params=False, ranges=(), overrides=at, cause_budget=0, verdict_only=True),
                       progress, reuse)


class _PastBudget(Exception):
    """An early re-check went past the budget its search's first finding set (`EarlyRecheck`)."""


class EarlyRecheck:
    """`_mark_scheduling`'s run for the findings of one configuration at the default point, started beside its search
    before any finding (a `Search.early`: the search ran a while without one). Its budget is not known yet: it runs
    with the largest (`_scheduling_budget(None)`), and stops once past the one the first finding sets (`found`,
    through a value shared with the child, read every thousand states or so). Its call gives what `_beside_verdict`
    reads: the run's verdict, the most states one of its searches explored, and what stopped it. That is the run
    `_scheduling_call` would have started at the first finding (the same depth-first searches) where those states are
    within its budget; a run that verified with more would have stopped at its budget, and says nothing."""

    def __init__(self, path: str, options: Options, reuse: tuple, config: Config):
        self.tag = (frozenset((config,)), None)
        self._args = (path, options, reuse, config)
        # (anonymous shared memory, which a forked child shares: the parent writes it at the first finding)
        self._bound = mmap.mmap(-1, 8)
        struct.pack_into("q", self._bound, 0, _scheduling_budget(None))

    def found(self, explored: int) -> None:
        struct.pack_into("q", self._bound, 0, _scheduling_budget(explored))

    def call(self) -> tuple[str, int, str | None]:
        path, options, reuse, config = self._args
        bound = self._bound

        def watch_budget(states: int, depth: int, seconds: float) -> None:
            if states > struct.unpack_from("q", bound)[0]:
                raise _PastBudget

        try:
            # (one process: a depth-first search spreads over none, and only a search of the run's own process is
            # told its progress)
            r = _scheduling_run(path, replace(options, jobs=1), (config,), options.overrides, reuse, None,
                                watch_budget)
        except _PastBudget:
            return "past-budget", 0, None
        except Exception:  # noqa: BLE001 - maybe past the budget, where the run after the search never goes: that run says
            return "error", 0, None
        return r.verdict, max((run.exploration.states for run in r.runs), default=0), r.stopped


def _scheduling_call(path: str, options: Options, reuse: tuple, config: Config,
                     explored: int) -> tuple[tuple, Callable[[], tuple[str, int, str | None]]]:
    """`_mark_scheduling`'s run for the findings of one configuration at the default point, to start beside that
    configuration's search at its first finding (`explored`: the states then): (what `_mark_scheduling` asks for when
    those are its point's only findings: the configurations and the states, the call giving what `_beside_verdict`
    reads)."""
    def call() -> tuple[str, int, str | None]:
        r = _scheduling_run(path, options, (config,), options.overrides, reuse, explored)
        return r.verdict, 0, r.stopped
    return (frozenset((config,)), explored), call


def _beside_verdict(tag: tuple, out: tuple[str, int, str | None], explored: int) -> str | None:
    """The verdict of a re-check that ran beside the search (`_scheduling_call`, `EarlyRecheck`), as the one after the
    search would give it; None where only that one can say: the child stopped on --timeout or --max-memory, which it
    counts from its own start and in its own process, or met an error."""
    verdict, states, stopped = out
    if stopped in ("timeout", "max-memory") or verdict == "error":
        return None
    if tag[1] is None and verdict == "verified" and states > _scheduling_budget(explored):
        return "past-budget"  # started early with the largest budget: the run with this one stops before it verifies
    return verdict


def _mark_scheduling(path: str, issues: list[Issue], options: Options,
                     reuse: tuple[sweep.Plan, dict[str, str]] | None) -> None:
    """Run again with every warp reconverging after each branch (--lockstep), at the point each finding was
    shown at (its witness's parameters, not the defaults): when that run verifies, the findings of that point
    needed lanes of a warp to run apart. Otherwise nothing is claimed. Where one configuration's search found all of
    a point's findings, that run started beside its search, at its first finding (`_scheduling_call`), and its
    verdict is read here."""
    by_point: dict = {}
    for i in issues:
        by_point.setdefault(i.run.point, []).append(i)
    for point, group in by_point.items():
        runs = {id(i.run): i.run for i in group}.values()
        explored = sum(r.exploration.states for r in runs)
        failing = tuple(i.run.config for i in group)  # only the configurations that showed something
        verdict = None
        for r in runs:
            beside, r.exploration.beside = r.exploration.beside, None
            if beside is not None and verdict is None and not options.all_params \
                    and beside.tag in ((frozenset(failing), explored), (frozenset(failing), None)):  # the run asked here
                try:
                    out = beside.result()  # None: it died; ("raise", exc): the run raised it, as it would have here
                except BaseException:  # (a limit of the run's watch while it waits): the child stops too
                    beside.cancel()
                    raise
                if out is not None:
                    if out[0] == "raise":
                        raise out[1]
                    verdict = _beside_verdict(beside.tag, out[1], explored)
            elif beside is not None:
                beside.cancel()
        if verdict is None:
            at = tuple(point) if options.all_params else options.overrides
            verdict = _scheduling_run(path, options, failing, at, None if options.all_params else reuse,
                                      explored).verdict
        if verdict == "verified":
            for i in group:
                i.needs_independent_scheduling = True


def _collect(runs: list[Run], universe: dict[Point, list[Config]], partitions: dict, esites: list[ElectSite],
             plan: sweep.Plan) -> list[Issue]:
    masks = sorted({m for cfgs in universe.values() for cfg in cfgs for m, _ in cfg.elect})
    by_key: dict[tuple, list[tuple[Run, Found, int]]] = {}
    for run in runs:
        for found in run.exploration.found:  # those found past the first finding (Limits.after_first) last
            by_key.setdefault(found.finding.key, []).append((run, found, int(found.after_first)))
    issues = []
    for key, hits in by_key.items():
        # the witness: at the default parameters if it shows there, else the nearest point; then one of the
        # search that stopped at findings (a schedule with nothing wrong before it), then the shortest
        run, found, _ = min(hits, key=lambda h: (plan.order(h[0].point), h[2], h[1].steps, runs.index(h[0])))
        per_point: dict[Point, list[Config]] = {}
        for r, _, _ in hits:
            per_point.setdefault(r.point, []).extend(r.cclass.members)
        configs = [cfg for cfgs in per_point.values() for cfg in cfgs]
        condition, witness = sweep.condition(per_point, universe, esites, partitions, plan, run.point)
        condition += f" (witness: {witness})" if witness else ""
        on_hw: bool | None = None
        if masks and sweep.names_elect(per_point, universe):  # else no lane matters: nothing to say of the H200's
            on_hw = any(all(cfg.elected(m, True) == lowest_lane(m) for m in masks) for cfg in configs)
        where = frozenset((r.point, cfg) for r, _, _ in hits for cfg in r.cclass.members)
        issues.append(Issue(found.finding, found, run, configs, condition, on_hw, where=where))
    issues.sort(key=lambda i: (causes.rank(i.code), i.witness.steps, i.finding.site, i.finding.message))
    return causes.group(issues)
