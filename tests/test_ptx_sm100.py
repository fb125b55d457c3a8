"""The PTX front end on sm_100 CTA pairs: tcgen05.mma/commit and cp.async.bulk.tensor with `.cta_group::2`
lower to the model's pair MMA, its multicast commit and the 2-SM load (docs/ptx.md, docs/semantics.md)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import ROOT, cli
from pipecheck.model.ir import MMA, MMA_COMMIT, TMA_LOAD, RConst, ROp
from pipecheck.ptx.frontend import LaunchOptions, classes_for, configurations, find_regions, load_ptx

PTX = ROOT / "tests" / "data" / "ptx"
MINI = PTX / "umma_2sm_mini.ptx"


def _classes(path: Path, **opts):
    prog = load_ptx(str(path), LaunchOptions(overrides=(("param_128", 3),), **opts), {})  # k = 3 k-tiles
    configs = configurations(prog, "lowest")
    prog.regions = find_regions(prog, configs)
    return prog, classes_for(prog, configs[0])


def _instrs(classes, op):
    return [(c.cta, i) for c in classes for i in c.program.instrs if i.op == op]


def test_the_pair_mma_reads_both_ctas_and_only_the_even_cta_issues_it():
    prog, classes = _classes(MINI)
    assert prog.launch.cluster == (2, 1, 1)  # .reqnctapercluster 2 (the __cluster_dims__ of the source)
    mmas = _instrs(classes, MMA)
    assert mmas and {cta for cta, _ in mmas} == {0}
    for _, ins in mmas:
        ops, outs, ncta = ins.args[:3]
        assert ncta == 2 and outs == ()
        # the stage's operand in the issuer's SMEM and at the same index in the odd CTA's
        assert [r.cta for r, _ in ops] == [None, RConst(1)]
        assert ops[0][0].indices == ops[1][0].indices


def test_the_commit_multicasts_and_the_2sm_loads_complete_on_the_leaders_barrier():
    _, classes = _classes(MINI)
    commits = _instrs(classes, MMA_COMMIT)
    assert commits and all(ins.args[1] == RConst(3) for _, ins in commits)  # mask 0b11: both CTAs' empty[s]
    loads = _instrs(classes, TMA_LOAD)
    assert {cta for cta, _ in loads} == {0, 1}
    for cta, ins in loads:
        dst, bar = ins.args[0], ins.args[3]
        assert dst.cta is None  # the half lands in the issuing CTA
        # the barrier is the even CTA's: a CTA-local address (the peer bit cleared) names CTA 0 in both CTAs
        # (a stage-indexed address resolves its CTA at run time: `cluster bits ? rank : CTA 0`)
        assert isinstance(bar.cta, ROp) and bar.cta.op == "?:" and bar.cta.args[2] == RConst(0)
        assert ins.args[2] == RConst(4096)  # the leader's expect_tx 8192 counts both CTAs' halves


def test_the_2sm_mini_kernel_and_its_planted_bugs():
    code, out, err = cli("verify", str(MINI), "-D", "param_128=5", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["verdict"] == "verified"
    code, out, err = cli("verify", str(PTX / "umma_2sm_mini_bug_commit_own_only.ptx"))
    assert code == 1 and "[hang]" in out
    # the odd CTA's producer waits for a release the commit never sends it
    assert "cta1.wg0 waits on cta1.empty[0] parity 0 forever" in out, out  # `__shared__ uint64_t empty[STAGES]`
    code, out, err = cli("verify", str(PTX / "umma_2sm_mini_bug_peer_skips_empty_wait.ptx"), "-D", "param_128=5")
    assert code == 1 and "[stale-read]" in out and "[overwrite]" in out


def test_an_odd_cta_issuing_the_pair_mma_is_refused_with_its_line(tmp_path):
    """The MMA warp's test `lane == 0 && rank % 2 == 0` (`or` of the lane bits and the rank's low bit, compared
    with 0) turned into `lane == rank % 2`: lane 1 of CTA 1 reaches the pair MMA (the source's -DODD_ISSUES)."""
    text = MINI.read_text()
    test = "or.b32  \t%r21, %r20, %r3;"
    assert text.count(test) == 1
    p = tmp_path / "odd.ptx"
    p.write_text(text.replace(test, "xor.b32  \t%r21, %r20, %r3;"))
    code, out, err = cli("verify", str(p))
    assert code == 2 and "Traceback" not in err
    assert re.search(r"odd\.ptx:\d+:\d+: error: PTX line \d+: `tcgen05\.mma\.cta_group::2\.kind::f16` is issued by the even "
                     r"CTA of a pair \(PTX ISA 9\.7\.16\), but CTA 1 \(%cluster_ctarank\) reaches it \[rule\]", err), err


def test_an_odd_cluster_is_refused_for_a_pair_kernel():
    code, out, err = cli("verify", str(MINI), "--cluster", "1")
    assert code == 2 and "works on a CTA pair" in err and "umma_2sm_mini.ptx:" in err and "Traceback" not in err
