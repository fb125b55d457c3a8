"""The reductions never change what is found: reduced and full exploration agree on every spec.

For each spec (at small parameters, so the full state space stays small) the plain search
(no partial-order reduction, no symmetry, visited states kept as tuples) and each reduced
search run to completion, past findings too, and must report the same verdict and the same
set of (code, line) findings. Persistent-set search preserves every reachable finding of an
acyclic system (search/por.py) and symmetry only merges isomorphic states (search/symmetry.py); this test
checks that the model's footprints and renamings make those theorems apply. Where the plain
search past findings is too large, they must at least agree on the verdict.

The counter abstraction (threads with the same code move as one counted class) is compared
with one process per warp on every spec (with the other reductions on: one process per
warp without them is beyond the limit on most specs; where even the reduced per-warp search
past findings is beyond it, as on examples/bugs/wrong_parity.pipe, the verdicts must agree), and with one process per thread on
the benchmark ring at its smallest parameters, where 160 threads are 160 processes. The
compact encoding must visit exactly the states the tuples do (compared on the reduced
search, where a second run is cheap).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from pipecheck.search.explore import Limits
from pipecheck.pipeline.verify import Options, load_checked, verify_file
from conftest import ROOT, corpus

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
              "por": dict(reduce=True, symmetry=False),
              "por+symmetry, a process per warp": dict(reduce=True, symmetry=True, counter="warps")}


def run(path: Path, ov: tuple, past: bool, reduce: bool = False, symmetry: bool = False, counter: str = "classes",
        compact: bool = True):
    limits = Limits(max_states=FULL_LIMIT, stop_at_first=not past, past_findings=past)
    return verify_file(str(path), Options(overrides=ov, limits=limits, reduce=reduce, symmetry=symmetry,
                                          counter=counter, compact=compact))


def findings(r) -> set:
    return {(i.code, r.sites[i.finding.site].span.line if i.finding.site >= 0 else 0) for i in r.all_issues}


@pytest.mark.parametrize("path", corpus(unreduced=True))
def test_reductions_preserve_findings(path: Path):
    ov = small(path)
    full = run(path, ov, past=True, compact=False)
    if full.stopped is None:
        for name, how in REDUCTIONS.items():
            reduced = run(path, ov, past=True, **how)
            if reduced.stopped is not None and "counter" in how:
                # a process per warp can be beyond the limit past findings: the verdict must still agree
                reduced = run(path, ov, past=False, **how)
                assert reduced.stopped is None and reduced.verdict == full.verdict, name
                continue
            assert (reduced.verdict, findings(reduced)) == (full.verdict, findings(full)), name
            if name == "por+symmetry":  # the compact visited set visits exactly the states the tuples do
                tuples = run(path, ov, past=True, compact=False, **how)
                assert (tuples.states, tuples.verdict, findings(tuples)) == \
                    (reduced.states, reduced.verdict, findings(reduced))
    else:  # too large to list every finding: the verdicts must still agree
        full = run(path, ov, past=False, compact=False)
        if full.stopped is not None:  # e.g. the SM100 GEMM: its unreduced space passes the limit even when small
            pytest.skip(f"{path.name}: the unreduced search passes {FULL_LIMIT} states even at {dict(ov)}")
        for name, how in REDUCTIONS.items():
            reduced = run(path, ov, past=False, **how)
            assert reduced.verdict == full.verdict == "findings", name


REVIEW_SPECS = sorted((ROOT / "tests" / "data" / "por" / "review").glob("*.pipe"))


@pytest.mark.parametrize("path", REVIEW_SPECS, ids=lambda p: p.name)
def test_reductions_preserve_findings_on_the_review_specs(path: Path):
    """Small specs an adversarial review wrote against the reduction's rules (a wait's completions, `mma_wait`, lanes
    lapping a barrier, tx bytes in some rounds, arrive.drop, re-init, tcgen05 ordering): the reduced search finds what
    the plain one does, past findings, by default and under --lockstep."""
    ov = small(path)
    for lockstep in (False, True):
        def go(reduce: bool):
            limits = Limits(max_states=FULL_LIMIT, past_findings=True)
            return verify_file(str(path), Options(overrides=ov, limits=limits, reduce=reduce, symmetry=reduce,
                                                  lockstep=lockstep, check_scheduling=False))
        full = go(False)
        assert full.stopped is None, path.name
        reduced = go(True)
        assert (reduced.verdict, findings(reduced)) == (full.verdict, findings(full)), (path.name, lockstep)


def lockstep_matters(path: Path, ov: tuple) -> bool:
    """Whether --lockstep moves some warp's classes together (otherwise it is the default model, tested above)."""
    from pipecheck.pipeline.configurations import config_classes
    from pipecheck.lang.lower import resolve_roles
    from pipecheck.model.system import Model
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
        if full.stopped is not None:  # e.g. ThunderKittens: three warpgroups of warps that write and fence
            pytest.skip(f"{path.name}: the unreduced lockstep search passes {FULL_LIMIT} states even at {dict(ov)}")
        assert go(False, True).verdict == full.verdict == "findings"


