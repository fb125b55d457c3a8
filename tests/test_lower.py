"""Thread classes and configurations: 128-thread warpgroups become a few counted classes."""
from __future__ import annotations

from pipecheck.pipeline.configurations import config_classes
from pipecheck.lang.lower import resolve_roles
from pipecheck.pipeline.verify import load_checked
from conftest import ROOT


def _load(name: str, **ov):
    sources: dict = {}
    k = load_checked(str(ROOT / name), ov, sources)
    codes, sites = resolve_roles(k, sources)
    return k, codes, sites


def test_3722_splits_lane_zero_from_the_rest():
    k, codes, _ = _load("specs/cutlass_3722.pipe")
    cc = config_classes(k, codes, "any")
    sizes = sorted(len(c.members) for c in cc)
    assert sizes == [1, 31]  # elected lane 0, or one of lanes 1..31 (all equivalent)
    lanes = sorted(cfg.elect[0][1] for c in cc if len(c.members) == 31 for cfg in c.members)
    assert lanes == list(range(1, 32))


def test_classes_of_the_buggy_configuration():
    k, codes, _ = _load("specs/cutlass_3722.pipe")
    bug = next(c for c in config_classes(k, codes, "any") if len(c.members) == 31)
    labels = {cl.label: cl.size for cl in bug.classes}
    assert labels == {
        "producer lanes 0,2-31": 31, "producer lane 1": 1,
        "consumer[0] thread 0": 1, "consumer[0] threads 1-127": 127,
        "consumer[1] thread 0": 1, "consumer[1] threads 1-127": 127,
    }
    assert sum(labels.values()) == 32 + 2 * 128


def test_non_signalling_threads_stay_one_class_across_warps():
    k, codes, _ = _load("examples/ring.pipe")
    cc = config_classes(k, codes, "lowest")[0]
    rest = [cl for cl in cc.classes if cl.unit == "consumer[0]" and cl.size == 127]
    assert len(rest) == 1 and not rest[0].signalling


def test_signalling_threads_split_by_warp(spec):
    path = spec("""
kernel k {
  mbarrier b count 128
  role g warpgroup { arrive b  wait b parity 0 }
}
""")
    sources: dict = {}
    kern = load_checked(str(path), {}, sources)
    codes, _ = resolve_roles(kern, sources)
    classes = config_classes(kern, codes, "lowest")[0].classes
    assert [cl.size for cl in classes] == [32, 32, 32, 32]  # warps are scheduled independently
    assert all(cl.signalling for cl in classes)


def test_elect_lowest_is_one_configuration():
    k, codes, _ = _load("specs/cutlass_3722.pipe")
    cc = config_classes(k, codes, "lowest")
    assert len(cc) == 1 and cc[0].representative.elect == ((0xFFFFFFFF, 0),)


# --- long loops of local steps (issue 19): folded, so threads that only advance cost O(1)

LONG_RING = (ROOT / "examples/ring.pipe").read_text().replace("param K_TILES = 8 in 1..16",
                                                              "param K_TILES = 300000 in 1..300000")


def test_a_loop_that_only_advances_is_folded(tmp_path):
    from pipecheck.model.ir import ADVANCE, BRANCH, LET
    path = tmp_path / "long.pipe"
    path.write_text(LONG_RING)
    sources: dict = {}
    k = load_checked(str(path), {}, sources)
    codes, _ = resolve_roles(k, sources)
    cc = config_classes(k, codes, "lowest")[0]
    idle = next(cl for cl in cc.classes if cl.label == "producer lanes 1-31")
    ops = [i.op for i in idle.program.instrs]
    assert len(ops) < 8 and BRANCH not in ops and ADVANCE not in ops, ops
    folded = [i for i in idle.program.instrs if i.op == LET and i.args[1].args[1].value == 300000]
    assert len(folded) == 1  # the ring advanced K_TILES times at once
    elected = next(cl for cl in cc.classes if cl.label == "producer lane 0")
    assert BRANCH in [i.op for i in elected.program.instrs]  # the lane that loads keeps its loop


