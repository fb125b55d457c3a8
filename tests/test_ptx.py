"""The PTX front end from the command line: compiling a .cu, the CUTLASS #3722 report, bad input."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, cli

PTX = ROOT / "tests" / "data" / "ptx"
SMALL = ["-D", "param_12=64", "-D", "param_1656=1"]
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def _cutlass_include() -> Path | None:
    try:
        import cutlass_library
    except ImportError:
        return None
    inc = Path(cutlass_library.__file__).parent / "source" / "include"
    return inc if inc.is_dir() else None


@pytest.fixture(scope="module")
def pingpong_small():
    return cli("verify", str(PTX / "cutlass_sm90_pingpong.ptx"), *SMALL)


def test_pingpong_report_names_the_elect_and_the_lanes(pingpong_small):
    code, out, err = pingpong_small
    assert code == 1, err
    assert "[hang]" in out
    assert "only when elect.sync (cluster_sm90.hpp:194 in device_kernel.h:123) elects a lane in 1..31" in out
    assert "the H200 elects the lowest lane of the mask, so this is latent on current hardware" in out
    # the step that skips the arrival is located in CUTLASS's own pipeline header
    assert "sm90_pipeline.hpp" in out
    # each parameter with why it has its value and the kernel statement that reads it
    assert "  param_12 = 64: set with -D; read at " in out
    assert "sm90_gemm_tma_warpspecialized_pingpong.hpp:525: `auto problem_shape_MNKL" in out
    assert "  param_640 = 32768: an expect_tx byte count (32768)" in out


@pytest.mark.skipif(_cutlass_include() is None, reason="the CUTLASS sources name the barriers")
def test_barriers_are_named_by_the_source_that_initialises_them(pingpong_small):
    """Each barrier by the array element and the object the kernel constructs (from the inlined-at chain of
    its init), its address beside it in the table; the set-up before the protocol is one row."""
    code, out, err = pingpong_small
    head = next(line for line in out.splitlines() if "[hang]" in line)
    assert "wg1 waits on mainloop_pipeline.full_barriers[0] parity 0 forever" in head
    assert "wg0 waits on mainloop_pipeline.empty_barriers[0] parity 0 forever" in head
    assert "  mainloop_pipeline.full_barriers[0] (mbar@0): phase 0" in out
    assert "  mainloop_pipeline.empty_barriers[0] (mbar@48): phase 0" in out
    # the full barriers of stages 1-5 were initialised and never used: not in the table at the failure
    assert "full_barriers[1] (mbar@8)" not in out
    setup = [line for line in out.splitlines() if "set-up: 26 barriers initialised" in line]
    assert len(setup) == 1 and setup[0].split("|")[0].strip().startswith("1-")
    assert "count 1: mainloop.full[0..5]" in out  # the compact form of the narrow timeline
    # the roles the code computes: the producer warp whose only TMA-issuing thread is the elected one
    assert "  wg0 (threads 0-127): producer: warp 0: TMA loads (thread 1)" in out
    assert "  wg1 (threads 128-255): consumer: warp 4: MMAs, TMA stores" in out
    table = out[out.index("counterexample:"):out.index("barriers at the failure:")]
    assert max(len(line) for line in table.splitlines()) <= 120


def test_report_states_parameters_and_their_defaults():
    data = json.loads(cli("verify", str(PTX / "mini_ok.ptx"), "--format", "json")[1])
    assert data["verdict"] == "verified"
    assert data["params"] == {"param_0": 2}
    data = json.loads(cli("verify", str(PTX / "mini_ok.ptx"), "-D", "param_0=5", "--format", "json")[1])
    assert data["params"] == {"param_0": 5} and data["verdict"] == "verified"


@needs_nvcc
def test_a_cuda_file_is_compiled_first(tmp_path):
    src = tmp_path / "mini.cu"
    shutil.copy(PTX / "src" / "mini.cu", src)
    code, out, err = cli("verify", str(src), "--nvcc=-DCOUNT=64")
    assert code == 0, out + err
    code, out, err = cli("verify", str(src), "--nvcc=-DCOUNT=65")
    assert code == 1 and "[hang]" in out and "mini.cu:" in out
    code, out, err = cli("verify", str(src))  # COUNT undefined: nvcc's error, located
    assert code == 2 and "nvcc failed" in err


@needs_nvcc
@pytest.mark.skipif(_cutlass_include() is None, reason="nvidia-cutlass (cutlass_library) is not installed")
def test_cutlass_pingpong_compiled_here_shows_3722():
    """The whole path on this machine: CUTLASS 4.2's pingpong GEMM compiled by nvcc (a debug build, as
    issue #3722's command has it: CUTLASS's role checks are `brkpt`s there), then checked."""
    src = PTX / "src" / "cutlass_sm90_pingpong.cu"
    code, out, err = cli("verify", str(src), f"--nvcc=-I{_cutlass_include()}", *SMALL, "--format", "json")
    assert code == 1, err
    data = json.loads(out)
    assert [f["code"] for f in data["findings"]] == ["hang"]
    assert "elects a lane in 1..31" in data["findings"][0]["condition"]


