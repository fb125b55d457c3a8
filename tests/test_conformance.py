"""Replay on silicon: emission of every spec, nvcc builds, the agreement rules, and (when
tests/hw/h200.json exists) pipecheck's verdicts against the recorded H200 outcomes."""
from __future__ import annotations

import concurrent.futures as cf
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, SPEC_FILES, cli
from pipecheck.core.diagnostics import SpecError
from pipecheck.replay.cuda import ReplayOptions, emit
from pipecheck.replay.outcome import (ModelVerdict, Recorded, config_key, expectation, explained_differences,
                                      judge, judge_recorded, load_recorded, model_verdict, parse_outcomes, run_kinds)

SPECS = SPEC_FILES
HW = ROOT / "tests" / "hw" / "h200.json"
NVCC = shutil.which("nvcc")
NVCC_FLAGS = ["-O2", "-gencode=arch=compute_90a,code=sm_90a"]


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def _emit_or_refusal(path: Path, opts: ReplayOptions = ReplayOptions()):
    try:
        return emit(_rel(path), opts), None
    except SpecError as exc:
        return None, exc.diagnostics[0]


# ---------------------------------------------------------------- emission


@pytest.mark.parametrize("path", SPECS, ids=lambda p: _rel(p))
def test_every_spec_emits_or_is_refused_with_the_construct_named(path: Path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    em, refusal = _emit_or_refusal(path)
    if refusal is not None:
        assert refusal.code == "replay", refusal.message
        assert "replay cannot run" in refusal.message and ":" in refusal.message
        assert refusal.span is not None
        return
    src = em.source
    assert "extern \"C\" __global__" in src and "int main(" in src
    assert "mbarrier.try_wait.parity" in src and "clock64() - t0 > cycles" in src  # every wait is bounded
    assert em.config["params"] == {p.name: p.value for p in em.kernel.params}


def test_sm90_specs_all_replay_except_named_constructs(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    refused = {}
    for p in SPECS:
        _, r = _emit_or_refusal(p)
        if r is not None:
            refused[_rel(p)] = r.message
    sm100 = {k for k, v in refused.items() if "sm_100" in v}
    others = {k: v for k, v in refused.items() if k not in sm100}
    # the specs the hardware run is for must replay
    for must in ("specs/cutlass_3722.pipe", "examples/bugs/stale_read.pipe", "examples/bugs/store_reuse.pipe",
                 "examples/bugs/oob_expect_tx.pipe", "examples/cluster_multicast.pipe"):
        assert must not in refused, refused.get(must)
    # named barrier ids that differ per role instance (FA3's and ThunderKittens' scheduler
    # barriers `bar_sync 9 + instance`) replay: PTX takes bar.sync's id in a register
    for must in ("specs/fa3_forward.pipe", "specs/thunderkittens_h100_attention.pipe"):
        assert must not in refused, refused.get(must)
    # every other refusal names the construct it cannot replay (today: a role that is not whole warps
    # under syncthreads)
    assert all(v.startswith("replay cannot run ") and " faithfully: " in v for v in others.values()), others


PER_INSTANCE_BAR = """kernel k {
  arch sm_90
  smem S bytes 1024
  role math[2] warpgroup {
    write S tile 0
    bar_sync BASE + instance, 128
    bar_arrive 1, 256
  }
}
"""


def test_named_barrier_id_per_role_instance_is_a_register_operand(spec, monkeypatch) -> None:
    src = emit(str(spec(PER_INSTANCE_BAR.replace("BASE", "4")))).source
    assert 'asm volatile("bar.sync %0, %1;" :: "r"((unsigned)(((4LL) + (b_instance)))), "r"(128) : "memory");' in src
    assert 'asm volatile("bar.arrive %0, %1;" :: "r"(1), "r"(256) : "memory");' in src  # constant: immediate value
    # every instance's id is checked: instance 1 of `15 + instance` is id 16
    with pytest.raises(SpecError) as exc:
        emit(str(spec(PER_INSTANCE_BAR.replace("BASE", "15"))))
    [r] = exc.value.diagnostics
    assert r.code == "replay" and "bar_sync 16, 128" in r.message and r.span.line == 6


def test_emission_is_deterministic(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    a = emit("specs/cutlass_3722.pipe", ReplayOptions(elect_lane=3)).source
    b = emit("specs/cutlass_3722.pipe", ReplayOptions(elect_lane=3)).source
    assert a == b


def test_forced_election_passes_a_mask_whose_lowest_lane_is_the_chosen_one(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    lane3 = emit("specs/cutlass_3722.pipe", ReplayOptions(elect_lane=3)).source
    lane0 = emit("specs/cutlass_3722.pipe", ReplayOptions(elect_lane=0)).source
    assert "pc_elect(0xfffffff8u)" in lane3 and "__syncwarp(0xffffffffu)" in lane3
    assert "pc_elect(0xffffffffu)" in lane0 and "0xfffffff8" not in lane0
    assert '\\"elect_lane\\": 3' in lane3  # the configuration every outcome line carries
    # a timed-out wait names its barrier element through this table
    assert 'pc_barriers[] = {{"full", 0, 4}, {"empty", 32, 4}};' in lane3


def test_mma_wait_waits_for_the_whole_warpgroups_operand_checks(monkeypatch) -> None:
    """wgmma is one warpgroup operation: once mma_wait returns in warp 0, warp 3 no longer reads
    the operands, so thread 0 may release the stage. The per-thread checks at issue must keep that:
    each thread counts its check, and mma_wait n waits until the warpgroup's checks of all but
    the last n MMAs are in."""
    monkeypatch.chdir(ROOT)
    src = emit("specs/cutlass_3722.pipe", ReplayOptions(elect_lane=0)).source
    assert "pc_mma_issued(pc_wgc); ++mma_n;" in src
    assert "pc_mma_wait(pc_wgc, pc_wgm * (mma_n - (1LL)), wait_cycles);" in src  # mma_wait 1
    assert "pc_mma_wait(pc_wgc, pc_wgm * (mma_n - (0LL)), wait_cycles);" in src  # mma_wait 0
    assert "const long long pc_wgm = pc_min(128LL, 128LL - 128LL * b_warpgroup);" in src
    # the release comes after the wait
    body = src[src.index("role_1("):]
    assert body.index("pc_mma_wait(pc_wgc, pc_wgm * (mma_n - (1LL))") < body.index("pc_arrive(")
    # a role with no MMA gets no counter
    assert "pc_wgc" not in src[src.index("role_0("):src.index("role_1(")]


def test_cluster_spec_gets_cluster_dims_and_remote_arrivals(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    src = emit("examples/cluster_multicast.pipe").source
    assert "__cluster_dims__(2, 1, 1)" in src
    assert "multicast::cluster" in src and "mapa.shared::cluster" in src


def test_store_epilogue_emits_bulk_store_groups(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    src = emit("examples/epilogue.pipe").source
    assert "cp.async.bulk.global.shared::cta.bulk_group" in src
    assert "cp.async.bulk.wait_group.read 1;" in src  # STAGES - 1, folded to the immediate PTX needs
    assert "fence.proxy.async.shared::cta;" in src and "bar.sync %0, %1;" in src


def test_cli_replay_writes_the_program(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "p.cu"
    code, _, err = cli("replay", "specs/cutlass_3722.pipe", "--emit-cuda", str(out), "-D", "K_TILES=4",
                       "--elect-lane", "3")
    assert code == 0, err
    text = out.read_text()
    assert "K_TILES=4" in text and "pc_elect(0xfffffff8u)" in text


def test_cli_replay_refuses_with_exit_2(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    code, out, err = cli("replay", "examples/umma_pipeline.pipe", "--emit-cuda", "-")
    assert code == 2 and out == ""
    assert "replay cannot run a spec for sm_100" in err and "[replay]" in err and "umma_pipeline.pipe:" in err
    code, _, err = cli("replay", "specs/cutlass_3722.pipe", "--emit-cuda", "-", "--elect-lane", "40")
    assert code == 2 and "not a lane" in err
    code, _, err = cli("replay", "specs/cutlass_3722.pipe", "--emit-cuda", "-", "--choose", "x")
    assert code == 2 and "--choose" in err


# ---------------------------------------------------------------- nvcc

# The configurations the hardware run most needs: the #3722 hang and its working election, a
# stale read, a store reuse, an expect_tx mismatch, a cluster with multicast.
KEY_CONFIGS = [("specs/cutlass_3722.pipe", 3), ("specs/cutlass_3722.pipe", 0), ("examples/bugs/stale_read.pipe", 0),
               ("examples/bugs/store_reuse.pipe", None), ("examples/bugs/oob_expect_tx.pipe", None),
               ("examples/cluster_multicast.pipe", None)]


def _nvcc(src: str, out: Path, device_only: bool) -> tuple[int, str]:
    cu = out.with_suffix(".cu")
    cu.write_text(src)
    # -cubin runs ptxas on every emitted instruction without the (slow, fixed) host driver
    extra = ["-cubin"] if device_only else []
    p = subprocess.run([NVCC, *NVCC_FLAGS, *extra, str(cu), "-o", str(out)], capture_output=True, text=True)
    return p.returncode, p.stderr + p.stdout


def _compile_all(items: list[tuple[str, str, bool]], tmp_path: Path) -> None:
    with cf.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda it: (it[0], *_nvcc(it[1], tmp_path / it[0], it[2])), items))
    failed = [(name, err[-3000:]) for name, rc, err in results if rc != 0]
    assert not failed, failed
    warned = [(name, err[-1000:]) for name, rc, err in results if "warning" in err]
    assert not warned, warned


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_key_configurations_build_with_nvcc(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    items = [(f"{Path(s).stem}_{lane}", emit(s, ReplayOptions(elect_lane=lane)).source, i > 0)
             for i, (s, lane) in enumerate(KEY_CONFIGS)]
    _compile_all(items, tmp_path)


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_host_driver_prints_the_outcome_format(tmp_path: Path, monkeypatch) -> None:
    """The JSON printer, on made-up records (-DPC_SELFTEST needs no GPU): a hang, a stale word, a
    thread in a collective, a store that left a word unwritten."""
    monkeypatch.chdir(ROOT)
    cu = tmp_path / "selftest.cu"
    cu.write_text(emit("examples/bugs/store_reuse.pipe").source)
    p = subprocess.run([NVCC, *NVCC_FLAGS, "-DPC_SELFTEST", str(cu), "-o", str(tmp_path / "selftest")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    run = subprocess.run([str(tmp_path / "selftest")], capture_output=True, text=True, timeout=60)
    [o] = parse_outcomes(run.stdout)
    assert o["spec"] == "examples/bugs/store_reuse.pipe" and o["config"]["params"] == {"TILES": 4}
    assert o["outcome"] == "hung" and o["watchdog"] is True
    [h] = o["hangs"]
    assert h["role"] == "epilogue" and h["threads"] == [0, 3] and h["count"] == 4 and h["site"].startswith("examples/")
    assert h["parity"] == 1 and h["barrier"] is None  # store_reuse declares no mbarrier
    assert h["t_us"] == 10.0  # from the earliest thread start to the group's earliest record
    [w] = o["wrong_data"]
    assert w["expected"] == {"buffer": "D", "tile_mod": 3} and w["found"] == "never loaded" and w["word"] == 7
    assert w["t_us"] == 2.5
    assert o["in_collective"][0]["threads"] == [5, 5]
    [sw] = o["store_wrong_data"]
    assert sw["word"] == 2 and sw["found"] == "never stored" and sw["expected"] == {"buffer": "D", "tile_mod": 1}
    assert run_kinds(o) == {"hung", "wrong_data"}


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_every_replayable_spec_builds_with_nvcc(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    items = []
    for p in SPECS:
        em, refusal = _emit_or_refusal(p)
        if em is not None:
            items.append((p.stem, em.source, False))
    _compile_all(items, tmp_path)


# ---------------------------------------------------------------- agreement rules (synthetic outcomes)

HANG, DONE, BAD, FAULT = frozenset({"hung"}), frozenset({"completed"}), frozenset({"wrong_data"}), frozenset({"faulted"})


def test_inevitable_hang_must_show_in_every_run() -> None:
    v = ModelVerdict(("hang", "expect-tx-mismatch"), may_complete=False)
    assert expectation(v).must == {"hung"}
    assert judge(v, [HANG] * 5).status == "agree"
    j = judge(v, [HANG, HANG, DONE, HANG, HANG])
    assert j.status == "disagree" and "run 2" in j.reason


def test_race_that_did_not_show_is_not_observed() -> None:
    v = ModelVerdict(("stale-read",), may_complete=True)
    assert judge(v, [DONE] * 5).status == "not-observed"
    assert judge(v, [DONE, BAD, DONE]).status == "agree"
    assert judge(v, [HANG] * 3).status == "disagree"


def test_verified_config_must_complete() -> None:
    v = ModelVerdict((), may_complete=True)
    assert judge(v, [DONE] * 5).status == "agree"
    j = judge(v, [DONE, HANG])
    assert j.status == "disagree" and "verified" in j.reason
    assert judge(v, [FAULT]).status == "disagree"
    assert judge(v, [FAULT], explained="a documented reason").status == "explained"


def test_fault_and_undefined_and_invalid() -> None:
    assert judge(ModelVerdict(("arrive-fault",), False), [FAULT] * 2).status == "agree"
    assert judge(ModelVerdict(("arrive-fault",), False), [DONE]).status == "disagree"
    assert judge(ModelVerdict(("exit-inflight",), True), [FAULT, DONE]).status == "undefined"
    assert judge(ModelVerdict((), True), [frozenset({"invalid"})]).status == "invalid"
    assert not judge(ModelVerdict((), True), []).ok
    # a protocol slip may hang or corrupt, schedule permitting
    assert judge(ModelVerdict(("double-arrive",), True), [HANG, DONE]).status == "not-observed"


def _rec(**run) -> Recorded:
    return Recorded("examples/x.pipe", {"params": {}, "elect_lane": None, "choices": {}}, (run,))


def test_a_run_is_judged_up_to_its_first_finding() -> None:
    """The model halts an execution at its first finding; what a run shows after the first event
    the verdict predicts is a consequence, not a disagreement. Before it, it still counts."""
    stale = ModelVerdict(("stale-read",), may_complete=True)
    bad = [{"t_us": 1.5, "site": "r"}]
    later_hang = _rec(outcome="hung", hangs=[{"t_us": 34000.0, "site": "w"}], wrong_data=bad)
    j = judge_recorded(later_hang, stale, {})
    assert j.status == "agree" and "after the first finding" in j.reason and "run 0: hung" in j.reason
    fault = _rec(outcome="faulted", fault="unspecified launch failure", wrong_data=bad)
    assert judge_recorded(fault, stale, {}).status == "agree"
    earlier_hang = _rec(outcome="hung", hangs=[{"t_us": 0.5, "site": "w"}], wrong_data=bad)
    assert judge_recorded(earlier_hang, stale, {}).status == "disagree"
    untimed = _rec(outcome="hung", hangs=[{"site": "w"}], wrong_data=[{"site": "r"}])  # no times: no ordering
    assert judge_recorded(untimed, stale, {}).status == "disagree"
    # a hang the model does not predict at all, with no predicted event before it, still disagrees
    assert judge_recorded(_rec(outcome="hung", hangs=[{"t_us": 3.0}]), stale, {}).status == "disagree"


def test_run_kinds_reads_the_outcome_json() -> None:
    assert run_kinds({"outcome": "completed", "hangs": [], "wrong_data": [], "store_wrong_data": []}) == DONE
    assert run_kinds({"outcome": "hung", "hangs": [{"site": "x"}], "wrong_data": [{"site": "y"}]}) == HANG | BAD
    assert run_kinds({"outcome": "hung", "watchdog": True, "hangs": []}) == HANG
    assert run_kinds({"outcome": "faulted", "fault": "unspecified launch failure"}) == FAULT
    assert run_kinds({"outcome": "wrong_data", "store_wrong_data": [{"word": 3}]}) == BAD
    assert run_kinds({"outcome": "invalid", "elect_mismatch": [{}]}) == {"invalid"}


def test_parse_outcomes_keeps_only_outcome_lines() -> None:
    text = 'noise\n{"schema": "pipecheck-replay-outcome/1", "run": 0, "outcome": "completed"}\n{"other": 1}\n{bad\n'
    assert [o["run"] for o in parse_outcomes(text)] == [0]


def test_explained_differences_table_parses() -> None:
    md = ("# Semantics\n\n## Explained differences (replay)\n\n| spec | configuration | pipecheck | hardware | explanation |\n"
          "|---|---|---|---|---|\n| `examples/x.pipe` | `*` | hang | completed | because |\n\n## Next\n| a | b | c | d | e |\n")
    table = explained_differences(md)
    assert table == {("examples/x.pipe", "*"): "because"}
    rec = Recorded("examples/x.pipe", {"params": {}, "elect_lane": None, "choices": {}},
                   ({"outcome": "completed"},))
    assert judge_recorded(rec, ModelVerdict(("hang",), False), table).status == "explained"
    assert rec.key == "elect=lowest"
    assert config_key({"params": {"S": 2, "K": 1}, "elect_lane": 3, "choices": {"w": [0, 1]}}) == "K=1 S=2 elect=3 w=0,1"


def test_docs_table_names_existing_specs() -> None:
    table = explained_differences((ROOT / "docs" / "semantics.md").read_text())
    for spec, _ in table:
        assert (ROOT / spec).exists(), spec


def test_model_verdict_of_the_3722_elections(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    cfg = {"params": {"STAGES": 4, "K_TILES": 8}, "choices": {}}
    hang = model_verdict("specs/cutlass_3722.pipe", {**cfg, "elect_lane": 3})
    assert "hang" in hang.codes and not hang.may_complete
    ok = model_verdict("specs/cutlass_3722.pipe", {**cfg, "elect_lane": 0})
    assert ok.codes == () and ok.may_complete


# ---------------------------------------------------------------- the recorded hardware run


NO_RUN = "tests/hw/h200.json is absent: no H200 run recorded yet (run benchmarks/hw/run_h200.py on an H200, docs/replay.md)"


# Compared in the default run (the issue's configurations, seconds each); every other recorded
# configuration runs under `pytest -m slow`: pipecheck's verdict lists every distinct finding of
# the configuration, which takes 10-60 s for some examples and minutes to hours for the heavy specs.
DEFAULT_RECORDED = {
    ("specs/cutlass_3722.pipe", "K_TILES=8 STAGES=4 elect=3"), ("specs/cutlass_3722.pipe", "K_TILES=8 STAGES=4 elect=0"),
    ("examples/bugs/stale_read.pipe", "K_TILES=8 STAGES=4 elect=0"), ("examples/bugs/store_reuse.pipe", "TILES=4 elect=lowest"),
    ("examples/bugs/full_count_bytes.pipe", "K_TILES=8 STAGES=4 elect=3"),
    ("examples/bugs/oob_expect_tx.pipe", "K_TILES=2 STAGES=2 elect=lowest"),
    ("examples/bugs/arrive_overflow.pipe", "K_TILES=8 STAGES=4 elect=0"),
    ("examples/cluster_multicast.pipe", "K_TILES=4 STAGES=2 elect=lowest"), ("examples/epilogue.pipe", "TILES=4 elect=lowest"),
}


def _recorded_params() -> list:
    """One test per recorded configuration that ran."""
    if not HW.exists():
        return []
    _machine, recs = load_recorded(HW)
    out = []
    for rec in recs:
        if not rec.runs:
            continue  # refused by replay, or not run before the deadline: nothing to compare
        slow = (rec.spec, rec.key) not in DEFAULT_RECORDED
        out.append(pytest.param(rec, id=f"{rec.spec} [{rec.key}]", marks=[pytest.mark.slow] if slow else []))
    return out


@pytest.mark.skipif(not HW.exists(), reason=NO_RUN)
@pytest.mark.parametrize("rec", _recorded_params())
def test_recorded_h200_outcome_agrees_with_pipecheck(rec: Recorded, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    table = explained_differences((ROOT / "docs" / "semantics.md").read_text())
    j = judge_recorded(rec, model_verdict(rec.spec, rec.config), table)
    assert j.ok, f"{rec.spec} [{rec.key}]: {j.status}: {j.reason}"


@pytest.mark.skipif(not HW.exists(), reason=NO_RUN)
def test_recorded_h200_run_covers_the_issue() -> None:
    """What the recorded run must hold (issue 8): the machine, at least 20 configurations run, the
    #3722 election hanging on lane 3 and completing on lane 0, a stale read, a store reuse and
    expect_tx mismatches among them, every run with a valid outcome."""
    machine, recs = load_recorded(HW)
    assert "H200" in machine["gpu"] and machine["driver"] and machine["cuda"]
    ran = {(r.spec, r.key): r for r in recs if r.runs}
    assert len(ran) >= 20
    lane3 = ran[("specs/cutlass_3722.pipe", "K_TILES=8 STAGES=4 elect=3")]
    lane0 = ran[("specs/cutlass_3722.pipe", "K_TILES=8 STAGES=4 elect=0")]
    assert all(run_kinds(r) == HANG for r in lane3.runs) and all(run_kinds(r) == DONE for r in lane0.runs)
    for spec in ("examples/bugs/stale_read.pipe", "examples/bugs/store_reuse.pipe", "examples/bugs/full_count_bytes.pipe",
                 "examples/bugs/single_tile_expect_tx.pipe", "examples/bugs/oob_expect_tx.pipe"):
        assert any(s == spec for s, _ in ran), spec
    assert all("invalid" not in run_kinds(o) and not o.get("build_error") for r in ran.values() for o in r.runs)


# ---------------------------------------------------------------- the runner (no GPU needed for these)


def _runner():
    import importlib.util
    spec = importlib.util.spec_from_file_location("run_h200", ROOT / "benchmarks" / "hw" / "run_h200.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def test_runner_plans_both_elections_and_header_parameters(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)  # prepare() works from the repository root; this restores the cwd afterwards
    runner = _runner()
    jobs = runner.prepare(tmp_path, 4, "single_tile_expect_tx")
    keys = sorted(config_key(j["config"]) for j in jobs)
    assert keys == ["K_TILES=1 STAGES=2 elect=0", "K_TILES=1 STAGES=2 elect=3",
                    "K_TILES=8 STAGES=2 elect=0", "K_TILES=8 STAGES=2 elect=3"]
    assert all((tmp_path / f"{j['name']}.cu").exists() for j in jobs)
    plan = (tmp_path / "plan.json").read_text()
    assert "single_tile_expect_tx__K_TILES1__elect3" in plan
    refused = runner.prepare(tmp_path / "r", 4, "umma_pipeline")
    assert refused and all("sm_100" in j["refused"] for j in refused)


def test_runner_restarts_a_program_that_ended_early(tmp_path: Path) -> None:
    runner = _runner()
    fake = tmp_path / "fake"
    # prints one outcome per process, as a program does after a watchdog hang
    fake.write_text('#!/bin/sh\necho \'{"schema": "pipecheck-replay-outcome/1", "outcome": "hung", "watchdog": true}\'\n')
    fake.chmod(0o755)
    runs = runner.run_program(fake, 3, 30.0)
    assert [r["run"] for r in runs] == [0, 1, 2] and all(run_kinds(r) == HANG for r in runs)
    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\nexit 3\n")
    silent.chmod(0o755)
    [r] = runner.run_program(silent, 1, 30.0)
    assert run_kinds(r) == FAULT and "exit 3" in r["fault"]


# ---------------------------------------------------------------- real compiled kernels (kind ptx)
# tests/hw/h200.json "ptx": the CUTLASS GEMMs of the PTX corpus run on the H200 by
# benchmarks/hw/run_ptx_h200.py (forced lane, bounded waits, the host harness), each at the launch the
# interposer captured (tests/hw/ptx/launch-<family>.json: grid, block, cluster, the Params bytes).
# pipecheck checks each configuration's corpus PTX at those bytes with the configuration's lane.

import json  # noqa: E402

from pipecheck.replay.outcome import launch_for_row, ptx_model_verdict, ptx_run_kinds  # noqa: E402

PTX_DEFAULT = {"pingpong-lane3", "cooperative-lane3"}  # hangs found in a few hundred states; the rest under -m slow


def _ptx_rows():
    if not HW.exists():
        return []
    data = json.loads(HW.read_text())
    rows = data.get("ptx", {}).get("configurations", [])
    return [pytest.param(r, id=r["name"], marks=[] if r["name"] in PTX_DEFAULT else [pytest.mark.slow]) for r in rows]


@pytest.mark.parametrize("row", _ptx_rows())
def test_recorded_h200_real_kernel_agrees_with_pipecheck(row: dict, tmp_path: Path) -> None:
    verdict, blocked = ptx_model_verdict(str(launch_for_row(ROOT, row, tmp_path)), row["elect_lane"])
    runs = [ptx_run_kinds(o) for o in row["outcomes"]]
    j = judge(verdict, runs)
    assert j.ok, f"{row['name']}: {j.reason}"
    hw_waits = {(h["bar"], h["parity"]) for o in row["outcomes"] for h in o.get("hangs", ())}
    if "hang" in verdict.codes and hw_waits:
        # the hardware's timed-out waits are the waits pipecheck's counterexample blocks in
        assert set(blocked) & hw_waits, (blocked, sorted(hw_waits))


def test_recorded_h200_real_kernels_cover_the_issue() -> None:
    if not HW.exists() or "ptx" not in json.loads(HW.read_text()):
        pytest.skip("no recorded real-kernel run")
    rows = {r["name"]: r for r in json.loads(HW.read_text())["ptx"]["configurations"]}
    kinds = {n: {o.get("outcome") for o in r["outcomes"]} for n, r in rows.items()}
    for fam in ("pingpong", "cooperative"):
        assert kinds[f"{fam}-lane0"] == {"completed"} and kinds[f"{fam}-lane3"] == {"hung"}
        assert kinds[f"{fam}-fixed-lane0"] == {"completed"} and kinds[f"{fam}-fixed-lane3"] == {"completed"}
    assert sum(bool(r["outcomes"]) for r in rows.values()) >= 6