@pytest.mark.parametrize("variant", ["fixed", "bug3722"])
def test_thread_processes_find_the_same(variant: str):
    """One process per thread (no counter abstraction at all) against the counted classes."""
    path = ROOT / "benchmarks" / "specs" / f"ring_{variant}.pipe"
    ov = (("STAGES", 1), ("K_TILES", 1), ("CONSUMERS", 1))
    counted = run(path, ov, past=True, reduce=True, symmetry=True)
    threads = run(path, ov, past=True, reduce=True, symmetry=True, counter="threads")
    assert threads.stopped is None
    assert sum(len(r.model.classes) for r in threads.runs) > 10 * sum(len(r.model.classes) for r in counted.runs)
    assert (threads.verdict, findings(threads)) == (counted.verdict, findings(counted))
    assert counted.verdict == ("verified" if variant == "fixed" else "findings")


@pytest.mark.parametrize("path", sorted((ROOT / "tests" / "data" / "reductions").glob("*.pipe")), ids=lambda p: p.stem)
def test_reductions_on_found_disagreements(path: Path):
    """Specs on which a reduction once lost a finding (each names what was lost): every reduction finds
    what the plain search finds."""
    full = run(path, (), past=True, compact=False)
    assert full.stopped is None and full.verdict == "findings"
    for name, how in REDUCTIONS.items():
        reduced = run(path, (), past=True, **how)
        assert (reduced.verdict, findings(reduced)) == (full.verdict, findings(full)), name


def _model(name: str, meetings: bool, lane: int):
    from pipecheck.lang.lower import build_classes, resolve_roles
    from pipecheck.model.system import Model
    from pipecheck.model.threads import Config
    sources: dict = {}
    k = load_checked(str(ROOT / name), {}, sources)
    codes, sites = resolve_roles(k, sources)
    classes = build_classes(k, codes, Config(((0xFFFFFFFF, lane),)), False)
    return Model(k, classes, sites, meetings=meetings)


def test_a_warp_meeting_every_lane_stands_at_is_one_move():
    """#3722 electing lane 1: the producer warp is two classes (lane 1, lanes 0,2-31) that both stand at the first
    elect(). As a meeting (Model.meeting) their arrivals are one move that passes all 32 lanes; without, each class
    arrives on its own and the first waits for the other."""
    def producer_moves(meetings: bool) -> tuple:
        model = _model("specs/cutlass_3722.pipe", meetings, 1)
        s = model.initial()
        producers = [c for c, cl in enumerate(model.classes) if cl.role == 0]
        assert len(producers) == 2
        return model, s, [(a, t) for a, t, _ in model.successors(s) if a[0] == "t" and a[1] in producers]

    model, s, moves = producer_moves(True)
    assert len(moves) == 1
    (action, after), = moves
    leader = model.meeting(s, action[1], action[2])
    assert leader is not None and len(leader) == 2 and leader[0] == (action[1], action[2])
    assert after.colls == ()  # the meeting is over: nobody waits at it
    for c in (c for c, cl in enumerate(model.classes) if cl.role == 0):  # both classes are past the elect
        (pc, _), _ = after.locs[c][0]
        assert model.code[c][pc].site != model.code[c][s.locs[c][0][0][0]].site
    _, _, apart = producer_moves(False)
    assert len(apart) == 2  # each class's own arrival


