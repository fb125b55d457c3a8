"""The pipeline for a compiled kernel (`.ptx`, or `.cu` compiled with nvcc first): parameters, the
configurations of elected lanes, one exploration per class of configurations that lower alike, and
issues with their conditions, in the same `Result` the reports render for a `.pipe` spec.
"""
from __future__ import annotations

import functools
import itertools
import sys
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Callable

from ..core import cache
from ..core.diagnostics import Span, SpecError, error
from ..core.version import __version__
from ..model.findings import Finding
from ..model.ir import ARRIVE, EXPECT_TX, EvalError
from ..model.system import Model
from ..model.threads import Config, lowest_lane, split_classes
from ..ptx.defaults import Choice, choose_defaults
from ..ptx.frontend import (LaunchOptions, PtxProgram, classes_for, configurations, find_regions, kernel_of,
                            parse_entry, program_at)
from ..ptx.launch import is_launch_file, read_launch
from ..ptx.nvcc import compile_cuda
from ..search.explore import Found
from ..search.symmetry import Symmetric
from . import causes
from .configurations import ConfigClass, ElectSite, class_multiset, describe
from .result import Issue, Options, Result, Run, spec_error
from .searches import CauseBudget, Search, limits_now, reduced_system, run_in_order

PTX_SUFFIXES = (".ptx", ".cu", ".cuh")


@dataclass
class PtxInfo:
    """What a PTX run adds to its result: the entry, the launch, the parameters and why each has its value."""

    entry: str
    ptx: str  # the PTX file read (a temporary one for a .cu)
    command: str  # the nvcc command, for a .cu
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    choices: list[Choice]
    overrides: dict[str, int]
    smallest: tuple[str, ...] = ()  # the loop bounds run once: the finding showed there, before the defaults
    launch: str = ""  # the `pipecheck capture` record whose parameter bytes and shape were used
    captured: tuple[str, ...] = ()  # the parameters read from that record's bytes
    swept: tuple[tuple[str, tuple[int, ...]], ...] = ()  # --all-params: each loop bound and the values swept
    seconds: tuple[tuple[str, float], ...] = ()  # the front end's phases (`--stats`; never in a report)


_DEFAULTS = f"ptx-defaults-{sys.implementation.cache_tag}"


@functools.cache
def _code_digest() -> bytes:
    """What the defaults of a PTX entry depend on besides its text and launch: all of pipecheck's code (they run the
    front end's evaluation and lowering at each candidate value)."""
    root = Path(__file__).resolve().parent.parent
    return cache.code_digest(sorted(root.rglob("*.py")), __version__, sys.version)


def _are_defaults(obj: object) -> bool:
    return (isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], list)
            and all(isinstance(c, Choice) for c in obj[0]) and isinstance(obj[1], tuple))


def is_kernel_file(path: str) -> bool:
    return path.endswith(PTX_SUFFIXES) or is_launch_file(path)


def call_chain(site, depth: int = 3) -> str:
    """`barrier.h:588 in sm90_pipeline.hpp:383 in sm90_mma_tma_gmma_ss_warpspecialized.hpp:351 ... in
    sm90_gemm_tma_warpspecialized_pingpong.hpp:613`: the source line and the inlined-at chain nvcc recorded."""
    frames = [site.span] + list(site.via)
    shown = frames[:depth] + (frames[-1:] if len(frames) > depth else [])
    words = [f"{f.file.rsplit('/', 1)[-1]}:{f.line}" for f in shown]
    if len(frames) > depth + 1:
        words[-1] = "... " + words[-1]
    return " in ".join(words)


def _elect_sites(prog: PtxProgram) -> list[ElectSite]:
    out = []
    for i in prog.plan.elect_sites:
        site = prog.sites[prog.site_index[i]]
        d = prog.ev.decoded[i]
        m = prog.ev.value(i, dict(d.roles)["mask"])
        where = f"{site.span.file.rsplit('/', 1)[-1]}:{site.span.line}"
        if site.via:
            outer = site.via[-1]
            where += f" in {outer.file.rsplit('/', 1)[-1]}:{outer.line}"
        out.append(ElectSite(int(m) & 0xFFFFFFFF, site.span.line, site.span.file, where))
    return out


