"""--jobs: configuration classes explored in forked processes give the report of one process."""
from __future__ import annotations

import os

import pytest

from pipecheck.pipeline import causes, workers
from pipecheck.pipeline.result import Options
from pipecheck.pipeline.verify import verify_file
from pipecheck.search.explore import Limits
from conftest import ROOT, cli

needs_fork = pytest.mark.skipif(not workers.can_fork(), reason="no fork on this platform: --jobs runs one process")


def _runs(result) -> list[tuple]:
    return [(r.config, r.exploration.states, r.exploration.transitions, r.exploration.extra.get("after_first"),
             [(f.finding.key, f.path) for f in r.exploration.found]) for r in result.runs]


@needs_fork
@pytest.mark.parametrize("spec", ["examples/bugs/clc_response_reuse.pipe", "examples/clc_scheduler.pipe",
                                  "specs/cutlass_sm90_pingpong_bug_early_release.pipe"])
def test_the_report_is_the_same_for_every_number_of_processes(spec):
    outs = [cli("verify", str(ROOT / spec), "--format", "json", "--jobs", str(j)) for j in (1, 2, 3)]
    assert outs[0][0] in (0, 1)
    assert outs[1] == outs[0] and outs[2] == outs[0]


@needs_fork
@pytest.mark.parametrize("total", [50, 100, 200])
def test_a_cause_budget_the_earlier_configurations_spent_is_exact(monkeypatch, total):
    """Three configurations, the last two with findings, 60 states past a first finding each, `total` for the spec.
    A search that starts while some of the total is left goes on for all of its 60: with 50 the third gets none
    (the second spent 63), with 100 and 200 both go on. With several processes a search runs ahead with the
    budget it would have if those still out before it spent all of theirs (none where they would use it up),
    and runs again when that was not its budget: the results are the one process's."""
    monkeypatch.setattr(causes, "TOTAL", total)
    path = str(ROOT / "examples/bugs/clc_response_reuse.pipe")
    opts = [Options(jobs=j, cause_budget=60, limits=Limits(stop_at_first=True)) for j in (1, 2, 3)]
    one, *more = (verify_file(path, o) for o in opts)
    past = [r.exploration.extra.get("after_first") for r in one.runs]
    assert past[0] is None and past[1] > 60
    assert (past[2] is None) == (total == 50) and (past[2] is None or past[2] > 60)
    for other in more:
        assert _runs(other) == _runs(one)
        assert [(i.code, i.condition, i.witness.path) for i in other.issues] == \
            [(i.code, i.condition, i.witness.path) for i in one.issues]


@needs_fork
def test_outcomes_come_in_order_and_a_raise_is_one_of_them():
    calls = [lambda: 1, lambda: 2, lambda: (_ for _ in ()).throw(ValueError("third")), lambda: 4]
    out = list(workers.in_order(iter(calls), 2))
    assert [kind for kind, _ in out] == ["ok", "ok", "raise", "ok"]
    assert out[0][1] == 1 and out[1][1] == 2 and out[3][1] == 4 and str(out[2][1]) == "third"


@needs_fork
def test_a_process_that_dies_runs_its_call_here():
    parent = os.getpid()

    def dies_in_a_child():
        if os.getpid() != parent:
            os._exit(9)  # killed before it sends anything back
        return "here"

    out = list(workers.in_order([lambda: "first", dies_in_a_child, lambda: "third"], 3))
    assert out == [("ok", "first"), ("ok", "here"), ("ok", "third")]


def test_one_process_runs_the_calls_here():
    parent = os.getpid()
    assert list(workers.in_order([os.getpid, os.getpid], 1)) == [("ok", parent), ("ok", parent)]


INVALID_POINTS = """
kernel k {
  param N = 2 in 1..4
  mbarrier b[2] count 1
  role p warp {
    for i in 0 .. N {
      if elect() { arrive b[i] }
      wait b[i] parity 0
    }
  }
}
"""


@needs_fork
@pytest.mark.parametrize("args", [("examples/cluster_multicast.pipe", "--all-params"),
                                  ("examples/bugs/wrong_parity.pipe", "--all-params", "--max-states", "60"),
                                  ("INVALID", "--all-params")], ids=["sweep", "stopped-sweep", "invalid-points"])
def test_a_sweep_is_the_same_for_every_number_of_processes(args, spec):
    """The points of --all-params run ahead on the other processes: the same report, also where a limit stops
    the sweep (the points after it are not explored) and where points fail in their searches (index out of
    range at N >= 3, in both configurations of the point: the second is passed over)."""
    path = str(spec(INVALID_POINTS)) if args[0] == "INVALID" else str(ROOT / args[0])
    outs = [cli("verify", path, *args[1:], "--format", "json", "--jobs", str(j)) for j in (1, 2, 3)]
    assert outs[1] == outs[0] and outs[2] == outs[0]
    if args[0] == "INVALID":
        assert outs[0][0] == 1 and outs[0][1].count("out of range") == 2


@needs_fork
@pytest.mark.parametrize("spec,alone", [("examples/bugs/lane_falls_behind.pipe", True),
                                        ("specs/cute_dsl_sm100_persistent_gemm_bug_acc_count.pipe", True),
                                        ("specs/cutlass_sm90_pingpong_bug_early_release.pipe", False)])