def test_a_warp_meeting_waits_for_a_lane_elsewhere():
    """Where a lane of the warp is elsewhere (#3722: lane 1 waits on empty while the others reach the second
    elect()), the lanes there arrive on their own, as without meetings."""
    model = _model("specs/cutlass_3722.pipe", True, 1)
    from pipecheck.search.explore import explore
    exp = explore(model, Limits(stop_at_first=True))
    assert exp.found and {f.finding.code for f in exp.found} == {"hang"}
    plain = explore(_model("specs/cutlass_3722.pipe", False, 1), Limits(stop_at_first=True))
    assert {f.finding.code for f in plain.found} == {"hang"}
    # the meeting takes one move where the plain search takes two, once per elect() every lane reaches
    assert len(exp.found[0].path) < len(plain.found[0].path)


@pytest.mark.parametrize("name", ["specs/cutlass_3722.pipe", "specs/cutlass_3722_fixed.pipe"])
def test_a_private_run_is_one_move(name):
    """A thread group that alone is persistent runs on through its reads and passing waits in one move
    (search/chains.py): the same findings and terminal states as the persistent-set search that stops in
    every state, fewer states, and each run's steps replay one by one for the report."""
    from pipecheck.search.explore import CHAIN, explore, replay
    from pipecheck.search.footprints import Footprints
    from pipecheck.search.por import Reduced
    model = _model(name, True, 1)
    every = explore(Reduced(model, Footprints(model)), Limits(past_findings=True))
    runs = explore(Reduced(model, Footprints(model), chains=True), Limits(past_findings=True))
    assert runs.complete and every.complete
    assert {(f.finding.code, f.finding.site) for f in runs.found} == {(f.finding.code, f.finding.site)
                                                                      for f in every.found}
    assert runs.terminals == every.terminals
    assert runs.extra["chained"] > 0 and runs.states < every.states
    for f in runs.found:
        steps = replay(model, f.path)
        assert len(steps) == f.steps and all(a[0] != CHAIN for a, _, _ in steps)
        if any(a[0] == CHAIN for a in f.path):
            assert f.steps > len(f.path)
        assert steps[-1][2] or f.terminal  # the last step raised the finding


@pytest.mark.parametrize("name,ov", [("benchmarks/specs/pingpong_bug_release_before_read.pipe",
                                      {"STAGES": 3, "K_TILES": 3, "TILES": 2}),
                                     ("examples/epilogue.pipe", {})])
def test_shortcuts_of_the_closure_are_exact(name, ov):
    """The closure's two shortcuts (search/por.py) change nothing it computes: (1) the reach of processes whose
    resources the others' first runs already supply (`_saturated`, e.g. one of two loads landing on one barrier) is
    the walk of everyone less them (`_without`), entry for entry; (2) a seed whose head clashes with another enabled
    head (`_clashes`) never closes alone. Checked in every state of the reduced search."""
    from pipecheck.search import por
    from pipecheck.search.explore import explore
    from pipecheck.search.footprints import Footprints
    from pipecheck.lang.lower import build_classes, resolve_roles
    from pipecheck.model.system import Model
    from pipecheck.model.threads import Config
    sources: dict = {}
    k = load_checked(str(ROOT / name), ov, sources)
    codes, sites = resolve_roles(k, sources)
    model = Model(k, build_classes(k, codes, Config(((0xFFFFFFFF, 0),)), False), sites)
    fp = Footprints(model)
    seen = {"derived": 0, "clash": 0}

    class Checked(por.Reduced):
        def expand(self, state, recent=()):
            procs, budgets = fp.processes(state, {fp.process_of(a) for a, _, _ in model.successors(state)})
            ix = por._Index(procs, self.flat)
            for p in procs:
                frozen = frozenset((p.key,))
                if por._saturated(ix, frozen):
                    seen["derived"] += 1
                    keys = ix.keys
                    live = [(g, [i for i in m if keys[i] not in frozen]) for g, m in enumerate(ix.kinds)]
                    live = [(g, m) for g, m in live if m]
                    avail, ats = por._walk(ix, live)
                    pos = [(ix.kind_plan[g][r - 1][2] if r else 0, m) for (g, m), r in zip(live, ats)]
                    d_avail, d_pos, d_unbounded = por._without(ix, frozen)
                    assert d_pos == pos
                    assert d_avail + [0] * (len(avail) - len(d_avail)) == avail
                    assert d_unbounded == [i for (g, m), r in zip(live, ats) if r == len(ix.kind_plan[g])
                                           and not ix.kind_whole[g] for i in m]
                if p.enabled and por._clashes(ix, p) is not None:
                    seen["clash"] += 1
                    assert por._close(ix, frozen, budgets, 2) is None
            return super().expand(state, recent)

    exp = explore(Checked(model, fp), Limits(past_findings=True))
    assert exp.complete and seen["derived"] > 0 and seen["clash"] > 0


