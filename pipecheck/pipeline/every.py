"""`verify --every K`: one exploration for every value of a loop bound (search/loop_offset.py), then a witness.

The kernel is lowered at every value of K's declared range; the programs must differ only in
K + c constants, which become a register. The folded exploration decides the verdict for every
K of the range (and every larger one of the same code). When it finds something, the concrete runs K = lo, lo + 1, ... look
for the smallest K with a finding, so the counterexample is an ordinary one, at that K.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable

from ..core.diagnostics import SpecError, error
from ..lang.check import check_kernel
from ..lang.lower import resolve_roles
from ..model.ir import EvalError
from ..model.ir import RVar
from ..model.system import Model
from ..search.explore import Exploration
from ..search.footprints import Footprints
from ..search.loop_offset import Offset, Refused, bound_only, merge_tree, plan as offset_plan, refusal, symbolic_programs
from ..search.por import Reduced
from ..search.symmetry import Symmetric
from ..search.visited import Interner
from ..symbolic import sweep
from .configurations import config_classes
from .result import Options, Result, Run, spec_error
from .searches import CauseBudget, Search, run_in_order


@dataclass
class Every:
    """What a --every run says beside the ordinary result."""

    name: str
    lo: int
    hi: int  # the declared range: every value in lo..hi lowers to the code the run explored
    states: int  # states of the folded exploration (all configuration classes)
    codes: tuple[str, ...]  # what the folded exploration found (empty: verified for every K >= lo)
    witness_k: int | None = None  # the smallest K whose ordinary run has a finding
    stopped: str | None = None


def _folded_system(model: Model, base: object, pl: object, options: Options) -> tuple[object, Interner | None]:
    """What one folded search explores, built fresh (pipeline/searches.py)."""
    folded = Offset(base, model, pl, Footprints(model))
    return Reduced(folded) if options.reduce else folded, Interner(options.stats) if options.compact else None


def verify_every(path: str, options: Options, progress: Callable | None, ordinary: Callable[..., Result]) -> Result:
    """The result for every value of `options.every`; raises SpecError when the abstraction does not apply.

    `ordinary(path, options)` is the pipeline's run at one value of K (the witness, the static checks)."""
    start = time.perf_counter()
    name = options.every
    if any(n == name for n, _ in options.overrides):
        raise error("usage", f"--every {name} covers every value of {name}: drop -D {name}", None)
    if options.all_params or options.engine != "explicit":
        raise error("usage", "--every cannot be combined with --all-params or --engine bmc", None)
    sources: dict[str, str] = {}
    p = sweep.plan(path, options.overrides, False, (), sources)
    param = next((q for q in p.kernel.params if q.name == name), None)
    if param is None:
        raise error("usage", f"--every {name}: the kernel has no parameter '{name}'", None)
    if param.lo is None or param.hi is None or param.hi <= param.lo:
        raise error("usage", f"--every {name} needs a declared range of several values "
                    f"(`param {name} = ... in LO..HI`)", param.span)
    lo, hi = param.lo, param.hi
    ka, kb = hi, hi - 1
    kernels, lowered = [], []
    for k in (ka, kb):
        kern = check_kernel(p.ast, p.procs, dict(options.overrides) | {name: k}, p.display)
        codes, sites = resolve_roles(kern, sources, options.lockstep)
        try:
            cc = config_classes(kern, codes, options.elect, {})
        except EvalError as exc:
            raise spec_error(exc, sites) from None
        kernels.append(kern)
        lowered.append((cc, sites, codes))
    (cca, sites, codes_a), (ccb, _, _) = lowered
    shape = lambda kern: sweep.exploration_key(kern, [])  # noqa: E731
    if shape(kernels[0]) != shape(kernels[1]) or len(cca) != len(ccb):
        raise refusal(Refused(f"{name} sizes a declaration or changes the configurations"), name, sites)
    # every value of the declared range must lower to the same code but for K + c: a branch or min/max over
    # K that folds the same way at two values could fold differently at a third
    kvar = RVar(-1, name)
    for k in range(lo, hi - 1):
        kern = check_kernel(p.ast, p.procs, dict(options.overrides) | {name: k}, p.display)
        codes, _ = resolve_roles(kern, sources, options.lockstep)
        try:
            if shape(kern) != shape(kernels[0]) or len(codes) != len(codes_a):
                raise Refused(f"{name} sizes a declaration")
            merged = [merge_tree(ck.body, ca.body, k, ka, kvar, name, -1) for ck, ca in zip(codes, codes_a)]
        except Refused as exc:
            raise refusal(Refused(f"{exc} (at {name} = {k})", exc.site), name, sites, param.span) from None
        try:
            bound_only(merged, kvar, name, values=range(lo, hi + 1))
        except Refused as exc:
            raise refusal(exc, name, sites) from None
    states = 0
    found: list[str] = []
    runs = []
    stopped = None
    built = []  # per configuration class: its model and folded system (refused here, in order, before any search)
    for a, b in zip(cca, ccb):
        try:
            progs = symbolic_programs([c.program for c in a.classes], [c.program for c in b.classes], ka, kb, name)
            pl = offset_plan(name, lo, progs, sites)
            classes = [dataclasses.replace(c, program=prog) for c, prog in zip(a.classes, progs)]
            model = Model(kernels[0], classes, sites, options.lockstep, every=pl, ordered_stores=options.reduce, meetings=options.meetings)
            base = model
            if options.symmetry:
                sym = Symmetric(model)
                base = sym if sym.active else model
            built.append((a, model, base, pl, Offset(base, model, pl, Footprints(model))))
        except Refused as exc:
            raise refusal(exc, name, sites) from None
    # the classes' folded searches, on --jobs processes (pipeline/searches.py; no cause budget: --every stops at
    # its first finding and then runs the ordinary search at the smallest K)
    searches = [Search(partial(_folded_system, model, base, pl, options), lambda: options.limits)
                for _, model, base, pl, _ in built]
    results = run_in_order(searches, CauseBudget(False, 0), options.jobs, progress)
    try:
        for a, model, base, _, folded in built:
            try:
                exp: Exploration = next(results)
            except EvalError as exc:
                raise spec_error(exc, sites) from None
            states += exp.states
            for f in exp.found:
                if f.finding.code not in found:
                    found.append(f.finding.code)
            runs.append(Run(a, model, exp, (), folded))
            if exp.stopped and exp.stopped != "first-finding":
                stopped = exp.stopped
                break
    finally:
        results.close()
    info = Every(name, lo, hi, states, tuple(found), None, stopped)
    if not found:
        # the checks over parameters and byte accounting (no exploration) still speak, at every value of K
        pinned = tuple(options.overrides) + tuple((q.name, q.value) for q in p.kernel.params
                                                  if q.name != name and q.name not in dict(options.overrides))
        static = ordinary(path, replace(options, every=None, explore=False, all_params=True, overrides=pinned))
        if static.static:
            static.every = info
            return static
        verdict = "inconclusive" if stopped else "verified"
        res = Result(path, p.kernel, options, verdict, [], runs, sites, sources, [], time.perf_counter() - start,
                     stopped, [], p)
        res.every = info
        return res
    # the smallest K whose ordinary run has a finding: a counterexample in the user's numbers
    bound = hi
    concrete = replace(options, every=None)
    last = None
    for k in range(lo, bound + 1):
        try:
            r = ordinary(path, replace(concrete, overrides=tuple(options.overrides) + ((name, k),)))
        except SpecError:
            continue
        last = r
        if r.verdict == "findings":  # the first K with a finding (the folded run stopped at its first one)
            info.witness_k = k
            r.every = info
            return r
    raise error("every", f"--every {name}: the loop-offset run found {', '.join(found)}, but no run with {name} in "
                f"{lo}..{bound} shows it: it needs a larger {name} than the declared range allows (widen the range "
                "to see it)", param.span) if last is not None else \
        error("usage", f"--every {name}: no value of {name} in {lo}..{bound} is valid", None)