def verify_ptx(path: str, options: Options, progress: Callable | None = None) -> Result:
    start = time.perf_counter()
    if options.every is not None or options.engine != "explicit":
        raise error("usage", "--every and --engine bmc work on .pipe specs; a PTX kernel is checked at its "
                    "parameter values (set them with -D param_<offset>=N, sweep its loop bounds with --all-params)",
                    None)
    sources: dict[str, str] = {}
    ptx_path, command = path, ""
    launch = read_launch(path) if path.endswith(".json") else None
    if launch is not None:  # a launch `pipecheck capture` recorded: its module, shape and parameter bytes
        ptx_path = launch.image
        lo = LaunchOptions(options.entry or launch.kernel, options.block or launch.block,
                           options.cluster or launch.cluster, options.grid or launch.grid)
    else:
        if not path.endswith(".ptx"):
            ptx_path, command = compile_cuda(path, options.nvcc_flags)
        lo = LaunchOptions(options.entry, options.block, options.cluster, options.grid)
    pz = parse_entry(ptx_path, lo, sources)
    t_parsed = time.perf_counter()
    overrides: dict[str, int] = {}  # as the user wrote them (the report), and by byte offset
    by_offset: dict[int, int] = {}
    for name, v in options.overrides:
        if not name.startswith("param_"):
            raise error("usage", f"-D {name}: a PTX kernel's parameters are named param_<byte offset> (the report "
                        "lists the ones its protocol reads)", None)
        try:
            by_offset[int(name[len("param_"):])] = v
        except ValueError:
            raise error("usage", f"-D {name}: expected param_<byte offset>, e.g. param_12", None) from None
        overrides[name] = v
    captured: list[str] = []

    def given(offset: int, nbytes: int) -> int | None:  # -D first, then the captured launch's bytes
        if offset in by_offset:
            return by_offset[offset]
        v = launch.value(offset, nbytes) if launch is not None else None
        if v is not None:
            captured.append(f"param_{offset}")
        return v

    key = repr((pz.entry.name, pz.block, pz.cluster, pz.grid, sorted(pz.shared.items()), sorted(pz.bases.items()),
                sorted(by_offset.items()), launch.params if launch is not None else None)).encode()
    choices, found = cache.kept(_DEFAULTS, _code_digest() + key + pz.sources[ptx_path].encode("utf-8", "surrogatepass"),
                                lambda: (choose_defaults(pz, given), tuple(captured)), _are_defaults, keep=256)
    captured[:] = found
    seconds = (("parse", t_parsed - start), ("defaults", time.perf_counter() - t_parsed))
    # what was set is not a default: program_at states every parameter whose value differs from its default
    defaults = {c.offset: (c.value, c.nbytes) for c in choices if c.searched}
    values = {c.offset: (c.value, c.nbytes) for c in choices}
    for off, v in by_offset.items():  # one the kernel does not read keeps the width it would have
        values[off] = (v, values.get(off, (0, 4))[1])
    loops = [c for c in choices if c.small is not None and f"param_{c.offset}" not in overrides
             and f"param_{c.offset}" not in captured]
    info = PtxInfo(pz.entry.name, ptx_path, command, pz.block, pz.cluster, choices, overrides,
                   launch=path if launch else "", captured=tuple(captured), seconds=seconds)
    if options.all_params:
        return _sweep(path, pz, values, defaults, loops, options, start, progress, sources, info)
    first = None
    if loops and options.explore:
        # the loops once first: a protocol broken there shows it in a short schedule; the defaults (every
        # stage reused, the ring wrapped twice, two tiles) run when that point verifies
        small = dict(values)
        small.update((c.offset, (c.small, c.nbytes)) for c in loops)
        first = _check_point(path, pz, small, defaults, options, start, progress, sources)
        if first.issues or first.stopped:
            first.ptx = PtxInfo(pz.entry.name, ptx_path, command, pz.block, pz.cluster, choices, overrides,
                                tuple(f"param_{c.offset}" for c in loops), path if launch else "", tuple(captured),
                                seconds=seconds)
            return first
    res = _check_point(path, pz, values, defaults, options, start, progress, sources)
    res.ptx = info
    if first is not None:  # the time and states of both points
        res.seconds = time.perf_counter() - start
    return res