@pytest.mark.parametrize("name", ["benchmarks/specs/pingpong_fixed.pipe",
                                  "benchmarks/specs/pingpong_bug_release_before_read.pipe"])
def test_lengthened_futures_find_the_same(name):
    """With a horizon so short that walks run past the ends of the futures, the reduction looks again with longer
    ones where a thread group's closure took processes in for that alone (`Reduced._lengthened`), and keeps the
    smaller set: it does so in some states here, and the findings and terminal states stay the plain search's."""
    from pipecheck.lang.lower import build_classes, resolve_roles
    from pipecheck.model.system import Model
    from pipecheck.model.threads import Config
    from pipecheck.search.explore import explore
    from pipecheck.search.footprints import Footprints
    from pipecheck.search.por import Reduced
    sources: dict = {}
    k = load_checked(str(ROOT / name), {"STAGES": 2, "K_TILES": 2, "TILES": 1}, sources)
    codes, sites = resolve_roles(k, sources)
    model = Model(k, build_classes(k, codes, Config(((0xFFFFFFFF, 0),)), False), sites)
    model.horizon = 6  # (with 8, the precise bytes a wait needs, footprints._tx_least, leave nothing to lengthen)
    limits = Limits(max_states=FULL_LIMIT, past_findings=True)
    reduced = explore(Reduced(model, Footprints(model), chains=True), limits)
    plain = explore(model, limits)
    assert reduced.complete and plain.complete
    assert reduced.extra["lengthened"] > 0
    assert {(f.finding.code, f.finding.site) for f in reduced.found} == {(f.finding.code, f.finding.site)
                                                                         for f in plain.found}
    assert reduced.terminals == plain.terminals


def test_a_size_next_to_the_benchmarks_stays_a_path():
    """pingpong fixed 7/16/8, next to the benchmark's 7/15/8: the consumers' futures end at the horizon where a walk
    with the producer frozen runs on through the stages already loaded, so the producer's closure took them in and
    the graph was 25,161 states wide. With those futures lengthened it is a path again (2,377 states, depth 2,098)."""
    import io
    import json
    from pipecheck.cli import run as cli_run
    out = io.StringIO()
    code = cli_run(["verify", str(ROOT / "benchmarks/specs/pingpong_fixed.pipe"), "-D", "STAGES=7", "-D", "K_TILES=16",
                    "-D", "TILES=8", "--max-states", "3000", "--jobs", "1", "--format", "json"], out, io.StringIO())
    data = json.loads(out.getvalue())
    assert code == 0 and data["verdict"] == "verified"
    assert data["stats"]["states"] <= 2_500


def _json_run(spec: str, *args: str) -> dict:
    import io
    import json
    from pipecheck.cli import run as cli_run
    out = io.StringIO()
    cli_run(["verify", str(ROOT / spec), *args, "--jobs", "1", "--format", "json"], out, io.StringIO())
    return json.loads(out.getvalue())


