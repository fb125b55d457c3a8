"""--every K: the loop-offset abstraction verifies every value of a loop bound in one exploration.

The verdict must agree with the ordinary runs at each K (a bug that needs K > STAGES is found, at
the smallest K that has it; a correct ring verifies), its state count must not depend on K, and a
spec outside the abstraction's rules is refused by name with exit code 2."""
from __future__ import annotations

import json

import pytest

from conftest import ROOT, cli
from pipecheck.pipeline.verify import Options, verify_file

RING = ROOT / "benchmarks" / "specs" / "ring_fixed.pipe"
RING_BUG = ROOT / "benchmarks" / "specs" / "ring_bug3722.pipe"
RELEASE_AT_END = ROOT / "specs" / "ring_bug_release_at_end.pipe"
DATA = ROOT / "tests" / "data" / "every"

NO_ACQUIRE = """
kernel no_acquire {
  arch sm_90
  param STAGES = 2 in 1..8
  param K = 2 in 1..64
  smem A[STAGES] bytes 1024
  mbarrier full[STAGES] count 1
  mbarrier empty[STAGES] count 1
  role producer warp {
    ring st(STAGES, phase = 1)
    if lane == 0 {
      for k in 0 .. K {
        arrive full[st.index] expect_tx 1024
        tma_load A[st.index] tile k bytes 1024 barrier full[st.index]
        advance st
      }
    }
  }
  role consumer warpgroup {
    ring st(STAGES)
    for k in 0 .. K {
      wait full[st.index] parity st.phase
      read A[st.index] tile k
      if thread == 0 { arrive empty[st.index] }
      advance st
    }
  }
}
"""


def _first_finding_k(path, name: str, lo: int, hi: int, overrides=()) -> tuple[int | None, set]:
    for k in range(lo, hi + 1):
        r = verify_file(str(path), Options(overrides=tuple(overrides) + ((name, k),), check_scheduling=False))
        if r.verdict == "findings":
            return k, {i.code for i in r.all_issues}
    return None, set()


@pytest.mark.parametrize("path,overrides,upto", [
    (RING, (("STAGES", 2), ("CONSUMERS", 1)), 9),
    (RING_BUG, (("STAGES", 2), ("CONSUMERS", 1)), 3),
    (RELEASE_AT_END, (("STAGES", 2),), 6),
    (RELEASE_AT_END, (("STAGES", 3),), 6),
    (DATA / "two_loops.pipe", (), 6),
    (DATA / "const_after.pipe", (), 6),
    (DATA / "end_past_lo.pipe", (), 26),
], ids=["ring-fixed", "ring-bug3722", "release-at-end-2", "release-at-end-3", "two-loops", "const-after",
        "end-past-lo"])
def test_every_agrees_with_each_k(path, overrides, upto):
    every = verify_file(str(path), Options(overrides=overrides, every="K_TILES", check_scheduling=False))
    want_k, want_codes = _first_finding_k(path, "K_TILES", every.every.lo, upto, overrides)
    assert every.every.witness_k == want_k
    if want_k is None:
        assert every.verdict == "verified"
    else:
        assert every.verdict == "findings"
        assert {i.code for i in every.all_issues} & want_codes
        assert set(every.every.codes) & want_codes


def test_a_bug_past_the_ring_is_found_at_its_smallest_k(tmp_path):
    spec = tmp_path / "no_acquire.pipe"
    spec.write_text(NO_ACQUIRE)
    # the default K = STAGES never reuses a stage: the ordinary run verifies
    assert verify_file(str(spec), Options(check_scheduling=False)).verdict == "verified"
    r = verify_file(str(spec), Options(every="K", check_scheduling=False))
    assert r.verdict == "findings" and r.every.witness_k == 3
    assert r.params["K"] == 3
    assert _first_finding_k(spec, "K", 1, 3)[0] == 3


def test_state_count_does_not_depend_on_k(tmp_path):
    text = RING.read_text()
    counts = []
    for rng in ("1..16", "1..64", "1..200"):
        p = tmp_path / f"ring_{rng.replace('..', '_')}.pipe"
        p.write_text(text.replace("K_TILES   = 16 in 1..64", f"K_TILES   = 16 in {rng}"))
        r = verify_file(str(p), Options(overrides=(("STAGES", 2), ("CONSUMERS", 1)), every="K_TILES"))
        assert r.verdict == "verified"
        counts.append(r.every.states)
    assert len(set(counts)) == 1
    # the ordinary runs grow with K
    small, large = (verify_file(str(RING), Options(overrides=(("STAGES", 2), ("CONSUMERS", 1), ("K_TILES", k))))
                    for k in (8, 32))
    assert large.states > small.states


