"""Warp symmetry: the warps of one role instance whose classes have the same code are interchangeable.

The search with symmetry must store fewer states than without it and find the same things;
a warp whose code differs (here: the count that makes three releases enough) is not swapped
with the others, and the overwrite it allows is still found.
"""
from __future__ import annotations

from pipecheck.search.explore import Limits
from pipecheck.search.symmetry import Symmetric
from pipecheck.pipeline.verify import Options, verify_file
from conftest import ROOT

SPEC = str(ROOT / "tests" / "data" / "symmetry" / "warp_release.pipe")


def run(symmetry: bool, reduce: bool = False, **params: int):
    """Without partial-order reduction by default: it already walks one order of the warps' releases here."""
    opts = Options(overrides=tuple(params.items()), symmetry=symmetry, reduce=reduce,
                   limits=Limits(max_states=200_000, stop_at_first=False, past_findings=True))
    return verify_file(SPEC, opts)


def codes(result) -> set[tuple[str, int]]:
    return {(i.code, result.sites[i.finding.site].span.line) for i in result.all_issues}


def test_the_four_releasing_warps_are_one_orbit():
    result = run(True, True)
    model = result.runs[0].model
    groups = Symmetric(model).warp_groups
    assert [len(g) for g in groups] == [4]
    assert [where[3] for where, _ in groups[0]] == [0, 1, 2, 3]


def test_symmetry_merges_states_and_keeps_the_verdict():
    with_sym, without = run(True, STAGES=1, K_TILES=2), run(False, STAGES=1, K_TILES=2)
    assert with_sym.verdict == without.verdict == "verified"
    assert with_sym.states * 2 < without.states


def test_a_short_count_is_still_an_overwrite_under_symmetry():
    with_sym, without = run(True, True, RELEASE=3), run(False, True, RELEASE=3)
    assert codes(with_sym) == codes(without)
    assert ("overwrite", 31) in codes(with_sym)