def _sweep(path: str, pz, values: dict, defaults: dict, loops: list[Choice], options: Options, start: float,
           progress: Callable | None, sources: dict[str, str], info: PtxInfo) -> Result:
    """`--all-params` over a compiled kernel: every combination of its loop bounds' sweep values (each from the
    value that runs its loop once to the default, `-D param_N=LO..HI` narrowing it), each point checked as a
    single run is, and each finding stated with the points that show it (a condition over the parameters)."""
    from ..symbolic.classes import points_text, witness_order  # z3: only for a sweep

    ranges = {name: (lo, hi) for name, lo, hi in options.ranges}
    axes: list[tuple[str, Choice, tuple[int, ...]]] = []
    for c in loops:
        name = f"param_{c.offset}"
        vals = c.sweep or (c.value,)
        if name in ranges:
            lo, hi = ranges.pop(name)
            vals = tuple(v for v in vals if lo <= v <= hi) or tuple(sorted({lo, hi}))
        axes.append((name, c, vals))
    if ranges:
        name = next(iter(ranges))
        steering = ", ".join(n for n, _, _ in axes) or "none"
        raise error("usage", f"-D {name}=LO..HI: {name} is not a loop bound of this kernel that --all-params sweeps "
                    f"(those are: {steering})", None)
    default = tuple((name, c.value) for name, c, _ in axes)
    points = sorted(itertools.product(*[[(name, v) for v in vals] for name, _, vals in axes]),
                    key=lambda pt: witness_order(pt, default))
    info.swept = tuple((name, vals) for name, _, vals in axes)
    results: list[tuple[tuple, Result]] = []
    stopped = None
    for pt in points:
        at = dict(values)
        for (name, v), (_, c, _) in zip(pt, axes):
            at[c.offset] = (v, c.nbytes)
        res = _check_point(path, pz, at, defaults, options, start, progress, sources, every_site=True)
        results.append((pt, res))
        if res.stopped and res.stopped != "first-finding":
            stopped = res.stopped
            break
    complete = [pt for pt, r in results if r.verdict != "inconclusive"]
    merged: dict[tuple, Issue] = {}
    hits: dict[tuple, list] = {}
    for pt, res in results:
        for issue in res.issues:
            site = res.sites[issue.finding.site] if 0 <= issue.finding.site < len(res.sites) else None
            key = (issue.code, issue.finding.site, site.span if site is not None else None)
            if key not in merged:
                merged[key] = issue
            hits.setdefault(key, []).append(pt)
    issues = []
    for key, issue in merged.items():
        ptext = points_text(hits[key], complete or [pt for pt, _ in results]) if len(points) > 1 else ""
        if stopped:
            ptext = (f"{ptext or 'any parameter values'}, at the {len(complete)} of {len(points)} parameter points "
                     f"explored (the sweep is incomplete: stopped by {stopped}, so the points not explored may show "
                     "it too)")
        issue.condition = " and ".join(t for t in (ptext, issue.condition) if t)
        issue.where = frozenset((pt, cfg) for pt in hits[key] for cfg in issue.configs)
        issues.append(issue)
    issues.sort(key=lambda i: (causes.rank(i.code), i.witness.steps, i.finding.site, i.finding.message))
    head = results[0][1]
    verdict = "findings" if issues else "inconclusive" if stopped else "verified"
    res = Result(path, head.kernel, options, verdict, issues, [r for _, res in results for r in res.runs], head.sites,
                 sources, head.esites, time.perf_counter() - start, stopped, [], None)
    res.config_classes = head.config_classes
    res.configs = head.configs
    res.ptx = info
    return res


