"""Arrivals the reduction may reorder: once-per-round arrives, unit arrivals, balanced tx bytes.

An arrive a thread cannot issue twice in one ring round is left out of the barrier's per-phase
record of arrivers (it can never be a double arrival), so plain single arrivals commute in any
order; landings whose bytes cannot complete a phase before the last of them commute too; a
consumer of a barrier that multicast loads complete on needs the bytes it waits for (the
reduction's `tight` need). tests/test_reductions.py checks on the whole corpus that none of this
changes a verdict.
"""
from __future__ import annotations

from pipecheck.search import por
from pipecheck.search.footprints import Footprints
from pipecheck.model import semantics as S
from pipecheck.search.explore import Limits
from pipecheck.pipeline.verify import Options, verify_file
from conftest import ROOT

RING = (ROOT / "examples" / "ring.pipe").read_text()
RELEASE = "      if thread == 0 { arrive empty[st.index] }\n"
SMALL = (("STAGES", 2), ("K_TILES", 4))


def arrives(result) -> dict[str, list[bool]]:
    """Per thread class, whether each of its arrives is once per ring round."""
    model = result.runs[0].model
    return {model.classes[c].label: [i.once for i in model.code[c] if i.op == "arrive"]
            for c in range(len(model.classes))}


def run(path, **kw):
    kw.setdefault("limits", Limits(max_states=100_000))
    kw.setdefault("overrides", SMALL)
    return verify_file(str(path), Options(**kw))


def test_a_ring_arrive_followed_by_advance_is_once_per_round(spec):
    result = run(spec(RING))
    assert result.verdict == "verified"
    assert all(all(once) for once in arrives(result).values()) and arrives(result)


def test_a_second_arrive_in_the_same_round_is_recorded_and_found(spec):
    result = run(spec(RING.replace(RELEASE, RELEASE * 2)))
    releasing = [once for label, once in arrives(result).items() if label.startswith("consumer") and once]
    assert releasing and all(once == [False, False] for once in releasing)  # both: either may come first
    assert "double-arrive" in {i.code for i in result.all_issues}


def test_a_ring_restarted_in_a_loop_repeats_its_rounds(spec):
    text = RING.replace("    ring st(STAGES)\n    for k in 0 .. K_TILES {\n",
                        "    for k in 0 .. K_TILES {\n      ring st(STAGES)\n")
    assert text != RING
    releasing = [once for label, once in arrives(run(spec(text), limits=Limits(max_states=10))).items()
                 if label.startswith("consumer") and once]
    assert releasing and all(once == [False] for once in releasing)


def test_the_planted_double_arrival_is_still_recorded():
    result = run(ROOT / "examples" / "bugs" / "double_arrive.pipe", overrides=())
    assert arrives(result)["consumer[0] thread 0"] == [False, False]
    assert "double-arrive" in {i.code for i in result.all_issues}


def test_unit_arrivals_commute_past_the_pending_count():
    bar = ("bar", 0)
    loud = {bar: por._LOUD}
    assert not por._conflict(((bar, "u", 1, 0),), ((bar, "u", 1, 0),), loud)
    assert por._conflict(((bar, "c", 1, 0),), ((bar, "c", 1, 0),), loud)
    assert por._conflict(((bar, "u", 1, 0),), ((bar, "r"),), loud)  # a waiter sees which arrival completes


def test_landings_balance_when_no_order_completes_the_phase_early():
    bar = ("bar", 0)
    limit = S.MAX_TX

    def level(owed: int, pending: int, *entries) -> int:
        return por._loudness([(e, 1) for e in entries], {bar: pending, (bar, "tx"): (owed, limit)}).get(bar, 0)

    # the producer's arrive.expect_tx is in: two loads of 64 bytes owe 128, landing in either order
    assert level(128, 0, (bar, "t", 64), (bar, "t", 64)) == por._BALANCED
    # a third landing of the next phase could complete this one early, in some orders
    assert level(128, 0, (bar, "t", 64), (bar, "t", 64), (bar, "t", 64)) == por._COUNTED
    # bytes landed before the arrive.expect_tx (tx below 0): the arrival and the last landing balance
    assert level(-64, 1, (bar, "c", 1, 128), (bar, "t", 64)) == por._BALANCED
    # a thread's own expect_tx / complete_tx: bytes the balance does not follow
    assert level(128, 0, (bar, "t", None), (bar, "t", 64)) == por._COUNTED
    # arrivals still owed beyond these: nothing can complete, everything commutes
    assert level(128, 2, (bar, "c", 1, 0), (bar, "t", 64)) == por._SILENT
    assert not por._conflict(((bar, "t", 64),), ((bar, "t", 64),), {bar: por._BALANCED})
    assert por._conflict(((bar, "t", 64),), ((bar, "r"),), {bar: por._BALANCED})


