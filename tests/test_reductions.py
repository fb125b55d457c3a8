"""The reductions never change what is found: reduced and full exploration agree on every spec.

For each spec (at small parameters, so the full state space stays small) the plain search
(no partial-order reduction, no symmetry) and each reduced search run to completion, past
findings too, and must report the same verdict and the same set of (code, line) findings.
Persistent-set search preserves every reachable finding of an acyclic system (por.py) and
symmetry only merges isomorphic states (symmetry.py); this test checks that the model's
footprints and renamings make those theorems apply. Where the plain search past findings
is too large, they must at least agree on the verdict.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from pipecheck.explore import Limits
from pipecheck.verify import Options, load_checked, verify_file
from conftest import ROOT, corpus

SPECS = sorted(p for d in ("specs", "examples") for p in (ROOT / d).rglob("*.pipe") if "lib" not in p.parts)
SMALL = {"STAGES": 2, "K_TILES": 2, "TILES": 2, "ACC_STAGES": 1}
FULL_LIMIT = 150_000


def small(path: Path) -> tuple[tuple[str, int], ...]:
    """The small parameters, clamped to each parameter's declared range."""
    kernel = load_checked(str(path), {}, {})
    out = []
    for p in kernel.params:
        if p.name in SMALL or p.lo is not None:  # every other parameter at the bottom of its range
            v = SMALL.get(p.name, p.lo)
            if p.lo is not None:
                v = max(v, p.lo)
            if p.hi is not None:
                v = min(v, p.hi)
            out.append((p.name, v))
    return tuple(out)


REDUCTIONS = {"por+symmetry": dict(reduce=True, symmetry=True), "symmetry": dict(reduce=False, symmetry=True),
              "por": dict(reduce=True, symmetry=False)}


def run(path: Path, ov: tuple, past: bool, reduce: bool = False, symmetry: bool = False):
    limits = Limits(max_states=FULL_LIMIT, stop_at_first=not past, past_findings=past)
    return verify_file(str(path), Options(overrides=ov, limits=limits, reduce=reduce, symmetry=symmetry))


def findings(r) -> set:
    return {(i.code, r.sites[i.finding.site].span.line if i.finding.site >= 0 else 0) for i in r.issues}


@pytest.mark.parametrize("path", corpus(unreduced=True))
def test_reductions_preserve_findings(path: Path):
    ov = small(path)
    full = run(path, ov, past=True)
    if full.stopped is None:
        for name, how in REDUCTIONS.items():
            reduced = run(path, ov, past=True, **how)
            assert (reduced.verdict, findings(reduced)) == (full.verdict, findings(full)), name
    else:  # too large to list every finding: the verdicts must still agree
        full = run(path, ov, past=False)
        assert full.stopped is None, f"{path.name}: the full search is too large for this test"
        for name, how in REDUCTIONS.items():
            reduced = run(path, ov, past=False, **how)
            assert reduced.verdict == full.verdict == "findings", name


def lockstep_matters(path: Path, ov: tuple) -> bool:
    """Whether --lockstep moves some warp's classes together (otherwise it is the default model, tested above)."""
    from pipecheck.configs import config_classes
    from pipecheck.lower import resolve_roles
    from pipecheck.model import Model
    sources: dict = {}
    k = load_checked(str(path), dict(ov), sources)
    codes, sites = resolve_roles(k, sources, True)
    return any(Model(k, cc.classes, sites, True).partners for cc in config_classes(k, codes, "any"))


LOCKSTEP_SPECS = [p for p in corpus(unreduced=True) if lockstep_matters(p.values[0], small(p.values[0]))]


@pytest.mark.parametrize("path", LOCKSTEP_SPECS)
def test_reduction_preserves_lockstep_findings(path: Path):
    """Under --lockstep a warp's converged classes move as one transition; the reduction keeps them together."""
    ov = small(path)

    def go(past: bool, reduce: bool):
        limits = Limits(max_states=FULL_LIMIT, stop_at_first=not past, past_findings=past)
        return verify_file(str(path), Options(overrides=ov, limits=limits, reduce=reduce, symmetry=False,
                                              lockstep=True, check_scheduling=False))
    full = go(True, False)
    if full.stopped is None:
        reduced = go(True, True)
        assert (reduced.verdict, findings(reduced)) == (full.verdict, findings(full))
    else:
        full = go(False, False)
        assert full.stopped is None, f"{path.name}: the full lockstep search is too large for this test"
        assert go(False, True).verdict == full.verdict == "findings"