@pytest.mark.parametrize("body,why", [
    ("arrive full[st.index] expect_tx 1024 + K", "upper bound of a `for` loop"),
    ("arrive full[st.index] expect_tx 1024 * K", "upper bound of a `for` loop"),
    ("if k == 0 { arrive full[st.index] expect_tx 1024 } else { arrive full[st.index] expect_tx 1024 }",
     "a loop counter is used other than in a tile tag"),
    ("init empty[st.index] count 1\n        arrive full[st.index] expect_tx 1024", "'init' inside the loop"),
])
def test_refused_by_name(tmp_path, body, why):
    text = NO_ACQUIRE.replace("arrive full[st.index] expect_tx 1024", body, 1)
    p = tmp_path / "r.pipe"
    p.write_text(text)
    code, out, err = cli("verify", str(p), "--every", "K")
    assert code == 2
    assert why in err and "r.pipe:" in err and "[every]" in err


@pytest.mark.parametrize("name,why", [
    ("kminus1", "used other than in a tile tag"),  # tile k - 1 meets the EMPTY tag when k is shifted to 0
    ("if", "other than as the upper bound"),  # `if K_TILES < 3` folds the same at the two largest values
    ("fold", "other than as the upper bound"),  # for k in 0 .. max(K_TILES, 3)
    ("choose_tag", "neither a loop counter"),  # tile x from a register on a buffer whose tags follow k
    ("k0_const", "other than K_TILES + constant (at K_TILES = 0)"),  # max(K_TILES, 1): differs only at 0
])
def test_review_holes_refused(name, why):
    code, _, err = cli("verify", str(DATA / f"{name}.pipe"), "--every", "K_TILES")
    assert code == 2 and why in err and "[every]" in err


def test_nested_loop_refused(tmp_path):
    text = NO_ACQUIRE.replace("    for k in 0 .. K {\n      wait", "    for t in 0 .. 2 {\n    for k in 0 .. K {\n      wait")
    text = text.replace("      advance st\n    }\n  }\n}", "      advance st\n    }\n    }\n  }\n}")
    p = tmp_path / "n.pipe"
    p.write_text(text)
    code, out, err = cli("verify", str(p), "--every", "K")
    assert code == 2 and "inside another loop" in err


def test_usage_errors(tmp_path):
    p = tmp_path / "u.pipe"
    p.write_text(NO_ACQUIRE)
    code, _, err = cli("verify", str(p), "--every", "K", "-D", "K=4")
    assert code == 2 and "drop -D K" in err
    code, _, err = cli("verify", str(p), "--every", "NOPE")
    assert code == 2 and "no parameter 'NOPE'" in err


