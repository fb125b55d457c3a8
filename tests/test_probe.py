"""The probe of the lockstep re-check (search/explore.py `_probe`, `Model.probe_schedules`): two schedules, one move a
state (threads first with asynchronous work last; asynchronous work first); a finding on one answers the re-check's
yes/no question with no search, and the re-check's verdict is the one its search gives."""
from __future__ import annotations

from collections import deque
from dataclasses import replace

import pytest

from pipecheck.pipeline import verify
from pipecheck.pipeline.verify import Options, load_checked, verify_file
from pipecheck.search.explore import Limits
from conftest import ROOT


def _model(name: str, lane: int, lockstep: bool):
    from pipecheck.lang.lower import build_classes, resolve_roles
    from pipecheck.model.system import Model
    from pipecheck.model.threads import Config
    sources: dict = {}
    k = load_checked(str(ROOT / name), {}, sources)
    codes, sites = resolve_roles(k, sources, lockstep)
    classes = build_classes(k, codes, Config(((0xFFFFFFFF, lane),)), False)
    return Model(k, classes, sites, lockstep, meetings=True)


def _expected(succs: list, order: tuple):
    """The move a probe schedule takes among a state's successors (`Model.successors`' order): the first of the
    first kinds in `order` that has one; None where there is none."""
    for kinds in order:
        moves = [m for m in succs if m[0][0] in kinds]
        if moves:
            return moves[0]
    return None


LATE = (("t",), ("x",), ("l", "m", "k"), ("s",))  # threads, exits, landings MMAs and commits, bulk stores
EARLY = (("l", "m", "k"), ("s",), ("t",), ("x",))


@pytest.mark.parametrize("name,lane,lockstep", [
    ("specs/cutlass_3722.pipe", 1, False),
    ("specs/cutlass_3722_fixed.pipe", 0, True),
    ("examples/bugs/no_producer_tail.pipe", 0, False),
    ("examples/bugs/store_reuse.pipe", 0, False),
    ("examples/bugs/tmem_free_no_sync.pipe", 0, True),
    ("examples/epilogue.pipe", 0, False),
])
def test_each_schedule_makes_the_move_its_order_picks(name, lane, lockstep):
    """In every reachable state (breadth-first, the first 1,500) and every state of each schedule itself, the
    model's `late_move` and `early_move` are the moves their orders pick among all the state's successors: the
    same action, state and findings, made alone."""
    model = _model(name, lane, lockstep)
    assert model.probe_schedules() == (model.late_move, model.early_move)
    pairs = ((model.late_move, LATE), (model.early_move, EARLY))
    seen = {model.initial()}
    todo = deque(seen)
    while todo and len(seen) < 1_500:
        s = todo.popleft()
        succs = model.successors(s)
        for move_of, order in pairs:
            assert move_of(s) == _expected(succs, order), s
        for _, t, _ in succs:
            if t not in seen:
                seen.add(t)
                todo.append(t)
    for move_of, order in pairs:
        s, kinds = model.initial(), []
        while (move := move_of(s)) is not None and len(kinds) < 5_000:
            assert move == _expected(model.successors(s), order), s
            kinds.append(move[0][0])
            s = move[1]
        assert move is None  # the schedule ends (every one of these kernels ends or hangs)
        assert "t" in kinds and set(kinds) - {"t"}  # both threads and asynchronous work move on it
        assert kinds[0] == "t"  # (nothing asynchronous is in flight at the start)


def _recheck(name: str, probe: bool) -> verify.Result:
    """The re-check's run (`verify._scheduling_run`'s options) of every configuration at the defaults."""
    limits = Limits(max_states=50_000, stop_at_first=True, depth_first=True, probe=probe)
    return verify_file(str(ROOT / name), Options(lockstep=True, check_scheduling=False, limits=limits, cause_budget=0,
                                                 verdict_only=True))


@pytest.mark.parametrize("name", ["examples/bugs/no_producer_tail.pipe", "examples/bugs/store_reuse.pipe",
                                  "specs/cutlass_sm90_pingpong_bug_early_release.pipe"])
def test_the_probe_answers_the_recheck_as_its_search_does(name):
    with_probe, without = _recheck(name, True), _recheck(name, False)
    assert with_probe.verdict == without.verdict == "findings"
    assert with_probe.issues == [] == without.issues  # a yes/no run: nothing collected, no witness replayed
    probed = [r.exploration for r in with_probe.runs if "probe" in r.exploration.extra]
    assert probed and all(e.found and e.states == e.extra["probe"] + 1 for e in probed)  # no search: one schedule
    assert all("probe" not in r.exploration.extra for r in without.runs)
    # without verdict_only the same run collects its findings as any run does
    full = verify_file(str(ROOT / name), replace(Options(lockstep=True, check_scheduling=False, cause_budget=0),
                                                 limits=Limits(max_states=50_000, stop_at_first=True, probe=True)))
    assert full.verdict == "findings" and full.issues


def test_where_the_probe_shows_nothing_the_search_decides():
    """lane_falls_behind needs lanes to run apart: under --lockstep no schedule shows a finding, the probe's
    included, so the search runs and verifies (and the finding is marked as needing independent scheduling)."""
    name = "examples/bugs/lane_falls_behind.pipe"
    r = _recheck(name, True)
    assert r.verdict == "verified" and all("probe" not in run.exploration.extra for run in r.runs)
    assert all(i.needs_independent_scheduling for i in verify_file(str(ROOT / name)).issues)


def test_the_early_recheck_counts_the_states_of_its_search_alone(tmp_path):
    """The early re-check (`verify.EarlyRecheck`, started before the first finding with the largest budget, then
    told the real one) stops once its search's states pass that budget. The probe's steps are not counted: where no
    schedule shows a finding, it verifies as the re-check started at the first finding does, with the same states
    (lane_falls_behind at K_TILES=100: 1,202 states under a budget of 2,000, while its two schedules take more steps
    than that)."""
    from pipecheck.pipeline.verify import EarlyRecheck, _beside_verdict, _scheduling_budget, _scheduling_run
    text = (ROOT / "examples" / "bugs" / "lane_falls_behind.pipe").read_text()
    assert "in 1..12" in text
    spec = tmp_path / "lane_falls_behind_long.pipe"
    spec.write_text(text.replace("in 1..12", "in 1..400"))
    options = Options(jobs=1, overrides=(("K_TILES", 100),))
    run = verify_file(str(spec), replace(options, check_scheduling=False))
    config = run.issues[0].run.config
    explored = 300
    assert _scheduling_budget(explored) == 2_000
    after = _scheduling_run(str(spec), options, (config,), options.overrides, None, explored)
    assert after.verdict == "verified" and [r.exploration.states for r in after.runs] == [1_202]
    early = EarlyRecheck(str(spec), options, None, config)
    early.found(explored)
    out = early.call()
    assert out == ("verified", 1_202, None) and _beside_verdict(early.tag, out, explored) == "verified"