def test_a_long_loop_with_visible_steps_is_searched(tmp_path):
    from conftest import cli
    path = tmp_path / "long.pipe"
    path.write_text(LONG_RING)
    code, out, err = cli("verify", str(path), "--max-states", "300")
    assert code == 3 and "million steps" not in err and "stopped by max-states" in out, err


def test_a_loop_that_does_nothing_visible_still_errs(tmp_path):
    # the fold needs constant bounds; a loop bounded by a thread's own choice that does nothing visible
    # for a million steps is still the spec error
    from conftest import cli
    path = tmp_path / "idle.pipe"
    path.write_text("kernel k {\n  role r thread {\n    choose c in 1 .. 2\n    ring st(2)\n"
                    "    for k in 0 .. c * 600000 { advance st }\n  }\n}\n")
    code, _, err = cli("verify", str(path))
    assert code == 2 and "a loop runs over a million steps without a barrier, TMA or read statement" in err
    assert "idle.pipe:5:" in err


def test_short_loops_are_not_folded():
    from pipecheck.lang.lower import FOLD_MIN_TRIPS
    from pipecheck.model.ir import BRANCH
    k, codes, _ = _load("examples/ring.pipe")
    assert k.params[1].value < FOLD_MIN_TRIPS
    cc = config_classes(k, codes, "lowest")[0]
    idle = next(cl for cl in cc.classes if cl.label == "producer lanes 1-31")
    assert BRANCH in [i.op for i in idle.program.instrs]  # what --every merges stays as it is


# --- configurations whose classes pair up in another order are one exploration

LANE0_AND_ELECT = """
kernel k {
  param TILES = 2 in 1..4
  smem tile[2] bytes 64
  mbarrier full[2] count 1
  mbarrier empty[2] count 1
  role producer warp {
    ring st(2, phase = 1)
    for t in 0 .. TILES {
      wait empty[st.index] parity st.phase
      if (1 << lane) == 1 { arrive full[st.index] expect_tx 64 }   # lane 0, as z3 cannot take it
      if elect() { tma_load tile[st.index] tile t bytes 64 barrier full[st.index] }
      advance st
    }
  }
  role consumer thread {
    ring rd(2)
    for t in 0 .. TILES {
      wait full[rd.index] parity rd.phase
      read tile[rd.index] tile t
      arrive empty[rd.index]
      advance rd
    }
  }
}
"""


def test_classes_in_another_order_are_one_configuration_class(spec):
    """Lane 0 stands apart (it posts expect_tx; written with a shift by the lane, which z3 cannot take, so
    every lane is its own z3 class, as `on cta lane` makes them in the CLC GEMM), and so does the elected
    lane: electing lane 1 lists
    [lane 0, lane 1, lanes 2-31], electing lane 5 [lane 0, lanes 1-4,6-31, lane 5]. The two explore
    isomorphic graphs: one configuration class for lanes 1..31, and each member's own classes, explored
    without reductions, give the representative's states and findings."""
    from pipecheck.lang.lower import build_classes
    from pipecheck.model.system import Model
    from pipecheck.model.threads import Config
    from pipecheck.search.explore import explore
    path = spec(LANE0_AND_ELECT)
    sources: dict = {}
    k = load_checked(str(path), {}, sources)
    codes, sites = resolve_roles(k, sources)
    cc = config_classes(k, codes, "any")
    assert sorted(len(c.members) for c in cc) == [1, 31]
    rest = next(c for c in cc if len(c.members) == 31)
    assert sorted(cfg.elect[0][1] for cfg in rest.members) == list(range(1, 32))

    def outcome(classes):
        exp = explore(Model(k, classes, sites))
        return exp.complete, exp.states, exp.transitions, sorted({f.finding.code for f in exp.found})

    orders = {}
    for lane in (1, 2, 5, 31):
        classes = build_classes(k, codes, Config(((0xFFFFFFFF, lane),)), False)
        orders[lane] = [cl.members[0] for cl in classes if cl.role == 0]
        assert outcome(classes) == outcome(rest.classes)
    assert orders[1] != orders[5]  # the elected lane's class sits elsewhere in the list