@pytest.mark.parametrize("variant", ["fixed", "bug_early_acc_release"])
def test_the_umma_family_keeps_the_verdict_of_the_search_without_reductions(variant):
    """The benchmark's third family (benchmarks/specs/umma_*.pipe, a Blackwell UMMA GEMM), which the reductions were not
    tuned on: at a size the search without them finishes (one accumulator stage, so the second tile reuses it), the
    same verdict and findings with and without them."""
    size = ("-D", "STAGES=1", "-D", "K_TILES=1", "-D", "TILES=2", "-D", "ACC_STAGES=1", "-D", "EPI=1")
    reduced = _json_run(f"benchmarks/specs/umma_{variant}.pipe", *size)
    plain = _json_run(f"benchmarks/specs/umma_{variant}.pipe", *size, "--no-reduction", "--no-symmetry")
    assert reduced["verdict"] == plain["verdict"] == ("verified" if variant == "fixed" else "findings")
    assert {f["code"] for f in reduced["findings"]} == {f["code"] for f in plain["findings"]}
    assert reduced["stats"]["states"] * 20 < plain["stats"]["states"]


def test_two_epilogue_warpgroups_fence_only_their_own_slices():
    """footprints._written: a fence touches the unfenced-write records of the buffers its class may write. In
    `write D[instance][sd.index]` the instance is a constant of each role instance's classes, so a warpgroup's fence
    names its own two D buffers, not the whole array: the two epilogue warpgroups' fences commute with each other's
    stores, and the umma family with two of them stays near a path (4/8/4: 61,252 states before, under 1,000 after)."""
    from pipecheck.pipeline.verify import verify_file
    from pipecheck.search.footprints import Footprints
    overrides = (("STAGES", 2), ("K_TILES", 2), ("TILES", 2), ("EPI", 2))
    result = verify_file(str(ROOT / "benchmarks/specs/umma_fixed.pipe"), Options(overrides=overrides))
    model = result.runs[0].model
    written = Footprints(model).written
    by_instance: dict = {}
    for c, cl in enumerate(model.classes):
        if cl.label.startswith("epilogue["):
            by_instance.setdefault(cl.instance, set()).update(written[c])
    assert sorted(by_instance) == [0, 1]
    assert len(by_instance[0]) == len(by_instance[1]) == 2 and not by_instance[0] & by_instance[1]
    data = _json_run("benchmarks/specs/umma_fixed.pipe", "-D", "STAGES=4", "-D", "K_TILES=8", "-D", "TILES=4",
                     "-D", "EPI=2", "--max-states", "5000")
    assert data["verdict"] == "verified" and data["stats"]["states"] < 1_500


def test_the_branches_of_a_state_that_offered_several_processes_try_the_others_first():
    """por.Reduced.expand: where several processes are offered, each successor's seed order starts with the other
    processes offered (so that each branch takes the others' moves next where they are alone persistent, and the
    branches meet again); with one process offered, one order for every successor."""
    from pipecheck.pipeline.verify import verify_file
    from pipecheck.search.por import Reduced
    from pipecheck.search.footprints import Footprints
    from pipecheck.search.explore import explore
    result = verify_file(str(ROOT / "specs/cutlass_sm90_cooperative.pipe"), Options(elect="lowest"))
    model = result.runs[0].model
    seen = {"dict": 0, "tuple": 0}

    class Checked(Reduced):
        def expand(self, state, recent=()):
            succ, orders, note = super().expand(state, recent)
            offered = {self.describer.process_of(a) for a, _, _ in succ}
            if len(offered) > 1:
                assert isinstance(orders, dict) and set(orders) == {a for a, _, _ in succ}
                for a, _, _ in succ:
                    mine = self.describer.process_of(a)
                    assert set(orders[a][:len(offered) - 1]) == offered - {mine}
                seen["dict"] += 1
            else:
                assert isinstance(orders, tuple)
                seen["tuple"] += 1
            return succ, orders, note

    run = result.runs[0]
    exp = explore(Checked(run.system, Footprints(model), chains=True), Limits(max_states=FULL_LIMIT))
    assert exp.complete and seen["dict"] > 0 and seen["tuple"] > 0
    assert exp.states == run.exploration.states  # the same graph as the pipeline's own search