def _write(tmp_path: Path, text: str, name: str = "k.ptx") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


HEAD = ".version 9.0\n.target sm_90a\n.address_size 64\n"


def test_malformed_ptx_is_located(tmp_path):
    p = _write(tmp_path, HEAD + ".visible .entry k()\n{\n\t.reg .b32 %r<4>;\n\tmov.u32 %r1, %tid.x\n\tadd.u32 %r2, %r1, 1;\n\tret;\n}\n")
    code, out, err = cli("verify", str(p))
    assert code == 2 and out == ""
    assert f"{p}:8:2: error: PTX: unexpected 'add.u32'; expected ';' [syntax]" in err
    assert "Traceback" not in err


def test_a_kernel_without_barriers_says_so(tmp_path):
    p = _write(tmp_path, HEAD + ".visible .entry k()\n{\n\t.reg .b32 %r<4>;\n\tmov.u32 %r1, %tid.x;\n\tret;\n}\n")
    code, out, err = cli("verify", str(p))
    assert code == 2
    assert "the kernel has no mbarrier, named-barrier or TMA instruction: there is no protocol to check" in err


def test_an_unmodelled_instruction_on_shared_memory_is_refused_by_name(tmp_path):
    text = (PTX / "mini_ok.ptx").read_text()
    bad = text.replace("mbarrier.arrive.shared::cta.b64 _, [%r19];", "atom.shared.add.u32 %r2, [%r19], 1;", 1)
    assert bad != text
    code, out, err = cli("verify", str(_write(tmp_path, bad)))
    assert code == 2
    assert "`atom.shared.add.u32` is an atomic on shared memory" in err and ":68:3:" in err


def test_several_kernels_need_entry(tmp_path):
    text = (PTX / "mini_ok.ptx").read_text()
    body = text[text.index(".visible .entry"):text.index(".file")]
    two = text.replace(body, body + body.replace("_Z4miniiPi", "_Z5otheriPi"))
    p = _write(tmp_path, two)
    code, out, err = cli("verify", str(p))
    assert code == 2 and "--entry" in err
    code, out, err = cli("verify", str(p), "--entry", "_Z5otheriPi")
    assert code == 0, err


@pytest.mark.parametrize("flags,says", [(["--every", "K"], "--every"), (["-D", "K=3"], "param_<byte offset>"),
                                       (["--all-params", "-D", "param_8=1..4"], "not a loop bound")])
def test_pipe_only_options_are_refused(flags, says):
    code, out, err = cli("verify", str(PTX / "mini_ok.ptx"), *flags)
    assert code == 2 and says in err


def test_a_trap_is_a_finding():
    """A failed device assert (a call to __assertfail) stops the kernel: `trap`, at the assert's line."""
    data = json.loads(cli("verify", str(PTX / "mini_bug_assert.ptx"), "--format", "json")[1])
    assert [f["code"] for f in data["findings"]] == ["trap"]
    assert data["findings"][0]["location"]["line"] == 16
    assert "threads 32-63" in data["findings"][0]["message"]


def test_brkpt_is_a_trap(tmp_path):
    text = (PTX / "mini_ok.ptx").read_text()
    bad = text.replace("\tbar.sync \t0;", "\tbar.sync \t0;\n\tbrkpt;", 1)
    assert bad != text
    data = json.loads(cli("verify", str(_write(tmp_path, bad)), "--format", "json")[1])
    assert {f["code"] for f in data["findings"]} == {"trap"}


def test_check_reads_a_kernel_without_searching():
    code, out, err = cli("check", str(PTX / "cutlass_sm90_pingpong.ptx"))
    assert code == 0, err
    assert "ok: kernel cutlass::device_kernel<KernelTmaWarpSpecializedPingpong>, sm_90a, block 384x1x1" in out
    assert "param_12=769" in out


def test_timeline_reads_a_compiled_kernel():
    code, out, err = cli("timeline", str(PTX / "mini_ok.ptx"), "--max-states", "2000")
    assert code in (0, 1), err
    assert "as-soon-as-possible schedule" in out and "(PTX line" in out and "CTA 0 exits" in out
    code, out, err = cli("timeline", str(PTX / "mini_ok.ptx"), "--max-states", "2000", "--format", "json")
    assert code in (0, 1) and '"schedule"' in out