def test_json_says_every(tmp_path):
    code, out, _ = cli("verify", str(RELEASE_AT_END), "--every", "K_TILES", "-D", "STAGES=2", "--format", "json")
    data = json.loads(out)
    assert code == 1 and data["every"]["witness"] == 3 and data["every"]["found"] == ["hang"]
    assert data["params"]["K_TILES"] == 3
    code, out, _ = cli("verify", str(RING), "--every", "K_TILES", "-D", "STAGES=2", "-D", "CONSUMERS=1",
                       "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "verified" and data["every"]["witness"] is None
    code, out, _ = cli("verify", str(RING), "--every", "K_TILES", "-D", "STAGES=2", "-D", "CONSUMERS=1")
    assert "verified for every K_TILES in 1..64" in out


def _loop_param(path) -> str | None:
    from pipecheck.pipeline.verify import load_checked
    names = [p.name for p in load_checked(str(path), {}, {}).params]
    return next((n for n in ("K_TILES", "K_BLOCKS", "N_BLOCKS", "K") if n in names), None)


@pytest.mark.parametrize("path", [p for p in __import__("conftest").SPEC_FILES if _loop_param(p)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_corpus_every_is_refused_or_agrees(path):
    """On every spec of the corpus with a loop bound: --every is refused by name (exit 2), or it finds
    something exactly when an ordinary run at some K does, at the first such K (STAGES = 2)."""
    from pipecheck.core.diagnostics import SpecError
    from pipecheck.pipeline.verify import load_checked
    name = _loop_param(path)
    params = {p.name: p for p in load_checked(str(path), {}, {}).params}
    ov = (("STAGES", max(2, params["STAGES"].lo or 2)),) if "STAGES" in params else ()
    try:
        r = verify_file(str(path), Options(overrides=ov, every=name, check_scheduling=False))
    except SpecError as exc:
        assert {d.code for d in exc.diagnostics} <= {"every"}, exc
        return
    if r.every.witness_k is None and r.static:  # checks over parameters alone (tensor maps, bytes) speak for every K
        assert r.verdict == "findings" and not r.every.codes
        return
    hi = min(params[name].hi or 12, r.every.lo + 8)
    want, _ = _first_finding_k(path, name, r.every.lo, hi, ov)
    if r.every.witness_k is None and want is None:
        assert r.verdict == "verified"
    else:
        assert r.every.witness_k == want


# ---------------------------------------------------------------- persistent kernels: --every over the tile loop

PERSISTENT = DATA / "persistent.pipe"
_DRAIN = "      if lane == 0 { wait_group_read STAGES_D - 1 }\n"


@pytest.mark.parametrize("old,new,want", [
    (None, None, None),
    (_DRAIN, "", "store-reuse"),  # no drain before a store stage is rewritten: from the third tile on
    (_DRAIN, _DRAIN.replace("STAGES_D - 1", "STAGES_D"), "store-reuse"),  # one store too many in flight
    ("        syncwarp\n        if lane == 0 { arrive empty", "        if lane == 0 { arrive empty", "overwrite"),
], ids=["fixed", "no-drain", "drain-one-short", "release-before-read"])
def test_every_tiles_agrees_with_each_tile_count(tmp_path, old, new, want):
    """A tile loop around the K loop (tags `t * K_TILES + k`), bulk-store groups, rings of two rates: the
    folded run over TILES finds a bug exactly when some tile count has it, at the smallest such count."""
    path = PERSISTENT
    if old is not None:
        text = PERSISTENT.read_text()
        assert old in text
        path = tmp_path / "p.pipe"
        path.write_text(text.replace(old, new, 1))
    every = verify_file(str(path), Options(every="TILES", check_scheduling=False))
    want_k, want_codes = _first_finding_k(path, "TILES", 1, 6)
    assert every.every.witness_k == want_k
    if want is None:
        assert want_k is None and every.verdict == "verified"
    else:
        assert want in want_codes and every.verdict == "findings"
        assert set(every.every.codes) & want_codes


def test_every_tiles_state_count_does_not_depend_on_the_range(tmp_path):
    counts = []
    for rng in ("1..8", "1..64"):
        p = tmp_path / f"p_{rng.replace('..', '_')}.pipe"
        p.write_text(PERSISTENT.read_text().replace("TILES    = 2 in 1..8", f"TILES    = 2 in {rng}"))
        r = verify_file(str(p), Options(every="TILES"))
        assert r.verdict == "verified"
        counts.append(r.every.states)
    assert len(set(counts)) == 1


@pytest.mark.parametrize("old,new,why", [
    ("    for t in 0 .. TILES {\n      if elect()", "    for t in 0 .. (TILES + 1) / 2 {\n      if elect()",
     "other than as the upper bound"),  # a pingpong warpgroup's share of the tiles
    ("tile t * K_TILES + k bytes", "tile t * 3 + k bytes", "different strides"),
    ("tile t * K_TILES + k bytes", "tile t * K_TILES - k bytes", "used other than in a tile tag"),
    ("tile t * K_TILES + k bytes", "tile t * K_TILES + k - 1 bytes", "used other than in a tile tag"),  # k from 0
    ("    if lane == 0 { wait_group_read 0 }", "    if TILES < 3 { wait_group_read 0 }", "upper bound of a `for`"),
])
def test_every_tiles_refused_by_name(tmp_path, old, new, why):
    text = PERSISTENT.read_text()
    assert old in text
    p = tmp_path / "r.pipe"
    p.write_text(text.replace(old, new, 1))
    code, _, err = cli("verify", str(p), "--every", "TILES")
    assert code == 2 and why in err and "[every]" in err, err


def test_every_tiles_takes_a_branch_the_whole_range_agrees_on(tmp_path):
    """`if TILES > 0` is true at every value of 1..8 (CUTLASS's store tail): folded the same at each."""
    text = PERSISTENT.read_text().replace("    if lane == 0 { wait_group_read 0 }",
                                          "    if TILES > 0 { if lane == 0 { wait_group_read 0 } }")
    p = tmp_path / "b.pipe"
    p.write_text(text)
    assert verify_file(str(p), Options(every="TILES")).verdict == "verified"


def test_every_tiles_on_fa3(tmp_path):
    """FA3's persistent forward kernel: tags `t * N_BLOCKS + j - 1` with j from 1, barrier_Q with no index waited
    on with a one-stage ring's phase. The planted early V release is found at the smallest tile count with it."""
    path = ROOT / "specs" / "fa3_forward_bug_early_v_release.pipe"
    r = verify_file(str(path), Options(every="TILES", elect="lowest", check_scheduling=False))
    assert r.verdict == "findings" and "overwrite" in r.every.codes
    assert r.every.witness_k == 1 and r.params["TILES"] == 1
    one = verify_file(str(path), Options(overrides=(("TILES", 1),), elect="lowest", check_scheduling=False))
    assert "overwrite" in {i.code for i in one.all_issues}


@pytest.mark.parametrize("name", ["umma_pipeline", "bugs/umma_acc_no_wait", "bugs/umma_commit_before_mma"])
def test_every_tiles_with_tcgen05_commits(name):
    """tcgen05.commit counters are shifted with their MMA unit's groups (the commit's `upto`, and its round on
    the barrier it arrives on): the folded run agrees with each tile count of the declared range."""
    path = ROOT / "examples" / f"{name}.pipe"
    r = verify_file(str(path), Options(every="TILES", check_scheduling=False))
    want_k, want_codes = _first_finding_k(path, "TILES", r.every.lo, r.every.hi)
    assert r.every.witness_k == want_k
    if want_k is None:
        assert r.verdict == "verified"
    else:
        assert set(r.every.codes) & want_codes and want_k > 1  # past the first tile: the counters wrapped


def _mutants(text: str) -> list[tuple[str, str]]:
    """Each statement of the kernel deleted, and a few counts, parities, depths and tags changed."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("kernel"))
    out = []
    for i, line in enumerate(lines):
        s = line.strip()
        if i > start and s and not s.startswith(("#", "smem", "mbarrier", "param", "arch", "ring", "role", "}")) \
                and not s.endswith("{"):
            out.append((f"line {i + 1} deleted", "\n".join(lines[:i] + lines[i + 1:])))
    for a, b in [("STAGES_D - 1", "STAGES_D"), ("parity rd.phase", "parity 0"), ("wait_group_read 0", "wait_group_read 1"),
                 ("ring wr(STAGES, phase = 1)", "ring wr(STAGES)"), ("expect_tx 1024", "expect_tx 512"),
                 ("tile t * K_TILES + k\n", "tile t * K_TILES + k + 1\n"), ("write D[st.index] tile t", "write D[st.index] tile t + 1")]:
        assert a in text
        out.append((f"{a} -> {b}", text.replace(a, b, 1)))
    return out


def test_every_tiles_mutants_agree_with_each_tile_count(tmp_path):
    """Mutants of the persistent kernel: the folded run's smallest tile count with a finding is the ordinary
    runs' (TILES = 1..6), or both verify."""
    from pipecheck.core.diagnostics import SpecError
    outcomes, wrong = [], []
    for name, text in _mutants(PERSISTENT.read_text()):
        p = tmp_path / "m.pipe"
        p.write_text(text)
        try:
            r = verify_file(str(p), Options(every="TILES", check_scheduling=False))
        except SpecError:
            continue  # the mutant is no longer a valid spec (a deleted expect_tx's TMA, ...)
        want, _ = _first_finding_k(p, "TILES", 1, 6)
        outcomes.append(want)
        if r.every.witness_k != want:
            wrong.append((name, r.every.witness_k, want))
    assert not wrong
    assert len(outcomes) >= 20 and None in outcomes and {1, 2, 3} <= set(outcomes)


@pytest.mark.parametrize("name,want", [("epilogue", None), ("bugs/store_reuse", 3), ("bugs/no_producer_tail", 1)])
def test_every_tiles_with_a_stage_picked_by_the_counter(name, want):
    """`D[t % STAGES]`: the tiles shift by multiples of STAGES, so each stage index stays what it was."""
    path = ROOT / "examples" / f"{name}.pipe"
    r = verify_file(str(path), Options(every="TILES", check_scheduling=False))
    assert r.every.witness_k == want == _first_finding_k(path, "TILES", 1, 6)[0]


def test_every_tiles_refuses_a_counter_kept_in_a_register(tmp_path):
    text = (ROOT / "examples" / "epilogue.pipe").read_text()
    old = "      write D[t % STAGES] tile t\n"
    assert old in text
    p = tmp_path / "e.pipe"
    p.write_text(text.replace(old, "      let s = t % STAGES\n      write D[s] tile t\n", 1))
    code, _, err = cli("verify", str(p), "--every", "TILES")
    assert code == 2 and "used other than in a tile tag" in err


def test_a_ring_that_only_gives_a_wait_its_parity_shifts_with_that_barrier():
    """Review finding: a parity ring that indexes nothing was its own family, shifted apart from the barrier whose
    phase it names, and the folded run verified a phase-alias every ordinary run has (TILES and a flat K loop)."""
    path = DATA / "parity_ring_skew.pipe"
    r = verify_file(str(path), Options(every="TILES", check_scheduling=False))
    assert r.every.witness_k == 1 == _first_finding_k(path, "TILES", 1, 3)[0]
    assert "phase-alias" in r.every.codes
    flat = DATA / "parity_ring_skew_flat.pipe"
    r = verify_file(str(flat), Options(every="K_TILES", check_scheduling=False))
    assert r.every.witness_k == 1 == _first_finding_k(flat, "K_TILES", 1, 3)[0]
    assert "phase-alias" in r.every.codes