def test_consumers_wait_for_the_bytes_of_barriers_whose_arrivals_all_expect_them():
    # footprints._tx_least: where every arrival on a barrier array expects a constant number of bytes, a wait on it
    # needs those bytes to land, not just a landing (DeepGEMM's multicast full barriers, and since session 25 every
    # such barrier: with one of a stage's copies frozen, the other does not let the consumer through in a walk);
    # barriers whose arrivals expect nothing (empty) need arrivals only
    deepgemm = run(ROOT / "specs" / "deepgemm_sm90_fp8.pipe", lockstep=True, limits=Limits(max_states=1), overrides=())
    model = deepgemm.runs[0].model
    names = model.layout.bar_names
    least = {names[g].split("[")[0]: v for g, v in enumerate(Footprints(model).tx_least)}
    assert least["cta0.full" if "cta0.full" in least else "full"] == 128 * 128 * 2 + 512
    assert all(v == 0 for n, v in least.items() if "empty" in n)
    coop = run(ROOT / "specs" / "cutlass_sm90_cooperative.pipe", limits=Limits(max_states=1), overrides=())
    model = coop.runs[0].model
    least = {model.layout.bar_names[g]: v for g, v in enumerate(Footprints(model).tx_least)}
    assert {v for n, v in least.items() if n.startswith("full")} == {2 * 128 * 64 * 2}  # BYTES_A + BYTES_B
    assert {v for n, v in least.items() if n.startswith("empty")} == {0}


def test_a_late_wait_commutes_with_arrivals_that_cannot_complete_its_phase():
    """`por._late_waits`: a wait that blocks now and needs k completions runs only after the others' arrivals
    completed k phases; a plain arrival changes what it sees only by completing one more there."""
    bar = ("bar", 0)
    head = ((bar, "u", 1, 0),)

    def late(pending: int, count: int | None, others: list, owed: int = 0) -> int | None:
        budgets = {bar: pending, (bar, "tx"): (owed, S.MAX_TX)}
        if count is not None:
            budgets[(bar, "count")] = count
        return por._late_waits(bar, head, others, budgets)

    # DeepGEMM's empty barrier: 16 a phase, 16 owed, 27 other arrivals in reach: with the head's 28 < 16 + 16, a wait
    # needing one completion commutes with it; one needing none (passing now, `Op.phases` 0) never does
    assert late(16, 16, [((bar, "u", 1, 0), 27)]) == 1
    # 31 others: the head may be the 32nd arrival, completing the second phase while that wait passes
    assert late(16, 16, [((bar, "u", 1, 0), 31)]) == 2
    assert late(16, 16, [((bar, "u", 1, 0), 30)]) == 1
    # no bound where the count is not known (arrive.drop, tcgen05), bytes are owed, or something else is in reach
    assert late(16, None, [((bar, "u", 1, 0), 3)]) is None
    assert late(16, 16, [((bar, "u", 1, 0), 3)], owed=128) is None
    assert late(16, 16, [((bar, "c", 1, 0), 3)]) is None
    assert late(16, 16, [((bar, "t", 64), 1)]) is None
    # another barrier's entries do not count: the head alone cannot complete a phase, every blocked wait commutes
    assert late(16, 16, [((("bar", 1), "c", 1, 64), 1)]) == 0


def test_late_waits_are_on_the_ops_and_free_deepgemm_lanes():
    """A wait that blocks names the completions it needs; with it, DeepGEMM's lanes that arrive apart (no
    --lockstep) are explored in a few thousand states, where the whole space was out of reach."""
    result = run(ROOT / "specs" / "deepgemm_sm90_fp8_store_drained.pipe", overrides=(("TILES", 1), ("K_BLOCKS", 6)),
                 limits=Limits(max_states=20_000))
    (r,) = result.runs
    assert result.verdict == "verified" and r.exploration.complete
    model = r.model
    fp = Footprints(model)
    s = model.initial()
    procs, budgets = fp.processes(s, set())
    assert any(op.phases >= 1 for p in procs for op in p.ops)  # waits that block carry their completions
    # (beside the footprint, which a future keeps from the first state it is seen in: a review found a wait's
    # completions read from there, stale once it passed: tests/data/por/review/stale_shape*.pipe)
    assert all(len(e) == 2 for p in procs for op in p.ops for e in op.footprint if e[0][0] == "bar" and e[1] == "r")
    assert any((("bar", g), "count") in budgets for g in range(len(s.bars)))


def test_a_wgmma_wait_touches_nothing():
    """`mma_wait` only waits for the unit's completed count, which only grows: it has no footprint, passing or not,
    so a passing wait commutes with the completion of the wgmma still in flight."""
    result = run(ROOT / "benchmarks" / "specs" / "pingpong_fixed.pipe",
                 overrides=(("STAGES", 2), ("K_TILES", 2), ("TILES", 2)), limits=Limits(max_states=1))
    model = result.runs[0].model
    fp = Footprints(model)
    s = model.initial()
    waits = [fp.op(s, ("mwait", u, need)) for u in range(len(s.mmas)) for need in (0, 1, 2)]
    assert waits and all(w.footprint == () for w in waits)
    assert [w.needs for w in waits[:3]] == [None, ((("mdone", 0, 0), 1),), ((("mdone", 0, 1), 1),)]
