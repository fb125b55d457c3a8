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


def test_a_replay_maps_no_state_again(monkeypatch):
    """`Symmetric.canon` keeps the states it mapped: replaying a schedule of the graph (a witness, for the cause
    grouping and the report) maps none of them again and gives the same states; past `_CANONS` states the memory is
    dropped, and the same states come out."""
    from pipecheck.search import symmetry
    from pipecheck.search.explore import replay
    from pipecheck.search.footprints import Footprints
    from pipecheck.search.por import Reduced
    model = run(True, True).runs[0].model
    sym = Symmetric(model)
    made: list = []
    canon = sym._canon
    monkeypatch.setattr(sym, "_canon", lambda s: made.append(s) or canon(s))
    system = Reduced(sym, Footprints(model), chains=True)
    state, path, states = system.initial(), [], []
    while succs := system.successors(state):  # a longest schedule: the first successor of every state
        action, state, _ = succs[0]
        path.append(action)
        states.append(state)
    mapped = len(made)
    assert len(path) > 20 and mapped >= len(path)
    steps = replay(system, path)
    assert len(made) == mapped  # every state of the replay was mapped before
    assert steps[-1][1] == states[-1] and len(steps) >= len(path)
    monkeypatch.setattr(symmetry, "_CANONS", 7)
    fresh = Symmetric(model)
    again = replay(Reduced(fresh, Footprints(model), chains=True), path)
    assert [t for _, t, _ in again] == [t for _, t, _ in steps]
    assert 0 < len(fresh._canons) <= 7