def test_explain_a_kernel_shows_its_contract():
    """The barrier contract of the compiled kernel: the count its init sets against the arrivals."""
    code, out, err = cli("explain", str(PTX / "mini_bug_count.ptx"))
    assert code in (0, 1), err
    row = next(line for line in out.splitlines() if line.strip().startswith("bar "))  # `__shared__ uint64_t bar`
    assert row.split()[1] == "65" and "64 arrivals" in row
    code, out, err = cli("explain", str(PTX / "cutlass_sm90_pingpong.ptx"), "-D", "param_12=64", "-D", "param_1656=1")
    assert "when elect.sync (cluster_sm90.hpp:194 in device_kernel.h:123) elects lane 0:" in out
    assert "when elect.sync (cluster_sm90.hpp:194 in device_kernel.h:123) elects a lane in 1..31:" in out
    code, out, err = cli("graph", str(PTX / "mini_ok.ptx"))
    assert code == 0 and out.startswith("flowchart") and "mbar (count 64)" in out


def test_loops_run_once_first():
    """Without -D the loop bounds first run their loops once: #3722 shows there, in a short schedule; a
    kernel that verifies there goes on to the defaults (mini_ok above: param_0 = 2)."""
    code, out, err = cli("verify", str(PTX / "cutlass_sm90_pingpong.ptx"))
    assert code == 1, err
    assert "(param_12=1, param_640=32768, param_1656=1): 1 finding (hang (latent))" in out  # the H200 elects lane 0
    assert "param_12 = 1: its loop once, tried before the default 769 (drives a k-loop" in out
    assert "elects a lane in 1..31" in out


def test_json_says_where_each_parameter_comes_from():
    data = json.loads(cli("verify", str(PTX / "cutlass_sm90_pingpong.ptx"), "--format", "json")[1])
    by = {p["name"]: p for p in data["ptx"]["parameters"]}
    assert by["param_12"]["point"] == "loops-once" and by["param_12"]["value"] == 1 and by["param_12"]["default"] == 769
    assert by["param_640"]["point"] == "default"
    assert data["ptx"]["block"] == [384, 1, 1] and data["ptx"]["nvcc"] is None


@needs_nvcc
def test_tcgen05_mma_and_commit_of_a_compiled_sm100_kernel(tmp_path):
    """tcgen05.mma reads its stage through the SMEM descriptor until the tcgen05.commit after it arrives;
    the kernel is compiled here for sm_100a (tests/data/ptx/src/umma_mini.cu, 7 k-tiles on a 3-stage ring)."""
    src = tmp_path / "umma_mini.cu"
    shutil.copy(PTX / "src" / "umma_mini.cu", src)
    base = (str(src), "--nvcc=-arch=sm_100a", "-D", "param_0=7", "--format", "json")

    def codes(*extra: str) -> tuple[int, list[str]]:
        code, out, err = cli("verify", *base, *extra)
        assert code in (0, 1), err
        return code, [f["code"] for f in json.loads(out)["findings"]]
    assert codes() == (0, [])
    code, found = codes("--nvcc=-DRELEASE_EARLY")  # the stage is released when the MMA is issued
    assert code == 1 and found[0] == "overwrite"
    code, found = codes("--nvcc=-DCOMMIT_FULL")  # the commit arrives on the wrong barrier
    assert code == 1 and found == ["hang"]


@needs_nvcc
def test_a_two_cta_tcgen05_mma_in_a_one_cta_kernel_is_refused_with_its_line(tmp_path):
    """A pair MMA (read since session 13, tests/test_ptx_sm100.py) that every CTA issues: the kernel runs on
    one pair by default, and the odd CTA reaching the MMA is refused; `tcgen05.cp.cta_group::2` by name."""
    from pipecheck.ptx.nvcc import compile_cuda
    ptx, _ = compile_cuda(str(PTX / "src" / "umma_mini.cu"), ("-arch=sm_100a",))
    text = Path(ptx).read_text()
    two = text.replace("tcgen05.mma.cta_group::1", "tcgen05.mma.cta_group::2", 1)
    assert two != text
    code, out, err = cli("verify", str(_write(tmp_path, two)), "-D", "param_0=7")
    assert code == 2 and "is issued by the even CTA of a pair" in err and "but CTA 1 (%cluster_ctarank)" in err
    assert "k.ptx:" in err and "Traceback" not in err
    cp = text.replace("tcgen05.mma.cta_group::1", "tcgen05.cp.cta_group::2.128x256b", 1)
    code, out, err = cli("verify", str(_write(tmp_path, cp)), "-D", "param_0=7")
    assert code == 2 and "(cta_group::2) is not modelled by the PTX front end yet" in err and "k.ptx:" in err