def test_the_lockstep_recheck_started_beside_the_search_is_the_one_made_after_it(monkeypatch, spec, alone):
    """The --lockstep re-check of a configuration's findings starts in a child at its first finding (or before it, once
    the search has run a while: verify.EarlyRecheck), and runs while the search goes on past it
    (verify._scheduling_call; with --jobs 2 or more): the report is the one whose re-check
    runs after the search (workers.beside off). Where one configuration has all of its point's findings (`alone`) and the machine has a
    second CPU, the child's verdict is the one used and no re-check runs after the search; where two configurations
    of the point have findings, the re-check covers both and runs after them."""
    from pipecheck.pipeline import verify
    after = []
    run = verify._scheduling_run
    monkeypatch.setattr(verify, "_scheduling_run", lambda *a: after.append(a[2]) or run(*a))

    def report():
        r = verify_file(str(ROOT / spec), Options(limits=Limits(stop_at_first=True), jobs=2))
        return [(i.code, i.finding.key, i.needs_independent_scheduling) for i in r.issues]

    with_child = report()
    rechecked_after = len(after)
    monkeypatch.setattr(workers, "beside", lambda call, tag=None, idle=False: None)
    assert report() == with_child and with_child
    assert len(after) == rechecked_after + 1  # without the child: one re-check after the searches
    if workers.available() >= 2:
        assert rechecked_after == (0 if alone else 1)


@needs_fork
@pytest.mark.parametrize("spec,alone", [("examples/bugs/lane_falls_behind.pipe", True),
                                        ("specs/cute_dsl_sm100_persistent_gemm_bug_acc_count.pipe", True),
                                        ("specs/cutlass_sm90_pingpong_bug_early_release.pipe", False)])
@pytest.mark.parametrize("budget", [None, (1, 0, 50_000)])
def test_a_lockstep_recheck_started_before_the_first_finding_says_what_the_one_after_it_says(monkeypatch, spec, alone,
                                                                                           budget):
    """A search that runs a while without a finding starts the --lockstep re-check of its configuration beside it
    (verify.EarlyRecheck, searches.EARLY_AFTER; here at once), with the largest budget, told the real one at the first
    finding: the report is the one whose re-check runs after the search (a search in the run's own process only:
    where two configurations have findings, none starts). With a budget of one state (`budget`) the
    re-check after the search never verifies: an early one that verified with more states, or went past it, says
    nothing either."""
    from pipecheck.pipeline import searches, verify
    if budget is not None:
        monkeypatch.setattr(verify, "SCHEDULING_BUDGET", budget)

    def report():
        r = verify_file(str(ROOT / spec), Options(limits=Limits(stop_at_first=True), jobs=2))
        return [(i.code, i.finding.key, i.needs_independent_scheduling) for i in r.issues]

    started = []
    beside = workers.beside
    monkeypatch.setattr(workers, "beside", lambda call, tag=None, idle=False: started.append((tag, idle)) or beside(
        call, tag, idle))
    monkeypatch.setattr(searches, "EARLY_AFTER", 0.0)
    with_early = report()
    assert all(idle and tag[1] is None for tag, idle in started)  # the early one, at the lower priority
    assert bool(started) == alone  # (at the first expansion, which finds nothing in these)
    monkeypatch.setattr(workers, "beside", beside)
    monkeypatch.setattr(searches, "EARLY_AFTER", 1e9)  # never: the re-check starts at the first finding, or after
    assert report() == with_early and with_early
    if budget is not None:
        assert not any(needs for _, _, needs in with_early)
    monkeypatch.setattr(workers, "beside", lambda call, tag=None, idle=False: None)
    assert report() == with_early


def test_a_recheck_beside_the_search_is_read_as_the_one_after_it_would_say():
    """verify._beside_verdict: a re-check that ran beside the search counts as the one after it, except where its own
    clock or memory stopped it, or it met an error (it may have gone past the budget, where the one after never goes):
    then the one after the search runs (None). One started before the first finding (tag's states None) ran with the
    largest budget: its 'verified' counts only within the budget the first finding sets (5 x 1,000 states here)."""
    from pipecheck.pipeline import verify
    early, first = ("cfg", None), ("cfg", 1_000)
    budget = verify._scheduling_budget(1_000)
    assert verify._beside_verdict(early, ("verified", budget, None), 1_000) == "verified"
    assert verify._beside_verdict(early, ("verified", budget + 1, None), 1_000) == "past-budget"
    assert verify._beside_verdict(first, ("verified", 0, None), 1_000) == "verified"
    for tag in (early, first):
        assert verify._beside_verdict(tag, ("findings", 10, None), 1_000) == "findings"
        assert verify._beside_verdict(tag, ("inconclusive", 10, "max-states"), 1_000) == "inconclusive"
        assert verify._beside_verdict(tag, ("inconclusive", 10, "timeout"), 1_000) is None
        assert verify._beside_verdict(tag, ("inconclusive", 10, "max-memory"), 1_000) is None
    assert verify._beside_verdict(early, ("error", 0, None), 1_000) is None