def _check_point(path: str, pz, values: dict, defaults: dict, options: Options, start: float,
                 progress: Callable | None, sources: dict[str, str], every_site: bool = False) -> Result:
    """The kernel at one parameter point: its configurations of elected lanes, one exploration per class."""
    prog = program_at(pz, values, defaults, every_site)
    configs = configurations(prog, options.elect)
    prog.regions = find_regions(prog, configs)
    kernel = kernel_of(prog)
    esites = _elect_sites(prog)
    groups: dict[frozenset, ConfigClass] = {}
    for cfg in configs:
        classes = classes_for(prog, cfg, options.lockstep)
        key = class_multiset(classes)  # classes that pair up in another order: one exploration
        if key in groups:
            groups[key].members.append(cfg)
        else:
            groups[key] = ConfigClass(cfg, [cfg], classes)
    cclasses = list(groups.values())
    runs: list[Run] = []
    stopped = None
    budget = CauseBudget(options.limits.stop_at_first, options.cause_budget)  # states past first findings (causes.py)
    built: list[tuple[ConfigClass, Model, object]] = []
    for cc in cclasses if options.explore else ():  # `pipecheck check`: read, evaluated and lowered only
        classes = cc.classes if options.counter == "classes" else split_classes(kernel, cc.classes, options.counter)
        try:
            model = Model(kernel, classes, prog.sites, options.lockstep, ordered_stores=options.reduce, meetings=options.meetings)
        except EvalError as exc:
            raise spec_error(exc, prog.sites) from None
        base = model
        if options.symmetry:
            sym = Symmetric(model)
            base = sym if sym.active else model
        built.append((cc, model, base))
    results = run_in_order([Search(partial(reduced_system, model, base, options), partial(limits_now, options.limits, start))
                            for _, model, base in built], budget, options.jobs, progress)
    try:
        for cc, model, base in built:
            if options.limits.timeout is not None and time.perf_counter() - start >= options.limits.timeout:
                stopped = "timeout"
                break
            try:
                exp = next(results)
            except EvalError as exc:
                raise spec_error(exc, prog.sites) from None
            runs.append(Run(cc, model, exp, (), base))
            if exp.stopped and exp.stopped != "first-finding":
                stopped = exp.stopped
                break
    finally:
        results.close()
    issues = _collect(runs, configs, esites)
    causes.mark_latent(issues)
    if issues:
        verdict = "findings"
    elif options.explore and (stopped or len(runs) < len(cclasses)):
        verdict = "inconclusive"
    else:
        verdict = "verified"
    res = Result(path, kernel, options, verdict, issues, runs, prog.sites, sources, esites,  # type: ignore[arg-type]
                 time.perf_counter() - start, stopped, [], None)
    res.config_classes = cclasses  # (`explain` reads the classes of a run that did not search)
    res.configs = configs
    return res


def _arrival_sites(run: Run) -> set[int]:
    return {ins.site for cl in run.model.classes for ins in cl.program.instrs if ins.op in (ARRIVE, EXPECT_TX)}


def _with_skipped_arrivals(finding: Finding, run: Run, runs: list[Run], failing: set[int], condition: str) -> Finding:
    """A hang that only some elected lanes show: the arrivals the passing configurations run and the
    failing one never does (#3722: the `arrive.expect_tx` of a thread the election left out)."""
    mine = _arrival_sites(run)
    others: set[int] = set()
    for r in runs:
        if id(r) not in failing:
            others |= _arrival_sites(r)
    notes = tuple((f"no thread runs this arrival ({call_chain(run.model.sites[site])}) when {condition}", site)
                  for site in sorted(others - mine))
    return replace(finding, notes=finding.notes + notes) if notes else finding


def _collect(runs: list[Run], configs: list[Config], esites: list[ElectSite]) -> list[Issue]:
    masks = sorted({m for cfg in configs for m, _ in cfg.elect})
    by_key: dict[tuple, list[tuple[Run, Found]]] = {}
    for run in runs:
        for found in run.exploration.found:  # those found past the first finding (Limits.after_first) last
            by_key.setdefault(found.finding.key, []).append((run, found))
    issues = []
    for hits in by_key.values():
        # the witness: one of a search that stopped at findings (nothing wrong before it), then the shortest
        run, found = min(hits, key=lambda h: (int(h[1].after_first), h[1].steps, runs.index(h[0])))
        members = [cfg for r, _ in hits for cfg in r.cclass.members]
        condition = describe(members, configs, esites)
        on_hw = None
        if masks:
            on_hw = any(all(cfg.elected(m, True) == lowest_lane(m) for m in masks) for cfg in members)
        finding = found.finding
        if finding.code == "hang" and len(members) < len(configs):
            finding = _with_skipped_arrivals(finding, run, runs, {id(r) for r, _ in hits}, condition)
        where = frozenset(((), cfg) for cfg in members)  # one parameter point: the configurations
        issues.append(Issue(finding, found, run, members, condition, on_hw, where=where))
    issues.sort(key=lambda i: (causes.rank(i.code), i.witness.steps, i.finding.site, i.finding.message))
    return causes.group(issues)


__all__ = ["PtxInfo", "is_kernel_file", "verify_ptx", "SpecError", "Span"]