def test_all_params_sweeps_the_loop_bounds_of_a_compiled_kernel():
    """--all-params over PTX: each loop bound from the value that runs its loop once to its default, a trip
    apart; a finding is stated with the points that show it. A consumer that releases a stage before its
    wgmma retires overwrites it only once the ring wraps: K >= 257 is 5 k-tiles of 64 on the 4-stage ring."""
    kernel = PTX / "cute_dsl_tma_pipeline_bug_release_before_wait.ptx"
    code, out, err = cli("verify", str(kernel), "--all-params", "-D", "param_132=129..321")
    assert code == 1, err
    assert "(param_132=129..321)" in out.splitlines()[0] and "4 parameter points" in out.splitlines()[0]
    assert "param_132: swept over 4 values (129, 193, 257, 321 in steps of 64) by --all-params" in out
    assert "[overwrite]" in out and "only when param_132 >= 257" in out
    # the points below the wrap verify: the same sweep over them has no finding
    code, out, err = cli("verify", str(kernel), "--all-params", "-D", "param_132=1..200")
    assert code == 0 and ": verified (" in out.splitlines()[0], out


TOKENS = HEAD + """
.visible .entry tokens() .reqntid 96, 1, 1
{
	.reg .pred %p<4>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<3>;
	.shared .align 8 .b8 bar[8];
	mov.u32 %r1, %tid.x;
	setp.ge.u32 %p1, %r1, 32;
	mov.u32 %r2, bar;
	@%p1 bra SYNC;
	mbarrier.init.shared::cta.b64 [%r2], COUNT;
	fence.mbarrier_init.release.cluster;
SYNC:
	bar.sync 0;
	@!%p1 bra DONE;
	mbarrier.arrive.shared::cta.b64 %rd1, [%r2];
WAIT:
	mbarrier.try_wait.shared::cta.b64 %p2, [%r2], %rd1;
	@!%p2 bra WAIT;
DONE:
	ret;
}
"""


def test_a_phase_token_names_the_phase_its_arrive_landed_in(tmp_path):
    """Warps 1-2 arrive with a state token and wait on it. Counting all 64 arrivals, both tokens are phase 0's:
    verified. Counting 32, each warp's arrivals complete a phase: the first warp's token is phase 0's, and two
    phases later its parity reads incomplete again (H200, benchmarks/hw/probe_phase_token.cu): a hang."""
    code, out, err = cli("verify", str(_write(tmp_path, TOKENS.replace("COUNT", "64"))))
    assert code == 0 and "verified" in out, out + err
    code, out, err = cli("verify", str(_write(tmp_path, TOKENS.replace("COUNT", "32"))))
    assert code == 1 and "[hang]" in out, out + err
    assert "waits on bar parity 0 forever" in out and "bar (mbar@0): phase 2" in out


def test_a_spin_loop_that_is_not_a_wait_is_refused(tmp_path):
    """A try_wait loop that does more than try again (here a store to shared memory in the back-off) is not read
    as a wait; explored as a loop of tests, a hang would look like a thread that keeps running: refused."""
    text = (PTX / "cuda_barrier_tma.ptx").read_text()
    bad = text.replace("nanosleep.u32 %r29;", "st.shared.u32 [%r2], %r29;", 1)
    assert bad != text
    code, out, err = cli("verify", str(_write(tmp_path, bad)))
    assert code == 2 and "Traceback" not in err
    assert ":204:3: error: PTX line 204: `mbarrier.try_wait.shared.b64` spins in a loop pipecheck does not read as a " \
           "wait" in err, err


def test_lanes_reading_a_stage_at_their_own_offset_are_one_class():
    """ab[s][lane * 4] with s a loop-carried stage index: the address mixes a run-time register with the lane, but
    every lane of the consumer warp reads the same stage buffer, so the warp stays one class (was: 32 classes)."""
    code, out, err = cli("verify", str(PTX / "lane_ring.ptx"), "--stats")
    assert code == 0, out + err
    assert "verified" in out
    assert "wg0: 20 (3 classes)" in err and "wg0 threads 32-63" in err


def test_lanes_whose_run_time_addresses_leave_the_stage_are_refused(tmp_path):
    """The tail loop's per-lane offset made lane * 32 bytes: lanes 16..31 would read the next stage's buffer, which
    the class's one program cannot show; the run is refused where the address is computed at run time."""
    text = (PTX / "lane_ring.ptx").read_text()
    bad = text.replace("shl.b32 \t%r85, %r3, 2;", "shl.b32 \t%r85, %r3, 5;", 1)
    assert bad != text
    code, out, err = cli("verify", str(_write(tmp_path, bad)))
    assert code == 2, out + err
    assert "PTX line 208: threads of one class access different buffers here" in out + err

